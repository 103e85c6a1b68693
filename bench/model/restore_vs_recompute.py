# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""Restore versus recompute on a real transformer: the cost kvtier exists to save.

A Qwen3 model is built from its configuration with random weights (no weights can be downloaded
on the benchmark machine): by default qwen3-coder-30b-a3b's own architecture (Qwen3-MoE, 48 layers,
32 query heads, 4 KV heads of 128, 128 experts with 8 active), on one GPU. For each prompt length:
1. prefill the prompt (recompute: the time a serving engine spends without kvtier), keep the cache;
2. save its KV through the kvtier Python package (contiguous form [2, layers, tokens, kv_heads, dim]);
3. the next token's logits from the never-evicted cache (the reference);
4. drop the cache and the page cache, restore the KV from disk through kvtier (each I/O path
   asked for), rebuild the model's cache from it, and compute the next token's logits again.
The logits must be bit-identical; the table gives prefill time against restore time.

Usage: python3 bench/model/restore_vs_recompute.py --store DIR --out DIR [--tokens 8192,32768,100000]
       [--io posix,gds] [--layers N]   (kvtier's Python module on PYTHONPATH)
"""
import argparse
import json
import os
import sys
import time

import torch

import kvtier


def build_model(layers: int | None):
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig

    config = Qwen3MoeConfig(
        vocab_size=151936, hidden_size=2048, num_hidden_layers=layers or 48, num_attention_heads=32,
        num_key_value_heads=4, head_dim=128, moe_intermediate_size=768, intermediate_size=6144,
        num_experts=128, num_experts_per_tok=8, max_position_embeddings=262144, rope_theta=10000000.0,
        rms_norm_eps=1e-6, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    return model.eval(), config


def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t


def cache_layers(cache):
    """(key, value) per layer, [1, kv_heads, tokens, dim], from a transformers cache."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


def cache_from(kv, config):
    """A transformers DynamicCache holding the restored KV ([2, layers, tokens, kv_heads, dim])."""
    from transformers import DynamicCache

    cache = DynamicCache(config=config)
    for layer in range(kv.shape[1]):
        k = kv[0, layer].transpose(0, 1).unsqueeze(0).contiguous()
        v = kv[1, layer].transpose(0, 1).unsqueeze(0).contiguous()
        cache.update(k, v, layer)
    return cache


def render(rows, ios):
    def name(io):  # cuFile in its compatibility mode is never called GDS
        compat = any("compat mode" in r[io]["gds"] for r in rows)
        return f"RESTORE {io}" + (" (cuFile compat mode)" if io == "gds" and compat else "")
    lines = ["| TOKENS | KV | PREFILL (recompute) | " + " | ".join(name(io) for io in ios) +
             " | LOGITS IDENTICAL |", "|---|---|---|" + "---|" * len(ios) + "---|"]
    for r in rows:
        cells = [f"{r[io]['restore_ms']:,.0f} ms ({r[io]['speedup_vs_prefill']:.1f}x)" for io in ios]
        same = all(r[io]["logits_identical"] for io in ios)
        lines.append(f"| {r['tokens']:,} | {r['kv_bytes'] / 1e9:.2f} GB | {r['prefill_ms']:,.0f} ms | "
                     + " | ".join(cells) + f" | {'yes' if same else 'NO'} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", default="8192,32768,100000")
    ap.add_argument("--io", default="posix,gds")
    ap.add_argument("--layers", type=int, default=None, help="fewer layers (correctness runs)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for io in args.io.split(","):
        os.makedirs(os.path.join(args.store, io), exist_ok=True)

    model, config = build_model(args.layers)
    L, H, D = config.num_hidden_layers, config.num_key_value_heads, config.head_dim
    print(f"model: Qwen3-MoE, {L} layers, {config.num_attention_heads} query heads, {H} KV heads of {D}, "
          f"{config.num_experts} experts ({config.num_experts_per_tok} active), random bf16 weights, "
          f"{sum(p.numel() for p in model.parameters()) / 1e9:.1f} B parameters on {torch.cuda.get_device_name()}",
          flush=True)
    geometry = kvtier.Geometry.custom("qwen3-moe-random", layers=L, kv_heads=H, head_dim=D, element_bytes=2,
                                      chunk_tokens=256)
    engines = {io: kvtier.open(os.path.join(args.store, io), geometry, io=io, capacity="40G") for io in args.io.split(",")}
    rows = []
    gen = torch.Generator().manual_seed(1)
    for n in [int(x) for x in args.tokens.split(",")]:
        ids = torch.randint(0, config.vocab_size, (1, n + 1), generator=gen).cuda()
        with torch.inference_mode():
            # warm-up of the kernels at a small size so the timed prefill is the prefill
            model(ids[:, :256], use_cache=True, logits_to_keep=1)
            out, prefill_s = timed(lambda: model(ids[:, :n], use_cache=True, logits_to_keep=1))
            cache = out.past_key_values
            kv = torch.empty(2, L, n, H, D, dtype=torch.bfloat16, device="cuda")
            for layer, (k, v) in enumerate(cache_layers(cache)):
                kv[0, layer].copy_(k[0].transpose(0, 1))
                kv[1, layer].copy_(v[0].transpose(0, 1))
            ref, decode_s = timed(lambda: model(ids[:, n:n + 1], past_key_values=cache, use_cache=True).logits)
            del out, cache
        tokens = ids[0, :n].to(torch.int32).cpu().numpy()
        row = {"tokens": n, "kv_bytes": kv.numel() * 2, "prefill_ms": prefill_s * 1e3, "decode_ms": decode_s * 1e3}
        for io, engine in engines.items():
            _, save_s = timed(lambda: engine.save(tokens, kv))
            engine.drop_page_cache()
            restored = torch.zeros_like(kv)
            r, restore_s = timed(lambda: engine.restore(tokens, restored))
            assert r["tokens_restored"] == n, r
            with torch.inference_mode():
                cache, rebuild_s = timed(lambda: cache_from(restored, config))
                got = model(ids[:, n:n + 1], past_key_values=cache, use_cache=True).logits
            same = torch.equal(got, ref)
            st = engine.stats()
            row[io] = {"save_ms": save_s * 1e3, "restore_ms": restore_s * 1e3, "rebuild_cache_ms": rebuild_s * 1e3,
                       "restore_GBps": kv.numel() * 2 / restore_s / 1e9, "kv_byte_exact": torch.equal(restored, kv),
                       "logits_identical": same, "max_abs_logit_diff": (got.float() - ref.float()).abs().max().item(),
                       "speedup_vs_prefill": prefill_s / restore_s, "gds": st["gds"], "io_engine": st["io_engine"],
                       "gds_restores": st["gds_restores"], "fallback": st["io_fallback"]}
            print(f"{n:>7} tokens ({kv.numel() * 2 / 1e9:.2f} GB KV): prefill {prefill_s * 1e3:,.0f} ms | {io}: restore "
                  f"{restore_s * 1e3:,.0f} ms ({row[io]['restore_GBps']:.2f} GB/s, {prefill_s / restore_s:.1f}x faster), "
                  f"logits identical: {same}, KV byte-exact: {row[io]['kv_byte_exact']}", flush=True)
            del restored, cache, got
            engine.evict(tokens)
        rows.append(row)
        del kv, ref
        torch.cuda.empty_cache()
    result = {"model": f"Qwen3-MoE random weights, {L} layers, {H} KV heads x {D}, bf16, 1 GPU",
              "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "command": " ".join(sys.argv),
              "rows": rows}
    with open(os.path.join(args.out, "restore_vs_recompute.json"), "w") as f:
        json.dump(result, f, indent=1)
    table = render(rows, list(engines))
    print(table)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table + "\n")
    if not all(r[io]["logits_identical"] for r in rows for io in engines):
        sys.exit("restored KV gave different logits")


if __name__ == "__main__":
    main()
