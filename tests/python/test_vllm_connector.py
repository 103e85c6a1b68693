# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""kvtier's vLLM connector, driven the way vLLM's scheduler and worker drive a KVConnectorBase_V1,
through vLLM's own classes (VllmConfig, KVConnectorFactory, Request, KVCacheBlocks, SchedulerOutput)
on host tensors: save at finish with deferred freeing, lookup over the workers' sockets, load into
each paged layout (skipping vLLM's own prefix hit), async load, a corrupted chunk reported as load
errors, and an unknown layout refused. Skipped where vLLM cannot be imported (see tools/setup.sh
--vllm); no GPU is needed."""
import glob
import os
import tempfile
import time
import unittest

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

try:
    import torch
    from vllm.config import CacheConfig, DeviceConfig, KVTransferConfig, VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm.sampling_params import SamplingParams
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.kv_cache_utils import KVCacheBlock
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request
    VLLM = None
except ImportError as e:
    VLLM = str(e)

BS, BLOCKS, LAYERS, HEADS, DIM = 16, 96, 3, 2, 64
SHAPES = {
    "kv_first": (2, BLOCKS, BS, HEADS, DIM),
    "block_first": (BLOCKS, 2, BS, HEADS, DIM),
    "packed_heads": (BLOCKS, HEADS, BS, 2 * DIM),
}


def row(layer, layout, block, offset, kv):
    """One token's K (kv=0) or V (kv=1) in a layer tensor, as vLLM's attention backends index it."""
    if layout == "kv_first":
        return layer[kv, block, offset]
    if layout == "block_first":
        return layer[block, kv, offset]
    return layer[block, :, offset, kv * DIM:(kv + 1) * DIM]


@unittest.skipIf(VLLM is not None, f"vllm is not importable: {VLLM}")
class ConnectorTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR"))
        self.rng = torch.Generator().manual_seed(11)
        self.connectors = []

    def tearDown(self):
        for c in self.connectors:
            c.shutdown()
        self.dir.cleanup()

    def pair(self, layout, **extra):
        """A scheduler-side and a worker-side connector, made by vLLM's factory from a VllmConfig,
        over a store of their own."""
        root = os.path.join(self.dir.name, f"store-{len(self.connectors)}")
        settings = {"kvtier.root": root, "kvtier.io": "posix", "kvtier.capacity": "256M",
                    "kvtier.lookup_timeout_ms": 5000, **extra}
        config = VllmConfig(
            cache_config=CacheConfig(block_size=BS),
            device_config=DeviceConfig(device="cpu"),
            kv_transfer_config=KVTransferConfig(kv_connector="KvtierConnector", kv_role="kv_both",
                                                kv_connector_module_path="kvtier.vllm_connector",
                                                kv_connector_extra_config=settings))
        cache_config = KVCacheConfig(num_blocks=BLOCKS, kv_cache_tensors=[], kv_cache_groups=[])
        scheduler = KVConnectorFactory.create_connector(config, KVConnectorRole.SCHEDULER, cache_config)
        worker = KVConnectorFactory.create_connector(config, KVConnectorRole.WORKER, cache_config)
        self.connectors += [worker, scheduler]
        caches = {f"model.layers.{i}.self_attn.attn": torch.zeros(SHAPES[layout], dtype=torch.bfloat16)
                  for i in reversed(range(LAYERS))}  # out of order on purpose: layers sort by index
        worker.register_kv_caches(caches)
        layers = [caches[f"model.layers.{i}.self_attn.attn"] for i in range(LAYERS)]
        return scheduler, worker, layers

    def request(self, rid, tokens, computed=0):
        r = Request(rid, list(tokens), SamplingParams(max_tokens=8), None)
        r.num_computed_tokens = computed
        return r

    def step(self, scheduler, worker, finished=()):
        """One scheduler step's metadata through the worker, as the model runner does it."""
        meta = scheduler.build_connector_meta(SchedulerOutput.make_empty())
        worker.bind_connector_metadata(meta)
        worker.start_load_kv(None)
        worker.wait_for_save()
        result = worker.get_finished(set(finished))
        errors = worker.get_block_ids_with_load_errors()
        worker.clear_connector_metadata()
        return result, errors

    def prefill(self, layers, layout, blocks, n):
        """What a forward pass would have left in the cache: random KV for n tokens, returned too."""
        kv = torch.randn(2, LAYERS, n, HEADS, DIM, generator=self.rng).to(torch.bfloat16)
        for layer in range(LAYERS):
            for t in range(n):
                for k in (0, 1):
                    row(layers[layer], layout, blocks[t // BS], t % BS, k).copy_(kv[k, layer, t])
        return kv

    def assert_holds(self, layers, layout, blocks, kv, first, last):
        for layer in range(LAYERS):
            for t in range(first, last):
                for k in (0, 1):
                    got = row(layers[layer], layout, blocks[t // BS], t % BS, k)
                    self.assertTrue(torch.equal(got, kv[k, layer, t]), f"{layout} layer {layer} token {t}")

    def save_session(self, scheduler, worker, layers, layout, n=600):
        """Request A: computed n tokens, finishes; its save is deferred until the worker reports it."""
        tokens = torch.randint(0, 150000, (n,), generator=self.rng).tolist()
        a = self.request("A", tokens, computed=n)
        self.assertEqual(scheduler.get_num_new_matched_tokens(a, 0), (0, False))  # nothing stored yet
        a_blocks = list(range(BLOCKS - 1, BLOCKS - 1 - (n + BS - 1) // BS, -1))
        kv = self.prefill(layers, layout, a_blocks, n)
        delay_free, _ = scheduler.request_finished(a, a_blocks)
        self.assertTrue(delay_free)  # blocks held until the save is done
        done, _ = self.step(scheduler, worker, finished={"A"})
        for _ in range(200):
            if done[0]:
                break
            time.sleep(0.01)
            done = worker.get_finished(set())
        self.assertEqual(done, ({"A"}, None))
        return tokens, kv

    def test_save_lookup_and_load_in_every_layout(self):
        for layout in SHAPES:
            with self.subTest(layout=layout):
                scheduler, worker, layers = self.pair(layout)
                tokens, kv = self.save_session(scheduler, worker, layers, layout)
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
                                row(layer, layout, blk, o, k).fill_(3.0)
                scheduler.update_state_after_alloc(c, KVCacheBlocks(([KVCacheBlock(i) for i in c_blocks],)), 480)
                _, errors = self.step(scheduler, worker)
                self.assertEqual(errors, set())
                self.assert_holds(layers, layout, c_blocks, kv, 32, 512)
                for layer in layers:
                    self.assertTrue(bool((row(layer, layout, c_blocks[0], 0, 0) == 3.0).all()), "a skipped block was written")

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
        config = VllmConfig(
            cache_config=CacheConfig(block_size=BS), device_config=DeviceConfig(device="cpu"),
            kv_transfer_config=KVTransferConfig(kv_connector="KvtierConnector", kv_role="kv_both",
                                                kv_connector_module_path="kvtier.vllm_connector",
                                                kv_connector_extra_config={"kvtier.root": self.dir.name}))
        cache_config = KVCacheConfig(num_blocks=BLOCKS, kv_cache_tensors=[], kv_cache_groups=[])
        worker = KVConnectorFactory.create_connector(config, KVConnectorRole.WORKER, cache_config)
        self.connectors.append(worker)
        for shape in ((BLOCKS, BS, HEADS, DIM), (2, 2, BS, HEADS, DIM), (BLOCKS, 2, 8, HEADS, DIM)):
            with self.subTest(shape=shape):
                with self.assertRaisesRegex(ValueError, "not one known layout"):
                    worker.register_kv_caches({"model.layers.0.attn": torch.zeros(shape, dtype=torch.bfloat16)})
        hnd = torch.zeros(2, BLOCKS, HEADS, BS, DIM, dtype=torch.bfloat16).transpose(2, 3)  # HND storage
        with self.assertRaisesRegex(ValueError, "not contiguous"):
            worker.register_kv_caches({"model.layers.0.attn": hnd})
        bad = KVTransferConfig(kv_connector="KvtierConnector", kv_role="kv_both",
                               kv_connector_module_path="kvtier.vllm_connector",
                               kv_connector_extra_config={"kvtier.root": self.dir.name, "kvtier.chunk_tokens": 100})
        with self.assertRaisesRegex(ValueError, "multiple of vLLM's block size"):
            KVConnectorFactory.create_connector(
                VllmConfig(cache_config=CacheConfig(block_size=BS), device_config=DeviceConfig(device="cpu"),
                           kv_transfer_config=bad), KVConnectorRole.SCHEDULER, cache_config)


if __name__ == "__main__":
    unittest.main()
