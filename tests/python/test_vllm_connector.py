# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""kvtier's vLLM connector, driven the way vLLM's scheduler and worker drive a KVConnectorBase_V1,
through vLLM's own classes (VllmConfig, KVConnectorFactory, Request, KVCacheBlocks, SchedulerOutput)
on host tensors: save at finish with deferred freeing, lookup over the workers' sockets, load into
each paged layout (skipping vLLM's own prefix hit) and into the KV cache tensors exactly as this
vLLM's model runner makes them for every attention backend it has, in both its KV cache layouts;
async load, a corrupted chunk reported as load errors, several drives, and unknown layouts or
settings refused. Skipped where vLLM cannot be imported (see tools/setup_vllm.sh); no GPU is needed.
Run by CI with the newest vLLM (.venv-vllm) and with 0.26.0 (.venv-vllm-0.26)."""
import glob
import importlib
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
import unittest

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

try:
    import kvtier
    import torch
    import vllm
    from vllm.config import CacheConfig, DeviceConfig, KVTransferConfig, ParallelConfig, VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm.sampling_params import SamplingParams
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.kv_cache_utils import KVCacheBlock
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, MLAAttentionSpec,
                                            SlidingWindowSpec)
    from vllm.v1.request import RequestStatus
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request
    VLLM = None
except ImportError as e:
    VLLM = str(e)

BS, BLOCKS, LAYERS, HEADS, DIM = 16, 96, 3, 2, 64
# Hand-made layer tensors: vLLM's logical shapes, with the strides vLLM gives them (packed_tokens:
# the logical [blocks, H, bs, 2D] over NHD storage, vLLM 0.26's default).
SHAPES = {
    "kv_first": lambda: torch.zeros(2, BLOCKS, BS, HEADS, DIM, dtype=torch.bfloat16),
    "block_first": lambda: torch.zeros(BLOCKS, 2, BS, HEADS, DIM, dtype=torch.bfloat16),
    "packed_heads": lambda: torch.zeros(BLOCKS, HEADS, BS, 2 * DIM, dtype=torch.bfloat16),
    "packed_tokens": lambda: torch.zeros(BLOCKS, BS, HEADS, 2 * DIM, dtype=torch.bfloat16).permute(0, 2, 1, 3),
}


def row(layer, block, offset, kv):
    """One token's K (kv=0) or V (kv=1) in a layer tensor, indexed by its logical shape as vLLM's
    attention backends index it, whatever order its bytes lie in."""
    if layer.dim() == 3:  # MLA's [blocks, bs, latent]: one tensor, no K or V
        return layer[block, offset]
    if layer.dim() == 4:  # [blocks, H, bs, 2D]
        return layer[block, :, offset, kv * DIM:(kv + 1) * DIM]
    if layer.shape[0] == 2:  # [2, blocks, bs, H, D]
        return layer[kv, block, offset]
    return layer[block, kv, offset]  # [blocks, 2, bs, H, D]


BACKENDS = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "CPU_ATTN", "FLEX_ATTENTION")


def vllm_allocations():
    """({label: make}, {label: make}): the layer tensors this vLLM's model runner makes, in every
    KV cache layout it has, as kvtier must take them and as it must refuse them. Made by vLLM's own
    code: vLLM 0.34 views one backing allocation per layer as [B, H, N, 2D] in each KVCacheLayout
    (kv_cache_planning's strides, create_kv_cache_views); 0.26 asks each attention backend for its
    shape and stride order in NHD and HND and reshapes with its model runner's helper."""
    try:
        from vllm.v1.kv_cache_layout import KVCacheLayout
    except ImportError:
        return _allocations_by_backend(), {}
    from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheTensor, compute_layout_strides,
                                            create_kv_cache_views)
    spec = FullAttentionSpec(block_size=BS, num_kv_heads=HEADS, head_size=DIM, dtype=torch.bfloat16)
    page = spec.page_size_bytes
    names = [f"model.layers.{i}.self_attn.attn" for i in range(LAYERS)]
    good, refused = {}, {}
    for layout in KVCacheLayout:
        block_stride = LAYERS * page if layout.is_block_outermost else None
        layer_stride, block_stride, *_ = compute_layout_strides(
            spec, BLOCKS, LAYERS, layout, fixed_strides=(None, block_stride, None, None, None))
        tensor = KVCacheTensor(size=LAYERS * BLOCKS * page, layers=names, layer_stride=layer_stride,
                               block_stride=block_stride)

        def make(layout=layout, tensor=tensor, views=[]):  # noqa: B006 - one allocation shared by the layers
            if not views:
                raw = torch.zeros(tensor.size, dtype=torch.int8)
                views.extend(create_kv_cache_views(raw, spec, BLOCKS, layout, tensor))
            return views.pop(0)
        # Each layer its own dense [B, N, H, 2D] or [B, H, N, 2D] region: what kvtier addresses.
        (good if layout.name in ("LBNHC", "LBHNC") else refused)[layout.name] = make
    return good, refused


def _allocations_by_backend():
    from vllm.v1.attention.backends import utils as backend_utils
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    try:
        from vllm.v1.kv_cache_interface import FullAttentionSpec
        from vllm.v1.worker.gpu.attn_utils import _reshape_attention_kv_cache as vllm_reshape
    except ImportError:
        vllm_reshape = None
    out = {}
    for name in BACKENDS:
        try:
            backend = AttentionBackendEnum[name].get_class()
        except Exception:  # noqa: BLE001 - a backend whose kernels are missing here
            continue
        for cache_layout in ("NHD", "HND"):
            backend_utils.set_kv_cache_layout(cache_layout)
            try:
                shape = tuple(backend.get_kv_cache_shape(BLOCKS, BS, HEADS, DIM))
                try:
                    order = tuple(backend.get_kv_cache_stride_order())
                except (AttributeError, NotImplementedError):
                    order = tuple(range(len(shape)))
            except Exception:  # noqa: BLE001 - a layout this backend refuses
                continue
            finally:
                backend_utils.set_kv_cache_layout(None)

            def make(shape=shape, order=order):
                raw = torch.zeros(BLOCKS * 2 * BS * HEADS * DIM * 2, dtype=torch.int8)
                if vllm_reshape is not None:
                    spec = FullAttentionSpec(block_size=BS, num_kv_heads=HEADS, head_size=DIM, dtype=torch.bfloat16)
                    return vllm_reshape(raw, spec, shape, order, BLOCKS, None)
                inverse = [order.index(i) for i in range(len(order))]
                return raw.view(torch.bfloat16).view(tuple(shape[i] for i in order)).permute(*inverse)
            out[f"{name}-{cache_layout}"] = make
    return out


def vllm_config(settings, **more):
    """A VllmConfig for the CPU with kvtier's connector and these kv_connector_extra_config settings."""
    return VllmConfig(cache_config=CacheConfig(block_size=BS), device_config=DeviceConfig(device="cpu"),
                      kv_transfer_config=KVTransferConfig(kv_connector="KvtierConnector", kv_role="kv_both",
                                                          kv_connector_module_path="kvtier.vllm_connector",
                                                          kv_connector_extra_config=settings), **more)


def cache_config(groups=()):
    return KVCacheConfig(num_blocks=BLOCKS, kv_cache_tensors=[], kv_cache_groups=list(groups))


def port_free(port: int) -> bool:
    import socket
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@unittest.skipIf(VLLM is not None, f"vllm is not importable: {VLLM}")
class ConnectorTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR"))
        self.rng = torch.Generator().manual_seed(11)
        self.connectors = []

    def tearDown(self):
        for c in self.connectors:
            c.shutdown()
        # A test's own cleanups (a cluster it started, whose pid files lie in the directory) before
        # the directory goes: unittest would run them after tearDown, and the servers would outlive
        # the test.
        self.doCleanups()
        self.dir.cleanup()

    def pair(self, layout, make=None, root=None, **extra):
        """A scheduler-side and a worker-side connector, made by vLLM's factory from a VllmConfig,
        over a store of their own, with layer tensors made by `make` (default: SHAPES[layout])."""
        root = root or os.path.join(self.dir.name, f"store-{len(self.connectors)}")
        settings = {"kvtier.root": root, "kvtier.io": "posix", "kvtier.capacity": "256M",
                    "kvtier.lookup_timeout_ms": 5000, **extra}
        config = vllm_config(settings)
        scheduler = KVConnectorFactory.create_connector(config, KVConnectorRole.SCHEDULER, cache_config())
        worker = KVConnectorFactory.create_connector(config, KVConnectorRole.WORKER, cache_config())
        self.connectors += [worker, scheduler]
        make = make or SHAPES[layout]
        caches = {f"model.layers.{i}.self_attn.attn": make()
                  for i in reversed(range(LAYERS))}  # out of order on purpose: layers sort by index
        worker.register_kv_caches(caches)
        layers = [caches[f"model.layers.{i}.self_attn.attn"] for i in range(LAYERS)]
        return scheduler, worker, layers

    def request(self, rid, tokens, computed=0):
        r = Request(rid, list(tokens), SamplingParams(max_tokens=8), None)
        r.num_computed_tokens = computed
        return r

    def step(self, scheduler, worker, finished=(), forward=False):
        """One scheduler step's metadata through the worker, as the model runner does it: by
        default a step without a forward pass (vLLM's kv_connector_no_forward: no wait_for_save),
        what vLLM runs once the last request has finished."""
        meta = scheduler.build_connector_meta(SchedulerOutput.make_empty())
        worker.bind_connector_metadata(meta)
        worker.start_load_kv(None)
        if forward:
            worker.wait_for_save()
        result = worker.get_finished(set(finished))
        errors = worker.get_block_ids_with_load_errors()
        worker.clear_connector_metadata()
        scheduler.update_connector_output(KVConnectorOutput(finished_sending=result[0], finished_recving=result[1]))
        return result, errors

    def prefill(self, layers, layout, blocks, n):
        """What a forward pass would have left in the cache: random KV for n tokens, returned too."""
        if layout == "mla":  # one latent per token and layer
            latent = torch.randn(LAYERS, n, DIM, generator=self.rng).to(torch.bfloat16)
            for layer in range(LAYERS):
                for t in range(n):
                    row(layers[layer], blocks[t // BS], t % BS, 0).copy_(latent[layer, t])
            return latent
        kv = torch.randn(2, LAYERS, n, HEADS, DIM, generator=self.rng).to(torch.bfloat16)
        for layer in range(LAYERS):
            for t in range(n):
                for k in (0, 1):
                    row(layers[layer], blocks[t // BS], t % BS, k).copy_(kv[k, layer, t])
        return kv

    def assert_holds(self, layers, layout, blocks, kv, first, last):
        for layer in range(LAYERS):
            for t in range(first, last):
                if layout == "mla":
                    got = row(layers[layer], blocks[t // BS], t % BS, 0)
                    self.assertTrue(torch.equal(got, kv[layer, t]), f"mla layer {layer} token {t}")
                    continue
                for k in (0, 1):
                    got = row(layers[layer], blocks[t // BS], t % BS, k)
                    self.assertTrue(torch.equal(got, kv[k, layer, t]), f"{layout} layer {layer} token {t}")

    def save_session(self, scheduler, worker, layers, layout, n=600, all_groups=False):
        """Request A: computed n tokens, finishes; its save is deferred until the worker reports it.
        all_groups: as vLLM tells a connector of its hybrid KV cache manager (SupportsHMA), which it
        does for one group too."""
        tokens = torch.randint(0, 150000, (n,), generator=self.rng).tolist()
        a = self.request("A", tokens, computed=n)
        self.assertEqual(scheduler.get_num_new_matched_tokens(a, 0), (0, False))  # nothing stored yet
        a_blocks = list(range(BLOCKS - 1, BLOCKS - 1 - (n + BS - 1) // BS, -1))
        kv = self.prefill(layers, layout, a_blocks, n)
        if all_groups:
            delay_free, _ = scheduler.request_finished_all_groups(a, (a_blocks,))
        else:
            delay_free, _ = scheduler.request_finished(a, a_blocks)
        self.assertTrue(delay_free)  # blocks held until the save is done
        # No request is left: vLLM steps on only while the connector says it has work.
        self.assertTrue(scheduler.has_pending_push_work())
        done, _ = self.step(scheduler, worker, finished={"A"})
        for _ in range(200):
            if done[0]:
                break
            time.sleep(0.01)
            done, _ = self.step(scheduler, worker)
        self.assertEqual(done, ({"A"}, None))
        self.assertFalse(scheduler.has_pending_push_work())
        return tokens, kv

    def load_repeat(self, scheduler, worker, layers, tokens, kv, layout="packed_tokens"):
        """Request B repeats a saved 600-token session and one more token: its 512 stored tokens
        (whole chunks) are found, loaded into fresh blocks and compared."""
        b = self.request("B", tokens + [5])
        self.assertEqual(scheduler.get_num_new_matched_tokens(b, 0), (512, False))
        b_blocks = list(range(0, 38))
        scheduler.update_state_after_alloc(b, KVCacheBlocks(([KVCacheBlock(i) for i in b_blocks],)), 512)
        _, errors = self.step(scheduler, worker)
        self.assertEqual(errors, set())
        self.assert_holds(layers, layout, b_blocks, kv, 0, 512)

    def test_one_full_attention_group_is_saved_as_vllms_hybrid_manager_hands_it_over(self):
        scheduler, worker, layers = self.pair("kv_first")
        tokens, kv = self.save_session(scheduler, worker, layers, "kv_first", all_groups=True)
        self.load_repeat(scheduler, worker, layers, tokens, kv, "kv_first")

    def test_save_lookup_and_load_in_every_layout(self):
        for layout in SHAPES:
            with self.subTest(layout=layout):
                self.check_save_lookup_and_load(layout)

    def test_save_lookup_and_load_into_vllms_own_allocations(self):
        good, refused = vllm_allocations()
        print(f"vLLM {vllm.__version__}: taken {sorted(good)}, refused {sorted(refused)}")
        # vLLM's default: NHD in 0.26 (FLASH_ATTN is what it picks on Hopper), LBNHC in 0.34.
        self.assertTrue({"TRITON_ATTN-NHD", "FLASH_ATTN-NHD"} <= set(good) or "LBNHC" in good, sorted(good))
        for label, make in good.items():
            with self.subTest(allocation=label):
                self.check_save_lookup_and_load(label, make)
        for label, make in refused.items():
            with self.subTest(allocation=label), self.assertRaisesRegex(ValueError, "cannot address"):
                self.pair(label, make)

    def check_save_lookup_and_load(self, layout, make=None):
        """A session saved at finish, found by a continuation, loaded into other blocks; then one whose
        first blocks vLLM holds itself: loaded around them, those blocks never written."""
        scheduler, worker, layers = self.pair(layout, make)
        tokens, kv = self.save_session(scheduler, worker, layers, layout)
        # What the store holds, read back in kvtier's own contiguous form: the KV as vLLM's
        # indexing wrote it, whatever order the layer's bytes lie in.
        out = torch.zeros(2, LAYERS, 600, HEADS, DIM, dtype=torch.bfloat16)
        self.assertEqual(worker._engine.restore(tokens, out)["tokens_restored"], 600)
        self.assertTrue(torch.equal(out, kv), f"{layout}: the store holds other bytes than the cache")
        # Request B continues the session: 600 stored tokens -> two whole chunks of 256.
        b = self.request("B", tokens + [7] * 100)
        self.assertEqual(scheduler.get_num_new_matched_tokens(b, 0), (512, False))
        b_blocks = list(range(0, 44))
        scheduler.update_state_after_alloc(b, KVCacheBlocks(([KVCacheBlock(i) for i in b_blocks],)), 512)
        _, errors = self.step(scheduler, worker)
        self.assertEqual(errors, set())
        self.assert_holds(layers, layout, b_blocks, kv, 0, 512)
        # Request C: vLLM's own prefix cache holds its first 32 tokens (2 blocks, shared with
        # other requests): kvtier loads the rest and never writes those blocks.
        c = self.request("C", tokens + [9] * 10)
        self.assertEqual(scheduler.get_num_new_matched_tokens(c, 32), (480, False))
        c_blocks = b_blocks[:2] + list(range(44, 44 + 31))
        for layer in layers:
            for blk in c_blocks[:2]:
                for k in (0, 1):
                    for o in range(BS):
                        row(layer, blk, o, k).fill_(3.0)
        scheduler.update_state_after_alloc(c, KVCacheBlocks(([KVCacheBlock(i) for i in c_blocks],)), 480)
        _, errors = self.step(scheduler, worker)
        self.assertEqual(errors, set())
        self.assert_holds(layers, layout, c_blocks, kv, 32, 512)
        for layer in layers:
            self.assertTrue(bool((row(layer, c_blocks[0], 0, 0) == 3.0).all()), "a skipped block was written")

    def test_corrupt_chunk_is_reported_as_failed_blocks(self):
        scheduler, worker, layers = self.pair("kv_first")
        tokens, kv = self.save_session(scheduler, worker, layers, "kv_first")
        store = worker._engine.store_dir
        seg = sorted(glob.glob(os.path.join(store, "seg-*.kvt")))[0]
        record = 4096 + 2 * LAYERS * 256 * HEADS * DIM * 2  # header + payload of a 256-token chunk
        with open(seg, "r+b") as f:  # a payload byte of the second chunk
            f.seek(record + 4096 + 1000)
            byte = f.read(1)
            f.seek(record + 4096 + 1000)
            f.write(bytes([byte[0] ^ 0x10]))
        d = self.request("D", tokens + [1])
        self.assertEqual(scheduler.get_num_new_matched_tokens(d, 0), (512, False))  # lookups read no payload
        d_blocks = list(range(0, 38))
        scheduler.update_state_after_alloc(d, KVCacheBlocks(([KVCacheBlock(i) for i in d_blocks],)), 512)
        _, errors = self.step(scheduler, worker)
        self.assertEqual(errors, set(d_blocks[16:32]))  # the second chunk's blocks: vLLM recomputes them
        self.assert_holds(layers, "kv_first", d_blocks, kv, 0, 256)
        # D is aborted in that very step, its computed tokens still counting the failed load: its
        # save must not store those blocks (whatever the failed read left there) as that chunk.
        d.num_computed_tokens = 512
        self.assertEqual(scheduler.request_finished(d, d_blocks), (True, None))
        for _ in range(200):
            done, _ = self.step(scheduler, worker, finished={"D"})
            if done[0]:
                break
            time.sleep(0.01)
        self.assertEqual(worker._engine.lookup(tokens), 256)
        out = torch.zeros(2, LAYERS, 600, HEADS, DIM, dtype=torch.bfloat16)
        self.assertEqual(worker._engine.restore(tokens, out)["tokens_restored"], 256)
        self.assertTrue(torch.equal(out[:, :, :256], kv[:, :, :256]))

    def test_a_request_aborted_while_its_async_load_runs_is_not_saved(self):
        scheduler, worker, layers = self.pair("packed_heads", **{"kvtier.async_load": True})
        tokens, _ = self.save_session(scheduler, worker, layers, "packed_heads")
        e = self.request("E", tokens + [2, 3])
        self.assertEqual(scheduler.get_num_new_matched_tokens(e, 0), (512, True))
        e.status = RequestStatus.WAITING_FOR_REMOTE_KVS
        e.num_computed_tokens = 512
        # vLLM holds its blocks for the load already; holding them for a save too would free them twice.
        self.assertEqual(scheduler.request_finished(e, list(range(32))), (False, None))
        self.assertFalse(scheduler.has_pending_push_work())

    def test_groups_kvtier_cannot_keep_as_they_are_set_up_are_refused(self):
        config = vllm_config({"kvtier.root": self.dir.name})
        window = SlidingWindowSpec(block_size=BS, num_kv_heads=HEADS, head_size=DIM, dtype=torch.bfloat16,
                                   sliding_window=128)
        full = FullAttentionSpec(block_size=BS, num_kv_heads=HEADS, head_size=DIM, dtype=torch.bfloat16)
        # Sliding windows and Mamba state as groups of their own are vLLM's hybrid KV cache manager,
        # which KvtierHybridConnector asks for (test_vllm_hybrid.py); never without full attention.
        for groups, why in (([KVCacheGroupSpec(["model.layers.0.attn"], window)], "no full-attention layer"),
                            ([KVCacheGroupSpec(["model.layers.0.attn"], full),
                              KVCacheGroupSpec(["model.layers.1.attn"], window)], "KvtierHybridConnector")):
            for role in (KVConnectorRole.SCHEDULER, KVConnectorRole.WORKER):
                with self.subTest(groups=len(groups), role=role), self.assertRaisesRegex(ValueError, why):
                    KVConnectorFactory.create_connector(config, role, cache_config(groups))
        # MLA is taken (its latent needs a TP-free store, checked when the tensors come), DeepSeek's fp8
        # latent with scales is not.
        mla = MLAAttentionSpec(block_size=BS, num_kv_heads=1, head_size=DIM, dtype=torch.bfloat16)
        self.connectors.append(KVConnectorFactory.create_connector(
            config, KVConnectorRole.SCHEDULER, cache_config([KVCacheGroupSpec(["model.layers.0.attn"], mla)])))
        ds = MLAAttentionSpec(block_size=BS, num_kv_heads=1, head_size=DIM, dtype=torch.uint8,
                              cache_dtype_str="fp8_ds_mla")
        with self.assertRaisesRegex(ValueError, "fp8_ds_mla"):
            KVConnectorFactory.create_connector(config, KVConnectorRole.SCHEDULER,
                                                cache_config([KVCacheGroupSpec(["model.layers.0.attn"], ds)]))

    def test_kv_of_another_model_dtype_or_kv_cache_dtype_is_keyed_apart(self):
        from types import SimpleNamespace as NS

        from kvtier.vllm_connector import _model_id

        def config(model="/models/Qwen3-Coder-30B-A3B-Instruct", revision=None, dtype="bfloat16", quant=None, kv="auto"):
            return NS(model_config=NS(model=model, revision=revision, dtype=dtype, quantization=quant),
                      cache_config=NS(cache_dtype=kv))
        base = _model_id(config())
        self.assertEqual(base, _model_id(config()))  # stable across processes: no object ids in it
        self.assertTrue(base.startswith("Qwen3-Coder-30B-A3B-Instruct-") and len(base) <= 64, base)
        others = [config(dtype="float16"), config(kv="fp8_e4m3"), config(kv="fp8_e5m2"), config(revision="v2"),
                  config(quant="fp8"), config(model="/other/Qwen3-Coder-30B-A3B-Instruct"), config(model="x" * 300)]
        ids = [_model_id(c) for c in others]
        self.assertEqual(len(set(ids + [base])), len(others) + 1, ids)
        self.assertTrue(all(len(i) <= 64 for i in ids))

    def test_data_parallel_or_several_nodes_are_refused(self):
        for parallel in (ParallelConfig(data_parallel_size=2), ParallelConfig(nnodes=2)):
            config = vllm_config({"kvtier.root": self.dir.name}, parallel_config=parallel)
            with self.subTest(parallel=parallel), self.assertRaisesRegex(ValueError, "one engine on one node"):
                KVConnectorFactory.create_connector(config, KVConnectorRole.SCHEDULER, cache_config())

    def test_a_trace_that_cannot_be_written_fails_nothing(self):
        scheduler, worker, layers = self.pair("kv_first", **{"kvtier.trace": os.path.join(self.dir.name, "no", "trace")})
        tokens, kv = self.save_session(scheduler, worker, layers, "kv_first")  # the save reported done
        self.assertEqual(worker._engine.lookup(tokens), 600)

    def test_async_load_is_reported_through_get_finished(self):
        scheduler, worker, layers = self.pair("packed_heads", **{"kvtier.async_load": True})
        tokens, kv = self.save_session(scheduler, worker, layers, "packed_heads")
        e = self.request("E", tokens + [2, 3])
        self.assertEqual(scheduler.get_num_new_matched_tokens(e, 0), (512, True))
        e_blocks = list(range(0, 32))
        scheduler.update_state_after_alloc(e, KVCacheBlocks(([KVCacheBlock(i) for i in e_blocks],)), 512)
        (saved, loaded), errors = self.step(scheduler, worker)
        for _ in range(200):
            if loaded:
                break
            time.sleep(0.01)
            saved, loaded = worker.get_finished(set())
        self.assertEqual(loaded, {"E"})
        self.assertEqual(worker.get_block_ids_with_load_errors(), set())
        self.assert_holds(layers, "packed_heads", e_blocks, kv, 0, 512)

    def test_requests_keyed_by_more_than_tokens_are_left_alone(self):
        scheduler, worker, layers = self.pair("kv_first")
        tokens, _ = self.save_session(scheduler, worker, layers, "kv_first")
        salted = Request("S", tokens + [1], SamplingParams(max_tokens=8), None, cache_salt="tenant-b")
        self.assertEqual(scheduler.get_num_new_matched_tokens(salted, 0), (0, False))
        salted.num_computed_tokens = 600
        self.assertEqual(scheduler.request_finished(salted, list(range(38))), (False, None))

    def test_unknown_layouts_and_bad_settings_are_refused(self):
        worker = KVConnectorFactory.create_connector(vllm_config({"kvtier.root": self.dir.name}),
                                                     KVConnectorRole.WORKER, cache_config())
        self.connectors.append(worker)
        for shape in ((BLOCKS, BS, HEADS, DIM), (2, 2, BS, HEADS, DIM), (BLOCKS, 2, 8, HEADS, DIM)):
            with self.subTest(shape=shape):
                with self.assertRaisesRegex(ValueError, "not one known layout"):
                    worker.register_kv_caches({"model.layers.0.attn": torch.zeros(shape, dtype=torch.bfloat16)})
        hnd = torch.zeros(2, BLOCKS, HEADS, BS, DIM, dtype=torch.bfloat16).transpose(2, 3)  # HND storage
        with self.assertRaisesRegex(ValueError, "cannot address"):
            worker.register_kv_caches({"model.layers.0.attn": hnd})
        # Padded pages (vLLM's page_size_padded): a gap after every block.
        padded = torch.zeros(BLOCKS, HEADS, BS, 2 * DIM + 8, dtype=torch.bfloat16)[..., : 2 * DIM]
        with self.assertRaisesRegex(ValueError, "gaps between its blocks"):
            worker.register_kv_caches({"model.layers.0.attn": padded})
        # Two layers whose bytes lie in different orders.
        with self.assertRaisesRegex(ValueError, "one layout is needed"):
            worker.register_kv_caches({"model.layers.0.attn": SHAPES["packed_heads"](),
                                       "model.layers.1.attn": SHAPES["packed_tokens"]()})
        for extra, why in (({"kvtier.root": self.dir.name, "kvtier.chunk_tokens": 100}, "multiple of vLLM's block size"),
                           ({"kvtier.roots": [self.dir.name]}, "unknown setting"),
                           ({"kvtier.root": []}, "needs 'kvtier.root'"),
                           ({"kvtier.root": self.dir.name, "kvtier.remote_ttl": "soon"}, "not a number"),
                           ({"kvtier.root": self.dir.name, "kvtier.metrics_port": 70000}, "not a port"),
                           ({"kvtier.root": self.dir.name, "kvtier.store_format": 3}, "store_format \\(3\\)")):
            with self.subTest(extra=extra), self.assertRaisesRegex(ValueError, why):
                KVConnectorFactory.create_connector(vllm_config(extra), KVConnectorRole.SCHEDULER, cache_config())

    def test_several_drives_and_the_trace(self):
        drives = [os.path.join(self.dir.name, f"drive{i}") for i in range(3)]
        trace = os.path.join(self.dir.name, "trace.jsonl")
        scheduler, worker, layers = self.pair("packed_tokens", root=drives, **{"kvtier.trace": trace})
        self.assertEqual(worker._engine.stats()["drives"], 3)
        # An empty store has nothing to probe yet: kvtier's defaults, each drive saying why.
        io = worker._engine.io_settings()
        self.assertEqual(io["source"], "defaults")
        self.assertEqual([d["state"].startswith("not tuned") for d in io["drives"]], [True] * 3)
        tokens, kv = self.save_session(scheduler, worker, layers, "packed_tokens")
        self.load_repeat(scheduler, worker, layers, tokens, kv)
        with open(trace) as f:
            events = [json.loads(line) for line in f]
        self.assertEqual([(e["event"], e["req"], e["tokens"]) for e in events], [("save", "A", 600), ("load", "B", 512)])
        self.assertEqual(events[1]["restored"], 512)

    def test_a_tp_free_store_is_read_by_ranks_of_another_tp_size(self):
        scheduler, worker, layers = self.pair("packed_tokens", **{"kvtier.store_format": 2, "kvtier.tune": False})
        self.assertIn("kvtier2", worker._engine.store_dir)
        tokens, kv = self.save_session(scheduler, worker, layers, "packed_tokens")
        self.load_repeat(scheduler, worker, layers, tokens, kv)
        model = worker._engine.geometry.model
        for c in self.connectors:
            c.shutdown()
        self.connectors = []
        # A deployment at TP 2 (each rank one of the two heads) restores what TP 1 saved.
        for rank in range(2):
            g = kvtier.Geometry.custom(model, layers=LAYERS, kv_heads=1, head_dim=DIM, chunk_tokens=256,
                                       tp_rank=rank, tp_world=2)
            e = kvtier.open(os.path.join(self.dir.name, "store-0"), g, io="posix", store_format=2, tune=False)
            out = torch.zeros(2, LAYERS, 600, 1, DIM, dtype=torch.bfloat16)
            self.assertEqual(e.restore(tokens, out)["tokens_restored"], 600)
            self.assertTrue(torch.equal(out, kv[:, :, :, rank:rank + 1]), f"rank {rank} of TP 2")
            del e

    def test_an_mla_models_latent_is_kept_once_in_a_tp_free_store(self):
        def latent_cache():
            return torch.zeros(BLOCKS, BS, DIM, dtype=torch.bfloat16)  # vLLM's MLA cache per layer

        with self.assertRaisesRegex(ValueError, "kvtier.store_format 2"):
            self.pair("mla", make=latent_cache)
        scheduler, worker, layers = self.pair("mla", make=latent_cache,
                                              **{"kvtier.store_format": 2, "kvtier.tune": False})
        self.assertEqual(worker._engine.geometry.kv_tensors, 1)
        tokens, latent = self.save_session(scheduler, worker, layers, "mla")
        self.load_repeat(scheduler, worker, layers, tokens, latent, layout="mla")
        # A rank of TP 4 (every rank holds the latent) restores it from the one copy.
        g = kvtier.Geometry.custom(worker._engine.geometry.model, layers=LAYERS, kv_heads=1, head_dim=DIM,
                                   chunk_tokens=256, tp_rank=3, tp_world=4, kv_tensors=1)
        root = os.path.dirname(os.path.dirname(os.path.dirname(worker._engine.store_dir)))
        for c in self.connectors:
            c.shutdown()
        self.connectors = []
        e = kvtier.open(root, g, io="posix", store_format=2, tune=False)
        out = torch.zeros(1, LAYERS, 600, 1, DIM, dtype=torch.bfloat16)
        self.assertEqual(e.restore(tokens, out)["tokens_restored"], 600)
        self.assertTrue(torch.equal(out[0, :, :, 0], latent))
        del e

    def test_a_fresh_node_finds_and_loads_what_the_cluster_holds(self):
        """Node A saves with kvtier.remote; node B, another store over the same Redis Cluster (real
        redis-server processes on 127.0.0.1), is told by its lookup what the cluster holds and
        loads it from there."""
        if not kvtier.built_with_remote() or shutil.which("redis-server") is None:
            self.skipTest("kvtier built without the remote tier, or no redis-server")
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        cluster = os.path.join(self.dir.name, "cluster")
        # Other tests start clusters at the same time (ctest -j): ports found free can be taken
        # before the servers bind them, so a failed start is tried again on other ports.
        rng = random.Random(os.getpid())
        started = subprocess.CompletedProcess([], 1, "", "no three free ports (and bus ports) found in 5 tries")
        for _ in range(5):
            first = rng.randrange(21000, 29000)
            if not all(port_free(p) and port_free(p + 10000) for p in range(first, first + 3)):
                continue
            started = subprocess.run([os.path.join(repo, "bench/remote/start_cluster.sh"), cluster, str(first), "0",
                                      "3"], capture_output=True, text=True, timeout=120)
            if started.returncode == 0:
                break
            subprocess.run([os.path.join(repo, "bench/remote/stop_cluster.sh"), cluster], capture_output=True,
                           timeout=60)
        self.assertEqual(started.returncode, 0, started.stderr)
        self.addCleanup(subprocess.run, [os.path.join(repo, "bench/remote/stop_cluster.sh"), cluster],
                        capture_output=True, timeout=60)
        seeds = started.stdout.strip().splitlines()[-1]
        a_sched, a_worker, a_layers = self.pair("packed_tokens", **{"kvtier.remote": seeds})
        tokens, kv = self.save_session(a_sched, a_worker, a_layers, "packed_tokens")
        a_worker._engine.sync_remote()  # whatever write-behind has not published yet
        b_sched, b_worker, b_layers = self.pair("packed_tokens", **{"kvtier.remote": seeds})
        self.assertEqual(b_worker._engine.stats()["records"], 0)  # node B's own store is empty
        b = self.request("B", tokens + [4])
        self.assertEqual(b_sched.get_num_new_matched_tokens(b, 0), (512, False))
        b_blocks = list(range(10, 48))
        b_sched.update_state_after_alloc(b, KVCacheBlocks(([KVCacheBlock(i) for i in b_blocks],)), 512)
        _, errors = self.step(b_sched, b_worker)
        self.assertEqual(errors, set())
        self.assert_holds(b_layers, "packed_tokens", b_blocks, kv, 0, 512)

    def test_tuning_is_the_workers_unless_turned_off_or_sizes_are_given(self):
        _, worker, _ = self.pair("packed_tokens", **{"kvtier.tune": False})
        self.assertEqual(worker._engine.io_settings()["source"], "defaults (tuning off)")
        _, worker, _ = self.pair("packed_tokens", **{"kvtier.request_size": "4M"})
        self.assertEqual(worker._engine.io_settings()["source"], "options")
        self.assertEqual(worker._engine.io_settings()["request_bytes"], 4 << 20)

    def test_worker_metrics_on_a_port_of_their_own(self):
        import socket
        import urllib.request
        with socket.socket() as s:  # a port free right now
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        scheduler, worker, layers = self.pair("kv_first", **{"kvtier.metrics_port": port})
        self.save_session(scheduler, worker, layers, "kv_first")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        saved = [line for line in text.splitlines()
                 if line.startswith("kvtier_") and worker._engine.store_dir in line and "chunks_written" in line]
        self.assertTrue(saved, "the worker's engine is not on its metrics port")
        self.assertTrue(any(line.rstrip().endswith(" 3.0") for line in saved), saved)  # 600 tokens: 3 chunks


if __name__ == "__main__":
    unittest.main()
