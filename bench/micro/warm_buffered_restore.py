# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""kvtier's buffered restore from a warm page cache into host memory: 20K tokens of one
qwen3-coder-30b-a3b TP-2 rank (0.98 GB), median of 5 restores after a warming one.
Usage: PYTHONPATH=build/release/python python3 bench/micro/warm_buffered_restore.py [DIR]"""
import os, sys, time, tempfile, numpy as np, kvtier
g = kvtier.Geometry.preset("qwen3-coder-30b-a3b", tp_rank=0, tp_world=2)
n = 20000
d = tempfile.mkdtemp(dir=sys.argv[1] if len(sys.argv) > 1 else None)
e = kvtier.open(d, g, io="buffered", capacity="4G")
kv = np.random.default_rng(1).integers(0, 2**16, size=(2, g.layers, n, g.kv_heads, g.head_dim), dtype=np.uint16)
toks = list(range(n))
e.save(toks, kv)
out = np.zeros_like(kv)
e.restore(toks, out)  # warm the page cache
ts = []
for _ in range(5):
    t = time.perf_counter(); r = e.restore(toks, out); ts.append(time.perf_counter() - t)
assert r["tokens_restored"] == n and np.array_equal(out, kv)
best = min(ts); med = sorted(ts)[2]
print(f"{kv.nbytes/1e9:.2f} GB, warm buffered restore: median {med*1e3:.0f} ms = {kv.nbytes/med/1e9:.2f} GB/s (best {kv.nbytes/best/1e9:.2f}); {e.stats()['io_engine']}")
import shutil; del e; shutil.rmtree(d)
