# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""Prometheus metrics of kvtier engines, through prometheus_client.

    import kvtier, kvtier.metrics
    engine = kvtier.open(...)
    kvtier.metrics.register(engine, rank="0")   # into prometheus_client's default registry

Every field of ``Engine.stats()`` (``kvtier.stat_fields()``) becomes a metric named ``kvtier_<field>``
(counters get prometheus_client's ``_total``), with a ``store`` label and the labels given here;
the text fields (I/O engine, fallbacks, GDS mode) are the labels of ``kvtier_info``. Metrics are
read from the engines at each scrape. A process serving ``/metrics`` from the default registry
(vLLM's API server, ``prometheus_client.start_http_server``) shows them; an engine in another
process shows up only in that process's registry.
"""
import re
import threading
import weakref

from ._kvtier import stat_fields

try:
    from prometheus_client import REGISTRY
    from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily,
                                        InfoMetricFamily)
except ImportError:  # optional: the engine itself never needs it
    REGISTRY = None


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")


class KvtierCollector:
    """A prometheus_client collector over the engines registered with it (held weakly: a closed
    engine drops out)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._engines = []  # (weakref to engine, labels dict)

    def add(self, engine, **labels):
        labels = {"store": engine.store_dir, **labels}
        for name in labels:
            if not _LABEL_NAME.match(name) or name.startswith("__") or name == "le":
                raise ValueError(f"label name {name!r} is not a Prometheus label name "
                                 "([a-zA-Z_][a-zA-Z0-9_]*, not starting with __, not le)")
        with self._lock:
            for ref, known in self._engines:
                # Twice the same series is a scrape Prometheus rejects whole.
                if ref() is engine:
                    raise ValueError(f"the engine of {engine.store_dir} is already registered with this "
                                     f"registry (labels {known}); registering it again would export every "
                                     "sample twice")
                if ref() is not None and known == labels:
                    raise ValueError(f"another engine is registered with the same labels {labels}: their "
                                     "samples would be the same series; give each its own labels")
            self._engines.append((weakref.ref(engine), labels))

    def _live(self):
        with self._lock:
            self._engines = [(ref, labels) for ref, labels in self._engines if ref() is not None]
            return [(ref(), labels) for ref, labels in self._engines]

    def collect(self):
        engines = [(e, labels, e.stats()) for e, labels in self._live() if e is not None]
        if not engines:
            return
        names = sorted({k for _, labels, _ in engines for k in labels})
        for name, kind, help_text in stat_fields():
            metric = f"kvtier_{name}"
            if kind == "counter":
                family = CounterMetricFamily(metric, help_text, labels=names)
            elif kind == "gauge":
                family = GaugeMetricFamily(metric, help_text, labels=names)
            elif kind == "histogram":
                family = HistogramMetricFamily(f"{metric}_seconds", help_text, labels=names)
            else:
                continue
            for _, labels, stats in engines:
                values = [labels.get(n, "") for n in names]
                if kind == "histogram":
                    h = stats[name]
                    buckets = [(repr(float(le)), count) for le, count in h["buckets"]] + [("+Inf", h["count"])]
                    family.add_metric(values, buckets, h["sum"])
                else:
                    family.add_metric(values, stats[name])
            yield family
        info = InfoMetricFamily("kvtier", "the engine's I/O paths", labels=names)
        texts = [n for n, kind, _ in stat_fields() if kind == "text"]
        for _, labels, stats in engines:
            info.add_metric([labels.get(n, "") for n in names], {t: str(stats[t]) for t in texts})
        yield info


_collectors = {}  # id(registry) -> (registry, its collector)
_collectors_lock = threading.Lock()


def collector(registry=None):
    """The collector registered with `registry` (default: prometheus_client's), made on first use."""
    if REGISTRY is None:
        raise ImportError("kvtier.metrics needs prometheus_client (pip install prometheus_client)")
    registry = registry or REGISTRY
    with _collectors_lock:
        if id(registry) not in _collectors:
            c = KvtierCollector()
            registry.register(c)
            _collectors[id(registry)] = (registry, c)
        return _collectors[id(registry)][1]


def register(engine, registry=None, **labels):
    """Exports `engine`'s stats, labelled with its store directory and `labels`. ValueError for a
    label name Prometheus does not take, and for an engine already registered with `registry` or
    another one with the same labels (the scrape would hold the same series twice)."""
    collector(registry).add(engine, **{k: str(v) for k, v in labels.items()})
