# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""A vLLM KV connector (KVConnectorBase_V1) backed by kvtier.

    vllm serve MODEL --kv-transfer-config '{"kv_connector": "KvtierConnector",
        "kv_connector_module_path": "kvtier.vllm_connector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"kvtier.root": "/nvme/kv", "kvtier.io": "auto"}}'

What it does, hook by hook:
- Scheduler: ``get_num_new_matched_tokens`` asks every worker's kvtier store (over a local ZeroMQ
  socket each worker serves) for the longest stored prefix of the prompt, takes the smallest answer
  (every rank must hold it), rounds it down to whole kvtier chunks and never counts the prompt's last
  token (vLLM must compute one). ``update_state_after_alloc`` plans the load into the request's
  blocks, marking the blocks vLLM already holds (its own prefix-cache hit) to be skipped: they are
  verified, never written. ``request_finished`` plans a save of every computed token and defers
  freeing the blocks until the workers report the save done.
- Worker: ``register_kv_caches`` takes the tensors as vLLM allocated them: it reads each layer's
  logical shape (``[2, blocks, bs, H, D]``, ``[blocks, 2, bs, H, D]`` or 0.26's packed
  ``[blocks, H, bs, 2D]``) and, from its strides, the order the bytes really lie in (vLLM permutes
  the logical shape by the backend's stride order: NHD by default, HND when asked). Any order kvtier
  cannot address (or a tensor with gaps between its blocks) is refused with a clear error; it opens
  the rank's kvtier store. ``start_load_kv``
  restores synchronously before the forward pass, or in the background when
  ``kvtier.async_load`` is set (reported through ``get_finished``). It also hands the planned
  saves to a background thread, which starts once the GPU work queued so far is done (vLLM's steps
  without a forward pass never call ``wait_for_save``); a save keeps only what a failed or pending
  load left valid. A miss or a checksum mismatch becomes ``get_block_ids_with_load_errors``: vLLM
  recomputes those blocks instead of serving wrong KV. A model whose KV cache is one group of full
  attention is taken, or of MLA with ``kvtier.store_format`` 2 (its latent stored once for every
  rank).
- Hybrid models, with ``"kv_connector": "KvtierHybridConnector"`` (``SupportsHMA``: vLLM runs its
  hybrid KV cache manager, which it turns off for KvtierConnector: sliding-window layers then keep
  every token, as full attention, and recurrent hybrids do not start): full-attention,
  sliding-window and Mamba groups, with ``kvtier.store_format`` 2 (``vllm_hybrid.py``). Each group
  keeps its own block table: kvtier writes each attention layer through its group's table, keeps a
  window layer's KV in records a block long and only where vLLM still holds the blocks (those that
  left the window are its null block), and a Mamba layer's state page at the save's end. A lookup
  finds the end of a save whose window and state are held and loads exactly there, never rounded.
  Each prefill step's end inside the prompt is saved too (``kvtier.step_saves``, true), from
  copies taken on the GPU at the step's end of the states and of the window blocks it keeps (vLLM
  overwrites a state in place and lets go of a window's blocks as it moves on), so the same prompt
  again resumes at its last step end and no step waits for a save (with more step ends waiting than
  copies allowed, a request's newest takes the place of its oldest one not begun). vLLM 0.26 cannot take back a hybrid request's failed blocks (its scheduler reads one group where
  load errors are reported), so a failed hybrid load raises instead of letting vLLM compute on KV
  nobody wrote. Mamba groups are taken with prefix caching off only (``mamba_cache_mode`` none):
  with it on, vLLM 0.26 may resume a request beside a connector from a state that is not its
  prefix's. Loads are synchronous for hybrid models.

Settings (``kv_connector_extra_config``): ``kvtier.root`` (store directory, required; a list of
directories spreads the store over several drives, one directory each), ``kvtier.io`` (auto, posix,
gds, buffered), ``kvtier.capacity`` (per drive), ``kvtier.dram``, ``kvtier.staging``,
``kvtier.request_size`` (sizes with K/M/G/T; 0 = each drive's tuning, else kvtier's defaults),
``kvtier.tune`` (true: a worker opening a store whose drives hold enough data but no tuning yet
probes them, a few seconds once, and reads with what it found; false: neither), ``kvtier.remote`` (Redis
Cluster seeds, ``redis://host:port[,host:port]``: a shared tier behind the local store, looked up
and restored from like it), ``kvtier.remote_password_env``, ``kvtier.remote_ttl`` (seconds),
``kvtier.tenant``, ``kvtier.chunk_tokens`` (256, or the first multiple of the block size past it;
a multiple of the block size),
``kvtier.async_load`` (false), ``kvtier.lookup_timeout_ms`` (2000: a whole lookup, every worker), ``kvtier.metrics_port`` (0: none;
else each worker serves its engine's Prometheus metrics on port + rank, since vLLM's workers are not
the process that serves ``/metrics``), ``kvtier.trace`` (a file each worker appends one JSON line
per load and save to: request, tokens, seconds; what the serving benchmark reads),
``kvtier.store_format`` (1: a store per rank; 2: a TP-free store, which deployments of another TP
size, up to the model's KV heads, read too; docs/format.md "TP-free stores"), ``kvtier.max_tp`` (8:
the largest TP size a TP-free store serves), ``kvtier.compression`` (off; split16 with store_format 2
and 16-bit KV: records kept coded losslessly, decoded on the host on restore; docs/format.md
"Compressed records"), ``kvtier.step_saves`` (true; false: a hybrid model's state and window
are kept at save ends only, not at prefill step ends), ``kvtier.step_copy_bytes`` (1G: the GPU
memory a worker's step-end saves may hold in copies of states and windows, outside vLLM's budget;
a step end whose copies would pass it is not kept).

Requests whose KV depends on more than their token ids (LoRA adapters, a cache salt, multimodal
inputs, prompt embeddings) are neither looked up nor saved: kvtier keys KV by token ids only.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import zmq

from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
)

try:
    from vllm.distributed.kv_transfer.kv_connector.v1.base import SupportsHMA
except ImportError:  # a vLLM without the hybrid KV cache manager's connector interface
    class SupportsHMA:  # type: ignore[no-redef]
        pass

import kvtier
import kvtier.metrics
from kvtier import vllm_hybrid as hybrid

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

log = logging.getLogger("kvtier.vllm")


# ---------------------------------------------------------------------------------------------
# Plans handed from the scheduler to the workers (pickled into every step's metadata)


@dataclass
class LoadPlan:
    req_id: str
    token_ids: list[int]  # the prefix to restore, a whole number of kvtier chunks
    block_ids: list[int]  # the request's blocks, in token order
    skip_blocks: int      # leading blocks vLLM already holds: verified, not written
    asynchronous: bool
    # A hybrid model's: each KV cache group's blocks for the prefix (-1: not to be written), a
    # Mamba group's being the one block that holds the state at the prefix's end.
    group_tables: list[list[int]] | None = None


@dataclass
class SavePlan:
    req_id: str
    token_ids: list[int]
    block_ids: list[int]
    group_tables: list[list[int]] | None = None  # a hybrid model's, as LoadPlan's
    # A running request's prefix at the end of this step's forward pass (a hybrid's prefill):
    # saved from a copy of its state taken then, before the next step overwrites it.
    at_step_end: bool = False


@dataclass
class KvtierMetadata(KVConnectorMetadata):
    loads: list[LoadPlan] = field(default_factory=list)
    saves: list[SavePlan] = field(default_factory=list)
    # Requests whose step-end saves of prefixes shorter than this many tokens may still read blocks
    # vLLM hands on this step (all of a preempted request's): ended in handle_preemptions, before
    # the runner writes those blocks anew. (A sliding window's blocks that leave it are not read:
    # a step-end save keeps the window from a copy taken at the step's end.)
    end_step_saves: dict[str, int] = field(default_factory=dict)


@dataclass
class _StepCopies:
    """What a step-end save reads in place of vLLM's memory, copied at the step's end: each Mamba
    layer's state, and each window layer's blocks (by layer) with a table into the copy."""
    states: "list[torch.Tensor]"
    windows: "dict[int, tuple[torch.Tensor, np.ndarray]]"
    nbytes: int  # the room they take among the copies in flight


@dataclass
class _Held:
    """A save's copies, let go of once (under the worker's lock): by the save as it ends, or as it
    gives way to a newer step end before it began (it then never runs)."""
    copies: "_StepCopies | None"
    begun: bool = False
    dropped: bool = False


@dataclass
class _WindowPick:
    """The window layers' blocks a step-end save keeps: one row of block ids per window group,
    padded to one length, each group's table into its row, and the bytes their copies take."""
    blocks: "np.ndarray"  # [groups, blocks] int64
    rows: dict[int, int]  # group -> row
    tables: "dict[int, np.ndarray]"
    nbytes: int


@dataclass
class _Prefill:
    """A hybrid's running request as the scheduler side follows it (step-end saves)."""
    prompt: list[int]
    tables: list[list[int]]  # each KV cache group's blocks so far
    saved_to: int = 0        # the longest prefix a step-end save was planned for


# ---------------------------------------------------------------------------------------------
# Settings, layout detection and the lookup channel


def _flag(extra: dict[str, Any], key: str, default: bool) -> bool:
    value = str(extra.get(key, default)).lower()
    if value not in ("1", "true", "yes", "0", "false", "no"):
        raise ValueError(f"KvtierConnector: {key} ({extra[key]!r}) is true or false")
    return value in ("1", "true", "yes")


@dataclass
class Settings:
    roots: list[str]  # one directory per drive; the first holds the index
    io: str = "auto"
    capacity: str = "0"
    dram: str = "0"
    staging: str = "0"
    request_size: str = "0"
    remote: str = ""
    remote_password_env: str = ""
    remote_ttl: int = 0
    tenant: str = ""
    chunk_tokens: int = 256
    async_load: bool = False
    lookup_timeout_ms: int = 2000
    metrics_port: int = 0
    trace: str = ""
    tune: bool = True
    store_format: int = 1
    max_tp: int = 8
    compression: str = "off"
    step_saves: bool = True
    step_copy_bytes: int = 1 << 30

    KEYS = ("kvtier.root", "kvtier.io", "kvtier.capacity", "kvtier.dram", "kvtier.staging",
            "kvtier.request_size", "kvtier.remote", "kvtier.remote_password_env", "kvtier.remote_ttl",
            "kvtier.tenant", "kvtier.chunk_tokens", "kvtier.async_load", "kvtier.lookup_timeout_ms",
            "kvtier.metrics_port", "kvtier.trace", "kvtier.tune", "kvtier.store_format", "kvtier.max_tp",
            "kvtier.compression", "kvtier.step_saves", "kvtier.step_copy_bytes")

    @property
    def root(self) -> str:
        return self.roots[0]

    @staticmethod
    def of(extra: dict[str, Any], block_size: int) -> "Settings":
        unknown = sorted(k for k in extra if k.startswith("kvtier.") and k not in Settings.KEYS)
        if unknown:  # a misspelt setting would otherwise be a silent default
            raise ValueError(f"KvtierConnector: unknown setting(s) {unknown} in kv_connector_extra_config; "
                             f"known: {list(Settings.KEYS)}")
        root = extra.get("kvtier.root")
        roots = [root] if isinstance(root, str) else list(root) if isinstance(root, (list, tuple)) else []
        if not roots or not all(isinstance(r, str) and r for r in roots):
            raise ValueError("KvtierConnector: kv_connector_extra_config needs 'kvtier.root': the store "
                             f"directory, or a list of directories one per drive (got {root!r})")
        flags = {key: _flag(extra, key, default) for key, default in
                 (("kvtier.async_load", False), ("kvtier.tune", True), ("kvtier.step_saves", True))}
        try:
            step_copy_bytes = kvtier.parse_size(str(extra.get("kvtier.step_copy_bytes", "1G")))
        except ValueError as e:
            raise ValueError(f"KvtierConnector: kvtier.step_copy_bytes: {e}") from e
        try:
            s = Settings(
                roots=[os.path.abspath(r) for r in roots],
                io=str(extra.get("kvtier.io", "auto")),
                capacity=str(extra.get("kvtier.capacity", "0")),
                dram=str(extra.get("kvtier.dram", "0")),
                staging=str(extra.get("kvtier.staging", "0")),
                request_size=str(extra.get("kvtier.request_size", "0")),
                remote=str(extra.get("kvtier.remote", "")),
                remote_password_env=str(extra.get("kvtier.remote_password_env", "")),
                remote_ttl=int(extra.get("kvtier.remote_ttl", 0)),
                tenant=str(extra.get("kvtier.tenant", "")),
                # Unasked, 256 tokens or the first multiple of the block size past them (a hybrid
                # model's attention blocks are made large enough to hold a Mamba state's page).
                chunk_tokens=int(extra.get("kvtier.chunk_tokens", -(-256 // block_size) * block_size)),
                async_load=flags["kvtier.async_load"],
                lookup_timeout_ms=int(extra.get("kvtier.lookup_timeout_ms", 2000)),
                metrics_port=int(extra.get("kvtier.metrics_port", 0)),
                trace=str(extra.get("kvtier.trace", "")),
                tune=flags["kvtier.tune"],
                store_format=int(extra.get("kvtier.store_format", 1)),
                max_tp=int(extra.get("kvtier.max_tp", 8)),
                compression=str(extra.get("kvtier.compression", "off")),
                step_saves=flags["kvtier.step_saves"],
                step_copy_bytes=step_copy_bytes,
            )
        except (TypeError, ValueError) as e:
            raise ValueError(f"KvtierConnector: a setting in kv_connector_extra_config is not a number: {e}") from e
        if s.chunk_tokens <= 0 or s.chunk_tokens % block_size != 0:
            raise ValueError(f"KvtierConnector: kvtier.chunk_tokens ({s.chunk_tokens}) must be a positive multiple "
                             f"of vLLM's block size ({block_size})")
        if s.store_format not in (1, 2):
            raise ValueError(f"KvtierConnector: kvtier.store_format ({s.store_format}) is 1 (a store per rank) or 2 "
                             "(TP-free: shared by every TP size)")
        if s.compression not in ("off", "split16"):
            raise ValueError(f"KvtierConnector: kvtier.compression ({s.compression!r}) is 'off' or 'split16'")
        if not 0 <= s.metrics_port < 65536:
            raise ValueError(f"KvtierConnector: kvtier.metrics_port ({s.metrics_port}) is not a port")
        return s


@dataclass
class Layout:
    name: str  # kvtier's layout name
    kv_heads: int
    head_dim: int
    order: tuple[int, ...]  # the permutation of the logical shape that is contiguous in memory
    kv_tensors: int = 2  # 2: K and V; 1: MLA's latent


# The meaning of each dimension: "kv" (K or V), "block", "token" (within a block), "head", "dim"
# (head_dim elements) or "kvdim" (K then V, 2 * head_dim elements).
_LOGICAL = (  # the logical shapes vLLM's attention backends report (get_kv_cache_shape)
    ("kv", "block", "token", "head", "dim"),  # [2, blocks, bs, H, D]
    ("block", "kv", "token", "head", "dim"),  # [blocks, 2, bs, H, D]
    ("block", "head", "token", "kvdim"),      # [blocks, H, bs, 2D] (0.26's packed K|V)
    ("block", "token", "dim"),                # [blocks, bs, latent]: MLA's one tensor
)
_PHYSICAL = {  # the byte orders kvtier addresses, outermost dimension first
    ("kv", "block", "token", "head", "dim"): "kv_first",
    ("block", "kv", "token", "head", "dim"): "block_first",
    ("block", "head", "token", "kvdim"): "packed_heads",
    ("block", "token", "head", "kvdim"): "packed_tokens",
    ("block", "token", "dim"): "kv_first",  # kvtier's kv_first of one tensor and one head
}


def _logical_meanings(shape: tuple[int, ...], block_size: int, num_blocks: int | None) -> list[tuple[str, ...]]:
    out = []
    for meanings in _LOGICAL:
        if len(meanings) != len(shape):
            continue
        size = dict(zip(meanings, shape))
        if size.get("kv", 2) != 2 or size["token"] != block_size or size.get("kvdim", 2) % 2:
            continue
        if num_blocks is not None and size["block"] != num_blocks:
            continue
        out.append(meanings)
    return out


def detect_layout(t: "torch.Tensor | tuple[int, ...]", block_size: int, num_blocks: int | None) -> Layout:
    """The kvtier layout of one layer's paged KV tensor: its logical shape says what each dimension
    is, its strides in which order the bytes lie. Refuses a shape that is none of the known ones (or
    could be two of them), an order kvtier cannot address and a tensor with gaps (padded pages)."""
    shape = tuple(t.shape) if hasattr(t, "shape") else tuple(t)
    strides = tuple(t.stride()) if hasattr(t, "stride") else None
    logical = _logical_meanings(shape, block_size, num_blocks)
    if len(logical) != 1:
        raise ValueError(
            f"KvtierConnector: KV cache tensor of shape {list(shape)} (block size {block_size}, "
            f"{num_blocks} blocks) is not one known layout: expected [2, blocks, bs, H, D], [blocks, 2, bs, H, D], "
            f"[blocks, H, bs, 2*D] or MLA's [blocks, bs, latent]. kvtier refuses a layout it would have to guess.")
    meanings = logical[0]
    size = dict(zip(meanings, shape))
    heads = size.get("head", 1)
    dim = size["dim"] if "dim" in size else size["kvdim"] // 2
    kv_tensors = 2 if "kv" in size or "kvdim" in size else 1
    for physical, name in _PHYSICAL.items():
        if sorted(physical) != sorted(meanings):
            continue
        order = tuple(meanings.index(m) for m in physical)
        if strides is None or t.permute(order).is_contiguous():
            return Layout(name, heads, dim, order, kv_tensors)
    described = ", ".join(f"{m} {n} (stride {st})" for m, n, st in zip(meanings, shape, strides))
    raise ValueError(
        f"KvtierConnector: KV cache tensor of logical shape {list(shape)} lies in memory in an order kvtier "
        f"cannot address or with gaps between its blocks ({described}); kvtier reads [2, blocks, bs, H, D], "
        f"[blocks, 2, bs, H, D], [blocks, H, bs, 2D] and [blocks, bs, H, 2D] laid out densely.")


def layer_order(names: list[str]) -> list[str]:
    """Layer names in model order: by the first integer in each name (model.layers.<i>.self_attn...)."""
    def index(name: str) -> int:
        m = re.search(r"\d+", name)
        if m is None:
            raise ValueError(f"KvtierConnector: cannot tell the layer index of KV cache '{name}'")
        return int(m.group())
    return sorted(names, key=index)


def lookup_address(root: str, rank: int) -> str:
    digest = hashlib.sha1(root.encode()).hexdigest()[:12]
    return f"ipc://{tempfile.gettempdir()}/kvtier-{digest}-r{rank}.ipc"


class LookupServer:
    """Answers the scheduler's lookups from one worker's engine: int32 token ids in, the stored
    prefix length (8 bytes) out."""

    def __init__(self, engine: "kvtier.Engine", address: str):
        self._engine = engine
        self._ctx = zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(address)
        self._address = address
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kvtier-lookup", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(100):
                continue
            tokens = np.frombuffer(self._sock.recv(), dtype=np.int32)
            try:
                hit = self._engine.lookup(tokens) if tokens.size else 0
            except Exception as e:  # noqa: BLE001 - whatever broke, the answer is "nothing stored"
                log.warning("kvtier lookup failed: %s", e)
                hit = 0
            self._sock.send(int(hit).to_bytes(8, "little"))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()
        if self._address.startswith("ipc://"):  # the socket's file, which zmq leaves behind
            try:
                os.unlink(self._address[len("ipc://"):])
            except OSError:
                pass


class LookupClient:
    """The scheduler's side: asks every worker, takes the smallest answer; a worker that does not
    answer in time counts as holding nothing."""

    def __init__(self, root: str, ranks: int, timeout_ms: int):
        self._ctx = zmq.Context.instance()
        self._addresses = [lookup_address(root, r) for r in range(ranks)]
        self._timeout = timeout_ms
        self._socks: list[zmq.Socket | None] = [None] * ranks

    def _socket(self, r: int) -> zmq.Socket:
        if self._socks[r] is None:
            s = self._ctx.socket(zmq.REQ)
            s.setsockopt(zmq.LINGER, 0)
            s.connect(self._addresses[r])
            self._socks[r] = s
        return self._socks[r]

    def lookup(self, tokens: np.ndarray, agree: bool = False) -> int:
        """The longest prefix every worker holds, all of them answering within the timeout (else
        no hit). `agree`: a hybrid model's workers hold prefixes only at the ends of their saves,
        not every prefix of one, so the smallest answer is asked of every worker again until all
        of them hold it (or it is 0)."""
        tokens = np.ascontiguousarray(tokens, dtype=np.int32)
        deadline = time.monotonic() + self._timeout / 1e3
        answers = self._ask(tokens, deadline)
        # Each answer is at most what was asked: every round ends agreed or asks for less.
        while agree and answers and min(answers) > 0 and len(set(answers)) > 1:
            answers = self._ask(tokens[: min(answers)], deadline)
        return min(answers) if answers else 0

    def _ask(self, tokens: np.ndarray, deadline: float) -> list[int]:
        """Every worker's answer for `tokens`, each at most its length; [] where one did not
        answer by `deadline`."""
        payload = tokens.tobytes()
        answers = []
        for r in range(len(self._addresses)):
            s = self._socket(r)
            s.send(payload)
            if not s.poll(max(0, int((deadline - time.monotonic()) * 1e3))):
                log.warning("kvtier: worker %d did not answer a lookup within %d ms; counting no hit", r,
                            self._timeout)
                s.close()
                self._socks[r] = None  # a REQ socket that lost its reply cannot be reused
                return []
            answers.append(min(int.from_bytes(s.recv(), "little"), len(tokens)))
        return answers

    def close(self) -> None:
        for s in self._socks:
            if s is not None:
                s.close()


def _worker_rank(vllm_config: "VllmConfig") -> tuple[int, int]:
    """(rank, world) of this worker among every worker holding a part of the KV cache."""
    pc = vllm_config.parallel_config
    world = pc.tensor_parallel_size * pc.pipeline_parallel_size
    # The scheduler reaches its workers over ipc:// sockets named by the store root and the rank:
    # one node, one data-parallel engine per root.
    if getattr(pc, "data_parallel_size", 1) > 1 or getattr(pc, "nnodes", 1) > 1:
        raise ValueError(f"KvtierConnector: data parallel size {getattr(pc, 'data_parallel_size', 1)} over "
                         f"{getattr(pc, 'nnodes', 1)} node(s): kvtier's connector serves one engine on one node "
                         "(tensor and pipeline parallel within it); run one engine per store root")
    try:
        from vllm.distributed.parallel_state import get_world_group
        return get_world_group().rank_in_group, world
    except (AssertionError, ImportError, AttributeError):
        return pc.rank, world


def _model_id(vllm_config: "VllmConfig") -> str:
    """The model part of kvtier's keys: the model, its revision, dtype, quantization and the KV
    cache dtype all change the KV a prompt produces, so KV saved under one is never a hit under
    another. A readable stem and a digest of all of it (kvtier takes at most 64 characters)."""
    mc, cc = vllm_config.model_config, vllm_config.cache_config
    model = str(getattr(mc, "model", None) or "vllm-model")
    details = [model, getattr(mc, "revision", None), getattr(mc, "dtype", None), getattr(mc, "quantization", None),
               getattr(cc, "cache_dtype", None)]
    digest = hashlib.sha1(repr(details).encode()).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", model.rstrip("/").split("/")[-1])[:40]
    return f"{stem}-{digest}"


def _total_kv_heads(vllm_config: "VllmConfig") -> int:
    """The model's KV heads over every rank (0: not known; then kv_heads x TP size)."""
    try:
        return int(vllm_config.model_config.get_total_num_kv_heads())
    except Exception:  # a config without a model (the tests' CPU config), or another vLLM's
        return 0


def _keyed_by_tokens_only(request: "Request") -> bool:
    return not (request.lora_request or request.cache_salt or request.mm_features
                or getattr(request, "prompt_embeds", None) is not None)


# ---------------------------------------------------------------------------------------------


class KvtierConnector(KVConnectorBase_V1):
    def __init__(self, vllm_config: "VllmConfig", role: KVConnectorRole, kv_cache_config: "KVCacheConfig" = None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        self._groups = hybrid.cache_groups(kv_cache_config)
        self._hybrid = self._groups is not None and self._groups.hybrid
        # A hybrid model's attention blocks are its attention groups' (sized to hold a Mamba page).
        self._block_size = (self._groups.attention_block_size if self._hybrid
                            else vllm_config.cache_config.block_size)
        self._settings = Settings.of(self._kv_transfer_config.kv_connector_extra_config or {}, self._block_size)
        self._rank, self._world = _worker_rank(vllm_config)
        self._model = _model_id(vllm_config)
        self._pipeline_stages = vllm_config.parallel_config.pipeline_parallel_size
        self._total_kv_heads = _total_kv_heads(vllm_config)
        # scheduler side
        self._lookup: LookupClient | None = None
        self._matched: dict[str, tuple[int, int]] = {}  # req -> (vLLM's own computed tokens, restorable)
        self._loads: list[LoadPlan] = []
        self._saves: list[SavePlan] = []
        self._saving: set[str] = set()  # requests whose blocks wait for their save to be reported done
        # A recurrent hybrid's state exists only where a step ends, and vLLM overwrites it in place;
        # a sliding window's KV is let go of as the window moves on: both are kept at every prefill
        # step's end, so that a prompt again (which resumes before its last token) finds them. Not
        # under vLLM's second model runner, which zeroes a step's new blocks (a preempted request's,
        # handed on) before telling the connector. kvtier.step_saves false: not at all (no copies,
        # no saves beside the prefill).
        self._step_ends = (self._hybrid and self._settings.step_saves
                           and os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "0") in ("", "0"))
        self._end_step_saves: dict[str, int] = {}  # this step's KvtierMetadata.end_step_saves
        self._keyed: dict[str, bool] = {}  # request -> keyed by its tokens only (step-end saves)
        self._prefills: dict[str, _Prefill] = {}
        self._step_saved: set[str] = set()  # requests with step-end saves planned
        # worker side
        self._engine: kvtier.Engine | None = None
        self._server: LookupServer | None = None
        self._layers: list[torch.Tensor] = []
        self._layout: Layout | None = None
        self._io = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kvtier-save")
        # Loads apart from saves: an async load never waits behind a multi-GB save, and a save that
        # waits for its request's load never holds the thread that load needs.
        self._load_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kvtier-load")
        self._mu = threading.Lock()
        self._pending_loads: dict[str, Future] = {}
        # A request's saves (step-end ones, then its finish), each with the tokens it saves.
        self._pending_saves: dict[str, list[tuple[int, Future]]] = {}
        self._step_copies = 0  # step-end saves in flight, each with its copies (GPU memory outside vLLM's budget)
        self._step_copy_bytes = 0  # what their copies take
        self._copies_too_large = False  # a step end's copies alone passed kvtier.step_copy_bytes
        # A request's step-end saves, oldest first: (tokens, its copies as _Held, future).
        self._step_saves: dict[str, list[tuple[int, _Held, Future]]] = {}
        self._finished_seen: set[str] = set()
        self._load_errors: set[int] = set()
        self._valid: dict[str, int] = {}  # request -> tokens its load left valid, where it fell short
        if self._hybrid:
            if not isinstance(self, SupportsHMA):
                raise ValueError(f"KvtierConnector: this model's KV cache groups are {self._groups.kinds}: a hybrid "
                                 "model is served by KvtierHybridConnector (vLLM's hybrid KV cache manager)")
            self._check_hybrid_settings()
        self._kernel_split = 1  # kernel blocks per vLLM block in the attention tensors (hybrid)
        self._attn_groups: list[int] = []  # each attention layer's KV cache group (hybrid)
        self._state_pages: list[hybrid.StatePages] = []  # each Mamba layer's (hybrid)
        self._state_groups: list[int] = []
        if role == KVConnectorRole.SCHEDULER:
            self._lookup = LookupClient(self._settings.root, self._world, self._settings.lookup_timeout_ms)

    # ---- scheduler side ------------------------------------------------------------------------

    def get_num_new_matched_tokens(self, request: "Request", num_computed_tokens: int) -> tuple[int | None, bool]:
        prompt = request.prompt_token_ids
        keyed = self._keyed[request.request_id] = _keyed_by_tokens_only(request)
        if prompt is None or len(prompt) < 2 or not keyed:
            return 0, False
        cached = self._matched.get(request.request_id)
        if cached is not None and cached[0] == num_computed_tokens and not self._hybrid:
            hit = cached[1]  # asked again while it waits to be admitted: no new round trip
        else:
            # A hybrid model's hit is where its window and state are held, exactly there, and
            # asked afresh each time: its load cannot fall back on recomputing what went since.
            hit = self._lookup.lookup(np.asarray(prompt[: len(prompt) - 1]), agree=self._hybrid)
            if not self._hybrid:
                hit -= hit % self._settings.chunk_tokens
        self._matched[request.request_id] = (num_computed_tokens, hit)
        if hit <= num_computed_tokens:
            return 0, False
        return hit - num_computed_tokens, self._settings.async_load

    def update_state_after_alloc(self, request: "Request", blocks: "KVCacheBlocks", num_external_tokens: int):
        if num_external_tokens == 0:
            return
        local, hit = self._matched.pop(request.request_id, (0, 0))
        if local + num_external_tokens != hit:
            # Not what kvtier offered: load what vLLM made room for; tokens kvtier cannot place are
            # reported as load errors and recomputed.
            log.warning("kvtier: request %s: vLLM took %d external tokens after %d of its own; kvtier offered %d",
                        request.request_id, num_external_tokens, local, hit - local)
        end = local + num_external_tokens
        if self._hybrid:
            if end != hit:
                # Its window and state are held at `hit` only: vLLM would compute on KV and state
                # that no load wrote.
                raise RuntimeError(f"KvtierConnector: request {request.request_id}: vLLM took {end} tokens where kvtier "
                                   f"offered {hit}; a hybrid model's KV and state load only where they were saved")
            tables = self._group_tables(blocks.get_block_ids(), end, skip_before=local)
            if self._groups.state_missing(tables):
                raise RuntimeError(f"KvtierConnector: request {request.request_id}: vLLM allocated no Mamba state "
                                   f"block at its {end} tokens; kvtier has nowhere to load the state")
            self._loads.append(LoadPlan(request.request_id, list(request.prompt_token_ids[:end]), [], 0, False,
                                        tables))
            return
        block_ids = list(blocks.get_block_ids()[0])
        self._loads.append(LoadPlan(request.request_id, list(request.prompt_token_ids[:end]), block_ids,
                                    local // self._block_size, self._settings.async_load))

    def build_connector_meta(self, scheduler_output: "SchedulerOutput") -> KVConnectorMetadata:
        if self._step_ends:
            self._plan_step_ends(scheduler_output)
            for rid in set(getattr(scheduler_output, "preempted_req_ids", None) or ()) & self._step_saved:
                self._end_step_saves[rid] = sys.maxsize
        meta = KvtierMetadata(loads=self._loads, saves=self._saves, end_step_saves=self._end_step_saves)
        self._loads, self._saves, self._end_step_saves = [], [], {}
        return meta

    def _plan_step_ends(self, so: "SchedulerOutput") -> None:
        """A step-end save for each request this step leaves inside its prompt: the prefix it will
        have computed and the state block holding the state after it."""
        scheduled = so.num_scheduled_tokens
        for new in so.scheduled_new_reqs:
            if new.prompt_token_ids is None or not self._keyed.get(new.req_id, False):
                continue
            run = _Prefill(list(new.prompt_token_ids), [list(b) for b in new.block_ids])
            self._prefills[new.req_id] = run  # new, or a streaming session's next input with its blocks
            self._plan_step_end(new.req_id, run, new.num_computed_tokens, scheduled.get(new.req_id, 0))
        cached = so.scheduled_cached_reqs
        for i, rid in enumerate(cached.req_ids):
            run = self._prefills.get(rid)
            if run is None:
                continue
            ids = cached.new_block_ids[i]
            if rid in cached.resumed_req_ids:  # preempted, then given blocks anew: all of them
                run.tables = [list(b) for b in ids] if ids is not None else run.tables
                run.saved_to = 0
            elif ids is not None:
                for table, more in zip(run.tables, ids):
                    table.extend(more)
            self._plan_step_end(rid, run, cached.num_computed_tokens[i], scheduled.get(rid, 0))

    def _plan_step_end(self, rid: str, run: _Prefill, computed: int, scheduled: int) -> None:
        end = computed + scheduled
        # The prompt's own end is not planned: what resumes there is a longer prompt, which the
        # finish save (prompt and output) serves; a prompt again resumes before its last token.
        # An end inside a chunk is kept as one on a boundary is (a lookup tries the ends of the
        # partial chunks saved after each boundary), at the cost of that partial chunk's KV.
        if end >= len(run.prompt) or end <= run.saved_to:
            return
        tables = self._group_tables(tuple(run.tables), end, skip_before=0)
        if self._groups.state_missing(tables):
            return
        if self._groups.window:
            # The window's blocks before the one holding token end - W + 1 are not kept (a
            # restore at `end` needs none of them); the worker copies the others at the step's
            # end (vLLM lets go of them as the window moves on) and the save reads the copy.
            gone = max(0, end - self._groups.window + 1)
            for g, kind in enumerate(self._groups.kinds):
                if kind == hybrid.WINDOW:
                    n = min(gone // self._groups.block_sizes[g], len(tables[g]))
                    tables[g][:n] = [-1] * n
        run.saved_to = end
        self._saves.append(SavePlan(rid, run.prompt[:end], [], tables, at_step_end=True))
        self._step_saved.add(rid)

    def request_finished(self, request: "Request", block_ids: list[int]) -> tuple[bool, dict[str, Any] | None]:
        self._matched.pop(request.request_id, None)
        self._keyed.pop(request.request_id, None)
        computed = request.num_computed_tokens
        if computed == 0 or not block_ids or not _keyed_by_tokens_only(request):
            return False, None
        if getattr(request.status, "name", "") == "WAITING_FOR_REMOTE_KVS":
            # Aborted while its load runs: vLLM holds the blocks for the load already, and the
            # blocks hold no KV of its own to save.
            return False, None
        tokens = list(request.all_token_ids[:computed])
        self._saves.append(SavePlan(request.request_id, tokens, list(block_ids)))
        self._saving.add(request.request_id)
        return True, None  # the blocks stay until the workers report the save done (get_finished)

    def request_finished_all_groups(self, request: "Request",
                                    block_ids: tuple[list[int], ...]) -> tuple[bool, dict[str, Any] | None]:
        if not self._hybrid:
            return self.request_finished(request, list(block_ids[0]) if block_ids else [])
        rid = request.request_id
        self._matched.pop(rid, None)
        self._keyed.pop(rid, None)
        self._prefills.pop(rid, None)
        stepped = rid in self._step_saved
        self._step_saved.discard(rid)
        plan = self._finish_plan(request, block_ids)
        if plan is None and stepped:
            # Nothing more to save, but its step-end saves may still read its blocks: they stay
            # until the workers report those done.
            plan = SavePlan(rid, [], [])
        if plan is None:
            return False, None
        self._saves.append(plan)
        self._saving.add(rid)
        return True, None

    def _finish_plan(self, request: "Request", block_ids: tuple[list[int], ...]) -> SavePlan | None:
        computed = request.num_computed_tokens
        if computed == 0 or not _keyed_by_tokens_only(request):
            return None
        if getattr(request.status, "name", "") == "WAITING_FOR_REMOTE_KVS":
            return None
        tables = self._group_tables(block_ids, computed, skip_before=0)
        if self._groups.state_missing(tables):
            log.warning("kvtier: request %s: no Mamba state block at its %d tokens; not saved", request.request_id,
                        computed)
            return None
        return SavePlan(request.request_id, list(request.all_token_ids[:computed]), [], tables)

    def _group_tables(self, block_ids: "tuple[list[int], ...]", tokens: int, skip_before: int) -> list[list[int]]:
        """Each KV cache group's blocks for a prefix of `tokens` tokens: an attention group's, with
        -1 for vLLM's null block (a window's tokens that left it) and for the blocks before
        `skip_before` tokens (vLLM's own prefix hit); a Mamba group's one block holding the state
        after the last of them."""
        out = []
        for g, (kind, bs) in enumerate(zip(self._groups.kinds, self._groups.block_sizes)):
            ids = list(block_ids[g])
            if kind == hybrid.STATE:
                b = hybrid.state_block(ids, tokens, bs)
                out.append([-1 if b is None else b])
                continue
            table = hybrid.window_table(ids, -(-tokens // bs))
            skip = min(skip_before // bs, len(table))
            table[:skip] = [-1] * skip
            out.append(table)
        return out

    def _check_hybrid_settings(self) -> None:
        s, g = self._settings, self._groups
        if s.store_format != 2:
            raise ValueError(f"KvtierHybridConnector: this model's KV cache groups are {g.kinds}: a hybrid model "
                             "(sliding-window or Mamba layers) is kept by TP-free stores only: set kvtier.store_format "
                             "2 (or serve a model of sliding-window and full-attention layers with KvtierConnector, "
                             "which keeps every layer whole in either store format)")
        if s.async_load:
            raise ValueError("KvtierHybridConnector: kvtier.async_load is not taken for a hybrid model: vLLM cannot take "
                             "back a hybrid request's failed load, so kvtier loads it before the forward pass")

    def has_pending_push_work(self) -> bool:
        # vLLM keeps stepping while requests wait for their blocks to be freed (0.26, 0.34); said
        # here too, so that a scheduler that only asks the connector still delivers the plans.
        return bool(self._saving)

    def update_connector_output(self, connector_output: Any) -> None:
        self._saving -= set(getattr(connector_output, "finished_sending", None) or ())

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config: "VllmConfig") -> str | None:
        return None  # kvtier reads the layout vLLM chose from the tensors' strides

    # ---- worker side ---------------------------------------------------------------------------

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]):
        num_blocks = self._kv_cache_config.num_blocks if self._kv_cache_config is not None else None
        hybrid_fields: dict[str, Any] = {}
        if self._hybrid:
            names, hybrid_fields = self._register_hybrid(kv_caches, num_blocks)
            block_size = self._groups.attention_block_size // self._kernel_split
            num_blocks = num_blocks * self._kernel_split
        else:
            names, block_size = layer_order(list(kv_caches)), self._block_size
        layers = [kv_caches[n] for n in names]
        layout = detect_layout(layers[0], block_size, num_blocks)
        for name, t in zip(names, layers):
            if tuple(t.shape) != tuple(layers[0].shape) or t.dtype != layers[0].dtype:
                raise ValueError(f"KvtierConnector: layer '{name}' has shape {list(t.shape)} {t.dtype}, layer "
                                 f"'{names[0]}' {list(layers[0].shape)} {layers[0].dtype}: one geometry is needed")
            if detect_layout(t, block_size, num_blocks) != layout:
                raise ValueError(f"KvtierConnector: layer '{name}' lies in memory otherwise (strides {t.stride()}) "
                                 f"than layer '{names[0]}' (strides {layers[0].stride()}): one layout is needed")
        s = self._settings
        if layout.kv_tensors == 1 and s.store_format != 2:
            raise ValueError("KvtierConnector: an MLA model's latent is kept by TP-free stores only, once for "
                             "every rank: set kvtier.store_format 2")
        if s.store_format == 2 and self._pipeline_stages > 1:
            raise ValueError(f"KvtierConnector: kvtier.store_format 2 (TP-free) with {self._pipeline_stages} "
                             "pipeline stages: a TP-free store holds every layer per head group; use store_format 1")
        total = self._total_kv_heads if s.store_format == 2 and layout.kv_tensors == 2 else 0
        if total and total != layout.kv_heads * self._world and not (layout.kv_heads == 1 and self._world > total):
            total = 0  # the model says otherwise than the tensors: kvtier checks what the tensors hold
        geometry = kvtier.Geometry.custom(self._model, layers=len(layers), kv_heads=layout.kv_heads,
                                          head_dim=layout.head_dim, element_bytes=layers[0].element_size(),
                                          chunk_tokens=s.chunk_tokens, tp_rank=self._rank,
                                          tp_world=self._world, kv_heads_total=total,
                                          kv_tensors=layout.kv_tensors, **hybrid_fields)
        root = s.roots if len(s.roots) > 1 else s.root
        self._engine = kvtier.open(root, geometry, io=s.io, capacity=s.capacity, dram=s.dram, staging=s.staging,
                                   request_size=s.request_size, tenant=s.tenant, remote=s.remote,
                                   remote_password_env=s.remote_password_env, remote_ttl=s.remote_ttl,
                                   tune=s.tune, store_format=s.store_format, max_tp=s.max_tp,
                                   compression=s.compression)
        # kvtier addresses the bytes in the order they lie: the same memory, viewed densely (a
        # latent's [blocks, bs, latent] as kv_first [1, blocks, bs, 1, latent]).
        self._layers = [t.permute(layout.order) for t in layers]
        if layout.kv_tensors == 1:
            self._layers = [t.unsqueeze(0).unsqueeze(3) for t in self._layers]
        self._layout = layout
        self._server = LookupServer(self._engine, lookup_address(s.root, self._rank))
        self._serve_metrics()
        log.info("kvtier connector: rank %d/%d, %d layers, layout %s (logical %s, strides %s), store %s, %s",
                 self._rank, self._world, len(layers), layout.name, list(layers[0].shape), layers[0].stride(),
                 self._engine.store_dir, self._engine.stats()["gds"])

    def _register_hybrid(self, kv_caches: dict[str, Any], num_blocks: int | None) -> tuple[list[str], dict[str, Any]]:
        """A hybrid model's attention layers in model order (what kvtier's layers are) and the
        geometry's hybrid fields; keeps each layer's group and each Mamba layer's state pages."""
        g = self._groups
        unknown = sorted(set(kv_caches) - set(g.layer_group))
        if unknown:
            raise ValueError(f"KvtierConnector: KV caches {unknown} belong to no KV cache group vLLM named")
        names = layer_order([n for n in kv_caches if g.kinds[g.layer_group[n]] != hybrid.STATE])
        states = layer_order([n for n in kv_caches if g.kinds[g.layer_group[n]] == hybrid.STATE])
        bs = g.attention_block_size
        self._kernel_split = hybrid.kernel_split(kv_caches[names[0]], detect_layout, bs, num_blocks)
        self._attn_groups = [g.layer_group[n] for n in names]
        self._state_pages = [hybrid.state_pages(n, kv_caches[n], g.page_bytes) for n in states]
        self._state_groups = [g.layer_group[n] for n in states]
        state_bytes = {p.state_bytes for p in self._state_pages}
        if len(state_bytes) > 1:
            raise ValueError(f"KvtierConnector: Mamba layers of {sorted(state_bytes)} state bytes: one size is needed")
        fields: dict[str, Any] = {
            "layer_kinds": ["window" if g.kinds[k] == hybrid.WINDOW else "full" for k in self._attn_groups],
            "window_tokens": g.window, "state_layers": len(states),
            "state_bytes": state_bytes.pop() if state_bytes else 0,
        }
        if g.window:
            fields["window_chunk_tokens"] = bs  # a window record a block: saves keep what vLLM still holds
        return names, fields

    def _serve_metrics(self) -> None:
        try:
            import prometheus_client
        except ImportError:
            log.info("kvtier connector: prometheus_client not installed, no metrics")
            return
        # Into this process's default registry (seen where this process serves /metrics) and, with
        # kvtier.metrics_port, on a port of its own: vLLM's workers run apart from its API server.
        kvtier.metrics.register(self._engine, rank=str(self._rank), world=str(self._world))
        if self._settings.metrics_port:
            port = self._settings.metrics_port + self._rank
            prometheus_client.start_http_server(port)
            log.info("kvtier connector: rank %d serves its metrics on :%d/metrics", self._rank, port)

    def _trace(self, **record: Any) -> None:
        if not self._settings.trace:
            return
        line = json.dumps({"rank": self._rank, "time": time.time(), **record})
        try:
            with self._mu, open(self._settings.trace, "a") as f:
                f.write(line + "\n")
        except OSError as e:  # the trace is a diagnostic: it never fails a load or a save
            log.warning("kvtier: cannot write the trace %s: %s", self._settings.trace, e)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        meta = self._get_connector_metadata()
        assert isinstance(meta, KvtierMetadata)
        # Saves start here, not in wait_for_save: a finished request's plan arrives in a later step,
        # often one without a forward pass, where vLLM calls start_load_kv and get_finished only.
        self._start_saves(meta)
        for plan in meta.loads:
            if plan.asynchronous:
                with self._mu:
                    self._pending_loads[plan.req_id] = self._load_pool.submit(self._load, plan)
            else:
                self._load(plan)

    def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata) -> None:
        # vLLM hands a preempted request's blocks, and a sliding window's that left it, to others
        # in the step that lets go of them, and its runner zeroes them right after this call (a
        # model with Mamba layers), before any forward pass writes them: the step-end saves still
        # reading them end here, those not begun are dropped (a later miss, never a stall).
        for rid, before in getattr(kv_connector_metadata, "end_step_saves", {}).items():
            with self._mu:
                saves = [(tokens, f) for tokens, f in self._pending_saves.get(rid, ())
                         if tokens < before and not f.cancelled()]
            # A cancelled save counts as done only once a save thread takes it off the queue:
            # waiting for it would wait for every save queued before it.
            running = []
            for tokens, f in saves:
                if f.cancel():
                    self._trace(event="step-save-dropped", req=rid, tokens=tokens, reason="preempted")
                else:
                    running.append(f)
            wait(running)

    def _paged_args(self, plan: "LoadPlan | SavePlan", copies: "_StepCopies | None" = None) -> dict[str, Any]:
        """A hybrid plan as save_paged's and restore_paged's arguments: every attention layer and
        its table in kernel blocks, the Mamba layers' state pages; or, for a step-end save,
        `copies` of the states and of the window layers' blocks it keeps, with tables into them."""
        r = self._kernel_split
        # One table a group, shared by its layers.
        by_group = {g: np.asarray(hybrid.expand(plan.group_tables[g], r), dtype=np.int32)
                    for g in set(self._attn_groups)}
        tables = [by_group[g] for g in self._attn_groups]
        layers = list(self._layers)
        args: dict[str, Any] = {}
        if copies is not None and copies.windows:
            for i, (copy, table) in copies.windows.items():
                layers[i], tables[i] = copy, table
            args["layer_num_blocks"] = [t.shape[self._block_axis] for t in layers]
        state = copies.states if copies is not None else \
            [p.view(plan.group_tables[g][0]) for p, g in zip(self._state_pages, self._state_groups)]
        return {"layers": layers, "block_table": tables[0], "layer_block_tables": tables, "state": state or None,
                "block_size": self._groups.attention_block_size // r, "layout": self._layout.name, **args}

    def _load_hybrid(self, plan: LoadPlan) -> None:
        start = time.perf_counter()
        try:
            r = self._engine.restore_paged(np.asarray(plan.token_ids, dtype=np.int32), **self._paged_args(plan))
        except Exception as e:  # noqa: BLE001 - told below, with what it means
            r = {"tokens_restored": 0, "problem": str(e), "checksum_misses": 0}
        self._trace(event="load", req=plan.req_id, tokens=len(plan.token_ids), restored=r["tokens_restored"],
                    skipped_blocks=0, seconds=time.perf_counter() - start, checksum_misses=r["checksum_misses"])
        if r["tokens_restored"] != len(plan.token_ids):
            # vLLM 0.26 cannot take a hybrid request's failed blocks back (its scheduler reads one
            # KV cache group where load errors are reported) and would compute on KV and state
            # nobody wrote: stop, never serve it.
            raise RuntimeError(f"KvtierConnector: the load of request {plan.req_id} ({len(plan.token_ids)} tokens of a "
                               f"hybrid model) restored {r['tokens_restored']}: {r.get('problem') or 'records missing'}; "
                               "vLLM cannot recompute a hybrid model's failed load, so kvtier stops rather than serve "
                               "KV and state it did not load")

    def _load(self, plan: LoadPlan) -> None:
        if plan.group_tables is not None:
            return self._load_hybrid(plan)
        table = np.asarray(plan.block_ids, dtype=np.int32)
        needed = -(-len(plan.token_ids) // self._block_size)
        table = table[:needed].copy()
        table[: plan.skip_blocks] = -1  # vLLM's own prefix hit: verified, never written
        restored = 0
        start = time.perf_counter()
        try:
            r = self._engine.restore_paged(np.asarray(plan.token_ids, dtype=np.int32), self._layers, table,
                                           block_size=self._block_size, layout=self._layout.name)
            restored = r["tokens_restored"]
            self._trace(event="load", req=plan.req_id, tokens=len(plan.token_ids), restored=restored,
                        skipped_blocks=plan.skip_blocks, seconds=time.perf_counter() - start,
                        checksum_misses=r["checksum_misses"])
            if r["checksum_misses"]:
                log.warning("kvtier: %d chunk(s) of request %s failed their checksum; vLLM recomputes them",
                            r["checksum_misses"], plan.req_id)
        except Exception as e:  # noqa: BLE001 - whatever failed, those blocks are recomputed, never served
            log.warning("kvtier: load of request %s failed: %s; vLLM recomputes it", plan.req_id, e)
        if restored < len(plan.token_ids):
            first_bad = max(restored // self._block_size, plan.skip_blocks)
            with self._mu:
                self._load_errors.update(plan.block_ids[first_bad:needed])
                # Until vLLM recomputes them these blocks hold no valid KV: a save of this request
                # (an abort in this very step) must not store them under their tokens' keys.
                self._valid[plan.req_id] = first_bad * self._block_size

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # loads complete before the forward pass (or, asynchronous, before vLLM schedules it)

    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor, attn_metadata: Any, **kwargs: Any) -> None:
        return  # saves happen whole: a finished request's from start_load_kv, a step end's from wait_for_save

    def wait_for_save(self):
        # Saves run in the background, decoding never waits on them: a finished request's start
        # in start_load_kv; a step-end save here, after the forward pass, from copies of the states
        # it left and of the window blocks it keeps (queued on its stream): the next step
        # overwrites the states in place, and vLLM lets go of the window's blocks as it moves on.
        meta = self._get_connector_metadata()
        plans = [p for p in meta.saves if p.at_step_end] if isinstance(meta, KvtierMetadata) else []
        if not plans:
            return
        kept, copies = [], []
        for plan in plans:
            pick = self._window_pick(plan)
            size = self._state_bytes + (pick.nbytes if pick else 0)
            if size > self._settings.step_copy_bytes:
                # Said once a worker: every step end of every request would say it again.
                (log.debug if self._copies_too_large else log.warning)(
                    "kvtier: step-end saves skipped: a step end's copies (%d bytes) exceed kvtier.step_copy_bytes "
                    "(%d): a prompt again finds only what its save ends kept", size, self._settings.step_copy_bytes)
                self._copies_too_large = True
                self._trace(event="step-save-dropped", req=plan.req_id, tokens=len(plan.token_ids),
                            reason="copies past kvtier.step_copy_bytes")
                continue
            # Saves slower than prefill: the request's oldest step ends not begun give way, else this
            # one is not kept (a later miss, never a GPU out of memory).
            if not self._make_room(plan.req_id, size):
                log.debug("kvtier: a step-end save of request %s skipped: copies in flight", plan.req_id)
                self._trace(event="step-save-dropped", req=plan.req_id, tokens=len(plan.token_ids),
                            reason="copies in flight")
            else:
                try:
                    copies.append(_StepCopies([p.view(plan.group_tables[g][0]).clone()
                                               for p, g in zip(self._state_pages, self._state_groups)],
                                              self._window_copies(pick), size))
                    kept.append(plan)
                except Exception as e:  # noqa: BLE001 - copies are GPU memory outside vLLM's budget
                    self._unreserve(size)
                    log.warning("kvtier: a step-end save of request %s skipped: its copies could not be made (%s)",
                                plan.req_id, e)
                    self._trace(event="step-save-dropped", req=plan.req_id, tokens=len(plan.token_ids),
                                reason="copies not made")
        if kept:
            self._submit_saves(kept, copies)

    def _reserve(self, size: int) -> bool:
        """Takes room for a step-end save's copies: at most _MAX_STEP_COPIES saves and
        kvtier.step_copy_bytes in flight."""
        with self._mu:
            saves, room = self._room_locked()
            if saves < 1 or room < size:
                return False
            self._step_copies += 1
            self._step_copy_bytes += size
            return True

    def _unreserve(self, size: int) -> None:
        with self._mu:
            self._step_copies -= 1
            self._step_copy_bytes -= size

    def _room_locked(self) -> tuple[int, int]:
        """Step-end saves and bytes of copies still allowed in flight (held: self._mu)."""
        return self._MAX_STEP_COPIES - self._step_copies, self._settings.step_copy_bytes - self._step_copy_bytes

    def _make_room(self, rid: str, size: int) -> bool:
        """Takes room for a step-end save's copies of `size` bytes, the request's oldest step-end
        saves no thread has begun giving way where that makes enough room (and only then: a newer
        step end that still would not fit leaves them be). The same prompt again resumes at its
        last saved step end, so a newer end is worth more than an older one still waiting (whose
        state only a prompt leaving between the two would have found)."""
        if self._reserve(size):
            return True
        with self._mu:
            # Chosen and let go of under one hold of the lock, which a save takes to begin: none
            # begins between, so none gives way for a room that then is not there.
            waiting = [e for e in self._step_saves.get(rid, ()) if e[1].copies is not None]
            self._step_saves[rid] = waiting
            saves, room = self._room_locked()
            giving_way = []
            for tokens, held, f in waiting:
                if saves >= 1 and room >= size:
                    break
                if not held.begun:
                    giving_way.append((tokens, held, f))
                    saves, room = saves + 1, room + held.copies.nbytes
            if saves < 1 or room < size:
                return False
            for _, held, _ in giving_way:
                held.dropped = True
                self._release_locked(held)
        for tokens, _, f in giving_way:
            f.cancel()  # off the pool's queue at once; one a thread took finds itself dropped
            self._trace(event="step-save-dropped", req=rid, tokens=tokens, reason="superseded")
        return self._reserve(size)  # room is only ever given back meanwhile: this takes it

    @property
    def _state_bytes(self) -> int:
        """Bytes of a step-end save's copies of the Mamba layers' states."""
        return sum(p.state_bytes for p in self._state_pages)

    def _window_pick(self, plan: SavePlan) -> "_WindowPick | None":
        """The blocks of each window layer a step-end save keeps (None: none)."""
        if not self._groups.window:
            return None
        tables = {g: np.asarray(hybrid.expand(plan.group_tables[g], self._kernel_split), dtype=np.int32)
                  for g in set(self._attn_groups) if self._groups.kinds[g] == hybrid.WINDOW}
        size = max(int((t >= 0).sum()) for t in tables.values())
        if size == 0:
            return None  # nothing of the window is kept: nothing read
        # One copy size for every window layer (kvtier reads a kind's layers with one block count):
        # a group holding fewer blocks pads its copy with block 0, which its table never names.
        groups = sorted(tables)
        blocks = np.zeros((len(groups), size), dtype=np.int64)
        remapped = {}
        for row, g in enumerate(groups):
            held = tables[g] >= 0
            blocks[row, : int(held.sum())] = tables[g][held]
            remapped[g] = np.full_like(tables[g], -1)
            remapped[g][held] = np.arange(int(held.sum()), dtype=np.int32)
        rows = {g: row for row, g in enumerate(groups)}
        axis = self._block_axis
        nbytes = sum(size * (t.numel() // t.shape[axis]) * t.element_size()
                     for t, g in zip(self._layers, self._attn_groups) if g in rows)
        return _WindowPick(blocks, rows, remapped, nbytes)

    def _window_copies(self, pick: "_WindowPick | None") -> "dict[int, tuple[torch.Tensor, np.ndarray]]":
        """Each window layer's blocks a step-end save keeps, copied (queued on this stream, after
        the step's forward pass), with a table into the copy: vLLM lets go of a window's blocks as
        it moves on and may hand them on before the save reads them; the copy stays."""
        if pick is None:
            return {}
        # One upload, from pinned memory and not waited for: a copy from pageable memory would
        # make this thread wait for the step's forward pass.
        index = torch.from_numpy(pick.blocks)
        device = self._layers[0].device
        if device.type == "cuda":
            index = index.pin_memory().to(device, non_blocking=True)
        return {i: (self._layers[i].index_select(self._block_axis, index[pick.rows[g]]), pick.tables[g])
                for i, g in enumerate(self._attn_groups) if g in pick.rows}

    @property
    def _block_axis(self) -> int:
        """The blocks' dimension of the layer tensors kvtier reads (kv_first has them second)."""
        return 1 if self._layout.name == "kv_first" else 0

    def _start_saves(self, meta: KvtierMetadata) -> None:
        plans = [p for p in meta.saves if not p.at_step_end]
        if plans:
            self._submit_saves(plans, [None] * len(plans))

    _MAX_STEP_COPIES = 4  # step-end saves a worker has in flight at once (each with its copies of states and windows)

    def _submit_saves(self, plans: list[SavePlan], copies: "list[_StepCopies | None]") -> None:
        # The blocks' last writes (and the copies) were queued on this stream: a save reads them
        # only after they land.
        done = torch.cuda.Event() if self._layers and self._layers[0].is_cuda else None
        if done is not None:
            done.record()
        for plan, copy in zip(plans, copies):
            # The copies (GPU memory) are held through `held`, let go of when the save is dropped:
            # the pool's queue keeps a dropped save's arguments until a thread takes it.
            held = _Held(copy)
            f = self._io.submit(self._save, plan, done, held)
            with self._mu:
                self._pending_saves.setdefault(plan.req_id, []).append((len(plan.token_ids), f))
                if copy is not None:
                    self._step_saves.setdefault(plan.req_id, []).append((len(plan.token_ids), held, f))
            if copy is not None:
                f.add_done_callback(functools.partial(self._copy_released, held))  # run at once if done

    def _copy_released(self, held: _Held, _: "Future | None" = None) -> None:
        with self._mu:  # once: by the save that ran, by one it gave way to, else by its future's callback
            self._release_locked(held)

    def _release_locked(self, held: _Held) -> None:
        if held.copies is None:
            return
        self._step_copies -= 1
        self._step_copy_bytes -= held.copies.nbytes
        held.copies = None

    def _save(self, plan: SavePlan, done: "torch.cuda.Event | None", held: _Held) -> None:
        with self._mu:
            if held.dropped:
                return  # gave way to a newer step end of its request before it began
            held.begun = True
            copies = held.copies
        try:
            self._save_from(plan, done, copies)
        finally:
            if copies is not None:
                self._copy_released(held)  # before its future is done: whoever sees it done sees the room

    def _save_from(self, plan: SavePlan, done: "torch.cuda.Event | None", copies: "_StepCopies | None") -> None:
        with self._mu:
            load = self._pending_loads.get(plan.req_id)
        if load is not None:
            load.exception()  # an aborted request's load still writing its blocks: wait for it
        with self._mu:
            valid = self._valid.pop(plan.req_id, None)
        tokens = plan.token_ids if valid is None else plan.token_ids[:valid]
        if not tokens:
            return
        start = time.perf_counter()
        try:
            if done is not None:
                done.synchronize()
            if plan.group_tables is not None:
                chunks = self._engine.save_paged(np.asarray(tokens, dtype=np.int32),
                                                 **self._paged_args(plan, copies))
            else:
                needed = -(-len(tokens) // self._block_size)
                chunks = self._engine.save_paged(np.asarray(tokens, dtype=np.int32), layers=self._layers,
                                                 block_table=np.asarray(plan.block_ids[:needed], dtype=np.int32),
                                                 block_size=self._block_size, layout=self._layout.name)
            self._trace(event="step-save" if plan.at_step_end else "save", req=plan.req_id, tokens=len(tokens),
                        chunks_written=chunks, seconds=time.perf_counter() - start)
        except Exception as e:  # noqa: BLE001 - a lost save is a future miss, never wrong KV
            log.warning("kvtier: save of request %s failed: %s", plan.req_id, e)

    def get_finished(self, finished_req_ids: set[str]) -> tuple[set[str] | None, set[str] | None]:
        with self._mu:
            # A finished request's save plan arrives in the same step as its id (start_load_kv runs
            # first): an id with no save pending now never gets one.
            self._finished_seen = (self._finished_seen | finished_req_ids) & set(self._pending_saves)
            saved = {r for r, fs in self._pending_saves.items()
                     if r in self._finished_seen and all(f.done() for _, f in fs)}
            loaded = {r for r, f in self._pending_loads.items() if f.done()}
            for r in saved:
                self._pending_saves.pop(r)
                self._step_saves.pop(r, None)
                self._finished_seen.discard(r)
            for r in loaded:
                self._pending_loads.pop(r)
        return saved or None, loaded or None

    def get_block_ids_with_load_errors(self) -> set[int]:
        with self._mu:
            errors, self._load_errors = self._load_errors, set()
        return errors

    def shutdown(self):
        self._load_pool.shutdown(wait=True)
        self._io.shutdown(wait=True)
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._lookup is not None:
            self._lookup.close()
        self._engine = None


class KvtierHybridConnector(KvtierConnector, SupportsHMA):
    """KvtierConnector under vLLM's hybrid KV cache manager (``SupportsHMA``): what recurrent hybrids
    (Mamba, linear attention) need, and what keeps only the window of sliding-window layers, in
    vLLM's GPU memory and in kvtier's store. Naming it turns that manager on for any model: a
    sliding-window model then needs ``kvtier.store_format`` 2 (its window layers are kept as kvtier's
    hybrid geometry), where KvtierConnector serves it with every layer kept whole."""
