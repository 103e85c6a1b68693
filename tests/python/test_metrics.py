# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""Operator metrics: an engine's stats scraped through prometheus_client (kvtier.metrics) and its
own Prometheus text (Engine.prometheus), both parsed back with prometheus_client's parser and
checked against Engine.stats()."""
import os
import tempfile
import unittest

import numpy as np

import kvtier
import kvtier.metrics

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families


def samples(text):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


class MetricsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(dir=os.environ.get("KVTIER_TEST_DIR"))
        self.g = kvtier.Geometry.preset("tiny", chunk_tokens=64)
        self.engine = kvtier.open(self.dir.name, self.g, io="posix", capacity="256M", dram="8M")
        rng = np.random.default_rng(3)
        self.tokens = rng.integers(0, 150000, size=640, dtype=np.int64)
        self.kv = rng.integers(0, 2**16, size=(2, self.g.layers, 640, self.g.kv_heads, self.g.head_dim),
                               dtype=np.uint16)
        self.engine.save(self.tokens, self.kv)
        out = np.zeros_like(self.kv)
        self.engine.restore(self.tokens, out)
        longer = np.concatenate([self.tokens, self.tokens + 1])
        self.engine.restore(longer, np.zeros((2, self.g.layers, 1280, self.g.kv_heads, self.g.head_dim), np.uint16))
        self.assertEqual(self.engine.lookup(self.tokens[:100] + 1), 0)

    def tearDown(self):
        del self.engine
        self.dir.cleanup()

    def test_prometheus_client_scrape_matches_stats(self):
        registry = CollectorRegistry()
        kvtier.metrics.register(self.engine, registry=registry, rank=0)
        # A second collector on another registry must not see this engine twice.
        got = samples(generate_latest(registry).decode())
        stats = self.engine.stats()
        labels = (("rank", "0"), ("store", self.engine.store_dir))
        for name, kind, _ in kvtier.stat_fields():
            if kind == "counter":
                self.assertEqual(got[(f"kvtier_{name}_total", labels)], stats[name], name)
            elif kind == "gauge":
                self.assertEqual(got[(f"kvtier_{name}", labels)], stats[name], name)
            elif kind == "histogram":
                self.assertEqual(got[(f"kvtier_{name}_seconds_count", labels)], stats[name]["count"], name)
                self.assertAlmostEqual(got[(f"kvtier_{name}_seconds_sum", labels)], stats[name]["sum"], 6)
        self.assertEqual(stats["dram_hits"], 20)          # two restores of 10 chunks each, from the tier
        self.assertEqual(stats["restore_misses"], 10)     # the longer request's 10 unstored chunks
        self.assertEqual(stats["restores"], 2)
        self.assertEqual(stats["restore_latency"]["count"], 2)
        self.assertEqual(stats["lookups"], 1)
        info = [k for k in got if k[0] == "kvtier_info"]
        self.assertEqual(len(info), 1)
        self.assertIn(("io_engine", stats["io_engine"]), info[0][1])

    def test_engine_prometheus_text_parses_and_matches(self):
        got = samples(self.engine.prometheus('rank="1"'))
        stats = self.engine.stats()
        self.assertEqual(got[("kvtier_records", (("rank", "1"),))], stats["records"])
        self.assertEqual(got[("kvtier_dram_hits_total", (("rank", "1"),))], stats["dram_hits"])
        buckets = sorted((float(dict(k[1])["le"]), v) for k, v in got.items()
                         if k[0] == "kvtier_restore_latency_seconds_bucket")
        self.assertEqual(buckets[-1], (float("inf"), 2))
        self.assertEqual([v for _, v in buckets], sorted(v for _, v in buckets))  # cumulative

    def test_an_engine_registered_twice_is_refused(self):
        # Registered twice, every sample was exported twice: Prometheus rejects the whole scrape.
        registry = CollectorRegistry()
        kvtier.metrics.register(self.engine, rank="0", registry=registry)
        with self.assertRaises(ValueError) as e:
            kvtier.metrics.register(self.engine, rank="0", registry=registry)
        self.assertIn("already registered", str(e.exception))
        text = generate_latest(registry).decode()
        lines = [line for line in text.splitlines() if not line.startswith("#")]
        self.assertEqual(len(lines), len(set(lines)), "a sample is exported twice")
        with self.assertRaises(ValueError):
            kvtier.metrics.register(self.engine, registry=CollectorRegistry(), **{"bad-name": "x"})

    def test_label_values_are_escaped_and_label_text_is_checked(self):
        value = 'a"b\\c\nkvtier_fake 1'
        got = samples(self.engine.prometheus({"rank": value, "node": "n1"}))
        self.assertEqual(got[("kvtier_records", (("node", "n1"), ("rank", value)))], self.engine.stats()["records"])
        self.assertNotIn("kvtier_fake", {name for name, _ in got})
        escaped = 'rank="a\\"b"'  # already escaped: taken as it is
        self.assertIn(("kvtier_records", (("rank", 'a"b'),)), samples(self.engine.prometheus(escaped)))
        for bad in ('rank="a"b"', 'rank="x"\nkvtier_fake 1', 'rank="x\ny"', "rank=x", '1rank="x"',
                    '__name__="x"', 'le="1"', 'rank="x" node="y"'):
            with self.subTest(labels=bad), self.assertRaises(ValueError):
                self.engine.prometheus(bad)
        with self.assertRaises(ValueError):
            self.engine.prometheus({"bad-name": "x"})

    def test_a_closed_engine_drops_out(self):
        registry = CollectorRegistry()
        other = kvtier.open(os.path.join(self.dir.name, "other"), self.g, io="posix")
        kvtier.metrics.register(other, registry=registry)
        self.assertIn("kvtier_restores_total", generate_latest(registry).decode())
        del other
        self.assertNotIn("kvtier_restores_total", generate_latest(registry).decode())


if __name__ == "__main__":
    unittest.main()
