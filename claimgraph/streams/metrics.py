"""Prometheus metrics for the governor and projector processes (Kafka runtime).

Each process serves ``/metrics`` on the port it is given. Counters count what is committed:
an aborted transaction is decided again and counted once, when its retry commits.

Both processes:

* ``claimgraph_consumer_lag`` — records of the input partition past the committed position
  (the log end offset, as a ``read_committed`` reader sees it, minus the position). A timer
  thread of its own measures it every ``lag_interval`` seconds, so it keeps growing while a
  transaction or a batch is stuck;
* ``claimgraph_last_progress_timestamp_seconds`` — when a batch last committed (governor) or
  was written (projector); with a lag above 0, its age is how long the process has stalled;
* ``process_*`` — CPU, memory, open files.

Governor (label ``partition``): ``claimgraph_commands_total``,
``claimgraph_decisions_total{kind}``, ``claimgraph_transactions_total``,
``claimgraph_transaction_aborts_total``, ``claimgraph_open_quarantines``,
``claimgraph_decision_latency_seconds`` (a command's append → its decision committed).

Projector (label ``graph``): ``claimgraph_applied_version``,
``claimgraph_projected_decisions_total``, ``claimgraph_projection_latency_seconds`` (a
decision logged → projected) and ``claimgraph_end_to_end_latency_seconds`` (its command
appended → projected).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaException, TopicPartition
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)

from claimgraph.logconf import events
from claimgraph.logs.kafka import KafkaConfig

if TYPE_CHECKING:
    from claimgraph.streams.kafka import KafkaGovernor
    from claimgraph.streams.kafka_projector import KafkaProjector

__all__ = ["LATENCY_BUCKETS", "GovernorMetrics", "LagWatcher", "ProjectorMetrics"]

_log = events("metrics")

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class LagWatcher:
    """A thread that sets ``gauge`` to (log end offset − ``position()``) every ``interval`` s.

    It reads the end with a ``read_committed`` consumer of its own (the last stable offset:
    an open transaction's records are not yet in the log), so it goes on measuring while the
    process it watches is blocked in a batch or a transaction. A failed query is logged and
    retried; the gauge keeps its last value meanwhile.
    """

    def __init__(
        self,
        cfg: KafkaConfig,
        topic: str,
        partition: int,
        position: Callable[[], int],
        gauge: Gauge,
        interval: float = 1.0,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        self.tp = TopicPartition(topic, partition)
        self.on_tick = on_tick
        self.measurements = 0  # how many times the gauge was set
        self.position = position
        self.gauge = gauge
        self.interval = interval
        self._consumer = Consumer(
            cfg.client(
                **{
                    "group.id": "claimgraph-lag",
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                }
            )
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="claimgraph-lag")
        self._thread.start()

    def measure(self) -> int | None:
        """The lag now (and set the gauge to it); None before the position is known."""
        _, end = self._consumer.get_watermark_offsets(self.tp, timeout=5, cached=False)
        position = self.position()
        if position < 0:  # still starting (folding the log): no position yet
            return None
        lag = max(0, int(end) - position)
        self.gauge.set(lag)
        self.measurements += 1
        return lag

    def _run(self) -> None:
        while True:
            try:
                self.measure()
            except KafkaException as exc:
                _log.warning("lag.unmeasured", topic=self.tp.topic, error=str(exc))
            self._consumer.poll(0)  # serves its client's log lines (nothing is assigned)
            if self.on_tick is not None:
                self.on_tick()
            if self._stop.wait(self.interval):
                break
        self._consumer.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)


def _common(registry: CollectorRegistry, labels: dict[str, str]) -> tuple[Gauge, Gauge]:
    """Lag, last progress and process metrics, the same in both processes."""
    lag = Gauge(
        "claimgraph_consumer_lag",
        "Records of the input partition past the committed position",
        list(labels),
        registry=registry,
    ).labels(**labels)
    progress = Gauge(
        "claimgraph_last_progress_timestamp_seconds",
        "When a batch last committed (governor) or was projected (projector)",
        list(labels),
        registry=registry,
    ).labels(**labels)
    progress.set(time.time())  # started: progress from here
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return lag, progress


class GovernorMetrics:
    """Metrics of one governor, updated after every committed transaction."""

    def __init__(self, port: int | None, partition: int, host: str = "127.0.0.1") -> None:
        self.registry = CollectorRegistry()
        labels = {"partition": str(partition)}
        self.commands = Counter(
            "claimgraph_commands",
            "Commands decided (committed)",
            list(labels),
            registry=self.registry,
        ).labels(**labels)
        self.decisions = Counter(
            "claimgraph_decisions",
            "Committed decisions by kind",
            ["partition", "kind"],
            registry=self.registry,
        )
        self.internal_errors = Counter(
            "claimgraph_internal_errors",
            "Commands a rule failed on: rejected internal_error (a bug; each is logged)",
            list(labels),
            registry=self.registry,
        ).labels(**labels)
        self._internal = 0
        self.transactions = Counter(
            "claimgraph_transactions",
            "Committed transactions",
            list(labels),
            registry=self.registry,
        ).labels(**labels)
        self.aborts = Counter(
            "claimgraph_transaction_aborts",
            "Aborted transactions",
            list(labels),
            registry=self.registry,
        ).labels(**labels)
        self.quarantines = Gauge(
            "claimgraph_open_quarantines", "Open conflicts", list(labels), registry=self.registry
        ).labels(**labels)
        self.latency = Histogram(
            "claimgraph_decision_latency_seconds",
            "A command's append to its decision committed",
            list(labels),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        ).labels(**labels)
        self.lag, self.progress = _common(self.registry, labels)
        self.aborts.inc(0)
        self._seen: dict[str, int] = {}
        self._aborts = 0
        self.partition = str(partition)
        self.watcher: LagWatcher | None = None
        if port is not None:
            start_http_server(port, addr=host, registry=self.registry)

    def watch(self, gov: KafkaGovernor, interval: float = 1.0) -> LagWatcher:
        """Measure the governor's lag on a timer from now on."""
        topic, partition = gov.input
        self.watcher = LagWatcher(
            gov.cfg, topic, partition, lambda: gov.position, self.lag, interval,
            lambda: self._count_aborts(gov),
        )  # fmt: skip
        return self.watcher

    def _count_aborts(self, gov: KafkaGovernor) -> None:
        """Aborts show while they happen, not only at the next commit."""
        aborts = gov.stats.aborts
        if aborts > self._aborts:
            self.aborts.inc(aborts - self._aborts)
            self._aborts = aborts

    def update(self, gov: KafkaGovernor, n: int) -> None:
        """After a committed transaction of ``n`` commands."""
        self.commands.inc(n)
        self.transactions.inc()
        by = gov.stats.decisions_by_kind or {}
        for kind, count in by.items():
            delta = count - self._seen.get(kind, 0)
            if delta:
                self.decisions.labels(partition=self.partition, kind=kind).inc(delta)
                self._seen[kind] = count
        if gov.stats.internal_errors > self._internal:
            self.internal_errors.inc(gov.stats.internal_errors - self._internal)
            self._internal = gov.stats.internal_errors
        self._count_aborts(gov)
        batch = gov.last_batch
        if batch is not None:
            for ms in batch.appended_ms:
                self.latency.observe(max(0.0, batch.committed_at - ms / 1000))
            self.progress.set(batch.committed_at)
        self.quarantines.set(
            sum(1 for st in gov.states.values() for c in st.conflicts.values() if c.open)
        )

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.close()


class ProjectorMetrics:
    """Metrics of one projector, updated after every batch."""

    def __init__(self, port: int | None, graph: str, host: str = "127.0.0.1") -> None:
        self.registry = CollectorRegistry()
        labels = {"graph": graph}
        self.applied = Gauge(
            "claimgraph_applied_version", "Applied version", ["graph"], registry=self.registry
        ).labels(**labels)
        self.decisions = Counter(
            "claimgraph_projected_decisions",
            "Decisions projected",
            ["graph"],
            registry=self.registry,
        ).labels(**labels)
        self.latency = Histogram(
            "claimgraph_projection_latency_seconds",
            "A decision logged to it projected",
            ["graph"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        ).labels(**labels)
        self.end_to_end = Histogram(
            "claimgraph_end_to_end_latency_seconds",
            "A command appended to its decision projected",
            ["graph"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        ).labels(**labels)
        self.lag, self.progress = _common(self.registry, labels)
        self._seen: object = None
        self._position = -1
        self.watcher: LagWatcher | None = None
        if port is not None:
            start_http_server(port, addr=host, registry=self.registry)

    def watch(self, proj: KafkaProjector, interval: float = 1.0) -> LagWatcher:
        """Measure the projector's lag on a timer from now on."""
        topic, partition = proj.input
        self.watcher = LagWatcher(
            proj.cfg, topic, partition, lambda: proj.position, self.lag, interval
        )
        return self.watcher

    def update(self, proj: KafkaProjector, n: int) -> None:
        """After a batch that wrote ``n`` decisions."""
        self.decisions.inc(n)
        self.applied.set(proj.applied)
        batch = proj.last_batch
        if batch is not None and batch is not self._seen:
            self._seen = batch
            for logged, appended in zip(batch.decided_ms, batch.appended_ms, strict=True):
                self.latency.observe(max(0.0, batch.projected_at - logged / 1000))
                self.end_to_end.observe(max(0.0, batch.projected_at - appended / 1000))
        if proj.position > self._position:  # read further (its graph's or others' records)
            self._position = proj.position
            self.progress.set(time.time())

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
