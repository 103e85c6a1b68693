#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""The reference evaluation as a serving experiment: vLLM serves N unique long prompts, then the N
again, each repeat evicted from vLLM's GPU prefix cache first, under one KV configuration at a time
(kvtier, LMCache, vLLM's own CPU offloading, none), all in the same vLLM on the same drives.

What a client of the engine sees is measured from the caller's side of vLLM's AsyncLLM (the engine
core runs in its own process, as in `vllm serve`): time to the first token (TTFT) and to the last.
Around each request, samplers clipped to its start and end read: bytes read from the store's drives
(/sys/block/*/stat), bytes the GPU received over PCIe (NVML, 20 ms windows), and host CPU time
(/proc/stat, whole machine). kvtier's own restore time per request comes from its connector's
trace. Greedy decoding: every repeat's output tokens are compared with the recompute's for the same
prompt (a restored prefix that changes the output is wrong KV). The recompute configuration also
requests each prompt a third time without eviction: vLLM's own GPU prefix-cache hit, the floor.

    python bench/vllm/serve_bench.py --model-dir DIR --drive /mnt/fast0 --out OUT \\
        --configs recompute,kvtier-posix,lmcache-disk --prompts 3

Each configuration runs in a process of its own (a fresh engine, its GPU memory given back after);
OUT/<config>.json holds its per-request records, OUT/<config>.log its log. bench/vllm/report.py
makes the table and the figure. The model is whatever DIR's config.json describes, with random
(dummy) weights: no weights are downloaded, and every output says so.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

CONFIGS = ("recompute", "kvtier-posix", "kvtier-gds", "kvtier-dram", "kvtier-drives", "kvtier-drives-tuned",
           "kvtier-drives-gds", "kvtier-hybrid", "lmcache-disk", "lmcache-cpu", "vllm-cpu")

DESCRIPTIONS = {
    "recompute": "no offload: every repeat is a full prefill",
    "kvtier-posix": "kvtier, O_DIRECT into pinned memory, then to the GPU",
    "kvtier-gds": "kvtier, cuFile (compatibility mode where the machine has no nvidia-fs: not GDS)",
    "kvtier-dram": "kvtier with its DRAM tier (pinned host memory, written through on save)",
    "kvtier-drives": "kvtier, one store over every drive given (--drives), at its defaults",
    "kvtier-drives-tuned": "kvtier over every drive given, 4 MiB requests and 32 MiB staging (issue 26's best flags)",
    "kvtier-drives-gds": "kvtier over every drive given, cuFile (compatibility mode where there is no nvidia-fs)",
    "kvtier-hybrid": "kvtier under vLLM's hybrid KV cache manager (KvtierHybridConnector, a TP-free store): "
                     "attention KV, sliding windows and Mamba state",
    "lmcache-disk": "LMCache local disk (chunk 256, O_DIRECT) with no CPU tier: every hit is read from the disk",
    "lmcache-cpu": "LMCache's CPU tier (pinned host memory), no disk",
    "vllm-cpu": "vLLM's own offloading (native, CPU memory)",
}


# ---------------------------------------------------------------------------------------------
# Samplers


def _busy_jiffies() -> int:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal: everything but idle and iowait
    return sum(fields[:8]) - fields[3] - fields[4]


def _block_devices(paths: list[str]) -> list[str]:
    """The /sys/dev/block/<major:minor> entries holding each path (one per distinct device)."""
    out = []
    for p in paths:
        st = os.stat(p)
        entry = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        if os.path.exists(f"{entry}/stat") and entry not in out:
            out.append(entry)
    return out


def _sectors_read(devices: list[str]) -> int:
    total = 0
    for d in devices:
        with open(f"{d}/stat") as f:
            total += int(f.read().split()[2])
    return total


class PcieSampler:
    """Integrates NVML's PCIe RX throughput (KB/s over 20 ms windows) while running."""

    def __init__(self):
        self.bytes = 0.0
        self.ok = False
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self.ok = True
        except Exception:  # noqa: BLE001 - no NVML: the column stays empty, said so
            self._nvml = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.bytes = 0.0
        if not self.ok:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            kbps = self._nvml.nvmlDeviceGetPcieThroughput(self._handle, self._nvml.NVML_PCIE_UTIL_RX_BYTES)
            now = time.perf_counter()
            self.bytes += kbps * 1024.0 * (now - last)
            last = now
            time.sleep(0.02)

    def stop(self) -> float | None:
        if not self.ok:
            return None
        self._stop.set()
        self._thread.join()
        return self.bytes


def drop_page_cache() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------
# One configuration, in its own process


def prompts_for(seed: int, n: int, low: int, high: int, vocab: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(1000, vocab) for _ in range(rng.randint(low, high))] for _ in range(n)]


def connector_for(config: str, args) -> tuple[dict | None, dict[str, str], dict]:
    """(kv_transfer_config, environment, other engine arguments) of a configuration."""
    store = os.path.join(args.drive, f"kv-{config}")
    kvtier_common = {"kvtier.capacity": args.kvtier_capacity, "kvtier.trace": os.path.join(args.out, f"{config}.trace"),
                     "kvtier.request_size": args.request_size, "kvtier.staging": args.staging}

    def kvtier(connector="KvtierConnector", **extra):
        return {"kv_connector": connector, "kv_connector_module_path": "kvtier.vllm_connector",
                "kv_role": "kv_both", "kv_connector_extra_config": {**kvtier_common, **extra}}

    if config == "recompute":
        return None, {}, {}
    if config == "kvtier-posix":
        return kvtier(**{"kvtier.root": store, "kvtier.io": "posix"}), {}, {}
    if config == "kvtier-gds":
        return kvtier(**{"kvtier.root": store, "kvtier.io": "gds"}), {}, {}
    if config == "kvtier-dram":
        return kvtier(**{"kvtier.root": store, "kvtier.io": "posix", "kvtier.dram": args.dram}), {}, {}
    if config == "kvtier-hybrid":
        return kvtier("KvtierHybridConnector", **{"kvtier.root": store, "kvtier.io": "posix",
                                                  "kvtier.store_format": 2}), {}, {}
    if config.startswith("kvtier-drives"):
        over = {"kvtier.root": store_paths(config, args), "kvtier.io": "gds" if config.endswith("gds") else "posix",
                "kvtier.capacity": args.drives_capacity or args.kvtier_capacity}
        if config.endswith("tuned"):
            over.update({"kvtier.request_size": "4M", "kvtier.staging": "32M"})
        return kvtier(**over), {}, {}
    if config.startswith("lmcache"):
        # With LMCACHE_LOCAL_CPU=False LMCache keeps no CPU copy: its CPU pool only stages what is
        # being written or read, so a hit after vLLM's eviction comes from the disk, as in the
        # reference (its 20 sessions were larger than any CPU tier). The pool must hold the writes a
        # whole session leaves pending (stores that find it full are dropped, not waited for).
        disk = config == "lmcache-disk"
        env = {"LMCACHE_CHUNK_SIZE": "256", "LMCACHE_LOCAL_CPU": "False" if disk else "True",
               "LMCACHE_MAX_LOCAL_CPU_SIZE": str(args.lmcache_cpu_gb), "LMCACHE_USE_EXPERIMENTAL": "True"}
        if disk:
            env.update({"LMCACHE_LOCAL_DISK": f"file://{store}/", "LMCACHE_MAX_LOCAL_DISK_SIZE": str(args.lmcache_disk_gb),
                        "LMCACHE_EXTRA_CONFIG": json.dumps({"use_odirect": True})})
        return {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}, env, {}
    if config == "vllm-cpu":
        return None, {}, {"kv_offloading_size": args.vllm_cpu_gb, "kv_offloading_backend": "native"}
    raise SystemExit(f"unknown configuration {config!r}: one of {', '.join(CONFIGS)}")


def store_paths(config: str, args) -> list[str]:
    if config.startswith("kvtier-drives"):
        return [os.path.join(d, f"kv-{config}") for d in args.drives.split(",")]
    if config in ("recompute", "vllm-cpu", "lmcache-cpu"):
        return [args.drive]
    return [os.path.join(args.drive, f"kv-{config}")]


def wait_until_stored(config: str, args, n: int, log) -> float:
    """Blocks until the configuration's saves of the n unique prompts are on its store (kvtier: its
    trace's save events; LMCache: its disk directory stops growing). Returns the seconds waited."""
    start = time.perf_counter()
    if config.startswith("kvtier"):
        trace = os.path.join(args.out, f"{config}.trace")
        while time.perf_counter() - start < 300:
            saves = 0
            if os.path.exists(trace):
                with open(trace) as f:
                    saves = sum(1 for line in f if '"event": "save"' in line)
            if saves >= n + 1:  # the warm-up request's save too
                break
            time.sleep(0.2)
        else:
            log(f"kvtier saves not all done after 300 s ({saves} of {n + 1})")
    elif config == "lmcache-disk":
        path, last, still = store_paths(config, args)[0], -1, 0
        while time.perf_counter() - start < 300 and still < 6:
            size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs) \
                if os.path.isdir(path) else 0
            still = still + 1 if size == last else 0
            last = size
            time.sleep(0.5)
    return time.perf_counter() - start


def run_one(config: str, args) -> None:
    transfer, env, engine_extra = connector_for(config, args)
    os.environ.update(env)
    for p in store_paths(config, args):
        if p != args.drive:
            shutil.rmtree(p, ignore_errors=True)
            os.makedirs(p, exist_ok=True)
    trace = os.path.join(args.out, f"{config}.trace")
    if os.path.exists(trace):
        os.remove(trace)
    import asyncio

    from vllm import SamplingParams
    from vllm.config import KVTransferConfig
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM

    def log(msg: str) -> None:
        print(f"[{config} {time.strftime('%H:%M:%S')}] {msg}", flush=True)

    started = time.perf_counter()
    engine_args = AsyncEngineArgs(
        model=args.model_dir, load_format="dummy", skip_tokenizer_init=True, enforce_eager=True, dtype="bfloat16",
        max_model_len=args.max_model_len, gpu_memory_utilization=args.gpu_memory_utilization,
        enable_prefix_caching=not args.no_prefix_caching, seed=0,
        kv_transfer_config=KVTransferConfig(**transfer) if transfer else None,
        **({"max_num_batched_tokens": args.max_num_batched_tokens} if args.max_num_batched_tokens else {}),
        **engine_extra)
    engine = None
    prompts = prompts_for(args.seed, args.prompts, args.min_tokens, args.max_tokens, args.vocab)
    devices = _block_devices(store_paths(config, args)) if not config.startswith("recompute") else []
    pcie = PcieSampler()
    params = SamplingParams(max_tokens=args.gen, temperature=0.0, ignore_eos=True,
                            output_kind=RequestOutputKind.CUMULATIVE)
    records = []

    async def request(tokens: list[int], rid: str) -> dict:
        cpu0, disk0 = _busy_jiffies(), _sectors_read(devices)
        pcie.start()
        t0 = time.perf_counter()
        first, out = None, []
        async for o in engine.generate(TokensPrompt(prompt_token_ids=tokens), params, rid):
            if first is None and o.outputs and o.outputs[0].token_ids:
                first = time.perf_counter()
            out = list(o.outputs[0].token_ids)
        t1 = time.perf_counter()
        rx = pcie.stop()
        return {"ttft_ms": (first - t0) * 1e3, "e2e_ms": (t1 - t0) * 1e3, "output": out,
                "disk_read_bytes": (_sectors_read(devices) - disk0) * 512,
                "pcie_rx_bytes": rx, "cpu_core_s": (_busy_jiffies() - cpu0) / os.sysconf("SC_CLK_TCK")}

    async def reset() -> bool:
        for _ in range(100):  # blocks a connector still saves from are freed once the save is done
            if await engine.reset_prefix_cache():
                return True
            await asyncio.sleep(0.1)
        return False

    def trace_lines() -> list[dict]:
        if not os.path.exists(trace):
            return []
        with open(trace) as f:
            return [json.loads(line) for line in f if line.strip()]

    async def main() -> None:
        nonlocal engine
        engine = AsyncLLM.from_engine_args(engine_args)
        log(f"engine up in {time.perf_counter() - started:.1f} s")
        # Warm-up (not measured): kernels loaded, one short save and restore path taken.
        warm = prompts_for(args.seed + 1, 1, 2048, 2048, args.vocab)[0]
        await request(warm, f"warm-{config}")
        outputs: list[list[int]] = []
        for phase in ("unique", "repeat"):
            if phase == "repeat":
                waited = wait_until_stored(config, args, len(prompts), log)
                log(f"saves done {waited:.1f} s after the unique phase")
            for i, tokens in enumerate(prompts):
                if phase == "repeat" and args.follow_up:
                    # The conversation's next turn: its prompt, the answer it got, a new message.
                    tokens = tokens + outputs[i] + prompts_for(args.seed + 2 + i, 1, args.follow_up, args.follow_up,
                                                               args.vocab)[0]
                await measure(phase, i, tokens, evict=True)
                if phase == "unique":
                    outputs.append(records[-1]["output"])
                if phase == "repeat" and config == "recompute":
                    # vLLM's own floor: the same prompt again at once, a hit in its GPU prefix cache.
                    await measure("gpu-hit", i, tokens, evict=False)

    async def measure(phase: str, i: int, tokens: list[int], evict: bool) -> None:
        evicted = await reset() if evict else False
        if evict and not evicted:
            log(f"{phase} {i}: vLLM's prefix cache could not be reset (blocks still held): this request may be a GPU "
                "hit; recorded with evicted=false, which report.py leaves out")
        dropped = drop_page_cache() if evict else False
        loads_before = len([e for e in trace_lines() if e["event"] == "load"])
        r = await request(tokens, f"{phase}-{i}-{config}")
        loads = [e for e in trace_lines() if e["event"] == "load"][loads_before:]
        r.update(config=config, phase=phase, prompt=i, prompt_tokens=len(tokens), evicted=evicted,
                 page_cache_dropped=dropped,
                 restore_ms=sum(e["seconds"] for e in loads) * 1e3 if loads else None,
                 restored_tokens=sum(e["restored"] for e in loads) if loads else None)
        records.append(r)
        log(f"{phase} {i}: {len(tokens)} tokens, TTFT {r['ttft_ms']:.0f} ms, e2e {r['e2e_ms']:.0f} ms, "
            f"restore {r['restore_ms']} ms ({r['restored_tokens']} tokens), disk "
            f"{r['disk_read_bytes'] / 1e9:.2f} GB, PCIe RX "
            f"{(r['pcie_rx_bytes'] or 0) / 1e9:.2f} GB, CPU {r['cpu_core_s']:.2f} core-s")
        # kvtier's trace by event (step ends not kept by why): what the step-end saves did.
        counts: dict[str, int] = {}
        for e in trace_lines():
            name = e["event"] + (f" ({e['reason']})" if "reason" in e else "")
            counts[name] = counts.get(name, 0) + 1
        with open(os.path.join(args.out, f"{config}.json"), "w") as f:
            json.dump({"config": config, "description": DESCRIPTIONS[config], "records": records,
                       "settings": vars(args), "transfer": transfer, "env": env, "trace_counts": counts}, f,
                      indent=1)

    try:
        asyncio.run(main())
    finally:
        if engine is not None:
            engine.shutdown()
    log("done")


# ---------------------------------------------------------------------------------------------
# The driver


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", required=True, help="a directory with the model's config.json (dummy weights)")
    ap.add_argument("--drive", required=True, help="directory on the drive every store uses")
    ap.add_argument("--drives", default="", help="comma list of directories, one per drive (kvtier-drives)")
    ap.add_argument("--out", required=True, help="results directory")
    ap.add_argument("--configs", default="recompute,kvtier-posix,lmcache-disk", help=f"of {', '.join(CONFIGS)}")
    ap.add_argument("--prompts", type=int, default=3, help="unique prompts (and as many repeats)")
    ap.add_argument("--min-tokens", type=int, default=98000)
    ap.add_argument("--max-tokens", type=int, default=100000)
    ap.add_argument("--gen", type=int, default=8, help="tokens generated per request (greedy)")
    ap.add_argument("--vocab", type=int, default=0,
                    help="token ids are drawn below this (0: the model's vocab_size from its config.json)")
    ap.add_argument("--seed", type=int, default=20261204)
    ap.add_argument("--follow-up", type=int, default=0,
                    help="repeats are each conversation's next turn (its prompt, the answer it got and this many new "
                         "tokens) instead of the same prompt again: a Mamba hybrid's state is held where a save ended, "
                         "so only a continuation finds it (0: the same prompt)")
    ap.add_argument("--max-model-len", type=int, default=102400)
    ap.add_argument("--max-num-batched-tokens", type=int, default=0,
                    help="vLLM's step budget (0: vLLM's default); under kvtier-hybrid each prefill step's end is "
                         "kept, and a multiple of kvtier.chunk_tokens keeps them without a partial chunk each")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    ap.add_argument("--kvtier-capacity", default="30G", help="kvtier.capacity (per drive)")
    ap.add_argument("--drives-capacity", default="", help="kvtier.capacity per drive for kvtier-drives")
    ap.add_argument("--request-size", default="0", help="kvtier.request_size (0: kvtier's default)")
    ap.add_argument("--staging", default="0", help="kvtier.staging (0: kvtier's default)")
    ap.add_argument("--dram", default="24G", help="kvtier.dram for kvtier-dram")
    ap.add_argument("--lmcache-cpu-gb", type=float, default=24.0,
                    help="LMCache's CPU pool: its tier (lmcache-cpu), its staging (lmcache-disk)")
    ap.add_argument("--lmcache-disk-gb", type=float, default=40.0)
    ap.add_argument("--vllm-cpu-gb", type=float, default=24.0)
    ap.add_argument("--no-prefix-caching", action="store_true",
                    help="vLLM's prefix caching off in every configuration (a Mamba hybrid under kvtier-hybrid needs "
                         "it: vLLM 0.26 may resume beside a connector from a state not its prefix's); repeats then "
                         "recompute or load whatever the GPU held")
    ap.add_argument("--deadline", type=float, default=0, help="seconds for all configurations (0: none)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.vocab == 0:
        # An id past the model's embedding table is a device-side assert inside the engine.
        with open(os.path.join(args.model_dir, "config.json")) as f:
            args.vocab = json.load(f)["vocab_size"]
    os.makedirs(args.out, exist_ok=True)
    if args.one:
        run_one(args.one, args)
        return
    start = time.perf_counter()
    for config in args.configs.split(","):
        if config not in CONFIGS:
            raise SystemExit(f"unknown configuration {config!r}: one of {', '.join(CONFIGS)}")
    for config in args.configs.split(","):
        left = args.deadline - (time.perf_counter() - start) if args.deadline else None
        if left is not None and left < 60:
            print(f"== {config}: skipped, {left:.0f} s left", flush=True)
            continue
        print(f"== {config}: {DESCRIPTIONS[config]}", flush=True)
        cmd = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--one", config]
        with open(os.path.join(args.out, f"{config}.log"), "w") as logf:
            # A session of its own: on timeout the engine core it started goes too (its GPU memory
            # back for the next configuration).
            child = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = child.wait(timeout=left)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                rc = "timeout"
        with open(os.path.join(args.out, f"{config}.log")) as logf:
            lines = logf.read().splitlines()
        print("\n".join(l for l in lines if l.startswith(f"[{config} ")), flush=True)
        if rc != 0:
            print(f"== {config}: exit {rc}; the log's end:\n" + "\n".join(lines[-25:]), flush=True)
        # Its stores go, their blocks handed back to the drive (a RAM-backed drive frees the memory).
        for p in store_paths(config, args):
            if p != args.drive:
                shutil.rmtree(p, ignore_errors=True)
        for d in {args.drive, *args.drives.split(",")} - {""}:
            subprocess.run(["fstrim", d], capture_output=True)
        time.sleep(3)  # the engine core's GPU memory given back


if __name__ == "__main__":
    main()
