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
"corrupt"; str(e) is the message. An invalid argument (KV of another element size or shape than
the geometry's, a malformed size) is kvtier.InvalidArgument, both a kvtier.Error and a ValueError.
"""
from ._kvtier import (Engine, Error, Geometry, InvalidArgument, __version__, built_with_remote,  # noqa: F401
                      open, parse_size, stat_fields)


def _error_str(self):
    # The message alone, as other exceptions print: args also carry the code, and Exception's own
    # __str__ would print both as a tuple.
    return str(self.args[0]) if self.args else ""


Error.__str__ = _error_str

__all__ = ["Engine", "Error", "Geometry", "InvalidArgument", "__version__", "built_with_remote", "open",
           "parse_size", "stat_fields"]
