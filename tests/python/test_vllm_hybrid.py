# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""kvtier's vLLM connector under vLLM's hybrid KV cache manager (HMA), on the CPU: KV cache groups of
full attention, sliding window and Mamba state; every block table from vLLM's own KVCacheManager
(a prefill's blocks, the window's blocks vLLM lets go of at finish, a load's null padding); the
layer tensors made as vLLM 0.26's model runner makes a hybrid model's (one raw tensor shared by a
layer of each group, attention re-strided blocks-first beside Mamba, each Mamba layer's state
tensors a page apart). Models are drawn by a seeded generator (layers of each kind, window, token
counts, kernel blocks smaller than vLLM's); a session is saved at finish through
request_finished_all_groups, found by a continuation and loaded into another request's blocks, and
every byte a load must write is compared, vLLM's null block never written. Run by CI with the
newest vLLM and with 0.26.0; skipped where vLLM cannot be imported."""
import dataclasses
import functools
import glob
import json
import logging
import os
import random
import tempfile
import threading
import time
import unittest
from concurrent.futures import Future

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

try:
    import kvtier  # noqa: F401
    import torch
    from vllm.config import CacheConfig, DeviceConfig, KVTransferConfig, VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole
    from vllm.sampling_params import SamplingParams
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.core.sched.output import CachedRequestData, NewRequestData, SchedulerOutput
    from vllm.v1.kv_cache_interface import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheTensor,
                                            MambaSpec, SlidingWindowSpec)
    from vllm.v1.outputs import KVConnectorOutput
    from vllm.v1.request import Request, RequestStatus

    from kvtier import vllm_connector
    VLLM = None
except ImportError as e:
    VLLM = str(e)

KERNEL_BS, HEADS, DIM, NUM_BLOCKS, MAX_LEN = 16, 2, 32, 160, 2304  # MAX_LEN: a multiple of every block size drawn
MAMBA_SHAPES = ((24, 3), (2, 8, 16))  # a conv state and an SSM state


class Model:
    """A hybrid model drawn by `rng`: its layers' kinds in model order, vLLM's KV cache groups and
    tensors for them, and its KV cache layer tensors as 0.26's model runner makes them."""

    def __init__(self, rng: random.Random):
        self.split = rng.choice((1, 1, 2, 3))  # kernel blocks per vLLM block
        self.bs = KERNEL_BS * self.split
        self.window = rng.choice((0, rng.randrange(2, 4 * self.bs)))
        self.mamba = self.window == 0 or rng.random() < 0.5
        kinds = ["full"] + (["window"] if self.window else []) + (["state"] if self.mamba else [])
        per_kind = rng.randint(1, 3)
        order = [k for k in kinds for _ in range(per_kind)]
        rng.shuffle(order)
        self.names = {k: [] for k in kinds}
        for i, k in enumerate(order):
            self.names[k].append(f"model.layers.{i}." + ("mixer" if k == "state" else "self_attn.attn"))
        full = FullAttentionSpec(block_size=self.bs, num_kv_heads=HEADS, head_size=DIM, dtype=torch.bfloat16)
        self.page = full.page_size_bytes
        specs = {"full": full}
        if self.window:
            specs["window"] = SlidingWindowSpec(block_size=self.bs, num_kv_heads=HEADS, head_size=DIM,
                                                dtype=torch.bfloat16, sliding_window=self.window)
        if self.mamba:  # prefix caching off: one state block per request, as long as the model
            specs["state"] = MambaSpec(block_size=MAX_LEN, shapes=MAMBA_SHAPES, dtypes=(torch.bfloat16, torch.float32),
                                       page_size_padded=self.page, mamba_cache_mode="none")
        self.kinds = kinds
        self.groups = [KVCacheGroupSpec(self.names[k], specs[k]) for k in kinds]
        tensors = [KVCacheTensor(size=NUM_BLOCKS * self.page, shared_by=[self.names[k][i] for k in kinds])
                   for i in range(per_kind)]
        self.config = KVCacheConfig(num_blocks=NUM_BLOCKS, kv_cache_tensors=tensors, kv_cache_groups=self.groups)
        self.raw = [torch.zeros(t.size, dtype=torch.int8) for t in tensors]
        self.caches = {}
        for i, t in enumerate(tensors):
            for k in kinds:
                self.caches[self.names[k][i]] = (self._state(self.raw[i]) if k == "state"
                                                  else self._attention(self.raw[i]))

    def _attention(self, raw):
        # FLASH_ATTN's logical [2, blocks, bs, H, D] over kernel blocks; beside Mamba layers the
        # runner re-strides it blocks-first (_update_hybrid_attention_mamba_layout).
        kv = raw.view(torch.bfloat16).view(2, NUM_BLOCKS * self.split, KERNEL_BS, HEADS, DIM)
        if self.mamba:
            hidden = kv.shape[2:].numel()
            kv = kv.as_strided(kv.shape, (hidden, 2 * hidden, *kv.stride()[2:]))
        return kv

    def _state(self, raw):
        # As the runner views a MambaSpec layer: tensor j [blocks, *shape_j], a page apart, after
        # the tensors before it.
        out, offset = [], 0
        for shape, dtype in zip(MAMBA_SHAPES, (torch.bfloat16, torch.float32)):
            size = torch.empty((), dtype=dtype).element_size()
            target = (NUM_BLOCKS, *shape)
            stride = torch.empty(target).stride()
            out.append(torch.as_strided(raw.view(dtype), size=target, stride=(self.page // size, *stride[1:]),
                                        storage_offset=offset // size))
            offset += stride[0] * size
        return out

    def group_of(self, kind: str) -> int:
        return self.kinds.index(kind)

    def rows(self, name: str, block: int, token: int):
        """Token `token`'s K and V rows (within vLLM block `block`) of an attention layer."""
        kernel, at = block * self.split + token // KERNEL_BS, token % KERNEL_BS
        t = self.caches[name]
        return t[0, kernel, at], t[1, kernel, at]

    def block_views(self, block: int):
        """Every layer's bytes of vLLM block `block`, as views of the layer tensors."""
        views = []
        for t in self.caches.values():
            if isinstance(t, list):
                views += [s[block] for s in t]
            else:
                kernels = slice(block * self.split, (block + 1) * self.split)
                views += [t[0, kernels], t[1, kernels]]
        return views

    def fill_block(self, block: int, gen):
        """Every layer's bytes of vLLM block `block` set to noise from `gen`."""
        for v in self.block_views(block):
            v.copy_(torch.randn(v.shape, generator=gen).to(v.dtype))

    def describe(self) -> str:
        return (f"layers {sum(len(v) for v in self.names.values())} ({', '.join(self.kinds)}), block {self.bs} "
                f"in kernel blocks of {KERNEL_BS}, window {self.window}")


def cpu_config(connector, settings, block_size=16):
    """A VllmConfig for the CPU with kvtier's `connector` and these kv_connector_extra_config settings."""
    return VllmConfig(cache_config=CacheConfig(block_size=block_size), device_config=DeviceConfig(device="cpu"),
                      kv_transfer_config=KVTransferConfig(kv_connector=connector, kv_role="kv_both",
                                                          kv_connector_module_path="kvtier.vllm_connector",
                                                          kv_connector_extra_config=settings))


# vLLM 0.26 lays a hybrid model's KV cache out as a raw tensor shared by a layer of each group
# (KVCacheTensor.shared_by); newer ones place layers by strides, which the connector refuses for a
# hybrid model (tested below).
LAYOUT_026 = VLLM is None and "shared_by" in getattr(KVCacheTensor, "__dataclass_fields__", {})


class _Records(logging.Handler):
    """What a logger said, kept."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@unittest.skipIf(VLLM is not None, f"vllm is not importable: {VLLM}")
@unittest.skipIf(VLLM is None and not LAYOUT_026, "this vLLM lays hybrid KV caches out otherwise than 0.26")
class HybridConnectorTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR"))
        self.connectors = []
        self.held = []  # events that hold save threads: set before the connectors shut down
        seed = int(os.environ.get("KVTIER_TEST_SEED", random.randrange(1 << 30)))
        print(f"KVTIER_TEST_SEED={seed}")
        self.rng = random.Random(seed)
        self.gen = torch.Generator().manual_seed(seed)

    def tearDown(self):
        for e in self.held:
            e.set()
        for c in self.connectors:
            c.shutdown()
        self.dir.cleanup()

    def pair(self, model, root, **extra):
        settings = {"kvtier.root": root, "kvtier.io": "posix", "kvtier.capacity": "256M", "kvtier.store_format": 2,
                    "kvtier.lookup_timeout_ms": 5000, **extra}
        if self.rng.random() < 0.5:  # else the default: 256 tokens, or the first multiple of the block past them
            settings["kvtier.chunk_tokens"] = model.bs * self.rng.choice((2, 4))
        # The attention groups' block size is what counts; vLLM's cache config may say the size it
        # started from, before its hybrid sizing raised it.
        said = self.rng.choice((model.bs, KERNEL_BS))
        config = cpu_config("KvtierHybridConnector", settings, block_size=said)
        scheduler = KVConnectorFactory.create_connector(config, KVConnectorRole.SCHEDULER, model.config)
        worker = KVConnectorFactory.create_connector(config, KVConnectorRole.WORKER, model.config)
        self.connectors += [worker, scheduler]
        worker.register_kv_caches(dict(reversed(list(model.caches.items()))))
        return scheduler, worker

    @staticmethod
    def manager(model):
        return KVCacheManager(model.config, max_model_len=MAX_LEN, scheduler_block_size=MAX_LEN if model.mamba
                              else model.bs, hash_block_size=model.bs, enable_caching=False)

    def model_where(self, ok):
        """A model drawn until `ok(model)` holds."""
        model = Model(self.rng)
        while not ok(model):
            model = Model(self.rng)
        return model

    def kv_truth(self, model, n, kinds=("full",)):
        """Random KV of `n` tokens for every layer of `kinds`: what the forward passes write."""
        return {name: torch.randn(2, n, HEADS, DIM, generator=self.gen).to(torch.bfloat16)
                for kind in kinds for name in model.names[kind]}

    def step(self, scheduler, worker, finished=(), so=None, forward=None, prepare=lambda: None):
        """One step as vLLM 0.26's runner takes it: the metadata built from `so` (none: nothing
        scheduled), preemptions told, `prepare()` (what the runner does to the step's blocks first:
        zeroes new ones of a model with Mamba layers), loads, and where the step has a forward pass
        `forward()` (what the model writes) and wait_for_save; then get_finished with `finished`.
        What the worker reported, and the blocks whose loads failed."""
        meta = scheduler.build_connector_meta(so or SchedulerOutput.make_empty())
        worker.handle_preemptions(meta)
        prepare()
        worker.bind_connector_metadata(meta)
        try:
            worker.start_load_kv(None)
            if forward is not None:
                forward()
                worker.wait_for_save()
        finally:
            result = worker.get_finished(set(finished))
            errors = worker.get_block_ids_with_load_errors()
            worker.clear_connector_metadata()
            scheduler.update_connector_output(KVConnectorOutput(finished_sending=result[0],
                                                                finished_recving=result[1]))
        return result, errors

    def prefill(self, model, manager, rid, tokens):
        """Request `rid`'s prompt computed: random KV in its blocks, a random state in its Mamba
        block; what it wrote, per layer."""
        request = Request(rid, list(tokens), SamplingParams(max_tokens=8), None)
        self.assertIsNotNone(manager.allocate_slots(request, len(tokens)))
        ids = manager.get_block_ids(rid)
        truth = {}
        for kind in ("full", "window"):
            for name in model.names.get(kind, []):
                kv = torch.randn(2, len(tokens), HEADS, DIM, generator=self.gen).to(torch.bfloat16)
                table = ids[model.group_of(kind)]
                for t in range(len(tokens)):
                    k, v = model.rows(name, table[t // model.bs], t % model.bs)
                    k.copy_(kv[0, t])
                    v.copy_(kv[1, t])
                truth[name] = kv
        for name in model.names.get("state", []):
            block = ids[model.group_of("state")][(len(tokens) - 1) // MAX_LEN]
            states = [torch.randn(s.shape[1:], generator=self.gen).to(s.dtype) for s in model.caches[name]]
            for s, value in zip(model.caches[name], states):
                s[block].copy_(value)
            truth[name] = states
        request.num_computed_tokens = len(tokens)
        return request, truth

    def finish(self, model, manager, scheduler, worker, request):
        """The request finishes: vLLM lets go of the window's blocks before it (and reuses them:
        garbage), hands every group's blocks to the connector and keeps them until it saved."""
        n = request.num_computed_tokens
        before = manager.get_block_ids(request.request_id)
        manager.remove_skipped_blocks(request.request_id, n, num_prompt_tokens=n)
        ids = manager.get_block_ids_for_computed_tokens(request.request_id, n)
        if model.window:
            g = model.group_of("window")
            let_go = [b for b, now in zip(before[g], ids[g]) if now == 0 and b != 0]
            self.assertEqual(len(let_go), (n - model.window + 1) // model.bs if n >= model.window else 0)
            for b in let_go:
                model.fill_block(b, self.gen)
        delay, _ = scheduler.request_finished_all_groups(request, ids)
        self.assertTrue(delay)
        self.assert_reported_saved(scheduler, worker, request.request_id)

    def assert_reported_saved(self, scheduler, worker, rid, prepare=lambda: None):
        """Steps from the one that says `rid` finished (`prepare` run in it as step() does) until
        the worker reports its saves done."""
        done, _ = self.step(scheduler, worker, finished={rid}, prepare=prepare, forward=lambda: None)
        deadline = time.monotonic() + 60  # a loaded machine's slow saves: done long before
        while time.monotonic() < deadline:
            if done[0]:
                break
            time.sleep(0.01)
            done, _ = self.step(scheduler, worker)
        self.assertEqual(done, ({rid}, None))

    def load(self, model, manager, scheduler, worker, rid, prompt):
        """A request with `prompt`: what kvtier offers, loaded into the blocks vLLM allocates;
        (hit, its blocks)."""
        request = Request(rid, list(prompt), SamplingParams(max_tokens=8), None)
        hit, asynchronous = scheduler.get_num_new_matched_tokens(request, 0)
        self.assertFalse(asynchronous)
        self.assertLess(hit, len(prompt))
        self.assertIsNotNone(manager.allocate_slots(request, len(prompt) - hit, num_external_computed_tokens=hit))
        scheduler.update_state_after_alloc(request, manager.get_blocks(rid), hit)
        _, errors = self.step(scheduler, worker)
        self.assertEqual(errors, set())
        self.loaded = request
        return hit, manager.get_block_ids(rid)

    def assert_loaded(self, model, truth, ids, hit):
        for name, kv in truth.items():
            if name in model.names.get("state", []):
                block = ids[model.group_of("state")][(hit - 1) // MAX_LEN]
                for j, (s, want) in enumerate(zip(model.caches[name], kv)):
                    self.assertTrue(torch.equal(s[block], want), f"{name}: state tensor {j}")
                continue
            kind = "window" if name in model.names.get("window", []) else "full"
            table = ids[model.group_of(kind)]
            first = (hit - model.window + 1) // model.bs * model.bs if kind == "window" and hit >= model.window else 0
            for t in range(first, hit):
                self.assertNotEqual(table[t // model.bs], 0, f"{name}: token {t} in vLLM's null block")
                k, v = model.rows(name, table[t // model.bs], t % model.bs)
                self.assertTrue(torch.equal(k, kv[0, t]) and torch.equal(v, kv[1, t]), f"{name}: token {t} of {hit}")
        for v in model.block_views(0):  # vLLM's null block: never written by anyone
            self.assertEqual(int((v != 0).sum()), 0, "vLLM's null block was written")

    def test_sessions_of_drawn_hybrid_models_are_saved_found_and_loaded(self):
        cases = hits = shorter = 0
        for case in range(8):
            model = Model(self.rng)
            with self.subTest(case=case, model=model.describe()):
                manager = self.manager(model)
                scheduler, worker = self.pair(model, os.path.join(self.dir.name, f"store-{case}"))
                n = self.rng.randrange(2, 6 * model.bs)
                tokens = [self.rng.randrange(150000) for _ in range(n)]
                a, truth = self.prefill(model, manager, "A", tokens)
                self.finish(model, manager, scheduler, worker, a)
                # A continuation finds the whole session: its window and state are held at its end.
                hit, ids = self.load(model, manager, scheduler, worker, "B", tokens + [7] * self.rng.randrange(1, 40))
                self.assertEqual(hit, n)
                self.assert_loaded(model, truth, ids, hit)
                hits += 1
                # A prompt that leaves the session early: with Mamba layers no state is held there
                # (no hit); otherwise whatever boundary kvtier finds loads byte for byte.
                cut = self.rng.randrange(1, n)
                hit, ids = self.load(model, manager, scheduler, worker, "C", tokens[:cut] + [9] * 5)
                self.assertLessEqual(hit, cut)
                if model.mamba:
                    self.assertEqual(hit, 0)
                if hit:
                    self.assert_loaded(model, truth, ids, hit)
                    shorter += 1
                cases += 1
        print(f"hybrid connector: {cases} models, {hits} sessions loaded whole, {shorter} shorter prompts loaded")

    def chunked_prefill(self, model, manager, scheduler, worker, rid, prompt, truth, states, sizes=None):
        """`prompt` computed over steps of drawn sizes, each writing its tokens' KV (from `truth`)
        and a new state (kept in `states` by the tokens computed after it), `sizes` the first steps'
        sizes if given; the window's blocks vLLM lets go of at a step are written with noise
        before that step's forward pass, as another request handed them would. The request, and
        the step ends kvtier keeps (those inside the prompt)."""
        request = Request(rid, list(prompt), SamplingParams(max_tokens=8), None)
        self.assertEqual(scheduler.get_num_new_matched_tokens(request, 0), (0, False))
        chunk, n, computed, planned = scheduler._settings.chunk_tokens, len(prompt), 0, []
        while computed < n:
            # Mostly whole chunks (a prefill alone in its steps), else any size (a step shared with
            # other requests), which leaves the later ends between chunk boundaries too.
            size = chunk * self.rng.randint(1, 2) if self.rng.random() < 0.7 else self.rng.randrange(1, 2 * chunk)
            size = min(n - computed, sizes.pop(0) if sizes else size)
            before = manager.get_block_ids(rid)
            new = manager.allocate_slots(request, size)
            self.assertIsNotNone(new)
            let_go = []
            if model.window:
                g = model.group_of("window")
                let_go = [b for b, now in zip(before[g], manager.get_block_ids(rid)[g]) if b != 0 and now == 0]
            so = dataclasses.replace(SchedulerOutput.make_empty(), num_scheduled_tokens={rid: size},
                                     total_num_scheduled_tokens=size)
            if computed == 0:
                so.scheduled_new_reqs = [NewRequestData.from_request(request, manager.get_block_ids(rid))]
            else:
                so.scheduled_cached_reqs = CachedRequestData(
                    req_ids=[rid], resumed_req_ids=set(), new_token_ids=[[]], all_token_ids={},
                    new_block_ids=[new.get_block_ids(allow_none=True)], num_computed_tokens=[computed],
                    num_output_tokens=[0])
            end = computed + size

            def forward(first=computed, end=end):
                ids = manager.get_block_ids(rid)
                for kind in ("full", "window"):
                    for name in model.names.get(kind, []):
                        table = ids[model.group_of(kind)]
                        for t in range(first, end):
                            k, v = model.rows(name, table[t // model.bs], t % model.bs)
                            k.copy_(truth[name][0, t])
                            v.copy_(truth[name][1, t])
                if not model.mamba:
                    return
                block = ids[model.group_of("state")][0]
                states[end] = {}
                for name in model.names["state"]:
                    states[end][name] = [torch.randn(s.shape[1:], generator=self.gen).to(s.dtype)
                                         for s in model.caches[name]]
                    for s, value in zip(model.caches[name], states[end][name]):
                        s[block].copy_(value)

            def hand_on(let_go=let_go):
                for b in let_go:
                    model.fill_block(b, self.gen)

            self.step(scheduler, worker, so=so, forward=forward, prepare=hand_on)
            computed = request.num_computed_tokens = end
            if end < n:
                planned.append(end)
        return request, planned

    def test_a_prompt_again_finds_the_state_a_prefill_step_left(self):
        """A recurrent hybrid's prompt computed in steps (chunked prefill): each step's end inside
        the prompt, on a chunk boundary or between two, is kept with the state that step left,
        copied before the next step overwrites it in place (the saves are held back here until the
        prefill is done, so that only a copy taken at the step's end can hold that state). Steps
        are drawn, or all of one budget that is no multiple of the chunk (vLLM's
        max_num_batched_tokens as it comes). The same prompt again resumes at the last step end
        before its last token, a prompt leaving it early at the last step end it passes, and every
        byte loaded is the step's; the request's blocks stay until every save of it is done."""
        cases = repeats = earlier = inside = 0
        for case in range(6):
            model = self.model_where(lambda m: m.mamba and not m.window)
            with self.subTest(case=case, model=model.describe()):
                manager = self.manager(model)
                scheduler, worker = self.pair(model, os.path.join(self.dir.name, f"steps-{case}"))
                chunk = scheduler._settings.chunk_tokens
                # Three requests' blocks at once at most (A until it is saved, then R and a C).
                n = self.rng.randrange(2 * chunk + 1, min(8 * chunk, NUM_BLOCKS * model.bs // 3))
                prompt = [self.rng.randrange(150000) for _ in range(n)]
                truth = self.kv_truth(model, n)
                gate = threading.Event()
                self.held.append(gate)
                for _ in range(2):  # both save threads
                    worker._io.submit(gate.wait)
                # No more step-end saves than this wait at once (their state copies are GPU memory
                # outside vLLM's budget): each newer step end takes the place of the oldest waiting,
                # so the last ones are kept.
                worker._MAX_STEP_COPIES = cap = self.rng.choice((1, 2, 4))
                states: dict[int, dict] = {}
                budget = chunk + self.rng.randrange(1, chunk) if case % 2 else None
                a, planned = self.chunked_prefill(model, manager, scheduler, worker, "A", prompt, truth, states,
                                                  sizes=[budget] * n if budget else None)
                self.assertEqual(worker._step_copies, min(cap, len(planned)))
                futures = [f for _, f in worker._pending_saves["A"]]
                self.assertEqual([f.cancelled() for f in futures],
                                 [i < len(planned) - cap for i in range(len(planned))])
                planned = planned[len(planned) - cap:] if len(planned) > cap else planned
                gate.set()
                self.finish(model, manager, scheduler, worker, a)
                manager.free(a)
                self.assertEqual(worker._step_copies, 0)
                if not planned:
                    continue  # one step held the whole prompt: nothing inside it to keep
                hit, ids = self.load(model, manager, scheduler, worker, "R", prompt)
                self.assertEqual(hit, planned[-1])
                self.assert_loaded(model, {**truth, **states[hit]}, ids, hit)
                repeats += 1
                inside += hit % chunk != 0
                # A prompt leaving it at a drawn token, and (with a budget) right after the first
                # step's end, which lies inside a chunk.
                cuts = [self.rng.randrange(chunk, n)] + ([planned[0]] if budget else [])
                for i, cut in enumerate(cuts):
                    want = max([e for e in planned if e <= cut], default=0)
                    hit, ids = self.load(model, manager, scheduler, worker, f"C{i}", prompt[:cut] + [9] * 5)
                    self.assertEqual(hit, want)
                    if hit:
                        self.assert_loaded(model, {**truth, **states[hit]}, ids, hit)
                        earlier += 1
                        inside += hit % chunk != 0
                    manager.free(self.loaded)
                cases += 1
        print(f"hybrid step-end states: {cases} models, {repeats} prompts again resumed at a step end, "
              f"{earlier} earlier exits loaded, {inside} loads at an end inside a chunk")
        self.assertGreater(repeats, 0)
        self.assertGreater(inside, 0)

    def test_a_window_models_step_end_saves_never_read_blocks_vllm_let_go_of(self):
        """A model with sliding-window layers computed in steps, saves slower than the steps (some
        superseded by newer step ends or skipped: too many in flight): vLLM lets go of the window's blocks as it moves on and hands
        them to others, who write them (noise here) before the next forward pass. A step-end save
        reads none of those (the blocks before its own window are not kept, the others are copied
        at the step's end), so whatever step end a prompt finds loads the step's own KV (and
        state) byte for byte; the same prompt again resumes at the last step end before its last
        token. No step waits for a save."""
        cases = ends = kept = 0
        for case in range(5):
            model = self.model_where(lambda m: m.window)
            with self.subTest(case=case, model=model.describe()):
                manager = self.manager(model)
                scheduler, worker = self.pair(model, os.path.join(self.dir.name, f"window-steps-{case}"))
                chunk = scheduler._settings.chunk_tokens
                n = self.rng.randrange(2 * chunk + 1, min(8 * chunk, NUM_BLOCKS * model.bs // 3))
                prompt = [self.rng.randrange(150000) for _ in range(n)]
                truth = self.kv_truth(model, n, ("full", "window"))
                real, delay = worker._engine, self.rng.choice((0.0, 0.005, 0.02))

                class SlowDrive:
                    def __getattr__(self, name):
                        return getattr(real, name)

                    def save_paged(self, *args, **kwargs):
                        time.sleep(delay)
                        return real.save_paged(*args, **kwargs)

                worker._engine = SlowDrive()
                # Few saves in flight: step ends skipped, and the saves after them find nothing of
                # the window before their own stored.
                worker._MAX_STEP_COPIES = self.rng.choice((1, 2, 4))
                submitted, submit = [], worker._submit_saves

                def recorded(plans, states, submit=submit, submitted=submitted):
                    submit(plans, states)
                    if plans and plans[0].at_step_end:
                        submitted.extend(worker._pending_saves["A"][-len(plans):])

                worker._submit_saves = recorded
                states: dict[int, dict] = {}
                budget = self.rng.choice((None, chunk + self.rng.randrange(1, chunk),
                                          self.rng.randrange(chunk // 4 + 1, chunk)))
                a, planned = self.chunked_prefill(model, manager, scheduler, worker, "A", prompt, truth, states,
                                                  sizes=[budget] * n if budget else None)
                # The request finishes: vLLM lets go of the window's blocks before its last window
                # first (handed on, written in the next step), then holds the others for the save.
                before = manager.get_block_ids("A")
                manager.remove_skipped_blocks("A", n, num_prompt_tokens=n)
                ids = manager.get_block_ids_for_computed_tokens("A", n)
                g = model.group_of("window")
                let_go = [b for b, now in zip(before[g], ids[g]) if b != 0 and now == 0]
                self.assertTrue(scheduler.request_finished_all_groups(a, ids)[0])
                self.assert_reported_saved(scheduler, worker, "A",
                                           prepare=lambda: [model.fill_block(b, self.gen) for b in let_go])
                # The step ends whose saves ran: those neither skipped nor superseded (too many in
                # flight); the newest one kept is never the one dropped.
                saved = [tokens for tokens, f in submitted if not f.cancelled()]
                if submitted:
                    self.assertFalse(submitted[-1][1].cancelled(), "the newest step end was dropped")
                manager.free(a)
                worker._engine = real
                if saved:
                    # The last step end saved, or (without Mamba layers) a later chunk boundary
                    # whose window the finish kept.
                    hit, ids = self.load(model, manager, scheduler, worker, "R", prompt)
                    if model.mamba:
                        self.assertEqual(hit, saved[-1])
                    else:
                        self.assertGreaterEqual(hit, saved[-1])
                    self.assert_loaded(model, {**truth, **states.get(hit, {})}, ids, hit)
                    manager.free(self.loaded)
                # Every step end, and every chunk boundary (a model without Mamba layers resumes at
                # any whose window records are held: records a save wrote from blocks vLLM had let
                # go of would be read there).
                for end in planned + list(range(chunk, n, chunk)):
                    hit, ids = self.load(model, manager, scheduler, worker, "C", prompt[:end] + [9] * 5)
                    self.assertLessEqual(hit, end)
                    if end in saved:
                        self.assertEqual(hit, end, "a step end saved and not found")
                    if model.mamba:
                        self.assertIn(hit, [0] + saved, "a state where no step end was saved")
                    if hit:
                        self.assert_loaded(model, {**truth, **states.get(hit, {})}, ids, hit)
                    manager.free(self.loaded)
                    ends += end in saved
                    kept += end in saved and hit == end
                cases += 1
        print(f"window-model step ends: {cases} models, {ends} saved step ends asked for, {kept} found where they "
              "ended")
        self.assertGreater(kept, 0)

    def test_a_streaming_sessions_next_input_lets_no_step_save_read_the_window_blocks_it_hands_on(self):
        """A streaming-input session (resumable) that stops right after its prefill keeps its
        blocks and goes back to waiting; its next input is scheduled as a new request, and that
        scheduling lets go of the window's blocks, written anew in that step: the save of the
        second step end, slow, runs after that and still keeps the window it had (its copy)."""
        model = self.model_where(lambda m: m.window and m.window <= 2 * m.bs)
        manager = self.manager(model)
        scheduler, worker = self.pair(model, os.path.join(self.dir.name, "session"))
        chunk = scheduler._settings.chunk_tokens
        last = model.window + 3 * model.bs
        n = 2 * chunk + last
        prompt = [self.rng.randrange(150000) for _ in range(n)]
        extra = [self.rng.randrange(150000) for _ in range(2 * model.bs)]
        truth = self.kv_truth(model, n + len(extra), ("full", "window"))
        real = worker._engine

        class SlowDrive:
            def __getattr__(self, name):
                return getattr(real, name)

            def save_paged(self, tokens, *args, **kwargs):
                if len(tokens) == 2 * chunk:
                    time.sleep(0.5)  # past the next input's step, where its blocks are written
                return real.save_paged(tokens, *args, **kwargs)

        worker._engine = SlowDrive()
        a, planned = self.chunked_prefill(model, manager, scheduler, worker, "A", prompt, truth, {},
                                          sizes=[chunk, chunk, last])
        self.assertEqual(planned, [chunk, 2 * chunk])
        # The next input arrives (vLLM 0.26's _update_request_as_session): waiting, blocks kept.
        a.prompt_token_ids.extend(extra)
        a._all_token_ids.extend(extra)
        a.num_prompt_tokens = len(a.prompt_token_ids)
        a.status = RequestStatus.WAITING
        g = model.group_of("window")
        before = manager.get_block_ids("A")
        self.assertIsNotNone(manager.allocate_slots(a, len(extra)))
        let_go = [b for b, now in zip(before[g], manager.get_block_ids("A")[g]) if b != 0 and now == 0]
        self.assertTrue(let_go)
        so = dataclasses.replace(SchedulerOutput.make_empty(), num_scheduled_tokens={"A": len(extra)},
                                 total_num_scheduled_tokens=len(extra))
        so.scheduled_new_reqs = [NewRequestData.from_request(a, manager.get_block_ids("A"))]

        def hand_on():
            for b in let_go:
                model.fill_block(b, self.gen)

        self.step(scheduler, worker, so=so, prepare=hand_on, forward=lambda: None)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(f.done() for _, f in worker._pending_saves["A"]):
            time.sleep(0.01)
        worker._engine = real
        # The second step end's save ran after the blocks were written, from its copy: kept, and
        # never stored from what others wrote.
        self.assertFalse(any(f.cancelled() for _, f in worker._pending_saves["A"]))
        hit, ids = self.load(model, manager, scheduler, worker, "C", prompt[:2 * chunk] + [9] * 5)
        self.assertEqual(hit, 2 * chunk)
        self.assert_loaded(model, truth, ids, hit)

    def test_step_saves_dropped_behind_other_saves_neither_stall_the_step_nor_hold_their_copies(self):
        """Step-end saves queued behind other requests' long saves: no step waits for them while
        the window moves on (they keep copies), and when their blocks go (a preemption) they are
        dropped at once (no wait for the saves queued before them), and what they hold (copies of
        states and windows: GPU memory) goes with them, so no more than the cap of copies is ever
        held."""
        model = self.model_where(lambda m: m.window and m.mamba)
        manager = self.manager(model)
        scheduler, worker = self.pair(model, os.path.join(self.dir.name, "queued"))
        chunk = scheduler._settings.chunk_tokens
        n = min(6 * chunk, NUM_BLOCKS * model.bs // 3)
        prompt = [self.rng.randrange(150000) for _ in range(n)]
        truth = self.kv_truth(model, n, ("full", "window"))
        gate = threading.Event()
        self.held.append(gate)
        for _ in range(2):  # both save threads in other requests' saves, say two long finishes
            worker._io.submit(gate.wait, 30)
        took, handle = [], worker.handle_preemptions

        def timed(meta):
            started = time.monotonic()
            handle(meta)
            took.append(time.monotonic() - started)

        worker.handle_preemptions = timed
        a, _ = self.chunked_prefill(model, manager, scheduler, worker, "A", prompt, truth, {}, sizes=[model.bs] * n)
        # None dropped as the window moved: those waiting past the cap gave way to newer step ends.
        pending = [f for _, f in worker._pending_saves["A"]]
        kept = [f for f in pending if not f.cancelled()]
        self.assertEqual(len(kept), min(worker._MAX_STEP_COPIES, len(pending)))
        self.assertFalse(pending[-1].cancelled(), "the newest step end was dropped")
        self.assertLess(max(took), 5.0, "a step waited for a save as the window moved")
        manager.free(a)
        self.step(scheduler, worker, so=dataclasses.replace(SchedulerOutput.make_empty(), preempted_req_ids={"A"}),
                  forward=lambda: None)
        queue, queued = worker._io._work_queue, []  # the pool's own queue: what it still holds
        while not queue.empty():
            queued.append(queue.get_nowait())
        for w in queued:
            queue.put(w)
        holding = [w for w in queued if w is not None and w.fn == worker._save and w.args[2].copies is not None]
        dropped = [f for f in kept if f.cancelled()]
        gate.set()
        self.assertTrue(kept, "no step-end save was queued")
        self.assertEqual(dropped, kept, "the preemption left step-end saves queued")
        self.assertLess(max(took), 5.0, "a step waited for saves queued before the ones it dropped")
        self.assertLessEqual(len(holding), worker._MAX_STEP_COPIES, "dropped saves still hold their copies")
        self.assertTrue(all(w.args[2].copies is None for w in queued if w is not None and w.future.cancelled()))

    def test_step_end_copies_that_cannot_be_made_skip_their_saves_and_give_their_room_back(self):
        """A step-end save's copies are GPU memory outside vLLM's budget: where they cannot be made
        (out of memory), the step goes on, those step ends are not kept (a later miss) and their
        room among the copies in flight is given back; the next steps' ends are kept again."""
        model = self.model_where(lambda m: m.window and m.mamba)
        manager = self.manager(model)
        scheduler, worker = self.pair(model, os.path.join(self.dir.name, "no-room"))
        chunk = scheduler._settings.chunk_tokens
        n = 4 * chunk
        prompt = [self.rng.randrange(150000) for _ in range(n)]
        truth = self.kv_truth(model, n, ("full", "window"))
        real, failed = worker._window_copies, []

        def first_fails(pick):
            if not failed:
                failed.append(pick)
                raise torch.OutOfMemoryError("CUDA out of memory (a test's)")
            return real(pick)

        worker._window_copies = first_fails
        states: dict[int, dict] = {}
        a, planned = self.chunked_prefill(model, manager, scheduler, worker, "A", prompt, truth, states,
                                          sizes=[chunk] * 4)
        self.assertEqual(planned, [chunk, 2 * chunk, 3 * chunk])
        self.assertEqual(len(failed), 1)
        # The first step end's copies failed: not kept; the next ones were.
        self.assertEqual([tokens for tokens, _ in worker._pending_saves["A"]], [2 * chunk, 3 * chunk])
        manager.remove_skipped_blocks("A", n, num_prompt_tokens=n)
        self.assertTrue(scheduler.request_finished_all_groups(a, manager.get_block_ids_for_computed_tokens("A", n))[0])
        self.assert_reported_saved(scheduler, worker, "A")
        manager.free(a)
        self.assertEqual(worker._step_copies, 0, "room of the copies that failed not given back")
        self.assertEqual(worker._step_copy_bytes, 0, "bytes of the copies that failed not given back")
        for cut, want in ((chunk + 5, 0), (2 * chunk + 5, 2 * chunk)):
            hit, ids = self.load(model, manager, scheduler, worker, f"C{cut}", prompt[:cut] + [9] * 5)
            self.assertEqual(hit, want)
            if hit:
                self.assert_loaded(model, {**truth, **states[hit]}, ids, hit)
            manager.free(self.loaded)

    def test_step_end_copies_stay_within_kvtier_step_copy_bytes(self):
        """The GPU memory step-end saves hold in copies never passes kvtier.step_copy_bytes: a
        recurrent hybrid's step ends (each a copy of every state) beyond what it holds give way,
        the oldest not begun first, so the last ones are kept and a prompt again resumes at the last
        step end; window models' copies (of every window block kept) are counted at their true
        size; a budget no step end's copies fit keeps none, said once, and the save ends still
        serve the prompt's next turn."""
        for case in range(6):
            model = self.model_where((lambda m: m.mamba and not m.window) if case < 3 else (lambda m: m.window))
            with self.subTest(case=case, model=model.describe()):
                trace = os.path.join(self.dir.name, f"copy-bytes-{case}.trace")
                scheduler, worker = self.pair(model, os.path.join(self.dir.name, f"copy-bytes-{case}"),
                                              **{"kvtier.trace": trace})
                manager = self.manager(model)
                chunk = scheduler._settings.chunk_tokens
                n = self.rng.randrange(3 * chunk + 1, min(8 * chunk, NUM_BLOCKS * model.bs // 3))
                prompt = [self.rng.randrange(150000) for _ in range(n)]
                truth = self.kv_truth(model, n, ("full", "window") if model.window else ("full",))
                gate = threading.Event()
                self.held.append(gate)
                for _ in range(2):  # both save threads busy: every step-end save waits
                    worker._io.submit(gate.wait, 30)
                worker._MAX_STEP_COPIES = 64  # the bytes bind, not the count
                held, copies, reserve, submit = [], [], worker._reserve, worker._submit_saves

                def reserved(size, reserve=reserve, worker=worker, held=held):
                    took = reserve(size)
                    held.append(worker._step_copy_bytes)
                    return took

                def submitted(plans, made, submit=submit, copies=copies):
                    copies.extend(c for c in made if c is not None)
                    submit(plans, made)

                worker._reserve, worker._submit_saves = reserved, submitted
                states: dict[int, dict] = {}
                if case < 3:
                    k = self.rng.randrange(1, 4)
                    worker._settings.step_copy_bytes = limit = k * worker._state_bytes + self.rng.randrange(
                        worker._state_bytes)
                elif case == 5:
                    worker._settings.step_copy_bytes = limit = worker._state_bytes  # no window fits
                else:
                    # At least one step end's copies fit: the window's blocks, at most those the
                    # window's last tokens span, in every window layer.
                    one_end = worker._state_bytes + (model.window // model.bs + 2) * len(
                        model.names["window"]) * model.page
                    limit = worker._settings.step_copy_bytes = self.rng.randrange(one_end, 4 * one_end + 4 * 2**20)
                logs = _Records()
                logging.getLogger("kvtier.vllm").addHandler(logs)
                try:
                    a, planned = self.chunked_prefill(model, manager, scheduler, worker, "A", prompt, truth, states,
                                                      sizes=[chunk] * n)
                finally:
                    logging.getLogger("kvtier.vllm").removeHandler(logs)
                self.assertTrue(held or case == 5, "no step end asked for room")
                self.assertLessEqual(max(held, default=0), limit, "copies in flight past kvtier.step_copy_bytes")
                for c in copies:  # what a copy is counted at is what it takes
                    self.assertEqual(c.nbytes, sum(t.numel() * t.element_size() for t in c.states) + sum(
                        t.numel() * t.element_size() for t, _ in c.windows.values()))
                pending = [(tokens, f) for tokens, f in worker._pending_saves.get("A", [])]
                kept = [tokens for tokens, f in pending if not f.cancelled()]
                warned = [r for r in logs.records if r.levelname == "WARNING" and "step_copy_bytes" in r.getMessage()]
                # Every step end not kept is in the trace, with why (no line yet: none dropped, none saved).
                lines = open(trace).read().splitlines() if os.path.exists(trace) else []
                dropped = [e for e in map(json.loads, lines) if e["event"] == "step-save-dropped"]
                self.assertEqual(sorted(e["tokens"] for e in dropped if e["reason"] == "superseded"),
                                 [tokens for tokens, f in pending if f.cancelled()])
                self.assertEqual(len(dropped), len(planned) - len(kept))
                if case < 3:
                    self.assertEqual(kept, planned[-k:], "the newest step ends the budget holds were not kept")
                    self.assertEqual(worker._step_copy_bytes, len(kept) * worker._state_bytes)
                if case == 5:
                    self.assertEqual(kept, [])
                    self.assertEqual(len(warned), 1, "a budget no copy fits is said once")
                else:
                    self.assertEqual(warned, [])
                    self.assertTrue(kept and kept[-1] == planned[-1], "the last step end was not kept")
                gate.set()
                if model.window:  # vLLM lets go of the window's blocks before its last window first
                    manager.remove_skipped_blocks("A", n, num_prompt_tokens=n)
                    ids = manager.get_block_ids_for_computed_tokens("A", n)
                    self.assertTrue(scheduler.request_finished_all_groups(a, ids)[0])
                    self.assert_reported_saved(scheduler, worker, "A")
                else:
                    self.finish(model, manager, scheduler, worker, a)
                manager.free(a)
                self.assertEqual((worker._step_copies, worker._step_copy_bytes), (0, 0))
                hit, ids = self.load(model, manager, scheduler, worker, "R", prompt)
                if case < 3:
                    self.assertEqual(hit, planned[-1])
                if hit:
                    self.assert_loaded(model, {**truth, **states.get(hit, {})}, ids, hit)
                manager.free(self.loaded)

    def test_a_newer_step_end_that_would_not_fit_leaves_the_older_ones_be(self):
        """Under kvtier.step_copy_bytes a request's older step ends give way to a newer one only
        where that makes room for it: with another request holding most of the budget and the
        newer copies larger (a window filling), cancelling the older one would not let the newer
        in, so the older one stays and the request keeps a step end."""
        for case in range(3):
            model = self.model_where(lambda m: m.window >= 2 * m.bs)
            with self.subTest(case=case, model=model.describe()):
                bs = model.bs
                manager = self.manager(model)
                scheduler, worker = self.pair(model, os.path.join(self.dir.name, f"no-room-{case}"))
                gate = threading.Event()
                self.held.append(gate)
                for _ in range(2):  # both save threads busy: every step-end save waits
                    worker._io.submit(gate.wait, 30)
                worker._MAX_STEP_COPIES = 64  # the bytes bind, not the count
                sizes, reserve = [], worker._reserve

                def reserved(size, reserve=reserve, sizes=sizes):
                    sizes.append(size)
                    return reserve(size)

                worker._reserve = reserved

                def prefill(rid, n, steps):
                    del sizes[:]
                    prompt = [self.rng.randrange(150000) for _ in range(n)]
                    truth = self.kv_truth(model, n, ("full", "window"))
                    self.chunked_prefill(model, manager, scheduler, worker, rid, prompt, truth, {}, sizes=steps)
                    return list(sizes)

                # B: one step end, its window full, waiting with its copies.
                (b,) = prefill("B", 4 * bs + 5, [4 * bs, 5])  # every step given: no drawn step end between
                # A's two step ends, one window block and then more: the second's copies larger.
                worker._settings.step_copy_bytes = 10**12
                first, second = prefill("A", 3 * bs + 5, [bs, 2 * bs, 5])
                self.assertGreater(second, first)
                for _, f in worker._pending_saves["A"]:
                    f.cancel()
                # B's and the first fit; B's and the second do not, with or without the first.
                worker._settings.step_copy_bytes = b + second - 1
                prefill("C", 3 * bs + 5, [bs, 2 * bs, 5])
                self.assertEqual([(tokens, f.cancelled()) for tokens, f in worker._pending_saves["C"]],
                                 [(bs, False)], "the older step end was cancelled for one that did not fit")
                self.assertLessEqual(worker._step_copy_bytes, worker._settings.step_copy_bytes)
                gate.set()

    def test_step_ends_give_way_only_before_their_save_begins_and_then_never_run(self):
        """Which of a request's waiting step ends give way to a newer one is chosen, and their room
        given back, under the lock a save takes to begin: one a thread has begun never gives way
        (a newer end that needs it then is not kept, and the older ones are left be), and one that
        gave way never runs, even where a thread took it off the queue before its cancel."""
        model = self.model_where(lambda m: m.mamba and not m.window)
        trace = os.path.join(self.dir.name, "give-way.trace")
        scheduler, worker = self.pair(model, os.path.join(self.dir.name, "give-way"), **{"kvtier.trace": trace})
        worker._MAX_STEP_COPIES, size = 2, self.rng.randrange(1, 1 << 20)
        worker._settings.step_copy_bytes = 3 * size  # the newer end needs both older ones gone
        copies = [vllm_connector._StepCopies([], {}, size) for _ in range(2)]
        helds = [vllm_connector._Held(c) for c in copies]
        futures = [Future(), Future()]
        for h, f in zip(helds, futures):
            f.add_done_callback(functools.partial(worker._copy_released, h))
        with worker._mu:
            worker._step_copies, worker._step_copy_bytes = 2, 2 * size
            worker._step_saves["A"] = [(10, helds[0], futures[0]), (20, helds[1], futures[1])]

        def dropped():
            lines = open(trace).read().splitlines() if os.path.exists(trace) else []
            return [(e["tokens"], e["reason"]) for e in map(json.loads, lines) if e["event"] == "step-save-dropped"]

        helds[1].begun = True  # a save thread has begun the newer of the two
        self.assertFalse(worker._make_room("A", 3 * size))
        self.assertEqual([(h.dropped, f.cancelled()) for h, f in zip(helds, futures)], [(False, False)] * 2)
        self.assertEqual((worker._step_copies, worker._step_copy_bytes), (2, 2 * size))
        self.assertEqual(dropped(), [])
        helds[1].begun = False
        self.assertTrue(futures[1].set_running_or_notify_cancel())  # a thread took it off the queue: no cancel
        self.assertTrue(worker._make_room("A", 3 * size))
        self.assertEqual([h.dropped for h in helds], [True, True])
        self.assertEqual((worker._step_copies, worker._step_copy_bytes), (1, 3 * size))
        self.assertEqual(dropped(), [(10, "superseded"), (20, "superseded")])
        ran = []
        worker._save_from = lambda *args: ran.append(args)
        worker._save(vllm_connector.SavePlan("A", [1] * 20, [], at_step_end=True), None, helds[1])
        futures[1].set_result(None)
        self.assertEqual(ran, [], "a step end that gave way was saved")
        self.assertEqual((worker._step_copies, worker._step_copy_bytes), (1, 3 * size), "room given back twice")

    def test_a_preempted_requests_step_saves_end_before_its_blocks_can_be_written_again(self):
        """vLLM takes a preempted request's blocks back at once and may hand them to another in the
        same step, whose new blocks its runner zeroes before the connector's start_load_kv: the
        step-end saves still reading them end when vLLM tells the connector of the preemption
        (handle_preemptions), before that; those not begun are dropped (a later miss). The request
        then finishes with nothing left to save (its computed tokens gone), and its blocks are still
        held until its saves are reported."""
        model = self.model_where(lambda m: m.mamba and not m.window)
        manager = self.manager(model)
        trace = os.path.join(self.dir.name, "preempted.trace")
        scheduler, worker = self.pair(model, os.path.join(self.dir.name, "preempted"), **{"kvtier.trace": trace})
        chunk = scheduler._settings.chunk_tokens
        n = min(2 * chunk + self.rng.randrange(1, chunk), NUM_BLOCKS * model.bs // 3)
        prompt = [self.rng.randrange(150000) for _ in range(n)]
        truth = self.kv_truth(model, n)
        # One save thread busy elsewhere, the other in the first step's save on a drive that takes
        # until `release`: the second step's save has not begun when A is preempted.
        gate, release, real = threading.Event(), threading.Event(), worker._engine
        self.held += [gate, release]

        class SlowDrive:
            def __getattr__(self, name):
                return getattr(real, name)

            def save_paged(self, *args, **kwargs):
                release.wait()
                return real.save_paged(*args, **kwargs)

        worker._engine = SlowDrive()
        worker._io.submit(gate.wait)
        states: dict[int, dict] = {}
        a, planned = self.chunked_prefill(model, manager, scheduler, worker, "A", prompt, truth, states,
                                          sizes=[chunk, chunk, n - 2 * chunk])
        self.assertEqual(planned, [chunk, 2 * chunk])
        pending = [f for _, f in worker._pending_saves["A"]]
        self.assertEqual(len(pending), 2)
        self.assertFalse(any(f.done() for f in pending))
        held = set(manager.get_block_ids("A")[model.group_of("full")])
        manager.free(a)  # preempted: its blocks go back to vLLM's pool, its computed tokens are lost
        a.num_computed_tokens = 0
        # Another request takes them in the same step; the runner zeroes them before loads.
        other = Request("S", [1] * (NUM_BLOCKS * model.bs // 2), SamplingParams(max_tokens=8), None)
        self.assertIsNotNone(manager.allocate_slots(other, NUM_BLOCKS * model.bs // 2))
        taken = held & set(manager.get_block_ids("S")[model.group_of("full")])
        self.assertTrue(taken)

        def zero_new_blocks():
            self.assertTrue(all(f.done() for f in pending), "the runner zeroed blocks a save still reads")
            for b in taken:
                for v in model.block_views(b):
                    v.zero_()

        so = dataclasses.replace(SchedulerOutput.make_empty(), preempted_req_ids={"A"})
        threading.Timer(0.3, release.set).start()
        started = time.perf_counter()
        self.step(scheduler, worker, so=so, prepare=zero_new_blocks, forward=lambda: None)
        self.assertGreaterEqual(time.perf_counter() - started, 0.25, "the running save was not waited for")
        self.assertTrue(pending[1].cancelled(), "a save not begun is dropped, not waited for")
        dropped = [(e["tokens"], e["reason"]) for e in map(json.loads, open(trace).read().splitlines())
                   if e["event"] == "step-save-dropped"]
        self.assertEqual(dropped, [(2 * chunk, "preempted")], "kvtier.trace says which step end the preemption dropped")
        gate.set()
        worker._engine = real
        manager.free(other)
        delay, _ = scheduler.request_finished_all_groups(a, tuple([] for _ in model.kinds))
        self.assertTrue(delay, "finished with step-end saves behind it: its blocks wait for them")
        self.assert_reported_saved(scheduler, worker, "A")
        hit, ids = self.load(model, manager, scheduler, worker, "R", prompt)
        self.assertEqual(hit, chunk)
        self.assert_loaded(model, {**truth, **states[hit]}, ids, hit)

    def test_step_saves_off_keeps_state_and_window_at_save_ends_only(self):
        """kvtier.step_saves false: a chunked prefill plans no step-end save (no state copy, and a
        window model's steps never wait for one); the finish save alone keeps the state, so the
        prompt again misses while the conversation's next turn resumes at the finish save's end."""
        for case in range(4):
            window = case == 3
            model = self.model_where(lambda m: m.window if window else m.mamba and not m.window)
            with self.subTest(case=case, model=model.describe()):
                manager = self.manager(model)
                scheduler, worker = self.pair(model, os.path.join(self.dir.name, f"off-{case}"),
                                              **{"kvtier.step_saves": self.rng.choice((False, "false", "0"))})
                chunk = scheduler._settings.chunk_tokens
                n = self.rng.randrange(2 * chunk + 1, min(6 * chunk, NUM_BLOCKS * model.bs // 3))
                prompt = [self.rng.randrange(150000) for _ in range(n)]
                truth = self.kv_truth(model, n, ("full", "window") if window else ("full",))
                states: dict[int, dict] = {}
                a, ends = self.chunked_prefill(model, manager, scheduler, worker, "A", prompt, truth, states,
                                               sizes=[chunk + 1] * n)
                self.assertGreater(len(ends), 0)  # step ends inside the prompt, none of them kept:
                self.assertEqual(scheduler._step_saved, set())
                self.assertEqual(worker._pending_saves.get("A", []), [])
                self.assertEqual(worker._step_copies, 0)
                if window:
                    continue  # its finish lets go of blocks the steps let go of before: another test's
                self.finish(model, manager, scheduler, worker, a)
                manager.free(a)
                hit, _ = self.load(model, manager, scheduler, worker, "R", prompt)
                self.assertEqual(hit, 0)
                manager.free(self.loaded)
                hit, ids = self.load(model, manager, scheduler, worker, "N", prompt + [7] * 3)
                self.assertEqual(hit, n)
                self.assert_loaded(model, {**truth, **states[n]}, ids, hit)
                manager.free(self.loaded)
        with self.assertRaisesRegex(ValueError, "kvtier.step_saves .* is true or false"):
            self.pair(Model(self.rng), os.path.join(self.dir.name, "bad"), **{"kvtier.step_saves": "sometimes"})
        for bad in ("1 G", "-1", "lots"):
            with self.assertRaisesRegex(ValueError, "kvtier.step_copy_bytes: .*size"):
                self.pair(Model(self.rng), os.path.join(self.dir.name, "bad"), **{"kvtier.step_copy_bytes": bad})
        _, worker = self.pair(Model(self.rng), os.path.join(self.dir.name, "sized"), **{"kvtier.step_copy_bytes": "1.5G"})
        self.assertEqual(worker._settings.step_copy_bytes, 3 << 29)

    def test_a_failed_load_of_a_hybrid_model_stops_rather_than_serves(self):
        rng = self.rng
        while True:
            model = Model(rng)
            if model.mamba:
                break
        manager = self.manager(model)
        scheduler, worker = self.pair(model, os.path.join(self.dir.name, "store"))
        tokens = [rng.randrange(150000) for _ in range(3 * model.bs)]
        a, _ = self.prefill(model, manager, "A", tokens)
        self.finish(model, manager, scheduler, worker, a)
        b = Request("B", tokens + [1], SamplingParams(max_tokens=8), None)
        hit, _ = scheduler.get_num_new_matched_tokens(b, 0)
        self.assertEqual(hit, len(tokens))
        # The state's record is damaged after the lookup found it: the load must not go on.
        states = [p for p in glob.glob(os.path.join(self.dir.name, "store", "**", "seg-*.kvt"), recursive=True)
                  if os.sep + "s0of1" + os.sep in p]
        self.assertTrue(states)
        for seg in states:  # the store's one record lies past the segment's 4 KiB header
            with open(seg, "r+b") as f:
                f.seek(4096)
                f.write(b"\xff" * (os.path.getsize(seg) - 4096))
        self.assertIsNotNone(manager.allocate_slots(b, 1, num_external_computed_tokens=hit))
        scheduler.update_state_after_alloc(b, manager.get_blocks("B"), hit)
        with self.assertRaisesRegex(RuntimeError, "cannot recompute a hybrid model's failed load"):
            self.step(scheduler, worker)

    def test_what_kvtier_cannot_keep_is_refused(self):
        rng = self.rng
        model = Model(rng)
        root = os.path.join(self.dir.name, "refused")
        with self.assertRaisesRegex(ValueError, "store_format 2"):
            self.pair(model, root, **{"kvtier.store_format": 1})
        with self.assertRaisesRegex(ValueError, "async_load"):
            self.pair(model, root, **{"kvtier.async_load": True})
        config = cpu_config("KvtierHybridConnector", {"kvtier.root": root, "kvtier.store_format": 2})
        full = FullAttentionSpec(block_size=16, num_kv_heads=HEADS, head_size=DIM, dtype=torch.bfloat16)

        def refused(specs, why):
            groups = [KVCacheGroupSpec([f"model.layers.{i}.attn"], s) for i, s in enumerate(specs)]
            with self.subTest(why=why), self.assertRaisesRegex(ValueError, why):
                KVConnectorFactory.create_connector(config, KVConnectorRole.SCHEDULER,
                                                    KVCacheConfig(num_blocks=8, kv_cache_tensors=[],
                                                                  kv_cache_groups=groups))

        def window(w, bs=16):
            return SlidingWindowSpec(block_size=bs, num_kv_heads=HEADS, head_size=DIM, dtype=torch.bfloat16,
                                     sliding_window=w)

        def mamba(mode):
            return MambaSpec(block_size=16, shapes=MAMBA_SHAPES, dtypes=(torch.bfloat16, torch.float32),
                             mamba_cache_mode=mode)
        refused([window(32)], "no full-attention layer")
        refused([full, window(32), window(64)], "one window size")
        refused([full, window(32, bs=32)], "block sizes")
        for mode in ("all", "align"):
            refused([full, mamba(mode)], "no-enable-prefix-caching")


@unittest.skipIf(VLLM is not None, f"vllm is not importable: {VLLM}")
@unittest.skipIf(VLLM is None and LAYOUT_026, "this vLLM lays hybrid KV caches out as 0.26 does (tested above)")
class HybridOfANewerVllmTest(unittest.TestCase):
    def test_a_hybrid_model_in_a_layout_other_than_026s_is_refused(self):
        from vllm.v1.kv_cache_interface import KVCacheTensor as Tensor
        full = FullAttentionSpec(block_size=16, num_kv_heads=HEADS, head_size=DIM, dtype=torch.bfloat16)
        window = SlidingWindowSpec(block_size=16, num_kv_heads=HEADS, head_size=DIM, dtype=torch.bfloat16,
                                   sliding_window=32)
        page = full.page_size_bytes
        tensor = Tensor(size=8 * page, layers=["model.layers.0.attn", "model.layers.1.attn"], layer_stride=0,
                        block_stride=page)
        groups = [KVCacheGroupSpec(["model.layers.0.attn"], full), KVCacheGroupSpec(["model.layers.1.attn"], window)]
        with tempfile.TemporaryDirectory() as root:
            config = cpu_config("KvtierHybridConnector", {"kvtier.root": root, "kvtier.store_format": 2})
            with self.assertRaisesRegex(ValueError, "vLLM 0.26's layout only"):
                KVConnectorFactory.create_connector(config, KVConnectorRole.SCHEDULER,
                                                    KVCacheConfig(num_blocks=8, kv_cache_tensors=[tensor],
                                                                  kv_cache_groups=groups))


@unittest.skipIf(VLLM is not None, f"vllm is not importable: {VLLM}")
class ConnectorChoiceTest(unittest.TestCase):
    def test_only_the_hybrid_connector_turns_vllms_hybrid_manager_on(self):
        # KvtierConnector leaves vLLM's hybrid KV cache manager off (sliding windows kept whole, as
        # before); KvtierHybridConnector asks for it.
        for name, hma in (("KvtierConnector", False), ("KvtierHybridConnector", True)):
            config = KVTransferConfig(kv_connector=name, kv_role="kv_both",
                                      kv_connector_module_path="kvtier.vllm_connector")
            self.assertEqual(KVConnectorFactory.supports_hma_config(config), hma, name)
        with tempfile.TemporaryDirectory() as root:
            config = cpu_config("KvtierConnector", {"kvtier.root": root, "kvtier.store_format": 2})
            full = FullAttentionSpec(block_size=16, num_kv_heads=HEADS, head_size=DIM, dtype=torch.bfloat16)
            window = SlidingWindowSpec(block_size=16, num_kv_heads=HEADS, head_size=DIM, dtype=torch.bfloat16,
                                       sliding_window=32)
            groups = [KVCacheGroupSpec(["model.layers.0.attn"], full), KVCacheGroupSpec(["model.layers.1.attn"], window)]
            with self.assertRaisesRegex(ValueError, "KvtierHybridConnector"):
                KVConnectorFactory.create_connector(config, KVConnectorRole.SCHEDULER,
                                                    KVCacheConfig(num_blocks=8, kv_cache_tensors=[],
                                                                  kv_cache_groups=groups))

    def test_the_agreeing_lookup_ends_whatever_workers_answer(self):
        """Workers answering more than they were asked, or growing, or one that stops answering:
        the scheduler's lookup ends within its timeout with no more than every worker holds."""
        import threading

        import numpy as np
        import zmq
        from kvtier.vllm_connector import LookupClient, lookup_address
        with tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR")) as root:
            answers = {0: lambda n: 100, 1: lambda n: 50}  # rank 0 says more than it is asked
            stop = threading.Event()

            def serve(rank):
                sock = zmq.Context.instance().socket(zmq.REP)
                sock.setsockopt(zmq.LINGER, 0)
                sock.bind(lookup_address(root, rank))
                while not stop.is_set():
                    if sock.poll(50):
                        n = len(sock.recv()) // 4
                        reply = answers[rank](n)
                        if reply is None:
                            continue  # stops answering
                        sock.send(int(reply).to_bytes(8, "little"))
                sock.close()
            threads = [threading.Thread(target=serve, args=(r,), daemon=True) for r in (0, 1)]
            for t in threads:
                t.start()
            client = LookupClient(root, 2, 1000)
            tokens = np.arange(200, dtype=np.int32)
            try:
                start = time.monotonic()
                self.assertEqual(client.lookup(tokens, agree=True), 50)
                answers[0] = lambda n: None  # rank 0 hangs mid-loop
                self.assertEqual(client.lookup(tokens, agree=True), 0)
                self.assertLess(time.monotonic() - start, 5)
            finally:
                stop.set()
                for t in threads:
                    t.join()
                client.close()

    def test_ranks_that_hold_different_ends_agree_on_one_every_rank_holds(self):
        """TP 2: each rank keeps its own state, so one rank may hold a session's end that another
        lost (a failed save, its own eviction). The scheduler's answer is an end every rank holds."""
        import numpy as np
        from kvtier.vllm_connector import LookupClient, LookupServer, lookup_address
        bs, short, long = 16, 40, 70
        tokens = np.arange(1000, 1000 + long + 5, dtype=np.int32)
        with tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR")) as root:
            def engine(rank):
                g = kvtier.Geometry.custom("tp-agree", layers=2, kv_heads=1, head_dim=16, chunk_tokens=32, tp_rank=rank,
                                           tp_world=2, kv_heads_total=2, layer_kinds=["full", "window"],
                                           window_tokens=20, window_chunk_tokens=bs, state_layers=1, state_bytes=64)
                return kvtier.open(root, g, io="posix", capacity="256M", store_format=2)

            def save(e, n, ends):
                layers = [torch.randn(2, 8, bs, 1, 16).to(torch.bfloat16) for _ in range(2)]
                table = np.arange(-(-n // bs), dtype=np.int32)
                for end in ends:
                    e.save_paged(tokens[:end], layers, table[: -(-end // bs)], block_size=bs,
                                 state=[torch.randint(0, 255, (64,), dtype=torch.uint8)],
                                 layer_block_tables=[table[: -(-end // bs)]] * 2)
            engines = [engine(0), engine(1)]
            save(engines[0], long, [long])   # rank 0 holds the long end (its short save was lost)
            save(engines[1], long, [short])  # rank 1 the short one (its long save was lost)
            servers = [LookupServer(e, lookup_address(root, r)) for r, e in enumerate(engines)]
            client = LookupClient(root, 2, 5000)
            try:
                self.assertEqual([e.lookup(tokens) for e in engines], [long, short])
                # The smallest answer (40) is no end of rank 0's: no end both hold, no hit.
                self.assertEqual(client.lookup(tokens, agree=True), 0)
                save(engines[0], long, [short])  # rank 0 saves the short end too
                self.assertEqual(client.lookup(tokens, agree=True), short)
                save(engines[1], long, [long])   # and rank 1 the long one
                self.assertEqual(client.lookup(tokens, agree=True), long)
            finally:
                client.close()
                for s in servers:
                    s.close()


if __name__ == "__main__":
    unittest.main()
