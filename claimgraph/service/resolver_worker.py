"""The resolver worker of ``serve``: runs the schema's resolver chains as new decisions land.

Woken by the graph advancing (``wait_for(head + 1)``), and when a new decision touched a
conflict or the schema (:func:`~claimgraph.service.ticker.touches_conflicts`: plain claims
cost no scan), it runs one pass of
:func:`~claimgraph.service.resolvers.run_resolvers` over the open, not escalated conflicts
whose edge types declare a chain, writing each verdict as the resolver principal the schema
names (the first of ``principals.resolvers`` that is a plain name, not a pattern). A pass that
only finds conflicts it already tried, unchanged, writes nothing — so its own refused verdict
does not wake it into a loop.

Arbiters run only from the server's allow-list (:class:`ArbiterAllowList`); a schema's arbiter
that is not on it is never run, the reason is logged and written in the escalation. With a
``lease`` (Kafka: :class:`~claimgraph.logs.kafka_lease.KafkaLease`), the worker acts only
while it holds it, and checks before each verdict, so one worker acts per graph however
many replicas run.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Protocol

from claimgraph.core.schema import GraphSchema
from claimgraph.errors import ClaimgraphError, VersionNotYetAvailable
from claimgraph.logconf import events
from claimgraph.service.arbiters import ArbiterAllowList
from claimgraph.service.resolvers import (
    RESOLVER_LIMITS,
    ResolverLimits,
    Verdict,
    run_resolvers,
)
from claimgraph.service.schemas import schema_at
from claimgraph.service.ticker import touches_conflicts

__all__ = ["Lease", "ResolverWorker", "resolver_agent"]

_log = events("resolvers")
_PATTERN = re.compile(r"[*?\[\]]")


class Lease(Protocol):
    """Who may act for a graph now (Kafka: consumer-group membership)."""

    def held(self) -> bool: ...

    def wait(self, timeout: float) -> bool: ...


def resolver_agent(schema: GraphSchema) -> str | None:
    """The principal a server's resolver worker writes as: the schema's first plain resolver
    name that is not one of its humans (a worker is not a person)."""
    for p in schema.resolvers:
        if not _PATTERN.search(p.text) and not schema.is_human(p.text):
            return p.text
    return None


class ResolverWorker:
    """Runs resolver passes over ``graph`` whenever it advances, until stopped."""

    def __init__(
        self,
        graph: Any,
        *,
        allowed: ArbiterAllowList,
        limits: ResolverLimits = RESOLVER_LIMITS,
        lease: Lease | None = None,
        wake: float = 1.0,
        min_gap: float = 0.2,
    ) -> None:
        self.graph = graph
        self.allowed = allowed
        self.limits = limits
        self.lease = lease
        self.wake = wake  # seconds: at most this long between looks at the stop flag
        self.min_gap = min_gap  # seconds between passes at least: a busy graph's are batched
        self.passes = 0  # passes run (each at a new head)
        self.version = -2  # the version the last pass ran at
        self.verdicts: list[tuple[str, Verdict, Any]] = []  # what this worker wrote
        self._seen: dict[str, str] = {}
        self._last = -2  # the head at the last look (-2: never looked)
        self._said: set[str] = set()
        self._advanced = threading.Condition()

    def _say_once(self, event: str, **fields: Any) -> None:
        if event not in self._said:
            self._said.add(event)
            _log.warning(event, graph=self.graph.name, **fields)

    def step(self, version: int) -> list[tuple[str, Verdict, Any]]:
        """One pass at ``version`` (if the schema there defines chains and names an agent)."""
        done = self._pass(version)
        with self._advanced:
            self.passes += 1
            self.version = max(self.version, version)
            self.verdicts.extend(done)
            self._advanced.notify_all()
        return done

    def _pass(self, version: int) -> list[tuple[str, Verdict, Any]]:
        schema = schema_at(self.graph, version)
        if schema is None or not any(et.resolvers for et in schema.edge_types.values()):
            return []
        agent = resolver_agent(schema)
        if agent is None:
            self._say_once(
                "resolvers.no_agent",
                why="the schema names no plain principals.resolvers name to write verdicts "
                "as; the resolver worker waits",
            )
            return []
        held = self.lease.held if self.lease is not None else None
        done = run_resolvers(
            self.graph,
            agent=agent,
            at=version,
            limits=self.limits,
            allowed=self.allowed,
            seen=self._seen,
            may_write=held,
        )
        for cid, v, r in done:
            for p in v.inputs.get("passed", []):
                if p["resolver"].startswith("arbiter:"):
                    _log.info(
                        "resolvers.passed",
                        graph=self.graph.name,
                        conflict=cid,
                        resolver=p["resolver"],
                        why=p["why"],
                    )
            _log.info(
                "resolvers.verdict",
                graph=self.graph.name,
                conflict=cid,
                resolver=v.resolver,
                action=v.action,
                winner=v.winner,
                decision=r.kind,
                reason=r.reason,
                version=r.version,
            )
        return done

    def wait_passed(self, version: int, timeout: float) -> bool:
        """Wait until a pass has run at ``version`` or later (an observed event, for tests)."""
        with self._advanced:
            return self._advanced.wait_for(lambda: self.version >= version, timeout)

    def look(self) -> bool:
        """Look at the head once: run a pass if a decision since the last look touched a
        conflict or the schema (always on the first look); whether a pass ran."""
        head = self.graph.head()
        if head == self._last:
            return False
        ran = self._last < -1 or touches_conflicts(self.graph, self._last + 1, head)
        if ran:
            self.step(head)
        self._last = head
        return ran

    def run(self, stop: threading.Event) -> None:
        """Look at each new head until ``stop`` is set; errors are logged, never fatal."""
        while not stop.is_set():
            if self.lease is not None and not self.lease.held():
                self._last = -2  # whoever held it may have left work: look again once we do
                self.lease.wait(self.wake)
                continue
            try:
                if self.look():
                    stop.wait(self.min_gap)  # a rate limit: the decisions meanwhile, one pass
                self.graph.wait_for(self._last + 1, self.wake)
            except VersionNotYetAvailable:
                continue
            except ClaimgraphError as exc:  # the store or broker is away: look again later
                _log.warning("resolvers.pass_failed", graph=self.graph.name, error=str(exc))
                stop.wait(self.wake)
