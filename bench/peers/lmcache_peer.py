# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""LMCache's disk backends driven without a serving engine, the way its vLLM integration drives them.

Per rank: an LMCacheEngine (LMCacheEngineBuilder, the builder vLLM's adapter uses), the GPU connector
LMCache picks for vLLM (CreateGPUConnector with EngineType.VLLM: VLLMPagedMemGPUConnectorV2 on CUDA),
and vLLM's paged KV layout per layer, [2, blocks, 16, kv heads, head dim]. As in vLLM, each rank's
paged cache is allocated once and is the one both store and retrieve see (LMCache's connector keeps
the layer pointers of the first call). The session is written into it and stored once through
engine.store (LMCache writes its files asynchronously; we wait until its own lookup sees every
token on the backend); each timed restore zeroes the cache, then engine.retrieve fills it, both ranks
at once. The slot mapping is the identity (token i in block i // 16), so the restored cache is the
saved tensor again and is checked bit for bit against it.

Backends (LMCache 0.5.x config names):
- disk: LocalDiskBackend, `local_disk` + `extra_config.use_odirect` (O_DIRECT reads into LMCache's
  pinned CPU pool, then its connector copies to the GPU), `local_cpu: False` so nothing is served
  from its CPU hot cache;
- gds: GdsBackend, `gds_path` with `gds_backend: cufile` (cufile-python reads into its registered GPU
  buffer, then the connector scatters into the paged cache).
"""
import os
import time

import torch

os.environ.setdefault("LMCACHE_TRACK_USAGE", "false")  # its usage telemetry: no network on a bench machine

CHUNK = 256          # LMCache's default chunk_size
BLOCK = 16           # vLLM's default block size
# per rank: LMCache allocates every chunk of a request at once (4.9 GB here) from its pinned CPU
# pool on store, and on a GDS restore from its registered GPU buffer; a smaller pool stores a prefix
POOL_GB = 6.0


def _files_under(path):
    return [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]


class LMCachePeer:
    """Both ranks' LMCache engines over one backend, with the session stored."""

    def __init__(self, s, backend, world, model):
        from lmcache.utils import EngineType, mock_up_broadcast_fn, mock_up_broadcast_object_fn
        from lmcache.v1.cache_engine import LMCacheEngineBuilder
        from lmcache.v1.config import LMCacheEngineConfig
        from lmcache.v1.gpu_connector import CreateGPUConnector
        from lmcache.v1.metadata import LMCacheMetadata

        self.s, self.backend, self.world = s, backend, world
        self.builder = LMCacheEngineBuilder
        self.roots = [os.path.join(s.rank_dir(r), f"lmcache-{backend}") for r in range(world)]
        _, layers, tokens, heads, dim = s.kv[0].shape
        self.layers, self.tokens = layers, tokens
        if tokens % BLOCK:
            raise ValueError(f"{tokens} tokens is not a whole number of {BLOCK}-token blocks")
        self.token_ids = torch.tensor(s.tokens, dtype=torch.long)
        self.slots = torch.arange(tokens, dtype=torch.long, device="cuda")
        self.engines, self.ids = [], []
        for r in range(world):
            path = os.path.join(self.roots[r], f"rank{r}")
            os.makedirs(path, exist_ok=True)
            common = dict(chunk_size=CHUNK, local_cpu=False, save_unfull_chunk=True,
                          lmcache_instance_id=f"kvtier-peers-{backend}-r{r}")
            if backend == "disk":
                config = LMCacheEngineConfig.from_defaults(
                    **common, max_local_cpu_size=POOL_GB, local_disk=path, max_local_disk_size=2 * POOL_GB,
                    extra_config={"use_odirect": True})
            elif backend == "gds":
                config = LMCacheEngineConfig.from_defaults(
                    **common, max_local_cpu_size=POOL_GB, gds_path=path, gds_backend="cufile",
                    gds_buffer_size=int(POOL_GB * 1024), extra_config={"use_direct_io": True})
            else:
                raise ValueError(f"unknown LMCache backend {backend!r}")
            # local_worker_id 0: both ranks share the one GPU here; worker_id keys their chunks apart
            metadata = LMCacheMetadata(model_name=model, world_size=world, local_world_size=world,
                                       worker_id=r, local_worker_id=0, kv_dtype=s.kv[0].dtype,
                                       kv_shape=(layers, 2, CHUNK, heads, dim))
            connector = CreateGPUConnector(config, metadata, EngineType.VLLM)
            engine = LMCacheEngineBuilder.get_or_create(config.lmcache_instance_id, config, metadata, connector,
                                                       mock_up_broadcast_fn, mock_up_broadcast_object_fn)
            engine.post_init()
            self.engines.append(engine)
            self.ids.append(config.lmcache_instance_id)
        self.search = ["LocalDiskBackend" if backend == "disk" else "GdsBackend"]
        self.out = [self._paged(s.kv[r]) for r in range(world)]
        self._store()

    def _paged(self, kv):
        """A copy of one rank's (2, layers, tokens, heads, dim) tensor as vLLM's per-layer paged caches."""
        return [kv[:, layer].contiguous().view(2, self.tokens // BLOCK, BLOCK, *kv.shape[3:])
                for layer in range(self.layers)]

    def _store(self):
        for r, engine in enumerate(self.engines):
            engine.store(self.token_ids, kvcaches=self.out[r], slot_mapping=self.slots)
        deadline = time.monotonic() + 120
        for r, engine in enumerate(self.engines):
            while (seen := engine.lookup(self.token_ids, search_range=self.search)) < self.tokens:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"LMCache {self.backend}: rank {r} holds {seen} of {self.tokens} tokens "
                                       "on its backend 120 s after store")
                time.sleep(0.05)

    def files(self):
        return [f for root in sorted(set(self.roots)) for f in _files_under(root)]

    def zero(self):
        for caches in self.out:
            for t in caches:
                t.zero_()

    def restore_rank(self, r):
        mask = self.engines[r].retrieve(self.token_ids, kvcaches=self.out[r], slot_mapping=self.slots)
        got = int(mask.sum().item())
        if got != self.tokens:
            raise RuntimeError(f"LMCache {self.backend}: rank {r} retrieved {got} of {self.tokens} tokens")

    def copy_out(self, out):
        """The restored paged caches into the benchmark's (2, layers, tokens, heads, dim) tensors."""
        for r in range(self.world):
            for layer, t in enumerate(self.out[r]):
                out[r][:, layer].copy_(t.view(2, self.tokens, *t.shape[3:]))

    def close(self):
        for i in self.ids:
            self.builder.destroy(i)
