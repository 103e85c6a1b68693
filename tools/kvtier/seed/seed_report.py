#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""Figures 1-5 of the reference evaluation and a one-page report from a seed run's seed.json.

Usage: seed_report.py <run directory>   (kvtier bench --workload seed runs it at the end)
Writes fig1_disk_read.png .. fig5_cpu.png, fig6_chunk_sweep.png (when swept) and report.md.
A shared run's directory (shared.json, bench --workload shared) gets fig_shared.png and report.md.
"""
import json
import sys
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def label(s, cufile):
    name = s["config"]
    if name == "gds":
        if not s.get("via_cufile"):
            return "gds (fell back: not via cuFile)"
        if "compat" in cufile.get("gds", ""):
            return "gds (cuFile compat mode)"
    return name


# Characters of 7-point caption text that fit the 7.5-inch figures: a longer line is cut at the edge.
CAPTION_CHARS = 125
CAPTION_LINE_IN = 0.14
LEGEND_IN = 0.3


def bar_figure(path, rows, key, title, subtitle, unit, cufile, fmt="{:.2f}", extra=None, bar_label=None):
    """Horizontal bars of rows[key]; `extra` = (key, label) overlays a second, thinner bar (a part of
    the first), named with the first's `bar_label` in a legend."""
    rows = [r for r in rows if r.get(key) is not None]
    caption = textwrap.wrap(subtitle, CAPTION_CHARS)
    legend = bool(rows and extra)
    bottom_in = CAPTION_LINE_IN * len(caption) + 0.1 + (LEGEND_IN if legend else 0)
    height = 1.2 + 0.55 * max(1, len(rows)) + bottom_in
    fig, ax = plt.subplots(figsize=(7.5, height))
    if not rows:
        ax.text(0.5, 0.5, "not measured on this machine", ha="center", va="center")
        ax.set_axis_off()
    else:
        names = [label(r, cufile) for r in rows]
        values = [r[key] for r in rows]
        bars = ax.barh(names, values, color="#3b6ea5", label=bar_label)
        evalues = [0] * len(rows)
        texts = [" " + fmt.format(v) + " " + unit for v in values]
        if extra:
            ekey, elabel = extra
            evalues = [r.get(ekey) or 0 for r in rows]
            ax.barh(names, evalues, color="#e0a030", height=0.35, label=elabel)
            texts = [f"{t} ({elabel.split()[0]} {fmt.format(e)})" for t, e in zip(texts, evalues)]
        for b, t, e in zip(bars, texts, evalues):
            ax.text(max(b.get_width(), e), b.get_y() + b.get_height() / 2, t, va="center")
        ax.invert_yaxis()
        top = max(max(values), max(evalues))
        ax.set_xlim(0, top * 1.45 if top > 0 else 1)
        ax.set_xlabel(unit)
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    caption_top = (CAPTION_LINE_IN * len(caption) + 0.1) / height
    fig.text(0.01, 0.02 / height, "\n".join(caption), fontsize=7, color="#555555", va="bottom")
    if legend:
        fig.legend(loc="lower center", bbox_to_anchor=(0.5, caption_top), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, bottom_in / height, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def token_range(w):
    """"20,000" when every session has the same length, else "19,000-20,000"."""
    lo, hi = w["tokens_min"], w["tokens_max"]
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


def headline(data):
    """What the KV was restored into, said first: a host-emulated run must not pass for a GPU's.
    seed.json from before the headline was written: named from the rank devices."""
    if data.get("headline"):
        return data["headline"]
    devices = data.get("machine", {}).get("rank_devices", [])
    if devices and all(str(d).startswith("host") for d in devices):
        return "**Host-emulated device: no GPU was used.**"
    return ""


def table_text(run, data):
    """table.md without its headline, which the report already has at its top."""
    text = (run / "table.md").read_text()
    head = headline(data)
    return text[len(head):].lstrip("\n") if head and text.startswith(head) else text


def machine_lines(data):
    machine = data.get("machine", {})
    lines = ["## Machine", ""]
    for k in ("kernel", "cpu", "cores", "memory_gib", "store_device", "store_device_model", "rank_devices",
              "page_cache"):
        v = machine.get(k)
        if isinstance(v, float):
            v = f"{v:.1f}"
        if k == "store_device_model" and not v:  # seed.json from before the model said why
            v = "unknown (the kernel lists none)"
        lines.append(f"- {k.replace('_', ' ')}: {v}")
    for k, v in machine.get("samplers", {}).items():
        if k == "pcie_sample_interval_ms" and not v:  # no sampler ran (seed.json from before it was left out)
            continue
        lines.append(f"- sampler {k.replace('_', ' ')}: {v}")
    for k, v in data.get("cufile", {}).items():
        lines.append(f"- cuFile ({k}): {v}")
    for k, v in data.get("fallbacks", {}).items():
        lines.append(f"- fallback ({k}): {v}")
    return lines


def line_figure(path, summary, key, title, ylabel, note, hline=None, hlabel=None):
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for config in sorted({s["config"] for s in summary}):
        pts = sorted((s["concurrency"], s.get(key)) for s in summary if s["config"] == config and s.get(key) is not None)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=config)
    if hline:
        ax.axhline(hline, color="#888888", linestyle="--", label=hlabel)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sessions restored at once per rank (N)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    ax.legend(fontsize=8)
    fig.text(0.01, 0.01, note, fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def concurrency_report(run, data):
    summary = data["summary"]
    machine = data.get("machine", {})
    load = data.get("host_load", {})
    names = []
    line_figure(run / "fig_c1_aggregate.png", summary, "aggregate_gbps", "Aggregate restore throughput",
                "GB/s (KV bytes, all ranks)", "Dashed lines would be the drive's raw O_DIRECT ceiling per N: see "
                "the table's CEILING column.")
    names.append("fig_c1_aggregate.png")
    line_figure(run / "fig_c2_tail.png", summary, "p99_over_p50", "Tail latency: p99 / p50 of session restore time",
                "p99 / p50", "A session's latency is its slowest rank's. Target: <= 1.5 at N = 8.", 1.5, "target 1.5")
    names.append("fig_c2_tail.png")
    if load.get("threads", 0) > 0:
        line_figure(run / "fig_c3_host_load.png", summary, "load_gbps",
                    "Host memory bandwidth left to a background load", "GB/s copied by the load (read + write)",
                    f"{load['threads']} copy threads; alone they move {load['alone_gbps']:.1f} GB/s.",
                    load["alone_gbps"], "load alone")
        names.append("fig_c3_host_load.png")
    lines = ["# kvtier concurrency evaluation", "", headline(data), "", f"Command: `{data.get('command', '')}`", ""]
    lines += machine_lines(data)
    w = data["workload"]
    kv = w.get("kv", "synthetic, random words (incompressible)")
    lines += ["", "## Workload", "",
              f"{len(w.get('session_tokens', []))} sessions of {token_range(w)} tokens of "
              f"{w['model']} at TP {w['ranks']}; per configuration and N, rounds of N sessions restored at once by "
              "each rank process (N threads, N paged caches), page cache dropped before each round, every byte "
              "checked after.", "", "## Results", "", table_text(run, data), ""]
    lines += [f"![{n}]({n})" for n in names]
    (run / "report.md").write_text("\n".join(lines) + "\n")
    print(f"report: {run / 'report.md'} and {len(names)} figures")


def shared_report(run, data):
    w = data["workload"]
    kv = w.get("kv", "synthetic, random words (incompressible)")
    names = {"cluster": "(a) from the cluster", "ceiling": "(b) raw GET ceiling", "local": "(c) own store"}
    rows = [dict(s, config=names.get(s["config"], s["config"])) for s in data["summary"]]
    for r in rows:
        r["cpu_ms_per_gb"] = r["cpu_core_s_per_gb"] * 1000
    common = (f"Medians of {w['rounds']} round(s) x {w['sessions']} session(s) of {w['tokens_min']}-{w['tokens_max']} "
              f"tokens ({w['model']}, TP {w['ranks']}); KV into {data['machine']['device']}.")
    bar_figure(run / "fig_shared.png", rows, "gbps", "Node B's restore of node A's sessions",
               "Session KV bytes over the slowest rank's time; the ceiling GETs the same values over the same "
               "connections without verifying or placing them. " + common, "GB/s", {})
    bar_figure(run / "fig_shared_cpu.png", rows, "cpu_ms_per_gb", "Node B's CPU per GB restored",
               "Process CPU time (getrusage, every thread) of node B's rank processes; the cluster's servers "
               "are not counted. " + common, "core-ms/GB", {}, "{:.0f}")
    lines = ["# kvtier shared (two nodes, one Redis Cluster)", "", f"Command: `{data.get('command', '')}`", "",
             (run / "table.md").read_text(), "", "![fig_shared](fig_shared.png)", "",
             "![fig_shared_cpu](fig_shared_cpu.png)"]
    (run / "report.md").write_text("\n".join(lines) + "\n")
    print(f"report: {run / 'report.md'} and 2 figures")


def main():
    run = Path(sys.argv[1])
    if (run / "shared.json").exists() and not (run / "seed.json").exists():
        return shared_report(run, json.loads((run / "shared.json").read_text()))
    data = json.loads((run / "seed.json").read_text())
    if data.get("mode") == "concurrency":
        return concurrency_report(run, data)
    summary = data["summary"]
    cufile = data.get("cufile", {})
    machine = data.get("machine", {})
    samplers = machine.get("samplers", {})
    main_chunk = data["workload"]["chunk_tokens"]
    repeat = [s for s in summary if s["phase"] == "repeat" and s["chunk_tokens"] == main_chunk]
    measured = samplers.get("dram_measured", False)
    dram_key = "dram_measured_gbps" if measured else "dram_accounted_gbps"
    dram_note = "memory-controller counters" if measured else "ACCOUNTED from the bytes the data path moved, not measured"
    n = data["workload"]["sessions"]
    common = f"Medians of {n} repeat windows; {data['workload']['ranks']} ranks; chunk {main_chunk} tokens."
    figures = [
        ("fig1_disk_read.png", "disk_read_gbps", "Figure 1. Physical disk read during retrieval",
         "Bytes read from the store's device (/proc/diskstats) inside each repeat window. " + common, "GB/s", "{:.2f}", None),
        ("fig2_restore.png", "restore_ms", "Figure 2. Time to restore a session",
         "End to end: lookup to all KV in place and verified. Shorter is better. " + common, "ms", "{:,.0f}", None),
        ("fig3_dram.png", dram_key, "Figure 3. Host DRAM bandwidth consumed during retrieval",
         f"Host memory traffic inside each window: {dram_note}. " + common, "GB/s", "{:.2f}", None),
        ("fig4_pcie_rx.png", "pcie_rx_gbps", "Figure 4. Delivery rate into GPU memory",
         "PCIe receive from NVML, ranks summed. " + samplers.get("pcie", "") + ". " + common, "GB/s", "{:.2f}", None),
        ("fig5_cpu.png", "cpu_core_s", "Figure 5. Host CPU consumed per request",
         "Blue: the whole machine's core-seconds per request (/proc/stat): kernel I/O threads and anything else "
         "running count too; orange: the part spent in kvtier's rank processes. The two come from different "
         "kernel counters (/proc/stat's per-CPU ticks, the processes' own times), each to a tick (10 ms): "
         "where kvtier is nearly all of it, orange can pass blue by that much. " + common, "core-s",
         "{:.2f}", ("kvtier_core_s", "kvtier rank processes")),
    ]
    # The drive's independent ceiling next to each restore rate: it was only in Table 1.
    if any(r.get("fio_kv_gbps") is not None for r in repeat):
        figures.append(
            ("fig_ceiling.png", "kv_gbps", "Restore rate against the drive's ceiling (fio)",
             "Blue: KV bytes restored per second; orange: fio reading the same file ranges (same order and "
             "request size, O_DIRECT), the drive's ceiling for these bytes. " + common, "GB/s", "{:.2f}",
             ("fio_kv_gbps", "fio ceiling")))
    bar_labels = {"fig5_cpu.png": "machine (all processes)", "fig_ceiling.png": "kvtier restore"}
    for name, key, title, subtitle, unit, fmt, extra in figures:
        bar_figure(run / name, repeat, key, title, subtitle, unit, cufile, fmt, extra, bar_labels.get(name))

    sweep = [s for s in summary if s["phase"] == "repeat"]
    chunks = sorted({s["chunk_tokens"] for s in sweep})
    made_sweep = len(chunks) > 1
    if made_sweep:
        fig, ax = plt.subplots(figsize=(7.5, 4))
        for config in sorted({s["config"] for s in sweep}):
            pts = sorted((s["chunk_tokens"], s["restore_ms"]) for s in sweep if s["config"] == config)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=config)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("chunk size (tokens)")
        ax.set_ylabel("restore, median ms")
        ax.set_title("Figure 6. Restore time against chunk size", loc="left", fontsize=11, fontweight="bold")
        ax.legend()
        fig.tight_layout()
        fig.savefig(run / "fig6_chunk_sweep.png", dpi=120)
        plt.close(fig)

    lines = ["# kvtier seed evaluation", "", headline(data), ""]
    lines += [f"Command: `{data.get('command', '')}`", ""]
    lines += machine_lines(data)
    w = data["workload"]
    kv = w.get("kv", "synthetic, random words (incompressible)")
    lines += ["", "## Workload", "",
              f"{w['sessions']} unique sessions of {token_range(w)} tokens of {w['model']} "
              f"at TP {w['ranks']} (one process per rank), saved in a unique phase (KV written by a prefill "
              f"stand-in from the token ids: {kv}), then restored in a repeat phase per configuration into a "
              "poisoned paged KV cache with the page cache dropped, and checked byte for byte.", ""]
    lines += ["## Table 1", "", table_text(run, data), ""]
    lines += ["## Figures", ""]
    for name, *_ in figures:
        lines.append(f"![{name}]({name})")
    if made_sweep:
        lines.append("![fig6_chunk_sweep.png](fig6_chunk_sweep.png)")
    lines += ["", "## Caveats", "",
              ("- KV is a forward pass's, tiled from a file (see Workload); restore paths do not depend on the values."
               if "kv_file" in w else
               "- KV comes from a deterministic stand-in for prefill, not a model; restore paths do not depend on the "
               "values."),
              "- DRAM BW is " + ("measured by the memory controllers." if measured else
                                 "accounted from what the data path moved (no memory-controller counters here): "
                                 "O_DIRECT reads count 1x, buffered reads 3x, cuFile compat mode 2x, peer-to-peer "
                                 "0x, plus 1x per byte DMA-copied to the GPU or 2x per byte copied by the CPU."),
              "- The unique phase of every configuration shares one store per chunk size (the DRAM configuration "
              "saves the sessions again to fill its tier); the repeat phases run one configuration after another.",
              ]
    # Said only where cuFile ran: on a machine without a GPU it is noise.
    if any(s["config"] == "gds" and s.get("via_cufile") for s in summary):
        lines.append("- cuFile compat mode is not GPUDirect Storage: it reads through host bounce buffers.")
    (run / "report.md").write_text("\n".join(lines) + "\n")
    print(f"report: {run / 'report.md'} and {len(figures) + int(made_sweep)} figures")


if __name__ == "__main__":
    main()
