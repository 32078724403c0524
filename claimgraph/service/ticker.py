"""The deadline ticker of ``serve``: a ``tick`` only when a quarantine deadline is due.

Time reaches the governor only through the log, as ``tick`` commands; a tick does something
only when an open, not escalated conflict has passed its edge type's ``quarantine.deadline``
(``core.governor.exits.tick``). So the ticker computes the next due time from the graph at
head — each such conflict's ``opened_time`` plus its deadline, under the schema in force —
and writes a tick once the clock reaches it, never on an idle graph. It recomputes only when
a new decision touched a conflict or the schema (:func:`touches_conflicts`; its own tick's
exits do, so a tick that left conflicts for the next one, past the per-tick exit limit, is
followed by another). It wakes every ``interval`` seconds at
most, or sooner when the next deadline is nearer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from claimgraph.core.wire import decode_decision
from claimgraph.errors import ClaimgraphError
from claimgraph.logconf import events
from claimgraph.service.schemas import schema_at

__all__ = ["DeadlineTicker", "next_deadline", "touches_conflicts"]

_log = events("ticker")

# decisions that change what a conflict scan would find, besides those naming a conflict
_SCHEMA_TYPES = frozenset({"publish_schema", "upgrade_rules"})


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _decisions(graph: Any, start: int, limit: int) -> list[tuple[int, Any]]:
    """Decisions from ``start``: from the embedded log's raw records when the graph has one
    (decoded only: the fields looked at are never scrubbed by erasure), else the port's."""
    logs = getattr(graph, "logs", None)
    if logs is None:
        return list(graph.decisions(start, limit))
    return [(r.offset, decode_decision(r.value)) for r in logs.decisions.read(start, limit)]


def touches_conflicts(graph: Any, start: int, end: int, page: int = 1000) -> bool:
    """Whether a decision in versions ``start..end`` opened, joined, changed or closed a
    conflict (it names one, or lists exits) or changed the schema: only then can the
    quarantine, its deadlines or its resolver chains differ from what they were before
    ``start``. Reading the decisions is cheap; scanning every conflict is not."""
    pos = start
    while pos <= end:
        batch = _decisions(graph, pos, min(page, end - pos + 1))
        if not batch:
            return False
        for version, d in batch:
            if version > end:
                return False
            if d.get("conflict_id") or d.get("exits") or d["command_type"] in _SCHEMA_TYPES:
                return True
        pos = batch[-1][0] + 1
    return False


def next_deadline(graph: Any, version: int) -> int | None:
    """The earliest log time (ms) at which a tick would exit a conflict open at ``version``;
    ``None`` when none would ever (no conflict with a deadline)."""
    schema = schema_at(graph, version)
    if schema is None:
        return None
    due: int | None = None
    for row in graph.quarantine(at=version):
        if row.get("escalated_at") is not None:
            continue
        et = schema.edge_types.get(row["edge_type"])
        if et is None or et.exits.deadline_ms is None:
            continue
        at = int(row["opened_time"]) + et.exits.deadline_ms
        due = at if due is None else min(due, at)
    return due


class DeadlineTicker:
    """Writes a tick to ``graph`` when a deadline is due, as ``agent``."""

    def __init__(
        self,
        graph: Any,
        *,
        interval: float,
        clock: Callable[[], int] = _wall_ms,
        agent: str = "ticker",
        lease: Any = None,
    ) -> None:
        self.graph = graph
        self.interval = interval
        self.clock = clock
        self.agent = agent
        self.lease = lease  # Kafka: only the replica holding the graph's lease ticks
        self.wakeups = 0  # steps taken (observed by tests, never timed)
        self.ticks = 0  # ticks written
        self.due: int | None = None  # the next deadline, as of ``self._head``
        self._head: int | None = None
        self._ticked: tuple[int, int] | None = None  # (the deadline ticked for, when)
        self._stepped = threading.Condition()

    def step(self) -> Any:
        """Look once: write a tick if a deadline is due; return its receipt (or ``None``)."""
        receipt = None
        if self.lease is None or self.lease.held():
            head = self.graph.head()
            if head != self._head:
                if self._head is None or touches_conflicts(self.graph, self._head + 1, head):
                    self.due = next_deadline(self.graph, head)
                self._head = head
            now = self.clock()
            if self.due is not None and now >= self.due and not self._waiting(now):
                receipt = self.graph.tick(agent=self.agent)
                self._ticked = (self.due, now)
                self.ticks += 1
        with self._stepped:
            self.wakeups += 1
            self._stepped.notify_all()
        return receipt

    def wait_wakeups(self, n: int, timeout: float) -> bool:
        """Wait until ``n`` steps have been taken (an observed event, for tests)."""
        with self._stepped:
            return self._stepped.wait_for(lambda: self.wakeups >= n, timeout)

    def _waiting(self, now: int) -> bool:
        """A tick was written for this deadline less than ``interval`` ago, and it is still
        due: the log's time lags this clock (or the exits went past the per-tick limit);
        tick again after ``interval``, not in a loop."""
        t = self._ticked
        return t is not None and t[0] == self.due and now - t[1] < self.interval * 1000

    def _sleep(self) -> float:
        if self.due is None or self._waiting(self.clock()):
            return self.interval
        return max(0.0, min(self.interval, (self.due - self.clock()) / 1000))

    def run(self, stop: threading.Event) -> None:
        """Step until ``stop`` is set; a failed tick is logged and tried at the next step."""
        while not stop.wait(self._sleep()):
            try:
                self.step()
            except ClaimgraphError as exc:  # e.g. the store or broker is away: next step
                _log.warning("ticker.failed", graph=self.graph.name, error=str(exc))
