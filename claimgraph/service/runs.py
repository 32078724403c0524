"""Runs: a pinned version, and a trace of what an agent read and wrote at it.

``with graph.run(agent=..., task=...) as run:`` pins the head version when it starts (or the
version of a shared :class:`Snapshot`), serves every read through ``run`` at that version, and
writes claims with ``based_on_version`` set to it and ``run_id`` set to the run. The trace —
``start`` (the pinned version), each ``read`` (the query and a SHA-256 digest of its result),
each ``write`` (the receipt and its decision), each ``tool`` call the caller records, and
``end`` — goes to the runs log (the embedded log ``R``, the Kafka ``PREFIX.runs`` topic, or the
HTTP API, which writes it to one of those).

:func:`replay` re-executes the recorded reads at the pinned version and proves the inputs are
identical, or names the first difference. Retention honours runs: a ``start`` event without its
``end`` is a live pin on ``pinned_version`` (see :func:`live_pins`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from claimgraph.errors import ConfigError, InputError, RunNotFound
from claimgraph.service.traces import (
    READS_REVISION,
    ReplayReport,
    RunSummary,
    digest,
    jsonable,
    replay,
    summarize,
)

if TYPE_CHECKING:
    from claimgraph.projections.reader import EdgeView, HistoryView, NeighborView, SlotView
    from claimgraph.service.api import NodeLike, Receipt
    from claimgraph.service.queries import PathsResult, ReachResult
    from claimgraph.service.reads import EdgeRef

__all__ = [
    "Run",
    "RunsMixin",
    "Snapshot",
    "hold_remote_pins",
    "pins_of",
]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A version pinned once and handed to several runs (execute-with-snapshot)."""

    version: int
    snapshot_id: str = field(default_factory=lambda: f"snap-{uuid.uuid4()}")


class RunsMixin:
    """What a graph transport adds for runs; it provides the runs log's two operations."""

    name: str

    # -- provided by the transport ----------------------------------------------------------------

    def head(self) -> int:
        raise NotImplementedError

    def wait_for(self, version: int, timeout: float = 0.0) -> int:
        raise NotImplementedError

    def append_run_events(self, events: Sequence[dict[str, Any]]) -> None:
        """Append trace events to the runs log."""
        raise NotImplementedError

    def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Trace events from the runs log (of one run, or all), in log order."""
        raise NotImplementedError

    # -- the SDK surface ------------------------------------------------------------------------

    def wait(self, receipt: Receipt, timeout: float = 10.0) -> Receipt:
        """Wait until reads see ``receipt``'s version; return it (its decision and version)."""
        self.wait_for(receipt.version, timeout)
        return receipt

    def snapshot(self) -> Snapshot:
        """Pin the head version once, to hand to several runs."""
        return Snapshot(self.head())

    def run(
        self,
        *,
        agent: str | None = None,
        task: str | None = None,
        snapshot: Snapshot | None = None,
        run_id: str | None = None,
        lease: float = 3600.0,
    ) -> Run:
        """Start a run: pin a version (head, or ``snapshot``'s) and trace what it reads.

        ``agent`` and ``task`` default to the graph's (over HTTP: the token's agent and its
        one literal task; in process there is none: name the agent). Where the graph keeps a
        pin registry (embedded, or Kafka with a projection), the pinned version is also held
        against GC for ``lease`` seconds (renew with :meth:`Run.renew`); the pin is released
        when the run ends, or lapses with its lease if the process dies.
        """
        agent = getattr(self, "default_agent", None) if agent is None else agent
        if agent is None:
            raise InputError("run: name the agent (agent=...): this graph has no default")
        task = getattr(self, "default_task", "") if task is None else task
        return Run(self, agent=agent, task=task, snapshot=snapshot, run_id=run_id, lease=lease)

    def runs(self) -> list[RunSummary]:
        """Every run in the runs log, oldest first."""
        return summarize(self.run_events())

    def replay_run(self, run_id: str) -> ReplayReport:
        """Re-execute a run's recorded reads at its pinned version and compare digests."""
        events = self.run_events(run_id)
        if not events:
            raise RunNotFound(run_id)
        return replay(self, events)  # type: ignore[arg-type]


def hold_remote_pins(
    graph: Any, events: Sequence[dict[str, Any]], agent: str, limit: int | None = None
) -> None:
    """Pins the server holds for runs of remote clients (which keep no registry of their own).

    A ``start`` event pins its version (1 h lease), an ``end`` releases the run's pin; all of
    a request's in one transaction, O(log n) each in the live pins. A start at a pruned
    version raises :class:`~claimgraph.errors.VersionPruned`, and more than ``limit`` live
    pins for ``agent`` raise :class:`~claimgraph.errors.LimitError`, before anything is
    pinned or appended.
    """
    registry = pins_of(graph)
    if registry is None:
        return
    starts = [
        (ev["pinned_version"], f"{agent}:{ev['run_id']}")
        for ev in events
        if ev["kind"] == "start" and ev["pinned_version"] >= 0
    ]
    ends = [f"{agent}:{ev['run_id']}" for ev in events if ev["kind"] == "end"]
    if not starts and not ends:
        return
    ended = set(ends)  # a run that starts and ends in one request holds nothing afterwards
    registry.batch(
        [(v, owner) for v, owner in starts if owner not in ended],
        lease=3600.0,
        holder=agent,
        limit=limit,
        release=ends,
    )


def pins_of(graph: Any) -> Any:
    """The graph's retention pin registry, if it keeps one (HTTP clients do not)."""
    try:
        return getattr(graph, "pins", None)
    except ConfigError:  # a Kafka graph opened without a projection directory
        return None


class Run:
    """A pinned version, reads served at it, and the trace of what was read and written."""

    def __init__(
        self,
        graph: RunsMixin,
        *,
        agent: str,
        task: str,
        snapshot: Snapshot | None = None,
        run_id: str | None = None,
        lease: float = 3600.0,
    ) -> None:
        self.graph = graph
        self.agent = agent
        self.task = task
        self.run_id = run_id or f"run-{uuid.uuid4()}"
        self.snapshot_id = snapshot.snapshot_id if snapshot else None
        self.version = snapshot.version if snapshot is not None else graph.head()
        self.pin: Any = None  # a retention pin: GC keeps the version readable while it lives
        registry = pins_of(graph)
        if registry is not None and self.version >= 0:
            self.pin = registry.pin(self.version, owner=self.run_id, lease=lease, holder=agent)
        self.events: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        self._closed = False
        self._event("start", {"snapshot": self.snapshot_id, "reads": READS_REVISION})
        self.flush()  # the pin is in the log before the first read is served

    # -- the trace ---------------------------------------------------------------------------------

    def _event(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        if self._closed:
            raise InputError(f"run {self.run_id} has ended; start a new run")
        ev = {
            "run_id": self.run_id,
            "seq": len(self.events),
            "kind": kind,
            "graph": self.graph.name,
            "agent": self.agent,
            "task": self.task,
            "pinned_version": self.version,
            "snapshot_id": self.snapshot_id,
            "time": time.time_ns() // 1_000_000,
            "payload": json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str),
        }
        self.events.append(ev)
        self._pending.append(ev)
        return ev

    def flush(self) -> None:
        """Write the trace events not yet in the runs log."""
        if self._pending:
            self.graph.append_run_events(self._pending)
            self._pending = []

    def _read(self, op: str, args: dict[str, Any], call: Callable[[], Any]) -> Any:
        g: Any = self.graph
        before = getattr(g, "blocked_run", None)
        g.blocked_run = self.run_id  # reads that hit quarantine are attributed to this run
        try:
            result = call()
        finally:
            g.blocked_run = before
        self._event("read", {"query": {"op": op, "args": jsonable(args)}, "digest": digest(result)})
        return result

    def tool(self, name: str, input: Any = None, output: Any = None) -> None:
        """Record a tool call beside the reads and writes (any JSON-able input and output)."""
        self._event("tool", {"name": name, "input": jsonable(input), "output": jsonable(output)})

    def close(self, status: str = "ok") -> None:
        """End the run: write its ``end`` event (the pin is released) and flush the trace."""
        if self._closed:
            return
        reads = sum(1 for e in self.events if e["kind"] == "read")
        writes = sum(1 for e in self.events if e["kind"] == "write")
        # the run boundary: its blocked reads go to the log (exit conditions count runs)
        flush = getattr(self.graph, "flush_blocked", None)
        blocked = (
            flush(agent=self.agent, run=self.run_id, pinned=self.version, task=self.task)
            if flush is not None
            else []
        )
        self._event(
            "end", {"status": status, "reads": reads, "writes": writes, "blocked": len(blocked)}
        )
        self._closed = True
        self.flush()
        registry = pins_of(self.graph)
        if self.pin is not None and registry is not None:
            registry.unpin(self.pin.pin_id)

    def renew(self, lease: float) -> None:
        """Extend the run's retention pin to ``lease`` seconds from now (long runs)."""
        registry = pins_of(self.graph)
        if self.pin is not None and registry is not None:
            self.pin = registry.renew(self.pin.pin_id, lease)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        self.close("ok" if exc_type is None else f"error: {exc_type.__name__}")

    # -- reads at the pinned version --------------------------------------------------------------

    def edge(self, edge_type: str, subject: NodeLike, obj: NodeLike) -> EdgeView:
        """The edge as of the pinned version (recorded)."""
        g: Any = self.graph
        args = {"edge_type": edge_type, "subject": _node(subject), "object": _node(obj)}
        r: EdgeView = self._read(
            "edge", args, lambda: g.edge(edge_type, subject, obj, at=self.version)
        )
        return r

    def read_edges(self, edges: Sequence[EdgeRef]) -> list[EdgeView]:
        """Several edges as of the pinned version, in one read of the graph (over HTTP, one
        request); each answer is recorded as its own ``edge`` read, so replay checks each."""
        from claimgraph.service.reads import edge_refs

        g: Any = self.graph
        wanted = edge_refs(edges)
        before = getattr(g, "blocked_run", None)
        g.blocked_run = self.run_id
        try:
            out: list[EdgeView] = g.read_edges(wanted, at=self.version)
        finally:
            g.blocked_run = before
        for (t, s, o), e in zip(wanted, out, strict=True):
            args = {"edge_type": t, "subject": list(s), "object": list(o)}
            query = {"op": "edge", "args": jsonable(args)}
            self._event("read", {"query": query, "digest": digest(e)})
        return out

    def slot(self, edge_type: str, node: NodeLike, *, direction: str = "out") -> SlotView:
        """An exclusive slot as of the pinned version (recorded)."""
        g: Any = self.graph
        args = {"edge_type": edge_type, "node": _node(node), "direction": direction}
        r: SlotView = self._read(
            "slot", args, lambda: g.slot(edge_type, node, direction=direction, at=self.version)
        )
        return r

    def neighbors(
        self,
        node: NodeLike,
        *,
        edge_type: str | None = None,
        direction: str = "out",
        include_absent: bool = False,
        min_confidence: float | None = None,
        writer: str | None = None,
        asserted_after: int | None = None,
        asserted_before: int | None = None,
    ) -> list[NeighborView]:
        """A node's neighbours as of the pinned version, optionally filtered (recorded)."""
        g: Any = self.graph
        args: dict[str, Any] = {
            "node": _node(node),
            "edge_type": edge_type,
            "direction": direction,
            "include_absent": include_absent,
        }
        filters = {
            "min_confidence": min_confidence,
            "writer": writer,
            "asserted_after": asserted_after,
            "asserted_before": asserted_before,
        }
        filters = {k: v for k, v in filters.items() if v is not None}
        args.update(filters)  # only the filters given: traces stay as they were without them
        r: list[NeighborView] = self._read(
            "neighbors",
            args,
            lambda: g.neighbors(
                node,
                edge_type=edge_type,
                direction=direction,
                at=self.version,
                include_absent=include_absent,
                **filters,
            ),
        )
        return r

    def paths(
        self,
        src: NodeLike,
        dst: NodeLike,
        *,
        max_hops: int = 3,
        edge_types: Sequence[str] | None = None,
        direction: Literal["out", "in", "both"] = "out",
        limit: int = 100,
    ) -> PathsResult:
        """Paths ``src`` → ``dst`` as of the pinned version (recorded)."""
        g: Any = self.graph
        types = list(edge_types) if edge_types else None
        args = {
            "src": _node(src),
            "dst": _node(dst),
            "max_hops": max_hops,
            "edge_types": types,
            "direction": direction,
            "limit": limit,
        }
        r: PathsResult = self._read(
            "paths",
            args,
            lambda: g.paths(
                src,
                dst,
                max_hops=max_hops,
                edge_types=types,
                direction=direction,
                limit=limit,
                at=self.version,
            ),
        )
        return r

    def reach(
        self,
        node: NodeLike,
        *,
        direction: Literal["out", "in", "both"] = "out",
        max_hops: int = 2,
        edge_types: Sequence[str] | None = None,
        limit: int = 100,
    ) -> ReachResult:
        """Nodes within ``max_hops`` of ``node`` as of the pinned version (recorded)."""
        g: Any = self.graph
        types = list(edge_types) if edge_types else None
        args = {
            "node": _node(node),
            "direction": direction,
            "max_hops": max_hops,
            "edge_types": types,
            "limit": limit,
        }
        r: ReachResult = self._read(
            "reach",
            args,
            lambda: g.reach(
                node,
                direction=direction,
                max_hops=max_hops,
                edge_types=types,
                limit=limit,
                at=self.version,
            ),
        )
        return r

    def history(self, edge_type: str, subject: NodeLike, obj: NodeLike) -> HistoryView:
        """An edge's history up to the pinned version (recorded)."""
        g: Any = self.graph
        args = {"edge_type": edge_type, "subject": _node(subject), "object": _node(obj)}
        r: HistoryView = self._read(
            "history", args, lambda: g.history(edge_type, subject, obj, at=self.version)
        )
        return r

    def quarantine(self, *, include_closed: bool = False) -> list[dict[str, Any]]:
        """Conflicts as of the pinned version (recorded)."""
        g: Any = self.graph
        r: list[dict[str, Any]] = self._read(
            "quarantine",
            {"include_closed": include_closed},
            lambda: g.quarantine(at=self.version, include_closed=include_closed),
        )
        return r

    def claim_info(self, claim_id: str) -> dict[str, Any] | None:
        """A claim as of the pinned version (recorded)."""
        g: Any = self.graph
        r: dict[str, Any] | None = self._read(
            "claim_info", {"claim_id": claim_id}, lambda: g.claim_info(claim_id, at=self.version)
        )
        return r

    def conflict(self, conflict_id: str) -> dict[str, Any] | None:
        """A conflict as of the pinned version (recorded)."""
        g: Any = self.graph
        r: dict[str, Any] | None = self._read(
            "conflict",
            {"conflict_id": conflict_id},
            lambda: g.conflict(conflict_id, at=self.version),
        )
        return r

    # -- writes as the run's agent, based on the pinned version -----------------------------------

    def _wrote(self, receipt: Receipt) -> Receipt:
        d = receipt.decision
        self._event(
            "write",
            {
                "command_id": receipt.command_id,
                "version": receipt.version,
                "kind": d["kind"],
                "reason": d["reason"],
                "command_type": d["command_type"],
            },
        )
        self.flush()
        return receipt

    def claim(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        polarity: str = "assert",
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """A claim by the run's agent in its task, ``based_on_version`` = the pinned version
        unless given."""
        g: Any = self.graph
        r: Receipt = g.claim(
            edge_type,
            subject,
            obj,
            agent=self.agent,
            task=self.task,
            run_id=self.run_id,
            polarity=polarity,
            confidence=confidence,
            evidence=evidence,
            reasoning=reasoning,
            asserted_at=asserted_at,
            properties=properties,
            command_id=command_id,
            based_on_version=self.version if based_on_version is None else based_on_version,
        )
        return self._wrote(r)

    def claim_many(self, claims: Sequence[dict[str, Any]]) -> list[Receipt]:
        """Several claims by the run's agent, submitted together: one synced write embedded,
        one ``POST /v1/commands`` per batch over HTTP. Each item takes the keyword arguments
        of :meth:`claim` plus ``edge_type``, ``subject`` and ``object``; receipts in order."""
        from claimgraph.service.api import node
        from claimgraph.service.inputs import now_millis, require_domain, to_millis

        g: Any = self.graph
        commands: list[Any] = []
        for c in claims:
            (st, si), (ot, oi) = node(c["subject"]), node(c["object"])
            at, based = c.get("asserted_at"), c.get("based_on_version")
            command = {
                "type": "claim",
                "command_id": c.get("command_id") or str(uuid.uuid4()),
                "graph": g.name,
                "agent": self.agent,
                "task": self.task,
                "run_id": self.run_id,
                "edge_type": c["edge_type"],
                "subject_type": st,
                "subject_id": si,
                "object_type": ot,
                "object_id": oi,
                "polarity": c.get("polarity", "assert"),
                "confidence": float(c.get("confidence", 1.0)),
                "evidence": list(c.get("evidence") or ()),
                "reasoning": c.get("reasoning", ""),
                "asserted_at": now_millis() if at is None else to_millis(at),
                "based_on_version": self.version if based is None else based,
                "properties": dict(c.get("properties") or {}),
            }
            require_domain(command)  # type: ignore[arg-type]
            commands.append(command if g.signer is None else g.signer.sign(command))
        receipts: list[Receipt] = g.submit(commands) if commands else []
        for r in receipts:
            d = r.decision
            self._event(
                "write",
                {
                    "command_id": r.command_id,
                    "version": r.version,
                    "kind": d["kind"],
                    "reason": d["reason"],
                    "command_type": d["command_type"],
                },
            )
        self.flush()
        return receipts

    def assert_(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Assert an edge within the run (see :meth:`claim`)."""
        return self.claim(
            edge_type,
            subject,
            obj,
            polarity="assert",
            confidence=confidence,
            evidence=evidence,
            reasoning=reasoning,
            asserted_at=asserted_at,
            based_on_version=based_on_version,
            properties=properties,
            command_id=command_id,
        )

    def deny(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Deny an edge within the run (see :meth:`claim`)."""
        return self.claim(
            edge_type,
            subject,
            obj,
            polarity="deny",
            confidence=confidence,
            evidence=evidence,
            reasoning=reasoning,
            asserted_at=asserted_at,
            based_on_version=based_on_version,
            properties=properties,
            command_id=command_id,
        )

    def retract(self, claim_id: str, *, reason: str = "") -> Receipt:
        """Retract one of the agent's claims within the run."""
        g: Any = self.graph
        r: Receipt = g.retract(
            claim_id, agent=self.agent, task=self.task, reason=reason, run_id=self.run_id
        )
        return self._wrote(r)


def _node(n: NodeLike) -> list[str]:
    from claimgraph.service.api import node

    return list(node(n))


# -- summaries and replay -------------------------------------------------------------------------
