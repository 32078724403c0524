"""Prometheus metrics for the governor and projector processes (Kafka runtime).

Each process serves ``/metrics`` on the port it is given. Metric names:

* ``claimgraph_commands_total`` — commands decided;
* ``claimgraph_decisions_total{kind}`` — decisions by kind;
* ``claimgraph_transactions_total`` / ``claimgraph_transaction_aborts_total``;
* ``claimgraph_consumer_lag`` — input records not yet processed (governor: commands,
  projector: decisions);
* ``claimgraph_open_quarantines`` — open conflicts over the graphs a governor holds;
* ``claimgraph_applied_version`` — the projector's applied version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

if TYPE_CHECKING:
    from claimgraph.streams.kafka import KafkaGovernor
    from claimgraph.streams.kafka_projector import KafkaProjector

__all__ = ["GovernorMetrics", "ProjectorMetrics"]


class GovernorMetrics:
    """Metrics of one governor, updated after every transaction."""

    def __init__(self, port: int | None, partition: int, host: str = "127.0.0.1") -> None:
        self.registry = CollectorRegistry()
        labels = {"partition": str(partition)}
        self.commands = Counter(
            "claimgraph_commands", "Commands decided", list(labels), registry=self.registry
        ).labels(**labels)
        self.decisions = Counter(
            "claimgraph_decisions",
            "Decisions by kind",
            ["partition", "kind"],
            registry=self.registry,
        )
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
        self.lag = Gauge(
            "claimgraph_consumer_lag",
            "Commands not yet decided",
            list(labels),
            registry=self.registry,
        ).labels(**labels)
        self.quarantines = Gauge(
            "claimgraph_open_quarantines", "Open conflicts", list(labels), registry=self.registry
        ).labels(**labels)
        self._seen: dict[str, int] = {}
        self._aborts = 0
        self.partition = str(partition)
        if port is not None:
            start_http_server(port, addr=host, registry=self.registry)

    def update(self, gov: KafkaGovernor, n: int) -> None:
        self.commands.inc(n)
        self.transactions.inc()
        by = gov.stats.decisions_by_kind or {}
        for kind, count in by.items():
            delta = count - self._seen.get(kind, 0)
            if delta:
                self.decisions.labels(partition=self.partition, kind=kind).inc(delta)
                self._seen[kind] = count
        if gov.stats.aborts > self._aborts:
            self.aborts.inc(gov.stats.aborts - self._aborts)
            self._aborts = gov.stats.aborts
        self.lag.set(gov.lag())
        self.quarantines.set(
            sum(1 for st in gov.states.values() for c in st.conflicts.values() if c.open)
        )


class ProjectorMetrics:
    """Metrics of one projector."""

    def __init__(self, port: int | None, graph: str, host: str = "127.0.0.1") -> None:
        self.registry = CollectorRegistry()
        self.applied = Gauge(
            "claimgraph_applied_version", "Applied version", ["graph"], registry=self.registry
        ).labels(graph=graph)
        self.decisions = Counter(
            "claimgraph_projected_decisions",
            "Decisions projected",
            ["graph"],
            registry=self.registry,
        ).labels(graph=graph)
        self.lag = Gauge(
            "claimgraph_consumer_lag",
            "Decisions not yet projected",
            ["graph"],
            registry=self.registry,
        ).labels(graph=graph)
        if port is not None:
            start_http_server(port, addr=host, registry=self.registry)

    def update(self, proj: KafkaProjector, n: int) -> None:
        self.decisions.inc(n)
        self.applied.set(proj.applied)
        self.lag.set(proj.lag())
