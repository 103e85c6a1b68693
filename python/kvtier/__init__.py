# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""kvtier: offload LLM KV caches to NVMe and restore them into host or GPU memory.

    import kvtier
    g = kvtier.Geometry.preset("qwen3-coder-30b-a3b", tp_rank=0, tp_world=2)
    engine = kvtier.open("/nvme/kv", g, io="auto")
    engine.save(token_ids, kv)            # kv: [2, layers, tokens, kv_heads, head_dim], any DLPack tensor
    hit = engine.lookup(token_ids)        # tokens of the longest stored prefix
    engine.restore(token_ids, kv_out)     # verified; a corrupt chunk is a miss, never wrong KV
    engine.restore_paged(token_ids, layer_tensors, block_table, block_size=16, layout="kv_first")

Errors raise kvtier.Error(message, code): e.code (also e.args[1]) is the kvtier status name, e.g.
"corrupt", or "invalid argument" for KV of another element size or shape than the geometry's.
"""
from ._kvtier import Engine, Error, Geometry, built_with_remote, open, stat_fields  # noqa: F401

__all__ = ["Engine", "Error", "Geometry", "built_with_remote", "open", "stat_fields"]
