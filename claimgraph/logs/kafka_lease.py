"""A lease on a graph's duty across processes, held by Kafka consumer-group membership.

Every process that could do a graph's duty (the resolver worker of each ``serve`` replica)
joins the consumer group ``PREFIX.ROLE.GRAPH``, subscribed to the decisions topic. The broker's
group coordinator assigns each partition to exactly one member; the member assigned the
graph's partition holds the lease. Its partitions are paused at once, so holding the lease
fetches nothing. When the holder closes it leaves the group and the coordinator reassigns
the partition to another member within a rebalance; when it dies or stops polling, after
``session.timeout.ms``.

``epoch`` counts the assignments this process has gained; a holder checks :meth:`held`
before each write, so a replica that lost the lease stops before its next verdict. A verdict
racing a takeover is not applied twice: the governor refuses a second verdict on a conflict
that is no longer open.
"""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import Consumer, KafkaException

from claimgraph.errors import StorageError
from claimgraph.logs.kafka import KafkaConfig

__all__ = ["KafkaLease"]


class KafkaLease:
    """This process's membership in the lease group of (``role``, ``graph``)."""

    def __init__(
        self,
        cfg: KafkaConfig,
        graph: str,
        partition: int,
        *,
        role: str = "resolvers",
        session_timeout_ms: int = 10_000,
    ) -> None:
        self.group = f"{cfg.prefix}.{role}.{graph}"
        self.partition = partition
        self.epoch = 0  # assignments of the graph's partition this member was given
        self.assignments = 0  # assignments of any kind (a member of a settled group has one)
        self._topic = cfg.decisions_topic
        self._held = threading.Event()
        self._stop = threading.Event()
        self._error: str | None = None
        self._consumer = Consumer(
            cfg.client(
                **{
                    "group.id": self.group,
                    "enable.auto.commit": False,
                    "auto.offset.reset": "latest",
                    "session.timeout.ms": session_timeout_ms,
                    "heartbeat.interval.ms": max(session_timeout_ms // 10, 100),
                }
            )
        )
        self._consumer.subscribe(
            [self._topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked
        )
        self._thread = threading.Thread(target=self._poll, name=f"lease-{self.group}", daemon=True)
        self._thread.start()

    def _assigned(self, consumer: Any, parts: list[Any]) -> None:
        consumer.assign(parts)
        if parts:
            consumer.pause(parts)  # membership only: nothing is fetched
        self.assignments += 1
        if any(p.topic == self._topic and p.partition == self.partition for p in parts):
            self.epoch += 1
            self._held.set()

    def _revoked(self, consumer: Any, parts: list[Any]) -> None:
        if any(p.topic == self._topic and p.partition == self.partition for p in parts):
            self._held.clear()

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                msg = self._consumer.poll(0.2)  # drives heartbeats and the callbacks above
            except KafkaException as exc:
                self._error = str(exc)
                continue
            error = msg.error() if msg is not None else None
            if error is not None and error.fatal():
                self._error = str(error)
                self._held.clear()
                return

    def held(self) -> bool:
        """Whether this process holds the lease now."""
        if self._error is not None and not self._thread.is_alive():
            raise StorageError(f"the lease group {self.group} failed: {self._error}")
        return self._held.is_set()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds to hold the lease; whether this process holds it."""
        return self._held.wait(timeout)

    def close(self) -> None:
        """Leave the group (another member takes the lease over at the next rebalance)."""
        self._stop.set()
        self._thread.join(10)
        self._held.clear()
        self._consumer.close()
