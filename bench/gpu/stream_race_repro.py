# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""The two cases reported to drop valid records on the H200 (issue 15), run the way they were
reported: KV from torch.randn/randint saved with no synchronize, restored into torch.zeros.

`ordering` "after the caller's stream" is kvtier's behaviour (its copies wait for the work queued on
the tensor framework's current stream); "after nothing (old)" names an idle stream instead, which
orders kvtier's copies after nothing, as before the fix. A build without the `stream=` argument
(the code before the fix) runs with "after the caller's stream" and gets no argument.
On the H200 neither ordering, nor the old build, dropped a record (docs/reliability.md): the
allocations kvtier makes at the start of each call appear to wait for the device in practice.

Usage: python3 bench/gpu/stream_race_repro.py DIR [--trials N] [--json OUT] [--orderings ...] [--prefixes ...]
"""
import argparse
import json
import os
import shutil
import traceback

import torch

import kvtier

CASES = [
    ("mla576", dict(layers=61, kv_heads=1, head_dim=576, element_bytes=2, chunk_tokens=64), 4097,
     torch.bfloat16, ("posix", "gds", "buffered")),
    ("fp8-8h", dict(layers=8, kv_heads=8, head_dim=128, element_bytes=1, chunk_tokens=128), 99999,
     torch.uint8, ("posix", "gds")),
]


def one(root, name, geo, n, dtype, io, ordering, idle, prefixes=()):
    g = kvtier.Geometry.custom(name, **geo)
    path = os.path.join(root, f"{name}-{io}-{ordering}")
    shutil.rmtree(path, ignore_errors=True)
    engine = kvtier.open(path, g, io=io, capacity="8G")
    tokens = torch.randint(0, 150000, (n,), dtype=torch.int64).numpy()
    shape = (2, g.layers, n, g.kv_heads, g.head_dim)
    # A build without the stream argument (the code before the fix) gets none.
    extra = {"stream": idle} if ordering == "after nothing (old)" else {}
    kv = (torch.randint(0, 256, shape, dtype=dtype, device="cuda") if dtype == torch.uint8
          else torch.randn(shape, dtype=dtype, device="cuda"))
    for p in prefixes:  # shorter sessions of the same tokens first, as a user trying sizes would
        engine.save(tokens[:p], kv.view(torch.uint8)[:, :, :p].contiguous(), **extra)
    engine.save(tokens, kv.view(torch.uint8), **extra)
    out = torch.zeros_like(kv)
    r = engine.restore(tokens, out.view(torch.uint8), **extra)
    torch.cuda.synchronize()
    exact = bool(torch.equal(out.view(torch.uint8)[:, :, : r["tokens_restored"]],
                             kv.view(torch.uint8)[:, :, : r["tokens_restored"]]))
    s = engine.stats()
    del engine
    shutil.rmtree(path, ignore_errors=True)
    return {"case": name, "tokens": n, "io": io, "ordering": ordering, "restored": r["tokens_restored"],
            "dropped": r["checksum_misses"], "kept_by_reread": s.get("recheck_kept", 0), "prefixes": list(prefixes),
            "restored_bytes_exact": exact, "gds": s["gds"][:40]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--orderings", default="after nothing (old),after the caller's stream",
                    help="comma-separated; a build before the fix takes only \"after the caller's stream\" (no stream=)")
    ap.add_argument("--prefixes", default="", help="comma-separated token counts saved before each session")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    idle = torch.cuda.Stream()  # nothing is ever queued on it
    rows = []
    for name, geo, n, dtype, paths in CASES:
        for io in paths:
            for ordering in a.orderings.split(","):
                for t in range(a.trials):
                    try:
                        row = one(a.dir, name, geo, n, dtype, io, ordering, idle,
                                  [int(p) for p in a.prefixes.split(",") if p])
                    except Exception as e:  # reported, and the next configuration runs
                        traceback.print_exc()
                        row = {"case": name, "tokens": n, "io": io, "ordering": ordering, "error": repr(e)}
                    row["trial"] = t
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
