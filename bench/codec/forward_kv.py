#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""KV produced by a forward pass of the real architecture, for measuring compression.

Builds qwen3-coder-30b-a3b's architecture (Qwen3-MoE: 4 KV heads of 128, q/k RMSNorm, RoPE) with
**random weights** (seeded; transformers' own initialisation: no weights can be downloaded here),
prefills random token ids and writes the KV cache as kvtier's contiguous form
`[2, layers, tokens, kv_heads, head_dim]` in bf16 to OUT/kv-<layers>L-<tokens>T.bin. Random
weights are not a trained model: every ratio measured on this data must say so.

Usage: python3 bench/codec/forward_kv.py --out DIR [--layers 4] [--tokens 2048] [--device cpu]
"""
import argparse
import json
import os
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--experts", type=int, default=128, help="fewer makes a CPU run cheaper; KV shape unchanged")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig

    config = Qwen3MoeConfig(
        vocab_size=151936, hidden_size=2048, num_hidden_layers=args.layers, num_attention_heads=32,
        num_key_value_heads=4, head_dim=128, moe_intermediate_size=768, intermediate_size=6144,
        num_experts=args.experts, num_experts_per_tok=8, max_position_embeddings=262144,
        rope_theta=10000000.0, rms_norm_eps=1e-6, norm_topk_prob=True, decoder_sparse_step=1,
        mlp_only_layers=[], tie_word_embeddings=False)
    torch.manual_seed(args.seed)
    with torch.device(args.device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    gen = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(1000, config.vocab_size, (1, args.tokens), generator=gen).to(args.device)
    start = time.perf_counter()
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
    took = time.perf_counter() - start
    cache = out.past_key_values
    layers = []
    for i in range(args.layers):
        k = cache.layers[i].keys if hasattr(cache, "layers") else cache[i][0]
        v = cache.layers[i].values if hasattr(cache, "layers") else cache[i][1]
        # [batch, heads, tokens, dim] -> [tokens, heads, dim]
        layers.append((k[0].transpose(0, 1).contiguous(), v[0].transpose(0, 1).contiguous()))
    kv = torch.stack([torch.stack([l[0] for l in layers]), torch.stack([l[1] for l in layers])])
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"kv-{args.layers}L-{args.tokens}T.bin")
    kv.to(torch.bfloat16).cpu().contiguous().view(torch.uint8).numpy().tofile(path)
    meta = {"file": path, "shape": list(kv.shape), "dtype": "bfloat16", "model": "Qwen3-MoE, qwen3-coder-30b-a3b's "
            "attention shape, random weights (seed %d), %d experts" % (args.seed, args.experts),
            "tokens": args.tokens, "prefill_s": took, "device": args.device}
    with open(path + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
