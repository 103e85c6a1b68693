# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""Shows the cause of the GPU records dropped as corrupt (issue 15) on a GPU machine.

The reported cases saved KV that torch had just queued (torch.randn on the current stream) and
restored into torch.zeros: kvtier's copies ran on non-blocking streams of its own, ordered after
nothing. Its checksum kernel could read KV the generator was still writing, so records were saved
with checksums of half-written bytes and every later read of them failed its check (and dropped
them). kvtier now orders its copies after the caller's stream. Naming an idle stream instead
(`stream=idle`) orders them after nothing again: the old behaviour, reproduced on purpose.

Usage: python3 bench/gpu/stream_race_repro.py DIR [--trials N] [--json OUT]
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


def one(root, name, geo, n, dtype, io, ordering, idle):
    g = kvtier.Geometry.custom(name, **geo)
    path = os.path.join(root, f"{name}-{io}-{ordering}")
    shutil.rmtree(path, ignore_errors=True)
    engine = kvtier.open(path, g, io=io, capacity="8G")
    tokens = torch.randint(0, 150000, (n,), dtype=torch.int64).numpy()
    shape = (2, g.layers, n, g.kv_heads, g.head_dim)
    stream = idle if ordering == "after nothing (old)" else None
    kv = (torch.randint(0, 256, shape, dtype=dtype, device="cuda") if dtype == torch.uint8
          else torch.randn(shape, dtype=dtype, device="cuda"))
    engine.save(tokens, kv.view(torch.uint8), stream=stream)
    out = torch.zeros_like(kv)
    r = engine.restore(tokens, out.view(torch.uint8), stream=stream)
    torch.cuda.synchronize()
    exact = bool(torch.equal(out.view(torch.uint8)[:, :, : r["tokens_restored"]],
                             kv.view(torch.uint8)[:, :, : r["tokens_restored"]]))
    s = engine.stats()
    del engine
    shutil.rmtree(path, ignore_errors=True)
    return {"case": name, "tokens": n, "io": io, "ordering": ordering, "restored": r["tokens_restored"],
            "dropped": r["checksum_misses"], "kept_by_reread": s["recheck_kept"],
            "restored_bytes_exact": exact, "gds": s["gds"][:40]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    idle = torch.cuda.Stream()  # nothing is ever queued on it
    rows = []
    for name, geo, n, dtype, paths in CASES:
        for io in paths:
            for ordering in ("after nothing (old)", "after the caller's stream"):
                for t in range(a.trials):
                    try:
                        row = one(a.dir, name, geo, n, dtype, io, ordering, idle)
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
