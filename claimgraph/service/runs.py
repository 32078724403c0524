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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from claimgraph.errors import ConfigError, InputError, RunNotFound
from claimgraph.service.api import GraphWrites
from claimgraph.service.catalogue_reads import RunReads
from claimgraph.service.catalogue_writes import RunWrites
from claimgraph.service.traces import (
    READS_REVISION,
    ReplayReport,
    RunSummary,
    digest,
    jsonable,
    replay,
    summarize,
    trace_args,
    traced_read,
)
from claimgraph.service.writes import fields_of, spec_of, split_params

if TYPE_CHECKING:
    from claimgraph.core.model import Command
    from claimgraph.projections.reader import EdgeView
    from claimgraph.service.api import NodeLike, Receipt
    from claimgraph.service.port import GraphPort
    from claimgraph.service.reads import EdgeRef

__all__ = [
    "Run",
    "RunPins",
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

    def runs(self) -> list[RunSummary]:
        """Every run in the runs log, oldest first."""
        return summarize(self.run_events())

    def replay_run(self, run_id: str) -> ReplayReport:
        """Re-execute a run's recorded reads at its pinned version and compare digests."""
        events = self.run_events(run_id)
        if not events:
            raise RunNotFound(run_id)
        return replay(self, events)  # type: ignore[arg-type]  # the typed reads of GraphAPI


def hold_remote_pins(
    graph: object, events: Sequence[dict[str, Any]], agent: str, limit: int | None = None
) -> None:
    """Pins the server holds for runs of remote clients (which keep no registry of their own).

    A ``start`` event pins its version (1 h lease), an ``end`` releases the run's pin; all of
    a request's in one transaction, O(log n) each in the live pins. A start at a pruned
    version raises :class:`~claimgraph.errors.VersionPruned`, and more than ``limit`` live
    pins for ``agent`` raise :class:`~claimgraph.errors.LimitError`, before anything is
    pinned or appended.
    """
    from claimgraph.projections.pins import PinRegistry

    registry = pins_of(graph)
    if not isinstance(registry, PinRegistry):
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


@runtime_checkable
class RunPins(Protocol):
    """What a run needs of a pin registry (a graph's, or a principal's view of it)."""

    def pin(self, version: int, *, owner: str, lease: float, holder: str = "") -> Any: ...

    def renew(self, pin_id: str, lease: float) -> Any: ...

    def unpin(self, pin_id: str) -> Any: ...


def pins_of(graph: object) -> RunPins | None:
    """The graph's retention pin registry, if it keeps one (HTTP clients do not)."""
    try:
        registry = getattr(graph, "pins", None)
    except ConfigError:  # a Kafka graph opened without a projection directory
        return None
    return registry if isinstance(registry, RunPins) else None


class Run(RunReads, RunWrites):
    """A pinned version, reads served at it, and the trace of what was read and written.

    Typed against the narrow :class:`~claimgraph.service.port.GraphPort`: its reads go
    through the port's ``read`` at the pinned version (:meth:`read`; the typed ones are
    generated from the query catalogue), its writes through the graph's writers when it has
    them, else built here and sent with ``submit``.
    """

    def __init__(
        self,
        graph: GraphPort,
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

    def read(self, query: str, /, **params: Any) -> Any:
        """A read the run traces (``edge``, ``slot``, ``neighbors``, ...: the catalogue's
        ``traced`` reads), at the pinned version: recorded with its arguments and a digest of
        its answer, so :func:`replay` can re-execute it."""
        spec = traced_read(query, params)
        g = self.graph
        before = g.blocked_run
        g.blocked_run = self.run_id  # reads that hit quarantine are attributed to this run
        try:
            result = g.read(spec.name, **params, at=self.version)
        finally:
            g.blocked_run = before
        query_ = {"op": spec.name, "args": jsonable(trace_args(spec, params))}
        self._event("read", {"query": query_, "digest": digest(result)})
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
        blocked = self.graph.flush_blocked(
            agent=self.agent, run=self.run_id, pinned=self.version, task=self.task
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

    # -- reads at the pinned version (the typed ones: RunReads) ------------------------------

    def read_edges(self, edges: Sequence[EdgeRef]) -> list[EdgeView]:
        """Several edges as of the pinned version, in one read of the graph (over HTTP, one
        request); each answer is recorded as its own ``edge`` read, so replay checks each."""
        from claimgraph.service.reads import edge_refs

        g = self.graph
        wanted = edge_refs(edges)
        before = g.blocked_run
        g.blocked_run = self.run_id
        try:
            out: list[EdgeView] = g.read("read_edges", edges=wanted, at=self.version)
        finally:
            g.blocked_run = before
        for (t, s, o), e in zip(wanted, out, strict=True):
            args = {"edge_type": t, "subject": list(s), "object": list(o)}
            query = {"op": "edge", "args": jsonable(args)}
            self._event("read", {"query": query, "digest": digest(e)})
        return out

    # -- writes as the run's agent, based on the pinned version -----------------------------------

    @property
    def _writer(self) -> GraphWrites:
        """The graph's writers (every graph has them), or writers over its ``submit``."""
        if isinstance(self.graph, GraphWrites):
            return self.graph
        return _Submits(self.graph)

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

    def write(self, name: str, /, **params: Any) -> Receipt:
        """A write of the catalogue a run offers (claim, assert_, deny, retract), by name:
        as the run's agent in its task and run; a claim is based on the pinned version unless
        ``based_on_version`` is given. Recorded in the trace."""
        spec = spec_of(name)
        if not spec.run:
            raise InputError(f"a run does not send {name}: write it on the graph")
        for k in ("agent", "task", "run_id"):
            if k in params:
                raise InputError(f"a run's writes are its own: {k} is the run's")
        if spec.command == "claim" and params.get("based_on_version") is None:
            params["based_on_version"] = self.version
        r = self._writer.write(name, agent=self.agent, task=self.task, run_id=self.run_id, **params)
        return self._wrote(r)

    def claim_many(self, claims: Sequence[dict[str, Any]]) -> list[Receipt]:
        """Several claims by the run's agent, submitted together: one synced write embedded,
        one ``POST /v1/commands`` per batch over HTTP. Each item takes the keyword arguments
        of :meth:`claim` plus ``edge_type``, ``subject`` and ``object``; receipts in order."""
        from claimgraph.service.inputs import require_domain

        g, signer, spec = self.graph, self._writer.signer, spec_of("claim")
        commands: list[Any] = []
        for c in claims:
            params = {("obj" if k == "object" else k): v for k, v in c.items()}
            if params.get("based_on_version") is None:
                params["based_on_version"] = self.version
            for k in ("agent", "task", "run_id"):
                params.pop(k, None)  # the run's
            _, _, command_id, own = split_params(spec, params)
            command = {
                "type": "claim",
                "command_id": command_id or str(uuid.uuid4()),
                "graph": g.name,
                "agent": self.agent,
                "task": self.task,
                **fields_of(spec, {**own, "run_id": self.run_id}),
            }
            require_domain(command)  # type: ignore[arg-type]
            commands.append(command if signer is None else signer.sign(command))  # type: ignore[arg-type]
        receipts = g.submit(commands) if commands else []
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


class _Submits(GraphWrites):
    """Writers over a bare port: each command (or signed record) through ``submit``."""

    def __init__(self, graph: GraphPort) -> None:
        self.graph, self.name = graph, graph.name

    def _one(self, command: Command) -> Receipt:
        return self.graph.submit([command])[0]

    def _one_signed(self, record: bytes) -> Receipt:
        return self.graph.submit([record])[0]


def _node(n: NodeLike) -> list[str]:
    from claimgraph.service.api import node

    return list(node(n))


# -- summaries and replay -------------------------------------------------------------------------
