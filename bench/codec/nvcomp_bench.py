#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""nvCOMP's own GPU codecs on files of KV bytes: what split16 (kvtier_codec_gpu_bench) is set against.

Each file (raw bf16 KV, bench/codec/forward_kv.py) is cut into records of --record-bytes, as a
store holds them, and every record is one nvCOMP buffer (its native format, chunked by
--chunk-bytes inside, nvCOMP's unit of GPU parallelism). The records are encoded on the GPU once,
then decoded as one batch into preallocated device memory --repeats times after warm-ups, timed by
CUDA events on the codec's stream; the last decode is compared byte for byte with the file. The
ratio counts every byte nvCOMP stores for a record (its headers included), as split16's does.

One JSON line per (file, algorithm); an algorithm the installed nvCOMP lacks, or that fails, gives
a line with an "error" field and no figures. Needs torch with a GPU and NVIDIA's Python package
(nvidia-nvcomp-cu13 with nvidia-libnvcomp-cu13; bench/gpu/fetch_nvcomp_wheels.sh).

Usage: python3 bench/codec/nvcomp_bench.py FILE... [--record-bytes 2M] [--chunk-bytes 64K]
       [--repeats 20] [--algorithms ANS,ANS-f2,...]
"""
import argparse
import json
import os
import statistics
import sys

# label: (nvCOMP's algorithm, the Codec's options for it, the torch type records are handed over
# as). A 16-bit element type lets a codec model whole bf16 words: ANS has a '<f2' mode; Bitcomp's
# lossless mode takes integer words (bf16 is not fp16, so '<i2' rather than '<f2').
ALGORITHMS = {
    "ANS": ("ANS", {}, "uint8"),
    "ANS-f2": ("ANS", {"data_type": "<f2"}, "float16"),
    "Bitcomp": ("Bitcomp", {}, "uint8"),
    "Bitcomp-i2": ("Bitcomp", {"data_type": "<i2"}, "int16"),
    "GDeflate": ("GDeflate", {}, "uint8"),
    "GDeflate-entropy": ("GDeflate", {"algorithm_type": 0}, "uint8"),
    "Zstd": ("Zstd", {}, "uint8"),
    "LZ4": ("LZ4", {}, "uint8"),
}
WARMUPS = 2


def parse_size(text):
    """Bytes of '2M', '64K' or a plain number."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    return int(t[:-1]) * units[t[-1]] if t and t[-1] in units else int(t)


def import_nvcomp():
    """nvidia.nvcomp, or exit with what is missing. Where a regular package named `nvidia` (one
    with an __init__.py) comes first on the path, it hides the namespace portions the wheels
    install; their directories are added to it then."""
    try:
        from nvidia import nvcomp
        return nvcomp
    except ImportError as e:
        first = e
    try:
        import nvidia

        for p in sys.path:
            d = os.path.join(p, "nvidia")
            if os.path.isdir(os.path.join(d, "nvcomp")) and d not in list(nvidia.__path__):
                nvidia.__path__.append(d)
        from nvidia import nvcomp
        return nvcomp
    except ImportError:
        sys.exit(f"nvcomp_bench: nvidia.nvcomp cannot be imported ({first}): install "
                 "nvidia-nvcomp-cu13 and nvidia-libnvcomp-cu13 (bench/gpu/fetch_nvcomp_wheels.sh "
                 "downloads them into .whl/, h200_python_env installs them under /tmp/site)")


def median_seconds(torch, stream, repeats, work):
    """Median seconds of work() on `stream`, timed by CUDA events, after WARMUPS untimed runs."""
    for _ in range(WARMUPS):
        work()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        begin.record(stream)
        work()
        end.record(stream)
        end.synchronize()
        times.append(begin.elapsed_time(end) / 1e3)
    return statistics.median(times)


def records_of(size, record_bytes):
    return [(at, min(record_bytes, size - at)) for at in range(0, size, record_bytes)]


def run_algorithm(torch, nvcomp, raw, label, args):
    """One algorithm on one file's bytes (`raw`, uint8 on the GPU): its figures as a dict."""
    algorithm, options, dtype = ALGORITHMS[label]
    dtype = getattr(torch, dtype)
    item = torch.empty(0, dtype=dtype).element_size()
    if raw.numel() % item != 0:
        raise ValueError(f"{raw.numel()} bytes are not whole {item}-byte words")
    records = records_of(raw.numel(), args.record_bytes)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        s = stream.cuda_stream
        codec = nvcomp.Codec(algorithm=algorithm, uncomp_chunk_size=args.chunk_bytes, cuda_stream=s,
                             **options)
        words = raw.view(dtype)
        # Entries take their element type from the tensors (as_arrays), so each record is a view of
        # the typed words.
        srcs = nvcomp.as_arrays([words[at // item:(at + n) // item] for at, n in records], cuda_stream=s)
        config = codec.compression_config([n for _, n in records])
        encoded = codec.encode(srcs, compression_config=config)
        stored = sum(encoded.buffer_sizes)  # waits for the encode
        out = torch.empty_like(words)
        out.view(torch.uint8).fill_(0xA5)  # only the decoder can put the file's bytes back
        dsts = nvcomp.as_arrays([out[at // item:(at + n) // item] for at, n in records], cuda_stream=s)
        # Built from the compression config: no header read back, so each decode is sync-free.
        dconfig = codec.decompression_config(config)
        seconds = median_seconds(torch, stream, args.repeats,
                                 lambda: codec.decode(encoded, out=dsts, decompression_config=dconfig))
        stream.synchronize()
        exact = bool(torch.equal(out.view(torch.uint8), raw))
    return {
        "nvcomp_algorithm": algorithm, "options": options, "raw_bytes": raw.numel(), "stored_bytes": stored,
        "ratio": round(raw.numel() / stored, 4), "records": len(records), "record_bytes": args.record_bytes,
        "chunk_bytes": args.chunk_bytes, "repeats": args.repeats,
        "decode_GBps": round(raw.numel() / seconds / 1e9, 2), "byte_exact": exact,
    }


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        sys.exit(f"nvcomp_bench: {path}: cannot be read ({e.strerror})")
    if not data:
        sys.exit(f"nvcomp_bench: {path}: is empty")
    return data


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--record-bytes", type=parse_size, default=2 << 20,
                    help="bytes of a record, one nvCOMP buffer (default 2M, the store's record)")
    ap.add_argument("--chunk-bytes", type=parse_size, default=64 << 10,
                    help="nvCOMP's uncomp_chunk_size inside a record (default 64K, nvCOMP's own)")
    ap.add_argument("--repeats", type=int, default=20, help="timed decodes after %d warm-ups" % WARMUPS)
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS),
                    help="labels, comma-separated, of: " + ", ".join(ALGORITHMS))
    args = ap.parse_args()
    labels = [a for a in args.algorithms.split(",") if a]
    unknown = [a for a in labels if a not in ALGORITHMS]
    if unknown:
        ap.error(f"unknown algorithm {', '.join(unknown)}; known: {', '.join(ALGORITHMS)}")
    # Records start 16-byte aligned in one allocation (nvCOMP's strictest buffer alignment).
    if args.record_bytes <= 0 or args.record_bytes % 16 or args.chunk_bytes <= 0 or args.repeats <= 0:
        ap.error("--record-bytes must be a positive multiple of 16, --chunk-bytes and --repeats positive")
    datas = [read_bytes(f) for f in args.files]

    try:
        import torch
    except ImportError as e:
        sys.exit(f"nvcomp_bench: torch cannot be imported ({e})")
    if not torch.cuda.is_available():
        sys.exit("nvcomp_bench: no CUDA GPU (torch.cuda.is_available() is false)")
    nvcomp = import_nvcomp()
    gpu = torch.cuda.get_device_name(0)
    failed = False
    for path, data in zip(args.files, datas):
        raw = torch.frombuffer(bytearray(data), dtype=torch.uint8).cuda()
        torch.cuda.synchronize()
        for label in labels:
            line = {"file": path, "algorithm": label}
            try:
                line.update(run_algorithm(torch, nvcomp, raw, label, args))
                failed |= not line["byte_exact"]
            except Exception as e:  # reported on its line: one codec's failure is not the others'
                line["error"] = f"{type(e).__name__}: {e}"
            line.update({"gpu": gpu, "nvcomp": nvcomp.__version__})
            print(json.dumps(line), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
