"""What ``serve`` runs beside the API: the deadline ticker and the resolver worker.

On Kafka both act only in the replica that holds the graph's lease (consumer-group
membership, :mod:`claimgraph.logs.kafka_lease`), so one replica ticks and resolves per graph
however many serve it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from claimgraph.logconf import events

__all__ = ["Duties"]

_log = events("serve")


def _thread(name: str, target: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        try:
            target()
        except BaseException:  # a bug: say the duty stopped (serve goes on), re-raise: the
            _log.error("serve.duty_stopped", duty=name)  # traceback is logged (thread.crashed)
            raise

    t = threading.Thread(target=run, name=f"claimgraph-{name}", daemon=True)
    t.start()
    return t


class Duties:
    """The ticker and resolver worker of one served graph, started and stopped together."""

    def __init__(
        self,
        graph: Any,
        data: Path,
        *,
        tick: float,
        resolvers: bool,
        arbiters: list[str],
        kafka: Any = None,
    ) -> None:
        from claimgraph.service.arbiters import ALLOW_FILE, ArbiterAllowList

        self.allowed = ArbiterAllowList.parse(arbiters, data / ALLOW_FILE)  # ConfigError first
        self.stop = threading.Event()
        self.lease: Any = None
        self.ticker: Any = None
        self.worker: Any = None
        self.threads: list[threading.Thread] = []
        if kafka is not None and (tick > 0 or resolvers):
            from claimgraph.logs.kafka_lease import KafkaLease

            self.lease = KafkaLease(kafka, graph.name, graph.partition, role="serve")
        if tick > 0:
            from claimgraph.service.ticker import DeadlineTicker

            self.ticker = DeadlineTicker(graph, interval=tick, lease=self.lease)
            self.threads.append(_thread("ticker", lambda: self.ticker.run(self.stop)))
        if resolvers:
            from claimgraph.service.resolver_worker import ResolverWorker

            self.worker = ResolverWorker(graph, allowed=self.allowed, lease=self.lease)
            self.threads.append(_thread("resolver worker", lambda: self.worker.run(self.stop)))

    def describe(self) -> str:
        """One line for serve's banner."""
        parts = []
        if self.ticker is not None:
            parts.append(f"ticks when a deadline is due (looks every {self.ticker.interval:g}s)")
        if self.worker is not None:
            names = ", ".join(sorted(self.allowed.entries)) or "none"
            parts.append(f"resolvers on (arbiters allowed: {names})")
        else:
            parts.append("resolvers off")
        if self.lease is not None:
            parts.append(f"on Kafka: only the holder of lease {self.lease.group} acts")
        return "; ".join(parts)

    def close(self, timeout: float = 30.0) -> None:
        """Stop the duties and wait for them (each looks at the stop flag every second or
        so), so none is still reading the graph when it closes."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if self.lease is not None:
            self.lease.close()
