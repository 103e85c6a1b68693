# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""The Python package on the host: round trips through NumPy arrays (zero-copy, contiguous and
paged), lookups, misses on corruption, and errors as kvtier.Error with the status code."""
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

import kvtier


def session(rng, g, tokens):
    """Random KV in contiguous form [2, layers, tokens, kv_heads, head_dim] (bf16-sized elements)."""
    return rng.integers(0, 2**16, size=(2, g.layers, tokens, g.kv_heads, g.head_dim), dtype=np.uint16)


class EngineTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR"))
        self.g = kvtier.Geometry.preset("tiny", chunk_tokens=64)
        self.engine = kvtier.open(self.dir.name, self.g, io="posix", capacity="256M")
        self.rng = np.random.default_rng(7)

    def tearDown(self):
        del self.engine
        self.dir.cleanup()

    def test_contiguous_round_trip_lookup_and_evict(self):
        tokens = self.rng.integers(0, 150000, size=1000, dtype=np.int64)
        kv = session(self.rng, self.g, 1000)
        self.assertEqual(self.engine.save(tokens, kv), (1000 + 63) // 64)
        self.assertEqual(self.engine.lookup(tokens), 1000)
        self.assertEqual(self.engine.lookup(list(tokens[:130]) + [1, 2, 3]), 128)
        read_only = np.frombuffer(tokens.astype(np.int32).tobytes(), dtype=np.int32)
        self.assertEqual(self.engine.lookup(read_only), 1000)  # e.g. straight off a socket
        out = np.zeros_like(kv)
        ceiling = self.engine.measure_read_ceiling(tokens)
        self.assertGreaterEqual(ceiling["bytes"], kv.nbytes)  # payload plus record headers
        self.assertGreater(ceiling["seconds"], 0)
        extents = self.engine.read_extents(tokens)  # the same bytes, as file ranges
        self.assertEqual(sum(length for _, _, length in extents), ceiling["bytes"])
        for path, offset, length in extents:
            self.assertTrue(os.path.isfile(path))
            self.assertGreaterEqual(os.path.getsize(path), offset + length)
            self.assertEqual(offset % 4096, 0)
        self.engine.drop_page_cache()  # the restore then reads from the disk, not the page cache
        r = self.engine.restore(tokens, out)
        self.assertEqual(r["tokens_restored"], 1000)
        np.testing.assert_array_equal(out, kv)
        self.assertGreaterEqual(self.engine.evict(tokens), 16)
        self.assertEqual(self.engine.lookup(tokens), 0)

    def test_paged_layouts_against_numpy_indexing(self):
        tokens = self.rng.integers(0, 150000, size=500, dtype=np.int32)
        bs, blocks = 16, 40
        table = self.rng.permutation(blocks)[: (500 + bs - 1) // bs].astype(np.int32)
        shapes = {
            "kv_first": (2, blocks, bs, self.g.kv_heads, self.g.head_dim),
            "block_first": (blocks, 2, bs, self.g.kv_heads, self.g.head_dim),
            "packed_heads": (blocks, self.g.kv_heads, bs, 2 * self.g.head_dim),
            "packed_tokens": (blocks, bs, self.g.kv_heads, 2 * self.g.head_dim),
        }
        kv = session(self.rng, self.g, 500)
        for layout, shape in shapes.items():
            with self.subTest(layout=layout):
                layers = [np.zeros(shape, dtype=np.uint16) for _ in range(self.g.layers)]
                self.engine.save(tokens, kv)
                r = self.engine.restore_paged(tokens, layers, table, block_size=bs, layout=layout)
                self.assertEqual(r["tokens_restored"], 500)
                for l in range(self.g.layers):
                    for t in (0, 15, 16, 255, 499):
                        b, o = table[t // bs], t % bs
                        for kv_i in (0, 1):
                            want = kv[kv_i, l, t]
                            if layout == "kv_first":
                                got = layers[l][kv_i, b, o]
                            elif layout == "block_first":
                                got = layers[l][b, kv_i, o]
                            elif layout == "packed_tokens":
                                got = layers[l][b, o, :, kv_i * self.g.head_dim:(kv_i + 1) * self.g.head_dim]
                            else:
                                half = layers[l][b, :, o, :]
                                got = half[:, kv_i * self.g.head_dim:(kv_i + 1) * self.g.head_dim]
                            np.testing.assert_array_equal(got, want, err_msg=f"{layout} layer {l} token {t}")
                # and back: save from the paged form under other tokens, restore contiguous
                other = tokens + 1
                self.engine.save_paged(other, layers, table, block_size=bs, layout=layout)
                out = np.zeros_like(kv)
                self.assertEqual(self.engine.restore(other, out)["tokens_restored"], 500)
                np.testing.assert_array_equal(out, kv)
                self.engine.evict(tokens)
                self.engine.evict(other)

    def test_restore_paged_skips_blocks_marked_minus_one(self):
        tokens = list(range(1000, 1300))
        kv = session(self.rng, self.g, 300)
        self.engine.save(tokens, kv)
        bs, blocks = 16, 32
        table = np.arange(blocks, dtype=np.int32)[::-1][: (300 + bs - 1) // bs].copy()
        skipped = table[:4].copy()  # the serving engine holds the first 64 tokens already
        table[:4] = -1
        layers = [np.zeros((2, blocks, bs, self.g.kv_heads, self.g.head_dim), np.uint16) for _ in range(self.g.layers)]
        r = self.engine.restore_paged(tokens, layers, table, block_size=bs)
        self.assertEqual(r["tokens_restored"], 300)
        for l in range(self.g.layers):
            self.assertFalse(layers[l][:, skipped].any(), "a skipped block was written")
            for t in (64, 65, 200, 299):
                np.testing.assert_array_equal(layers[l][:, table[t // bs], t % bs], kv[:, l, t])
        with self.assertRaises(kvtier.Error) as e:  # a save needs every token
            self.engine.save_paged([5] * 300, layers, table, block_size=bs)
        self.assertIn("only a restore", e.exception.args[0])

    def test_layer_num_blocks_gives_layers_of_other_block_counts_and_is_checked(self):
        """Layers copied out of a larger cache (only the blocks a table names, the table into the
        copy) save like the cache; a count per layer, each layer's shape its count's, and the
        layers a store keeps together (all of them here) alike."""
        tokens = self.rng.integers(0, 150000, size=300, dtype=np.int32)
        kv = session(self.rng, self.g, 300)
        bs, blocks = 16, 40
        table = self.rng.permutation(blocks)[: (300 + bs - 1) // bs].astype(np.int32)
        shape = (blocks, bs, self.g.kv_heads, 2 * self.g.head_dim)
        layers = [np.zeros(shape, dtype=np.uint16) for _ in range(self.g.layers)]
        self.engine.save(tokens, kv)
        self.assertEqual(self.engine.restore_paged(tokens, layers, table, block_size=bs,
                                                   layout="packed_tokens")["tokens_restored"], 300)
        copies = [np.ascontiguousarray(layer[table]) for layer in layers]
        into = np.arange(len(table), dtype=np.int32)
        counts = [len(table)] * self.g.layers
        other = tokens + 1
        self.engine.save_paged(other, copies, into, block_size=bs, layout="packed_tokens", layer_num_blocks=counts)
        out = np.zeros_like(kv)
        self.assertEqual(self.engine.restore(other, out)["tokens_restored"], 300)
        np.testing.assert_array_equal(out, kv)
        with self.assertRaisesRegex(kvtier.InvalidArgument, "layer_num_blocks has 1 counts"):
            self.engine.save_paged(other, copies, into, block_size=bs, layout="packed_tokens", layer_num_blocks=[3])
        with self.assertRaisesRegex(kvtier.InvalidArgument, "with layer_num_blocks"):
            self.engine.save_paged(other, copies, into, block_size=bs, layout="packed_tokens",
                                   layer_num_blocks=[len(table) + 1] * self.g.layers)
        mixed = [layers[0]] + copies[1:]
        with self.assertRaisesRegex(kvtier.InvalidArgument, "kept together"):
            self.engine.save_paged(other, mixed, into, block_size=bs, layout="packed_tokens",
                                   layer_num_blocks=[blocks] + counts[1:])

    def test_custom_geometry_round_trip(self):
        g = kvtier.Geometry.custom("qwen3-random", layers=3, kv_heads=1, head_dim=32, chunk_tokens=16)
        self.assertEqual((g.model, g.layers, g.kv_heads, g.head_dim, g.tp_world), ("qwen3-random", 3, 1, 32, 1))
        self.assertEqual(g.bytes_for_tokens(10), 2 * 3 * 10 * 32 * 2)
        with tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR")) as d:
            e = kvtier.open(d, g, io="posix")
            kv = session(self.rng, g, 50)
            self.assertEqual(e.save(list(range(50)), kv), 4)
            out = np.zeros_like(kv)
            self.assertEqual(e.restore(list(range(50)), out)["tokens_restored"], 50)
            np.testing.assert_array_equal(out, kv)
            del e

    def test_a_tp_free_store_serves_a_tp_size_other_than_the_one_that_saved(self):
        heads, tokens = 4, list(range(100, 190))
        whole = self.rng.integers(0, 2**16, size=(2, 2, len(tokens), heads, 16), dtype=np.uint16)

        def rank(r, tp):
            return kvtier.Geometry.custom("tp-free", layers=2, kv_heads=heads // tp, head_dim=16,
                                          chunk_tokens=32, tp_rank=r, tp_world=tp)

        with tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR")) as d:
            for r in range(2):  # TP 2 saves, each rank its two heads
                e = kvtier.open(d, rank(r, 2), io="posix", store_format=2, tune=False)
                e.save(tokens, np.ascontiguousarray(whole[:, :, :, 2 * r:2 * r + 2]))
                del e
            one = kvtier.open(d, rank(0, 1), io="posix", store_format=2, tune=False)
            self.assertEqual(one.geometry.kv_heads_total, heads)
            out = np.zeros_like(whole)
            self.assertEqual(one.restore(tokens, out)["tokens_restored"], len(tokens))
            np.testing.assert_array_equal(out, whole)
            del one
            for r in range(4):  # TP 4: one head each
                e = kvtier.open(d, rank(r, 4), io="posix", store_format=2, tune=False)
                out = np.zeros((2, 2, len(tokens), 1, 16), dtype=np.uint16)
                self.assertEqual(e.restore(tokens, out)["tokens_restored"], len(tokens))
                np.testing.assert_array_equal(out, whole[:, :, :, r:r + 1])
                del e
            with self.assertRaisesRegex(kvtier.Error, "max_tp 6"):
                kvtier.open(d, rank(0, 1), store_format=2, max_tp=6)

    def test_coded_records_store_fewer_bytes_and_restore_exactly(self):
        g = kvtier.Geometry.custom("coded", layers=2, kv_heads=2, head_dim=128, chunk_tokens=64)
        tokens = list(range(300))
        # bf16 words of normally distributed values: their exponents cluster, so records shrink.
        kv = self.rng.normal(0, 0.5, size=(2, 2, len(tokens), 2, 128)).astype(np.float32)
        kv = (kv.view(np.uint32) >> 16).astype(np.uint16)
        with tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR")) as d:
            e = kvtier.open(d, g, io="posix", store_format=2, tune=False, compression="split16")
            self.assertEqual(e.save(tokens, kv), 10)  # 5 chunks of each of the 2 heads' groups
            self.assertLess(e.stats()["bytes_written"], kv.nbytes * 0.95)
            out = np.zeros_like(kv)
            self.assertEqual(e.restore(tokens, out)["tokens_restored"], len(tokens))
            np.testing.assert_array_equal(out, kv)
            del e
            with self.assertRaisesRegex(kvtier.Error, "store_format 2"):
                kvtier.open(d + "/f1", g, compression="split16")
            with self.assertRaisesRegex(kvtier.Error, "expected off or split16"):
                kvtier.open(d, g, store_format=2, compression="zstd")

    def test_an_mla_latent_is_stored_once_for_every_rank(self):
        def rank(r, tp):
            return kvtier.Geometry.custom("mla", layers=2, kv_heads=1, head_dim=64, chunk_tokens=32,
                                          tp_rank=r, tp_world=tp, kv_tensors=1)

        tokens = list(range(7, 107))
        latent = self.rng.integers(0, 2**16, size=(1, 2, len(tokens), 1, 64), dtype=np.uint16)
        with tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR")) as d:
            ranks = [kvtier.open(d, rank(r, 4), io="posix", store_format=2, tune=False) for r in range(4)]
            self.assertEqual(ranks[0].geometry.kv_tensors, 1)
            for e in ranks:  # every rank saves; rank 0 writes the one copy
                e.save(tokens, latent)
            for e in ranks:
                out = np.zeros_like(latent)
                self.assertEqual(e.restore(tokens, out)["tokens_restored"], len(tokens))
                np.testing.assert_array_equal(out, latent)
                self.assertEqual(e.stats()["records"], 4)
            del ranks, e
            with self.assertRaisesRegex(kvtier.Error, "TP-free stores only"):
                kvtier.open(d, rank(0, 1), io="posix")

    def test_a_hybrid_model_restores_kv_window_and_state_together(self):
        g = kvtier.Geometry.custom("hybrid", layers=3, kv_heads=2, head_dim=16, chunk_tokens=32,
                                   layer_kinds=["full", "window", "full"], window_tokens=20,
                                   state_layers=2, state_bytes=256)
        self.assertEqual((g.window_tokens, g.state_layers, g.state_bytes), (20, 2, 256))
        tokens = list(range(3, 99))  # three whole chunks
        kv = self.rng.integers(0, 2**16, size=(2, 3, len(tokens), 2, 16), dtype=np.uint16)
        state = [self.rng.integers(0, 256, size=256, dtype=np.uint8) for _ in range(2)]
        with tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR")) as d:
            e = kvtier.open(d, g, io="posix", store_format=2, tune=False)
            e.save(tokens, kv, state=state)
            self.assertEqual(e.lookup(tokens + [7, 7]), len(tokens))
            out = np.zeros_like(kv)
            got = [np.zeros(256, dtype=np.uint8) for _ in range(2)]
            self.assertEqual(e.restore(tokens, out, state=got)["tokens_restored"], len(tokens))
            np.testing.assert_array_equal(out[:, [0, 2]], kv[:, [0, 2]])
            # the window layer: the chunks from the one holding token 96 - 20 on
            np.testing.assert_array_equal(out[:, 1, 64:], kv[:, 1, 64:])
            self.assertFalse(out[:, 1, :64].any())
            for a, b in zip(got, state):
                np.testing.assert_array_equal(a, b)
            with self.assertRaisesRegex(kvtier.Error, "recurrent layers"):
                e.restore(tokens, out)
            with self.assertRaisesRegex(kvtier.Error, "state\\[1\\] holds 128 bytes"):
                e.restore(tokens, out, state=[got[0], got[1][:128]])
            del e
        with self.assertRaisesRegex(kvtier.Error, "'sliding' is not"):
            kvtier.Geometry.custom("h", layers=1, kv_heads=1, head_dim=8, layer_kinds=["sliding"])

    def test_parse_size_reads_every_settings_sizes_and_names_the_grammar_otherwise(self):
        for text, want in (("4096", 4096), ("64M", 64 << 20), ("1.5G", 3 << 29), ("2GiB", 2 << 30), ("0", 0)):
            self.assertEqual(kvtier.parse_size(text), want, text)
        for bad in ("1 G", "-1", "0x10", "1e3", "", "1.0000001K"):
            with self.assertRaisesRegex(kvtier.InvalidArgument, "size"):
                kvtier.parse_size(bad)

    def test_request_size_and_a_read_only_reader_beside_the_writer(self):
        tokens = self.rng.integers(0, 150000, size=700, dtype=np.int64)
        kv = session(self.rng, self.g, 700)
        self.engine.save(tokens, kv)
        # a small request size splits every record into several reads; the bytes still check out
        with tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR")) as d:
            e = kvtier.open(d, self.g, io="posix", request_size="8K", staging="64K")
            e.save(tokens, kv)
            out = np.zeros_like(kv)
            self.assertEqual(e.restore(tokens, out)["tokens_restored"], 700)
            np.testing.assert_array_equal(out, kv)
            del e
        with self.assertRaises(kvtier.Error):
            kvtier.open(self.dir.name, self.g, io="posix", request_size="12 parsecs")
        # a reader next to the open writer: it sees and restores what was saved, and cannot write
        reader = kvtier.open(self.dir.name, self.g, io="posix", read_only=True)
        self.assertEqual(reader.lookup(tokens), 700)
        out = np.zeros_like(kv)
        self.assertEqual(reader.restore(tokens, out)["tokens_restored"], 700)
        np.testing.assert_array_equal(out, kv)
        with self.assertRaises(kvtier.Error):
            reader.save(self.rng.integers(0, 150000, size=64, dtype=np.int64), session(self.rng, self.g, 64))
        del reader

    def test_io_settings_and_tune(self):
        # explicit settings win and are reported as such; tune() probes a drive holding data and
        # keeps what it found, which the next engine without settings uses
        with tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR")) as d:
            e = kvtier.open(d, self.g, io="posix", request_size="64K", staging="256K")
            self.assertEqual(e.io_settings()["source"], "options")
            self.assertEqual(e.io_settings()["request_bytes"], 64 << 10)
            tokens = self.rng.integers(0, 150000, size=20000, dtype=np.int64)
            kv = session(self.rng, self.g, 20000)  # 20 MB: enough for tune(), not for a probe at open
            e.save(tokens, kv)
            found = e.tune()
            self.assertEqual(len(found["drives"]), 1)
            drive = found["drives"][0]
            self.assertEqual(drive["state"], "probed")
            self.assertGreater(drive["request_bytes"], 0)
            self.assertGreater(drive["in_flight"], 0)
            self.assertGreater(drive["bytes_per_second"], 0)
            self.assertTrue(os.path.exists(os.path.join(os.path.dirname(drive["dir"]), "TUNING.json")))
            del e
            e = kvtier.open(d, self.g, io="posix")
            used = e.io_settings()
            self.assertEqual(used["source"], "tuned")
            self.assertEqual(used["request_bytes"], drive["request_bytes"])
            self.assertEqual(used["staging_bytes"], drive["request_bytes"] * max(drive["in_flight"], 2))
            self.assertEqual(used["drives"][0]["state"], "kept")
            out = np.zeros_like(kv)
            self.assertEqual(e.restore(tokens, out)["tokens_restored"], 20000)
            np.testing.assert_array_equal(out, kv)
            del e
            self.assertEqual(kvtier.open(d, self.g, io="posix", tune=False).io_settings()["source"],
                             "defaults (tuning off)")
            reader = kvtier.open(d, self.g, io="posix", read_only=True)
            with self.assertRaises(kvtier.Error) as err:
                reader.tune()
            self.assertEqual(err.exception.code, "permission denied")
            del reader

    def test_corrupt_record_is_a_miss(self):
        tokens = list(range(640))
        kv = session(self.rng, self.g, 640)
        self.engine.save(tokens, kv)
        seg = sorted(glob.glob(os.path.join(self.engine.store_dir, "seg-*.kvt")))[0]
        with open(seg, "r+b") as f:  # a payload byte of the third record
            rec = 4096 + kv[:, :, :64].nbytes
            f.seek(2 * rec + 4096 + 100)
            b = f.read(1)
            f.seek(2 * rec + 4096 + 100)
            f.write(bytes([b[0] ^ 0x40]))
        out = np.zeros_like(kv)
        r = self.engine.restore(tokens, out)
        self.assertEqual(r["tokens_restored"], 128)
        self.assertEqual(r["checksum_misses"], 1)
        np.testing.assert_array_equal(out[:, :, :128], kv[:, :, :128])

    def test_errors_carry_the_status_code(self):
        kv = session(self.rng, self.g, 100)
        with self.assertRaises(kvtier.Error) as e:
            self.engine.save(list(range(200)), kv)  # room for 100 tokens only
        self.assertEqual(e.exception.args[1], "invalid argument")
        with self.assertRaises(kvtier.Error) as e:
            self.engine.restore_paged([1, 2], [np.zeros((2, 4, 16, 2, 64), np.uint16)] * self.g.layers, [0],
                                      layout="mystery")
        self.assertIn("never guessed", e.exception.args[0])
        with self.assertRaises(kvtier.Error) as e:
            kvtier.open(self.dir.name, kvtier.Geometry.preset("tiny", chunk_tokens=128))
        self.assertIn(e.exception.args[1], ("locked", "geometry mismatch"))
        with self.assertRaises(kvtier.Error):
            kvtier.Geometry.preset("gpt-17")
        with self.assertRaises(kvtier.Error) as e:
            kvtier.Geometry.custom("m", layers=4, kv_heads=2, head_dim=64, tp_rank=2, tp_world=2)
        self.assertEqual(e.exception.args[1], "invalid argument")
        strided = np.zeros((2, 2, 100, 2, 64), np.uint16)[:, :, ::2]
        with self.assertRaises(TypeError):  # never a silent copy: a restore into one would vanish
            self.engine.restore([1, 2], strided)
        with self.assertRaises(TypeError):
            self.engine.restore_paged([1, 2], [strided] * self.g.layers, [0])

    def test_error_code_is_an_attribute_and_still_args_1(self):
        with self.assertRaises(kvtier.Error) as e:
            kvtier.Geometry.custom("m", layers=4, kv_heads=2, head_dim=64, tp_rank=2, tp_world=2)
        self.assertEqual(e.exception.code, "invalid argument")
        self.assertEqual(e.exception.args[1], e.exception.code)
        self.assertEqual(len(e.exception.args), 2)
        self.assertEqual(kvtier.Error("damaged", "corrupt").code, "corrupt")  # raised from Python too
        self.assertIsNone(kvtier.Error("no code").code)

    def test_kv_of_another_element_size_is_refused_naming_the_dtype(self):
        kv = session(self.rng, self.g, 100)  # bf16-sized: 2 bytes per element
        cases = {"float32": kv.astype(np.float32), "int8": kv.astype(np.int8)}
        for name, wrong in cases.items():
            with self.subTest(dtype=name):
                with self.assertRaises(kvtier.Error) as e:
                    self.engine.save(list(range(100)), wrong)
                self.assertEqual(e.exception.code, "invalid argument")
                self.assertIn(f"kv is {name} ({wrong.dtype.itemsize}-byte elements)", e.exception.args[0])
                self.assertIn("element_bytes=2", e.exception.args[0])
                with self.assertRaises(kvtier.Error):
                    self.engine.restore(list(range(100)), np.zeros_like(wrong))
        self.assertEqual(self.engine.lookup(list(range(100))), 0, "a refused save stored something")
        # The same KV as raw bytes (how a framework hands over bf16 or fp8) and as float16 are fine.
        self.assertEqual(self.engine.save(list(range(100)), kv.view(np.uint8)), 2)
        out = np.zeros_like(kv).view(np.float16)
        self.assertEqual(self.engine.restore(list(range(100)), out)["tokens_restored"], 100)
        np.testing.assert_array_equal(out.view(np.uint16), kv)
        bs, blocks = 16, 8
        layers = [np.zeros((2, blocks, bs, self.g.kv_heads, self.g.head_dim), np.float32)] * self.g.layers
        with self.assertRaises(kvtier.Error) as e:
            self.engine.restore_paged(list(range(100)), layers, list(range(7)), block_size=bs)
        self.assertIn("layers[0] is float32 (4-byte elements)", e.exception.args[0])

    def test_wrong_kv_shapes_name_the_expected_and_the_given_shape(self):
        g, tokens = self.g, list(range(100))
        form = f"[2, {g.layers}, tokens, {g.kv_heads}, {g.head_dim}]"
        odd = np.zeros((2, g.layers, 100, g.kv_heads, g.head_dim - 1), np.uint16)  # not whole tokens
        swapped = np.zeros((2, 100, g.layers, g.kv_heads, g.head_dim), np.uint16)  # whole, but scrambled
        for wrong in (odd, swapped):
            with self.subTest(shape=wrong.shape), self.assertRaises(kvtier.Error) as e:
                self.engine.restore(tokens, wrong)
            self.assertEqual(e.exception.code, "invalid argument")
            self.assertIn(f"kv has shape {wrong.shape} (uint16)", e.exception.args[0])
            self.assertIn(form, e.exception.args[0])
        # A uint8 view of the same bytes, head_dim counted in bytes, is the same form.
        kv = session(self.rng, g, 100)
        self.assertEqual(self.engine.save(tokens, kv.view(np.uint8)), 2)
        out = np.zeros_like(kv).view(np.uint8)
        self.assertEqual(out.shape[-1], 2 * g.head_dim)
        self.assertEqual(self.engine.restore(tokens, out)["tokens_restored"], 100)
        np.testing.assert_array_equal(out.view(np.uint16), kv)

        bs, blocks, table = 16, 8, list(range(7))
        good = (2, blocks, bs, g.kv_heads, g.head_dim)
        bad = {
            "kv_first": ([np.zeros((blocks, 2, bs, g.kv_heads, g.head_dim), np.uint16)] * g.layers,
                         f"[2, 2, {bs}, {g.kv_heads}, {g.head_dim}]"),  # blocks read where kv_first has them
            "block_first": ([np.zeros(good, np.uint16)] * g.layers,
                            f"[2, 2, {bs}, {g.kv_heads}, {g.head_dim}]"),
            "packed_heads": ([np.zeros((blocks, g.kv_heads, bs, g.head_dim), np.uint16)] * g.layers,
                             f"[{blocks}, {g.kv_heads}, {bs}, {2 * g.head_dim}]"),
            "packed_tokens": ([np.zeros((blocks, g.kv_heads, bs, 2 * g.head_dim), np.uint16)] * g.layers,
                              f"[{blocks}, {bs}, {g.kv_heads}, {2 * g.head_dim}]"),
        }
        for layout, (layers, want) in bad.items():
            with self.subTest(layout=layout), self.assertRaises(kvtier.Error) as e:
                self.engine.restore_paged(tokens, layers, table, block_size=bs, layout=layout)
            self.assertIn(f"layers[0] has shape {layers[0].shape} (uint16)", e.exception.args[0])
            self.assertIn(f"layout {layout} with block_size {bs} expects {want}", e.exception.args[0])
        # A later layer with another number of blocks than the first.
        layers = [np.zeros(good, np.uint16), np.zeros((2, blocks + 1, bs, g.kv_heads, g.head_dim), np.uint16)]
        with self.assertRaises(kvtier.Error) as e:
            self.engine.restore_paged(tokens, layers, table, block_size=bs)
        self.assertIn(f"layers[1] has shape (2, {blocks + 1}, {bs}", e.exception.args[0])
        self.assertIn(f"expects [2, {blocks}, {bs}, {g.kv_heads}, {g.head_dim}]", e.exception.args[0])
        # block_size disagreeing with the tensors' is a wrong shape too.
        with self.assertRaises(kvtier.Error) as e:
            self.engine.restore_paged(tokens, [np.zeros(good, np.uint16)] * g.layers, list(range(4)), block_size=32)
        self.assertIn(f"expects [2, {blocks}, 32, {g.kv_heads}, {g.head_dim}]", e.exception.args[0])

    def test_kv_in_any_other_shape_is_refused_naming_both_shapes(self):
        # These held a whole number of tokens and were taken: restored into the documented form,
        # their bytes came back in another order, a silent scramble.
        g, tokens = self.g, list(range(100))
        kv = session(self.rng, g, 100)
        form = f"[2, {g.layers}, tokens, {g.kv_heads}, {g.head_dim}]"
        others = {
            "4-D [tokens, 2, L, H*D]": np.ascontiguousarray(kv.transpose(2, 0, 1, 3, 4)).reshape(100, 2, g.layers, -1),
            "3-D": kv.reshape(2 * g.layers, 100, -1),
            "6-D": kv.reshape(2, g.layers, 100, g.kv_heads, g.head_dim // 2, 2),
            "1-D": kv.reshape(-1),
        }
        for name, wrong in others.items():
            for op in ("save", "restore"):
                with self.subTest(shape=name, op=op), self.assertRaises(ValueError) as e:
                    getattr(self.engine, op)(tokens, wrong if op == "save" else np.zeros_like(wrong))
                self.assertIsInstance(e.exception, kvtier.Error)
                self.assertEqual(e.exception.code, "invalid argument")
                self.assertIn(f"kv has shape {wrong.shape} (uint16)", str(e.exception))
                self.assertIn(form, str(e.exception))
        self.assertEqual(self.engine.lookup(tokens), 0, "a refused save stored something")

    def test_refused_arrays_say_what_is_wrong_with_them(self):
        tokens = list(range(100))
        kv = session(self.rng, self.g, 100)
        frozen = kv.copy()
        frozen.flags.writeable = False
        self.assertEqual(self.engine.save(tokens, frozen), 2)  # a save only reads its KV
        with self.assertRaises(TypeError) as e:
            self.engine.restore(tokens, frozen)
        self.assertIn("read-only", str(e.exception))
        self.assertNotIn("non-contiguous", str(e.exception))
        with self.assertRaises(TypeError) as e:
            self.engine.save(tokens, kv.astype(object))
        self.assertIn("dtype is object", str(e.exception))
        big_endian = np.arange(100, dtype=">i4")
        with self.assertRaises(TypeError) as e:
            self.engine.lookup(big_endian)
        self.assertIn("byte order", str(e.exception))
        self.assertNotIn("not a ndarray", str(e.exception))
        self.assertEqual(self.engine.lookup(big_endian.astype(np.int32)), 100)

    def test_a_short_restore_says_why(self):
        tokens = self.rng.integers(0, 150000, size=300, dtype=np.int64)
        self.engine.save(tokens, session(self.rng, self.g, 300))
        out = np.zeros_like(session(self.rng, self.g, 400))
        r = self.engine.restore(tokens + 1, out)
        self.assertEqual(r["tokens_restored"], 0)
        self.assertEqual(r["problem"], f"not found: no stored prefix of these tokens in {self.engine.store_dir}")
        longer = np.concatenate([tokens, tokens[:100]])
        r = self.engine.restore(longer, out)
        self.assertEqual(r["tokens_restored"], 300)
        self.assertIn("partial: the store holds the first 300 of these 400 tokens", r["problem"])
        self.assertEqual(self.engine.restore(tokens, out)["problem"], "")
        # A drive moved away: its records are misses, and the problem says so.
        drives = [os.path.join(self.dir.name, d) for d in ("a", "b")]
        e = kvtier.open(drives, self.g, io="posix", capacity="32M")
        sessions = [self.rng.integers(0, 150000, size=4000, dtype=np.int64) for _ in range(8)]
        for t in sessions:
            e.save(t, session(self.rng, self.g, 4000))
        del e
        os.rename(drives[1], drives[1] + ".gone")
        e = kvtier.open(drives, self.g, io="posix", capacity="32M")
        self.assertEqual(e.stats()["drives_offline"], 1)
        out = np.zeros_like(session(self.rng, self.g, 4000))
        short = [e.restore(t, out) for t in sessions]
        short = [r for r in short if r["tokens_restored"] < 4000]
        self.assertTrue(short, "no session had a record on the missing drive")
        for r in short:
            self.assertIn("1 of the store's drives offline", r["problem"])

    def test_errors_print_their_message_and_invalid_arguments_are_value_errors(self):
        with self.assertRaises(kvtier.Error) as e:
            kvtier.Geometry.custom("m", layers=4, kv_heads=2, head_dim=64, tp_rank=2, tp_world=2)
        self.assertEqual(str(e.exception), e.exception.args[0])  # was the (message, code) tuple
        self.assertNotIn("'invalid argument')", str(e.exception))
        self.assertEqual(str(kvtier.Error("damaged", "corrupt")), "damaged")
        self.assertIsInstance(e.exception, ValueError)
        with self.assertRaises(ValueError):
            kvtier.open(os.path.join(self.dir.name, "hex"), self.g, capacity="0x1000000")
        with self.assertRaises(kvtier.Error) as e:  # another code: a kvtier.Error, not a ValueError
            kvtier.open(self.dir.name, self.g)
        self.assertNotIsInstance(e.exception, ValueError)

    def test_version_is_the_builds(self):
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as f:
            version = re.search(r"^project\(kvtier VERSION ([0-9.]+)", f.read(), re.M).group(1)
        self.assertEqual(kvtier.__version__, version)
        with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as f:
            self.assertIn(f'version = "{version}"', f.read(), "pyproject.toml and CMakeLists.txt disagree")

    def test_numpy_is_a_declared_dependency(self):
        try:
            import tomllib
        except ImportError:
            self.skipTest("tomllib needs Python 3.11")
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        with open(os.path.join(root, "pyproject.toml"), "rb") as f:
            project = tomllib.load(f)["project"]
        names = [d.split(";")[0].split(">")[0].split("=")[0].split("<")[0].strip() for d in project["dependencies"]]
        self.assertIn("numpy", names, "pip install kvtier would leave out numpy, which the package imports")

    def test_token_ids_outside_32_bits_are_refused_never_cut(self):
        t = np.arange(1000, dtype=np.int64) + 7
        kv = session(self.rng, self.g, 1000)
        self.engine.save(t, kv)
        for bad in (t + 2**32, t - 2**32, np.array([2**31], dtype=np.int64)):
            with self.assertRaises(kvtier.Error) as e:  # cut to 32 bits, these matched t's KV
                self.engine.lookup(bad)
            self.assertEqual(e.exception.args[1], "invalid argument")
            self.assertIn("outside", e.exception.args[0])
            with self.assertRaises(kvtier.Error):
                self.engine.restore(bad, np.zeros_like(kv))
        with self.assertRaises(kvtier.Error):
            self.engine.lookup([7, 8, 2**32 + 9])
        with self.assertRaises(kvtier.Error):
            self.engine.lookup([2**70])
        self.assertEqual(self.engine.lookup(t), 1000)
        self.assertEqual(self.engine.lookup([int(x) for x in t]), 1000)  # Python ints in range are fine

    def test_token_lists_of_non_integers_are_a_type_error(self):
        for bad in ([1.5, 2.0], ["a", "b"], [1, None], "abc", 3.0):
            with self.assertRaises(TypeError, msg=repr(bad)):
                self.engine.lookup(bad)

    def test_damaged_manifest_is_a_kvtier_error(self):
        path = os.path.join(self.dir.name, "bad")
        e = kvtier.open(path, self.g, io="posix")
        manifest = os.path.join(e.store_dir, "MANIFEST.json")
        del e
        with open(manifest, "wb") as f:
            f.write(b'{"format": \xff\xfe\xc3\x28 }')
        with self.assertRaises(kvtier.Error) as err:
            kvtier.open(path, self.g, io="posix")
        self.assertEqual(err.exception.args[1], "corrupt")
        self.assertIn("MANIFEST.json", err.exception.args[0])

    def test_capacity_is_kept_and_another_is_said_and_taken_at_the_first_save(self):
        path = os.path.join(self.dir.name, "kept")
        tokens = self.rng.integers(0, 150000, size=300, dtype=np.int32)
        e = kvtier.open(path, self.g, io="posix", capacity="300M")
        e.save(tokens, session(self.rng, self.g, 300))
        del e
        e = kvtier.open(path, self.g, io="posix")  # "0": not given, the store's
        self.assertEqual(e.stats()["capacity_bytes"], 300 << 20)
        del e
        e = kvtier.open(path, self.g, io="posix", capacity="200M")
        self.assertEqual(e.lookup(tokens), 300)
        self.assertEqual(e.stats()["capacity_bytes"], 300 << 20)  # an engine that only read
        e.save(self.rng.integers(0, 150000, size=100, dtype=np.int32), session(self.rng, self.g, 100))
        self.assertEqual(e.stats()["capacity_bytes"], 200 << 20)
        del e
        self.assertEqual(kvtier.open(path, self.g, io="posix").stats()["capacity_bytes"], 200 << 20)

    def test_gds_with_host_memory_is_a_recorded_fallback(self):
        e = kvtier.open(os.path.join(self.dir.name, "gds"), self.g, io="gds", capacity="256M")
        tokens = self.rng.integers(0, 150000, size=200, dtype=np.int32)
        kv = session(self.rng, self.g, 200)
        e.save(tokens, kv)
        out = np.zeros_like(kv)
        self.assertEqual(e.restore(tokens, out)["tokens_restored"], 200)
        np.testing.assert_array_equal(out, kv)
        s = e.stats()
        self.assertIn("I/O path gds", s["io_fallback"])
        self.assertGreaterEqual(s["fallbacks"], 2)

    def test_store_over_several_directories(self):
        drives = [os.path.join(self.dir.name, d) for d in ("a", "b", "c")]
        e = kvtier.open(drives, self.g, io="posix", capacity="64M")
        sessions = []
        for _ in range(12):
            tokens = self.rng.integers(0, 150000, size=3000, dtype=np.int64)
            kv = session(self.rng, self.g, 3000)
            e.save(tokens, kv)
            sessions.append((tokens, kv))
        self.assertEqual(e.stats()["drives"], 3)
        del e
        for d in drives:  # 16 MiB segments: the 37 MB saved spread over every drive
            self.assertTrue(glob.glob(os.path.join(d, "rank0of1", "seg-*.kvt")), d)
        e = kvtier.open(list(reversed(drives)), self.g, io="posix", capacity="64M")
        for tokens, kv in sessions:
            out = np.zeros_like(kv)
            self.assertEqual(e.restore(tokens, out)["tokens_restored"], 3000)
            np.testing.assert_array_equal(out, kv)
        with self.assertRaises(ValueError):
            kvtier.open([], self.g)

    def test_staging_that_cannot_be_allocated_is_a_resource_error_and_makes_no_store(self):
        # Under a limit of the address space the staging allocation itself fails; it was
        # kvtier.Error('internal error: out of host memory') after the store had been created.
        path = os.path.join(self.dir.name, "limited")
        code = (
            "import resource, sys, kvtier\n"
            "resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
            "try:\n"
            "    kvtier.open(sys.argv[1], kvtier.Geometry.preset('tiny'), staging='4G')\n"
            "except kvtier.Error as e:\n"
            "    print(e.code); print(e.args[0])\n")
        r = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=120)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[:1], ["no space"], r.stdout + r.stderr)
        self.assertIn("staging: 4294967296 bytes (4.0 GiB) of host memory asked for", lines[1])
        self.assertIn("RLIMIT_AS 3.0 GiB", lines[1])
        self.assertFalse(os.path.exists(os.path.join(path, "rank0of1")), "a refused open made a store")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipUnless(kvtier.built_with_remote(), "kvtier built without hiredis")
class RemoteTest(unittest.TestCase):
    """Two engines with their own stores sharing a real redis-server this test starts."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR"))
        self.port = free_port()
        self.server = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.dir.name],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def tearDown(self):
        self.server.kill()
        self.server.wait()
        self.dir.cleanup()

    def test_node_b_restores_what_node_a_saved(self):
        g = kvtier.Geometry.preset("tiny", chunk_tokens=64)
        uri = f"redis://127.0.0.1:{self.port}"
        a = kvtier.open(os.path.join(self.dir.name, "a"), g, io="posix", capacity="256M", remote=uri)
        b = kvtier.open(os.path.join(self.dir.name, "b"), g, io="posix", capacity="256M", remote=uri)
        rng = np.random.default_rng(11)
        tokens = rng.integers(0, 150000, size=700, dtype=np.int64)
        kv = session(rng, g, 700)
        self.assertEqual(a.save(tokens, kv), 11)
        deadline = time.monotonic() + 20
        while a.stats()["remote_writes"] < 11:
            self.assertLess(time.monotonic(), deadline, a.stats()["remote"])
            time.sleep(0.01)
        out = np.zeros_like(kv)
        self.assertEqual(b.restore(tokens, out)["tokens_restored"], 700)
        np.testing.assert_array_equal(out, kv)
        self.assertEqual(b.stats()["remote_hits"], 11)
        r = b.restore(tokens + 1, out)  # in neither store nor the cluster
        self.assertEqual(r["tokens_restored"], 0)
        self.assertIn("not found", r["problem"])
        self.assertIn("the remote tier did not hold the rest either", r["problem"])

    def test_bad_seeds_are_a_kvtier_error(self):
        g = kvtier.Geometry.preset("tiny", chunk_tokens=64)
        with self.assertRaises(kvtier.Error) as err:
            kvtier.open(os.path.join(self.dir.name, "c"), g, remote="redis://user:pw@127.0.0.1:1")
        self.assertEqual(err.exception.args[1], "invalid argument")


if __name__ == "__main__":
    unittest.main()
