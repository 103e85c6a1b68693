# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""vLLM's hybrid KV cache manager (HMA) seen as kvtier's hybrid geometry (docs/format.md "Hybrid
models"): which KV cache groups kvtier takes, each attention layer's block table, and the
recurrent layers' state pages.

Under HMA every KV cache group has a block table of its own. A full-attention group's table holds
every token's blocks; a sliding-window group's holds vLLM's null block (id 0) before the block of
token ``N - W + 1``; a Mamba group holds the state after token N in its block ``(N - 1) //
mamba_block_size`` (a list of tensors per layer, conv and SSM state, one after the other in one
page). kvtier stores the window layers in records a block long, so that what a save keeps starts
where vLLM's window blocks do, and the state at a save's end (and at each prefill step's end:
vllm_connector.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from vllm.v1.kv_cache_interface import KVCacheConfig

FULL, WINDOW, STATE, LATENT = "full", "window", "state", "latent"
_KINDS = {"FullAttentionSpec": FULL, "SlidingWindowSpec": WINDOW, "MambaSpec": STATE,
          "MLAAttentionSpec": LATENT}


@dataclass
class CacheGroups:
    """vLLM's KV cache groups as kvtier takes them."""
    kinds: list[str]        # per group: full, window, state or latent
    block_sizes: list[int]  # per group: tokens per block (a Mamba group's: tokens per state block)
    window: int = 0         # the sliding-window groups' W (tokens a token attends to, itself included)
    layer_group: dict[str, int] = field(default_factory=dict)
    page_bytes: int = 0     # the Mamba groups' page (state plus padding)

    @property
    def hybrid(self) -> bool:
        """Sliding-window or recurrent layers: kvtier's hybrid geometry."""
        return any(k in (WINDOW, STATE) for k in self.kinds)

    @property
    def attention_block_size(self) -> int:
        return next(bs for k, bs in zip(self.kinds, self.block_sizes) if k != STATE)

    def state_missing(self, tables: list[list[int]]) -> bool:
        """Whether a Mamba group of `tables` (as the connector plans them) has no state block."""
        return any(t == [-1] for t, k in zip(tables, self.kinds) if k == STATE)


def cache_groups(kv_cache_config: "KVCacheConfig | None") -> CacheGroups | None:
    """The groups of `kv_cache_config`, or None where vLLM said nothing (the tensors' shapes are
    checked when they come). Refuses, with why, what kvtier would have to guess at."""
    groups = list(getattr(kv_cache_config, "kv_cache_groups", None) or [])
    if not groups:
        return None
    names = [type(g.kv_cache_spec).__name__ for g in groups]
    kinds = [_KINDS.get(n) for n in names]
    if None in kinds:
        raise ValueError(f"KvtierConnector: this model's KV cache groups are {names}; kvtier takes full attention "
                         "(FullAttentionSpec), sliding windows (SlidingWindowSpec), Mamba state (MambaSpec) and MLA "
                         "(MLAAttentionSpec, alone): the others are refused, not guessed")
    specs = [g.kv_cache_spec for g in groups]
    out = CacheGroups(kinds=kinds, block_sizes=[s.block_size for s in specs])
    for g, group in enumerate(groups):
        for name in group.layer_names:
            out.layer_group[name] = g
    if LATENT in kinds:
        if len(set(kinds)) > 1:
            raise ValueError(f"KvtierConnector: MLA beside other kinds of layers ({names}) is not taken")
        if getattr(specs[0], "cache_dtype_str", None) == "fp8_ds_mla":
            raise ValueError("KvtierConnector: the fp8_ds_mla KV cache packs scales with the latent; kvtier does not "
                             "take it")
        return out
    if FULL not in kinds:
        raise ValueError(f"KvtierConnector: no full-attention layer among {names}: no prefix a load could start "
                         "from")
    if not out.hybrid:
        return out
    windows = {s.sliding_window for s, k in zip(specs, kinds) if k == WINDOW}
    if len(windows) > 1:
        raise ValueError(f"KvtierConnector: sliding windows of {sorted(windows)} tokens: kvtier keeps one window "
                         "size per model")
    out.window = windows.pop() if windows else 0
    attention = {bs for bs, k in zip(out.block_sizes, kinds) if k != STATE}
    if len(attention) > 1:
        raise ValueError(f"KvtierConnector: attention groups of block sizes {sorted(attention)}: kvtier needs one")
    for t in kv_cache_config.kv_cache_tensors:
        if not hasattr(t, "shared_by") or getattr(t, "offset", 0) or getattr(t, "block_stride", 0):
            # What is built and tested: vLLM 0.26's layout, a raw tensor per layer of each group,
            # pages a block apart. Newer vLLMs place layers with strides of their own.
            raise ValueError(f"KvtierConnector: this vLLM lays a hybrid model's KV cache out as {t}; kvtier takes a "
                             "hybrid model (sliding-window or Mamba layers) in vLLM 0.26's layout only (a tensor "
                             "shared by a layer of each group, unpacked)")
    mamba = [s for s, k in zip(specs, kinds) if k == STATE]
    for s in mamba:
        if s.mamba_cache_mode != "none":
            # vLLM 0.26 computes a hybrid's local prefix-cache hit per group and takes the largest
            # when a connector is set (scheduler.py, its issue #46453): a load could resume where
            # the recurrent state is not the one after the prefix.
            raise ValueError(f"KvtierConnector: Mamba prefix caching (mamba_cache_mode {s.mamba_cache_mode!r}) with "
                             "a connector can resume a request from a state that is not its prefix's in this vLLM; "
                             "serve this model with --no-enable-prefix-caching (kvtier keeps the state itself)")
        if getattr(s, "num_speculative_blocks", 0):
            raise ValueError("KvtierConnector: Mamba state with speculative decoding blocks is not taken")
        if (tuple(s.shapes), tuple(s.dtypes)) != (tuple(mamba[0].shapes), tuple(mamba[0].dtypes)):
            raise ValueError("KvtierConnector: Mamba layers of different state shapes: kvtier keeps one state size")
    if mamba:
        out.page_bytes = mamba[0].page_size_bytes
    return out


def kernel_split(tensor: "torch.Tensor", detect: Any, block_size: int, num_blocks: int | None) -> int:
    """How many kernel blocks one of vLLM's blocks is in an attention tensor (vLLM's attention
    backends may address a block of a hybrid model in smaller kernel blocks): the smallest r with
    block_size / r tokens and num_blocks x r blocks that `detect` takes."""
    last: Exception | None = None
    for r in range(1, block_size + 1):
        if block_size % r:
            continue
        try:
            detect(tensor, block_size // r, None if num_blocks is None else num_blocks * r)
            return r
        except ValueError as e:
            last = e
    raise last  # type: ignore[misc]


def expand(table: list[int], r: int) -> list[int]:
    """A table of vLLM's blocks as one of kernel blocks (r per block); -1 stays -1."""
    if r == 1:
        return list(table)
    return [b * r + i if b >= 0 else -1 for b in table for i in range(r)]


@dataclass
class StatePages:
    """One Mamba layer's state pages: the bytes of every state tensor of block b, one after the
    other, as one uint8 view."""
    storage: "torch.Tensor"  # the layer's whole storage as uint8
    first: int               # byte of block 0's state in it
    page: int
    state_bytes: int

    def view(self, block: int) -> "torch.Tensor":
        if block < 0:  # vLLM's null block, or none: never another block's bytes
            raise ValueError(f"KvtierConnector: no Mamba state block ({block})")
        at = self.first + block * self.page
        return self.storage[at: at + self.state_bytes]


def state_pages(name: str, tensors: list["torch.Tensor"], page_bytes: int) -> StatePages:
    """The pages of a Mamba layer's state tensors as vLLM's model runner views them (tensor j:
    [num_blocks, *shape_j] over the layer's raw storage, a page apart, after tensors 0..j-1)."""
    import torch
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError(f"KvtierConnector: Mamba layer '{name}' has no state tensors")
    at = tensors[0].data_ptr()
    for j, t in enumerate(tensors):
        if t.stride(0) * t.element_size() != page_bytes or not t[0].is_contiguous() or t.data_ptr() != at:
            raise ValueError(f"KvtierConnector: Mamba layer '{name}': state tensor {j} ({list(t.shape)}, strides "
                             f"{t.stride()}) is not a dense state a page ({page_bytes} bytes) apart, after the ones "
                             "before it")
        at += t[0].numel() * t.element_size()
    state_bytes = at - tensors[0].data_ptr()
    storage = torch.empty(0, dtype=torch.uint8, device=tensors[0].device).set_(tensors[0].untyped_storage())
    first = tensors[0].storage_offset() * tensors[0].element_size()
    if first + (tensors[0].shape[0] - 1) * page_bytes + state_bytes > storage.numel():
        raise ValueError(f"KvtierConnector: Mamba layer '{name}': its pages run past its storage")
    return StatePages(storage, first, page_bytes, state_bytes)


def window_table(ids: list[int], blocks: int) -> list[int]:
    """A sliding-window group's first `blocks` block ids with vLLM's null block (0: tokens that
    left the window) as kvtier's "not held"."""
    return [b if b != 0 else -1 for b in ids[:blocks]]


def state_block(ids: list[int], tokens: int, block_size: int) -> int | None:
    """The block of a Mamba group's table holding the state after `tokens` tokens; None where it
    is vLLM's null block or past the table."""
    i = (tokens - 1) // block_size
    return ids[i] if 0 <= i < len(ids) and ids[i] != 0 else None
