# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""kvtier side by side with what a user would pick instead, in one run on one machine.

The KV of one 100K-token qwen3-coder-30b-a3b session at TP 2 (two rank shards, random bytes of the
real geometry) is saved once into kvtier stores and once as one plain file per rank (the same bytes,
contiguous). Each configuration then restores both ranks' shards at once (one thread per rank) into
GPU memory, from a cold page cache, and the result is compared byte for byte with what was saved:
- kvtier, each I/O path asked for (posix = io_uring + O_DIRECT + pinned bounce; gds = cuFile, which
  on a machine without GPUDirect Storage runs in its compatibility mode and is labelled so;
  buffered = page cache);
- KvikIO (RAPIDS; `kvikio` from PyPI): CuFile.pread into the device buffer, in its POSIX compat mode
  and with cuFile where it opens;
- a naive PyTorch loader: read the file into pinned host memory, then copy it to the GPU;
- LMCache's disk backends where they can be driven without a serving engine (else the reason is
  recorded).
The drive's ceiling is fio, an independent tool, next to every round: replaying kvtier's reads (the
same file ranges and request size, O_DIRECT) for kvtier's configurations and reading the plain files
for the peers that read them, one job per rank, both ranks at once, at the depth that was fastest on
the first round. kvtier's own raw read of its records (no copy, no checksum) is kept as attribution.
CPU is the process's user+system time per GB restored (all threads).

Usage: python3 bench/peers/peers_bench.py --dir DIR --out DIR [--tokens 100000] [--repeats 2]
       [--configs ...] [--kv PATH]   (kvtier's Python module on PYTHONPATH; run as root to drop the
       page cache; --kv: forward-pass KV instead of random bytes, which the coded configuration
       "kvtier posix split16" needs to shrink)
"""
import argparse
import json
import os
import resource
import sys
import threading
import time
import traceback

import torch

import kvtier

GEOMETRY = "qwen3-coder-30b-a3b"
WORLD = 2


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def parse_size(text):
    """Bytes of '16M', '4K', '1G' or a plain number, as kvtier's options take them."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    return int(t[:-1]) * units[t[-1]] if t and t[-1] in units else int(t)


def drop_file_cache(paths):
    """Cold reads: drop_caches as root, and fadvise(DONTNEED) on each file either way."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        except OSError:
            pass
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)


WINDOW_CPU = [0.0]  # process CPU seconds (all threads) of the last on_ranks window


def on_ranks(fn):
    """Runs fn(rank) for every rank at once; the wall time of the slowest. The process's CPU time
    over the same window lands in WINDOW_CPU (setup outside the window is not counted)."""
    errors = []

    def run(r):
        try:
            fn(r)
        except Exception as e:  # noqa: BLE001 - reported per configuration
            errors.append(e)
    threads = [threading.Thread(target=run, args=(r,)) for r in range(WORLD)]
    torch.cuda.synchronize()
    cpu = cpu_seconds()
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t
    WINDOW_CPU[0] = cpu_seconds() - cpu
    if errors:
        raise errors[0]
    return seconds


class Setup:
    def __init__(self, args):
        self.dir = args.dir
        self.tokens = list(range(1000, 1000 + args.tokens))
        self.geometries = [kvtier.Geometry.preset(GEOMETRY, tp_rank=r, tp_world=WORLD) for r in range(WORLD)]
        g = self.geometries[0]
        shape = (2, g.layers, args.tokens, g.kv_heads, g.head_dim)
        if args.kv == "random":
            gen = torch.Generator(device="cuda").manual_seed(5)
            self.kv = [torch.randint(-32768, 32767, shape, dtype=torch.int16, device="cuda", generator=gen)
                       .view(torch.bfloat16) for _ in range(WORLD)]
            self.kv_what = "random bf16 bit patterns (incompressible)"
        else:
            self.kv, self.kv_what = file_kv(args.kv, shape)
        self.out = [torch.empty_like(k) for k in self.kv]
        self.bytes = sum(k.numel() * k.element_size() for k in self.kv)
        self.fio, self.fio_sweep = None, None  # cold runs: set in main
        # Several drives: kvtier's store spreads over all of them; a peer reads one file per rank,
        # so rank r's files (plain, LMCache's) go on drive r (mod the count), as LMCache's
        # per-GPU disk paths place them.
        self.drive_dirs = [os.path.join(d, "peers") for d in args.drives.split(",")] if args.drives else [self.dir]
        for d in self.drive_dirs:
            os.makedirs(d, exist_ok=True)
        self.files = [os.path.join(self.rank_dir(r), f"plain-rank{r}.kv") for r in range(WORLD)]
        for r, path in enumerate(self.files):
            host = self.kv[r].view(torch.uint8).flatten().cpu().numpy()
            with open(path, "wb") as f:
                f.write(host.data)
                f.flush()
                os.fsync(f.fileno())
        self.engines = {}
        self.lmcache = {}  # backend -> LMCachePeer, stored on first use
        self.warm = args.warm
        self.request = parse_size(args.request_size)
        self.staging = args.staging

    def rank_dir(self, r):
        """Where rank r's own files go (a peer's, one file per rank)."""
        return self.drive_dirs[r % len(self.drive_dirs)]

    def engine(self, io, dram="0", compression="off"):
        """Both ranks' engines for I/O path `io` (and DRAM tier size), each over a store of its own
        (written once; the engines stay open for the whole run). Compression: one TP-free store
        (store_format 2) whose records are kept coded, shared by both ranks."""
        name = (io if dram == "0" else f"{io}+dram") + ("" if compression == "off" else f"+{compression}")
        if name not in self.engines:
            roots = [os.path.join(d, f"kvtier-{name}") for d in self.drive_dirs]
            coded = {} if compression == "off" else {"store_format": 2, "compression": compression}
            es = [kvtier.open(roots if len(roots) > 1 else roots[0], g, io=io, capacity="30G", dram=dram,
                              request_size=str(self.request), staging=self.staging, **coded)
                  for g in self.geometries]
            for r, e in enumerate(es):
                e.save(self.tokens, self.kv[r])
            self.engines[name] = es
        return self.engines[name]

    def close(self):
        """LMCache's engines are destroyed (kvtier's close with their objects); its storage threads would
        otherwise keep the process alive after the run."""
        for peer in self.lmcache.values():
            peer.close()

    def cache_state(self, files, engines=()):
        """Cold runs drop the page cache for the files about to be read; warm runs read them once
        first, so they are served from the page cache."""
        if not self.warm:
            for e in engines:
                e.drop_page_cache()
            drop_file_cache(files)
            return
        for e in engines:
            files = files + [os.path.join(e.store_dir, f) for f in os.listdir(e.store_dir) if f.endswith(".kvt")]
        for path in files:
            with open(path, "rb", buffering=0) as f:
                while f.read(64 << 20):
                    pass

    def check(self):
        # bits, not values: random bf16 bit patterns include NaNs, which never compare equal
        return all(torch.equal(self.out[r].view(torch.int16), self.kv[r].view(torch.int16)) for r in range(WORLD))


def kvtier_config(io, dram="0", compression="off"):
    def run(s: Setup):
        engines = s.engine(io, dram, compression)
        s.cache_state([], engines)
        for o in s.out:
            o.zero_()
        results = [None] * WORLD

        def rank(r):
            results[r] = engines[r].restore(s.tokens, s.out[r])
        seconds = on_ranks(rank)
        assert all(x["tokens_restored"] == len(s.tokens) for x in results), results
        st = engines[0].stats()
        note = st["gds"] if io == "gds" else st["io_engine"]
        if dram != "0":
            note = f"DRAM tier ({dram} per rank), {st['dram_hits']} chunk hits on rank 0"
        if io == "gds" and st["gds_restores"] == 0:
            note += f" (fell back: {st['io_fallback']})"
        if compression != "off":
            stored = sum(e.stats()["bytes_written"] for e in engines)
            kv = sum(e.stats()["kv_bytes_written"] for e in engines)
            note += f", {compression} records: {stored / kv:.3f} stored bytes per KV byte"
        return seconds, note
    return run


def kvikio_config(compat):
    def run(s: Setup):
        import kvikio
        import kvikio.defaults
        kvikio.defaults.set({"num_threads": 16,
                             "compat_mode": kvikio.CompatMode.ON if compat else kvikio.CompatMode.OFF})
        s.cache_state(s.files)
        for o in s.out:
            o.zero_()

        def rank(r):
            with kvikio.CuFile(s.files[r], "r") as f:
                n = f.pread(s.out[r].view(torch.uint8).flatten()).get()
                assert n == s.out[r].numel() * s.out[r].element_size(), n
        seconds = on_ranks(rank)
        mode = kvikio.defaults.get("compat_mode")
        return seconds, (f"kvikio {kvikio.__version__}, compat_mode={mode} ("
                         f"{'POSIX reads into its bounce buffers' if compat else 'cuFile'}), 16 threads")
    return run


def naive_config(s: Setup):
    s.cache_state(s.files)
    pinned = [torch.empty(o.numel() * o.element_size(), dtype=torch.uint8).pin_memory() for o in s.out]
    for o in s.out:
        o.zero_()

    def rank(r):
        view = memoryview(pinned[r].numpy())
        with open(s.files[r], "rb", buffering=0) as f:
            done = 0
            while done < len(view):  # one read() returns at most ~2 GiB
                n = f.readinto(view[done:])
                if not n:
                    raise EOFError(f"{s.files[r]} ends at {done} bytes")
                done += n
        s.out[r].view(torch.uint8).flatten().copy_(pinned[r], non_blocking=True)
        torch.cuda.current_stream().synchronize()
    seconds = on_ranks(rank)
    return seconds, "open().readinto(pinned tensor) then tensor.cuda copy, pinned buffers preallocated"


def lmcache_config(backend):
    """LMCache's disk backends, driven without vLLM through the engine its vLLM adapter builds
    (lmcache_peer.py); stored once per backend."""
    def run(s: Setup):
        from lmcache_peer import LMCachePeer
        import lmcache
        if backend not in s.lmcache:
            s.lmcache[backend] = LMCachePeer(s, backend, WORLD, GEOMETRY)
        peer = s.lmcache[backend]
        s.cache_state(peer.files())
        peer.zero()
        for o in s.out:
            o.zero_()
        seconds = on_ranks(peer.restore_rank)
        peer.copy_out(s.out)
        how = ("LocalDiskBackend, O_DIRECT into its pinned CPU pool, then its CUDA connector" if backend == "disk"
               else "GdsBackend over cufile-python into its registered GPU buffer, then its CUDA connector")
        ops = "its compiled CUDA kernels" if _lmcache_native() else "its torch fallback ops (its kernels did not load)"
        return seconds, (f"lmcache {lmcache.__version__} (torch {torch.__version__}): {how}, {ops}; "
                         f"vLLM paged layout, chunk 256, both ranks in one process")
    return run


def _lmcache_native():
    """Whether LMCache's compiled kernels load (c_ops up to 0.5.3, cuda_ops after; a wheel built
    for another torch than the machine's does not load, and 0.5.4+ then run torch fallbacks)."""
    import importlib
    for name in ("lmcache.c_ops", "lmcache.cuda_ops"):
        try:
            importlib.import_module(name)
            return True
        except ImportError:
            pass
    return False


def measure_ceiling(s: Setup):
    """The drive's ceiling: raw O_DIRECT of kvtier's records (headers included), both ranks at once."""
    engines = s.engine("posix")
    for e in engines:
        e.drop_page_cache()
    ceilings = [None] * WORLD

    def ceil(r):
        ceilings[r] = engines[r].measure_read_ceiling(s.tokens)
    return on_ranks(ceil), sum(c["bytes"] for c in ceilings)




class Fio:
    """fio reading file ranges: one stream per rank, all at once, O_DIRECT, --readonly; each range a
    job chained after its stream's previous one (wait_for), so a stream reads like one reader. Not a
    replayed I/O log: fio 3.33 ends a replay without waiting for the requests in flight. A stream's
    time is its jobs' job_runtime summed (fio's clock, start-up and gaps left out: errs fast); the
    read's is the slowest stream's. Every job must read all its bytes (tools/kvtier/fio_ceiling.cpp
    does the same for the C++ benchmarks)."""

    def __init__(self, binary, work):
        import shutil
        import subprocess
        self.binary, self.work, self.runs, self.depth = binary, work, 0, None
        if shutil.which(binary) is None:
            raise RuntimeError(f"fio ('{binary}') not found: the ceiling needs it (apt install fio; or --fio PATH)")
        self.version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
        os.makedirs(work, exist_ok=True)

    def read(self, streams, request, depth):
        """`streams`: per rank, [(path, offset, length)]; returns seconds."""
        import subprocess
        name = os.path.join(self.work, f"fio-{self.runs}")
        self.runs += 1
        job, want = "[global]\nioengine=io_uring\ndirect=1\nrw=read\nallow_file_create=0\n", {}
        for s, extents in enumerate(streams):
            previous = None
            for e, (path, offset, length) in enumerate(extents):
                whole = length // request * request
                parts = [(f"s{s}e{e}", offset, whole, request, depth), (f"s{s}e{e}t", offset + whole, length - whole,
                                                                         length - whole, 1)]
                for job_name, at, size, bs, iodepth in parts:
                    if size == 0:
                        continue
                    job += (f"[{job_name}]\nfilename={path.replace(':', chr(92) + ':')}\noffset={at}\nsize={size}\n"
                            f"bs={bs}\niodepth={iodepth}\n" + (f"wait_for={previous}\n" if previous else ""))
                    want[job_name] = (s, size)
                    previous = job_name
        with open(name + ".fio", "w") as f:
            f.write(job)
        out = subprocess.run([self.binary, "--readonly", "--output-format=json", name + ".fio"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"fio exited {out.returncode}: {(out.stdout + out.stderr)[:400]}")
        jobs = json.loads(out.stdout[out.stdout.find("{"):])["jobs"]
        stream_ms = {}
        for j in jobs:
            s, size = want.pop(j["jobname"])
            if j["error"] or j["read"]["io_bytes"] != size:
                raise RuntimeError(f"fio job {j['jobname']}: error {j['error']}, read {j['read']['io_bytes']} of {size}")
            stream_ms[s] = stream_ms.get(s, 0) + j["job_runtime"]
        if want:
            raise RuntimeError(f"fio did not report jobs {sorted(want)}")
        seconds = max(stream_ms.values()) / 1e3
        if seconds <= 0:
            raise RuntimeError("fio read for under a millisecond: too short to time")
        return seconds


def fio_streams(s: Setup, which):
    """Per rank, the file ranges a configuration reads: kvtier's records, or the plain files."""
    if which == "kvtier":
        # one stream per rank and drive, as kvtier reads a store over several drives at once
        streams = []
        for e in s.engine("posix"):
            by_drive = {}
            for extent in e.read_extents(s.tokens):
                by_drive.setdefault(os.stat(extent[0]).st_dev, []).append(extent)
            streams += list(by_drive.values())
        return streams
    # O_DIRECT reads whole 4 KiB blocks: a plain file's last partial block (if any) is left out.
    return [[(p, 0, os.path.getsize(p) // 4096 * 4096)] for p in s.files]


def measure_fio(s: Setup, which):
    """fio's time for the same reads, page cache dropped; the depth is chosen on the first call."""
    streams = fio_streams(s, which)
    request = s.request
    paths = [p for st in streams for p, _, _ in st]
    if s.fio.depth is None:
        sweep = {}
        for d in (1, 32, 2, 16, 4, 8):  # shallow and deep alternately: no depth always runs warmest
            drop_file_cache(paths)
            sweep[d] = s.fio.read(streams, request, d)
        s.fio.depth = min(sweep, key=sweep.get)
        s.fio_sweep = {d: sum(x[2] for st in streams for x in st) / t / 1e9 for d, t in sweep.items()}
        print(f"fio depth sweep ({which}, GB/s): {s.fio_sweep} -> depth {s.fio.depth}", flush=True)
    drop_file_cache(paths)
    return s.fio.read(streams, request, s.fio.depth), sum(x[2] for st in streams for x in st)


def measure_h2d(s: Setup):
    """The warm runs' ceiling: one pinned host-to-device copy of the same bytes, both ranks at once."""
    pinned = [torch.empty(o.numel() * o.element_size(), dtype=torch.uint8).pin_memory() for o in s.out]

    def copy(r):
        s.out[r].view(torch.uint8).flatten().copy_(pinned[r], non_blocking=True)
        torch.cuda.current_stream().synchronize()
    on_ranks(copy)  # warm-up
    return on_ranks(copy), s.bytes


CONFIGS = {
    "kvtier dram": kvtier_config("posix", dram="6G"),
    "kvtier posix": kvtier_config("posix"),
    "kvtier gds": kvtier_config("gds"),
    "kvtier buffered": kvtier_config("buffered"),
    # Coded records: held against fio reading the same KV's raw bytes (the plain files), so its
    # ratio says how far past the drive's raw-byte rate reading fewer bytes gets (issue 28).
    "kvtier posix split16": kvtier_config("posix", compression="split16"),
    "kvikio compat": kvikio_config(True),
    "kvikio cufile": kvikio_config(False),
    "naive torch": naive_config,
    "lmcache disk": lmcache_config("disk"),
    "lmcache gds": lmcache_config("gds"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=100000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--configs", default=None, help="default: every disk configuration (cold), or with --warm "
                    "the DRAM tier against the page cache")
    ap.add_argument("--warm", action="store_true", help="files in the page cache: kvtier's DRAM tier against "
                    "peers reading a warm page cache; ceiling = pinned host-to-device copy")
    ap.add_argument("--drives", help="comma-separated directories, one per drive: kvtier's store over all of "
                    "them, rank r's peer files on drive r mod their count (default: everything in --dir)")
    ap.add_argument("--request-size", default="16M", help="kvtier's request size, and fio's (both ceilings)")
    ap.add_argument("--staging", default="0", help="kvtier's staging per rank (0: its default, 128M)")
    ap.add_argument("--kv", default="random", help="random (incompressible bf16 bit patterns) or PATH: forward-pass "
                    "KV written by bench/codec/forward_kv.py, tiled to the session (what coded records are measured on)")
    ap.add_argument("--fio", default="fio", help="fio executable for the drive's ceiling (cold runs)")
    ap.add_argument("--from-json", help="only re-render table and figure from a peers.json of an earlier run")
    ap.add_argument("--cufile-mode", help="with --from-json, for runs that did not record it: what kvtier "
                    "reported for cuFile on that machine")
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            run = json.load(f)
        summary = summarize(run["rows"], run["kv_bytes"], run.get("cufile") or args.cufile_mode or "")
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "table.md"), "w") as f:
            f.write(render(summary, run.get("warm", False)) + "\n")
        figure(summary, os.path.join(args.out, "fig_peers.png"), run.get("warm", False))
        return
    if args.dir is None:
        ap.error("--dir is required (a directory on the drive under test), unless --from-json")
    if args.configs is None:
        args.configs = ("kvtier dram,kvtier buffered,kvikio compat,kvikio cufile,naive torch" if args.warm else
                        ",".join(c for c in CONFIGS if c != "kvtier dram" and (args.kv != "random" or not coded(c))))
    os.makedirs(args.dir, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    s = Setup(args)
    machine_cufile = cufile_mode()
    print(f"cuFile on this machine: {machine_cufile}", flush=True)
    s.engine("posix")  # writes the store
    print(f"{args.tokens} tokens, {WORLD} ranks of {GEOMETRY}: {s.bytes / 1e9:.2f} GB of KV on {torch.cuda.get_device_name()}; "
          f"KV: {s.kv_what}", flush=True)
    # the ceilings next to every round, both ranks at once
    if args.warm:
        ceilings = [("ceiling (pinned H2D)", measure_h2d, "one pinned host-to-device copy of the same bytes")]
    else:
        s.fio = Fio(args.fio, os.path.join(args.out, "fio"))
        what = f"{s.fio.version}, io_uring, O_DIRECT, {args.request_size} requests, one stream per rank (kvtier's: per rank and drive), depth swept on round 0"
        ceilings = [("ceiling fio (kvtier's records)", lambda s: measure_fio(s, "kvtier"),
                     f"{what}: replays kvtier's reads"),
                    ("ceiling fio (plain files)", lambda s: measure_fio(s, "plain"), f"{what}: the plain files"),
                    ("kvtier raw read (attribution)", measure_ceiling,
                     "kvtier's io_uring O_DIRECT read of the same records, no copy, no checksum: not a ceiling")]
    rows = []
    for rep in range(args.repeats):
        for ceiling_name, measure, ceiling_note in ceilings:
            ceiling_s, ceiling_bytes = measure(s)
            rows.append({"config": ceiling_name, "repeat": rep, "seconds": ceiling_s,
                         "GBps": ceiling_bytes / ceiling_s / 1e9, "cpu_s": None, "exact": None, "note": ceiling_note})
        # "_" for " " too: the names hold spaces, which shell variables passing arguments split
        for name in args.configs.replace("_", " ").split(","):
            try:
                seconds, note = CONFIGS[name](s)
                cpu = WINDOW_CPU[0]
                exact = s.check()
                row = {"config": name, "repeat": rep, "seconds": seconds, "GBps": s.bytes / seconds / 1e9,
                       "cpu_s": cpu, "cpu_window": "restore", "exact": exact, "note": note}
            except Exception as e:  # noqa: BLE001 - a peer that cannot run here is recorded, not hidden
                row = {"config": name, "repeat": rep, "seconds": None, "GBps": None, "cpu_s": None, "exact": None,
                       "note": f"did not run: {type(e).__name__}: {e}"}
                if rep == 0:
                    traceback.print_exc()
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = summarize(rows, s.bytes, machine_cufile)
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump({"command": " ".join(sys.argv), "warm": args.warm, "cufile": machine_cufile, "gpu": torch.cuda.get_device_name(), "kv_bytes": s.bytes,
                   "drives": s.drive_dirs, "kv": s.kv_what,
                   "fio": None if args.warm else {"version": s.fio.version, "depth": s.fio.depth,
                                                  "depth_sweep_gbps": s.fio_sweep},
                   "tokens": args.tokens, "rows": rows, "summary": summary}, f, indent=1)
    table = render(summary, args.warm)
    print(table)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table + "\n")
    figure(summary, os.path.join(args.out, "fig_peers.png"), args.warm)
    s.close()


def summarize(rows, kv_bytes, cufile=""):
    """Best (fastest) repeat of each configuration; ratio to the ceiling of the same round. `cufile`:
    what cuFile does on the machine (carried into the notes of the cuFile configurations)."""
    def ceiling_for(name):
        """The ceiling a configuration is held against: fio on the files it reads (kvtier's records for
        kvtier, the plain files for the rest); runs recorded before fio: the one ceiling they had."""
        names = [r["config"] for r in rows if r["config"].startswith("ceiling")]
        raw_records = name.startswith("kvtier") and not coded(name)
        want = "ceiling fio (kvtier's records)" if raw_records else "ceiling fio (plain files)"
        pick = want if want in names else (names[0] if names else None)
        return pick, {r["repeat"]: r["seconds"] for r in rows if r["config"] == pick}
    out = []
    for name in dict.fromkeys(r["config"] for r in rows):
        runs = [r for r in rows if r["config"] == name and r["seconds"]]
        if not runs:
            out.append({"config": name, "note": next(r["note"] for r in rows if r["config"] == name)})
            continue
        best = dict(min(runs, key=lambda r: r["seconds"]))
        ceiling_name, ceiling = ceiling_for(name)
        if name.startswith("ceiling") or name.startswith("kvtier raw"):
            ceiling_name, ceiling = name, {r["repeat"]: r["seconds"] for r in runs}
        if cufile and ("gds" in name or "cufile" in name) and cufile not in best["note"]:
            best["note"] += f"; machine: {cufile}"
        out.append({"config": name, "seconds": best["seconds"], "GBps": kv_bytes / best["seconds"] / 1e9,
                    "ceiling": ceiling_name, "ceiling_seconds": ceiling[best["repeat"]],
                    "ratio_to_ceiling": ceiling[best["repeat"]] / best["seconds"],
                    "cpu_s_per_GB": best["cpu_s"] / (kv_bytes / 1e9) if best["cpu_s"] is not None else None,
                    # runs before 2026-12-03 05:50 timed CPU over the whole step (setup included)
                    "cpu_scope": (("restore" if best.get("cpu_window") else "whole step")
                                  if best["cpu_s"] is not None else None),
                    "exact": all(r["exact"] is not False for r in runs), "runs": len(runs), "note": best["note"]})
    return out


def cufile_mode():
    """What cuFile does on this machine, as kvtier's engine reports it after one tiny save from GPU
    memory ("cuFile compat mode: ..." or "GPUDirect Storage peer-to-peer ...")."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        g = kvtier.Geometry.custom("probe", layers=1, kv_heads=1, head_dim=64, chunk_tokens=16)
        e = kvtier.open(d, g, io="gds")
        e.save(list(range(16)), torch.zeros(2, 1, 16, 1, 64, dtype=torch.bfloat16, device="cuda"))
        mode = e.stats()["gds"]
        del e
    return mode


def coded(name):
    """Whether a configuration keeps its records coded (reads fewer bytes than it delivers)."""
    return "split16" in name


def file_kv(path, shape):
    """Both ranks' KV of `shape` [2, layers, tokens, rank's heads, head_dim] from a file of forward-pass
    KV (bench/codec/forward_kv.py: [2, L, T, H, D] bf16, its shape in PATH.json): model layer l,
    model head h at position t is the file's layer l % L, head h % H, token (t % T + offset) % T, the
    offset drawn (seeded) per window of T positions, repeat of the file's layers and repeat of its
    heads, so that no two windows, layers or heads hold equal bytes."""
    with open(path + ".json") as f:
        meta = json.load(f)
    two, fl, ft, fh, fd = meta["shape"]
    _, layers, tokens, heads, dim = shape
    if fd != dim or two != 2:
        raise SystemExit(f"--kv {path}: shape {meta['shape']} does not fit {GEOMETRY}'s head_dim {dim}")
    data = torch.from_file(path, size=2 * fl * ft * fh * fd, dtype=torch.int16).view(2, fl, ft, fh, fd).cuda()
    windows = -(-tokens // ft)
    gen = torch.Generator().manual_seed(5)
    offsets = torch.randint(0, ft, (windows, -(-layers // fl), -(-heads * WORLD // fh)), generator=gen)
    t = torch.arange(tokens, device="cuda")
    out = []
    for r in range(WORLD):
        kv = torch.empty(shape, dtype=torch.int16, device="cuda")
        for layer in range(layers):
            for j in range(heads):
                h = r * heads + j  # the model's head: every rank sees the bytes of its own heads
                off = offsets[:, layer // fl, h // fh].to("cuda")[t // ft]
                kv[:, layer, :, j, :] = data[:, layer % fl, (t % ft + off) % ft, h % fh, :]
        out.append(kv.view(torch.bfloat16))
    return out, f"forward-pass KV from {path} ({meta.get('model', 'model unknown')}), tiled to {tokens} tokens"


def label(r, summary):
    """A configuration's name; cuFile configurations say so where cuFile runs in its compatibility
    mode on this machine (a property of the machine: KvikIO's cuFile is the same library), never
    "GDS"."""
    compat = any("cuFile compat mode" in x.get("note", "") for x in summary)
    cufile = "gds" in r["config"] or "cufile" in r["config"]
    return r["config"] + (" [cuFile compat mode]" if cufile and compat else "")


def render(summary, warm=False):
    lines = ["| CONFIGURATION | RESTORE (best of runs) | GB/s | CEILING, SAME ROUND | RATIO | CPU s / GB | BYTE-EXACT | NOTE |",
             "|---|---|---|---|---|---|---|---|"]
    held = sorted({r["ceiling"] for r in summary if r.get("ceiling") and not r["config"].startswith(("ceiling", "kvtier raw"))})
    for r in summary:
        if "seconds" not in r:
            lines.append(f"| {label(r, summary)} | - | - | - | - | - | - | {r['note']} |")
            continue
        cpu = f"{r['cpu_s_per_GB']:.2f}" if r["cpu_s_per_GB"] is not None else "-"
        if r.get("cpu_scope") == "whole step" and cpu != "-":
            # a warm step includes reading the files into the page cache: not the restore's CPU
            cpu = "-" if warm else cpu + "*"
        exact = "-" if r["config"].startswith(("ceiling", "kvtier raw")) else ("yes" if r["exact"] else "NO")
        lines.append(f"| {label(r, summary)} | {r['seconds'] * 1e3:,.0f} ms | {r['GBps']:.2f} | {r['ceiling_seconds'] * 1e3:,.0f} ms "
                     f"| {r['ratio_to_ceiling']:.2f}x | {cpu} | {exact} | {r['note']} |")
    if held:
        lines.append("")
        lines.append("CEILING: each configuration against " + "; ".join(held) + " (kvtier's configurations against "
                     "fio replaying kvtier's reads, the others against fio reading the plain files), measured in the "
                     "same round. The kvtier raw read row attributes, it is not a ceiling.")
        if any(coded(r["config"]) for r in summary):
            lines.append("A coded configuration (split16) reads fewer bytes than the KV it delivers: it is held "
                         "against fio reading the same KV's raw bytes (the plain files), so a ratio above 1x is KV "
                         "delivered faster than the drive reads it raw.")
    if any(r.get("cpu_scope") == "whole step" for r in summary):
        lines.append("")
        lines.append("CPU: " + ("not shown: this run timed CPU over each whole step, which in a warm run includes "
                                "reading the files into the page cache." if warm else
                                "* timed over each whole step (setup included: the naive loader's pinned "
                                "allocation, KvikIO's thread pool on first use, cache drops), an upper bound."))
    return "\n".join(lines)


def figure(summary, path, warm):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    ran = [r for r in summary if "seconds" in r]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    colors = ["0.6" if r["config"].startswith(("ceiling", "kvtier raw")) else ("C0" if r["config"].startswith("kvtier") else "C1")
              for r in ran]
    ax.barh([label(r, summary) for r in ran], [r["GBps"] for r in ran], color=colors)
    ax.set_xlabel("GB/s restored into GPU memory (both ranks, "
                  + ("files in the page cache; kvtier from its DRAM tier)" if warm else "cold page cache)"))
    ax.invert_yaxis()
    ax.set_title("100K-token session restore: kvtier vs peers, same files, same run")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
    # a peer's leftover non-daemon threads (LMCache's) must not hold the finished run open
    sys.stdout.flush()
    os._exit(0)
