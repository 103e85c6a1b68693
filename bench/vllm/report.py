#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""Table and figure of a serving run (bench/vllm/serve_bench.py's OUT/<config>.json files):
medians over the repeats, as the reference's Table 1, and whether every repeat's output tokens
equal the recompute's.

    python bench/vllm/report.py OUT [OUT2 ...] [--to DIR] [--label TEXT]
        # writes DIR/table.md, summary.json and ttft.png (DIR: the first OUT); several OUTs: the
        # calls of one run (same prompts and seed), a configuration in two kept from the later
"""
import argparse
import glob
import json
import os
import statistics

ORDER = ("recompute", "gpu-hit", "vllm-cpu", "lmcache-cpu", "kvtier-dram", "lmcache-disk", "kvtier-posix",
         "kvtier-gds", "kvtier-drives", "kvtier-drives-tuned", "kvtier-drives-gds")


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, unit="", digits=0):
    return "n/a" if v is None else f"{v:,.{digits}f}{unit}"


def load(outs):
    runs = {}
    for path in [p for out in outs for p in sorted(glob.glob(os.path.join(out, "*.json")))]:
        with open(path) as f:
            run = json.load(f)
        if "records" not in run:
            continue
        runs[run["config"]] = run
        hits = [r for r in run["records"] if r["phase"] == "gpu-hit"]
        if hits:
            runs["gpu-hit"] = {"config": "gpu-hit", "description": "vLLM's own GPU prefix-cache hit (no eviction)",
                               "records": [dict(r, phase="repeat") for r in hits]}
    return runs


def rows(runs):
    # The reference output of a prompt: the recompute's first (unique-phase) full prefill.
    reference = {r["prompt"]: r["output"] for r in runs.get("recompute", {}).get("records", []) if r["phase"] == "unique"}
    out = []
    for name in sorted(runs, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER)):
        recs = runs[name]["records"]
        # A repeat whose eviction from vLLM's GPU cache failed may have been a GPU hit: never counted.
        rep = [r for r in recs if r["phase"] == "repeat" and (r.get("evicted") or name == "gpu-hit")]
        dropped = sum(1 for r in recs if r["phase"] == "repeat" and not r.get("evicted") and name != "gpu-hit")
        if dropped:
            print(f"report: {name}: {dropped} repeat(s) left out, not evicted from vLLM's GPU cache first")
        uni = [r for r in recs if r["phase"] == "unique"]
        if not rep:
            continue
        equal = [r["output"] == reference.get(r["prompt"]) for r in rep if r["prompt"] in reference]
        ttft = median([r["ttft_ms"] for r in rep])
        disk = median([r["disk_read_bytes"] / (r["ttft_ms"] / 1e3) / 1e9 for r in rep])
        pcie = median([r["pcie_rx_bytes"] / (r["ttft_ms"] / 1e3) / 1e9 if r["pcie_rx_bytes"] is not None else None
                       for r in rep])
        out.append({
            "config": name, "description": runs[name]["description"], "n": len(rep),
            "ttft_ms": ttft, "e2e_ms": median([r["e2e_ms"] for r in rep]),
            "restore_ms": median([r.get("restore_ms") for r in rep]),
            "restored_tokens": median([r.get("restored_tokens") for r in rep]),
            "disk_gb": median([r["disk_read_bytes"] / 1e9 for r in rep]), "disk_gbps": disk, "pcie_gbps": pcie,
            "cpu_core_s": median([r["cpu_core_s"] for r in rep]),
            "cold_ttft_ms": median([r["ttft_ms"] for r in uni]),
            "outputs_equal": f"{sum(equal)}/{len(equal)}" if equal else "n/a",
            "prompt_tokens": median([r["prompt_tokens"] for r in rep]),
        })
    return out


def table(rs, label):
    base = {r["config"]: r for r in rs}
    lm = base.get("lmcache-disk", {}).get("ttft_ms")
    rc = base.get("recompute", {}).get("ttft_ms")
    lines = [f"Medians over the repeats of each configuration. {label}", "",
             "| configuration | repeats | TTFT | end to end | kvtier restore | tokens restored | disk read | "
             "disk GB/s (over TTFT) | PCIe RX GB/s (over TTFT) | CPU / request | cold TTFT | outputs = recompute | "
             "vs recompute | vs LMCache disk |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(
            f"| {r['config']} | {r['n']} | {fmt(r['ttft_ms'], ' ms')} | {fmt(r['e2e_ms'], ' ms')} | "
            f"{fmt(r['restore_ms'], ' ms')} | {fmt(r['restored_tokens'])} | {fmt(r['disk_gb'], ' GB', 2)} | "
            f"{fmt(r['disk_gbps'], '', 2)} | {fmt(r['pcie_gbps'], '', 2)} | {fmt(r['cpu_core_s'], ' core-s', 2)} | "
            f"{fmt(r['cold_ttft_ms'], ' ms')} | {r['outputs_equal']} | "
            f"{fmt(rc / r['ttft_ms'] if rc else None, 'x', 2)} | {fmt(lm / r['ttft_ms'] if lm else None, 'x', 2)} |")
    lines += ["", "Configurations:"] + [f"- {r['config']}: {r['description']}" for r in rs]
    return "\n".join(lines) + "\n"


def figure(rs, path, label):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 4.5))
    names = [r["config"] for r in rs]
    ttft = [r["ttft_ms"] / 1e3 for r in rs]
    restore = [(r["restore_ms"] or 0) / 1e3 for r in rs]
    ax.bar(names, ttft, color="#888", label="time to first token (client side)")
    ax.bar(names, restore, color="#2a7", width=0.5, label="of which kvtier's restore")
    for i, v in enumerate(ttft):
        ax.text(i, v, f"{v:.2f} s", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("seconds (median over repeats)")
    ax.set_title("A returning ~100K-token session in vLLM 0.26: time to first token", fontsize=10)
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelsize=8, rotation=20)
    fig.text(0.01, 0.01, label, fontsize=6, wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outs", nargs="+", metavar="OUT")
    ap.add_argument("--to", help="where the table and figure go (default: the first OUT)")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    to = args.to or args.outs[0]
    rs = rows(load(args.outs))
    with open(os.path.join(to, "table.md"), "w") as f:
        f.write(table(rs, args.label))
    with open(os.path.join(to, "summary.json"), "w") as f:
        json.dump(rs, f, indent=1)
    try:
        figure(rs, os.path.join(to, "ttft.png"), args.label)
    except ImportError:
        print("report: matplotlib missing, no figure")
    print(table(rs, args.label))


if __name__ == "__main__":
    main()
