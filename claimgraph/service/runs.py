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

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from claimgraph.core.wire import decode_run_event, encode_run_event
from claimgraph.errors import ClaimgraphError, ConfigError, InputError, RunNotFound

if TYPE_CHECKING:
    from claimgraph.service.api import NodeLike, Receipt

__all__ = [
    "READ_OPS",
    "ReplayReport",
    "Run",
    "RunSummary",
    "RunsMixin",
    "Snapshot",
    "check_event",
    "digest",
    "live_pins",
    "replay",
    "summarize",
]


def _jsonable(value: Any) -> Any:
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def digest(result: Any) -> str:
    """SHA-256 of a read result's canonical JSON (sorted keys, no spaces): what a run saw."""
    raw = json.dumps(_jsonable(result), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


# The reads a run can make and replay: op → (method name, argument names in call order).
READ_OPS: dict[str, tuple[str, ...]] = {
    "edge": ("edge_type", "subject", "object"),
    "slot": ("edge_type", "node", "direction"),
    "neighbors": ("node", "edge_type", "direction", "include_absent"),
    "history": ("edge_type", "subject", "object"),
    "quarantine": ("include_closed",),
    "claim_info": ("claim_id",),
    "conflict": ("conflict_id",),
}


class _Reads(Protocol):
    def edge(self, edge_type: str, subject: NodeLike, obj: NodeLike, *, at: int | None) -> Any: ...
    def slot(self, edge_type: str, node: NodeLike, *, direction: str, at: int | None) -> Any: ...
    def neighbors(
        self,
        node: NodeLike,
        *,
        edge_type: str | None,
        direction: str,
        at: int | None,
        include_absent: bool,
    ) -> Any: ...
    def history(
        self, edge_type: str, subject: NodeLike, obj: NodeLike, *, at: int | None
    ) -> Any: ...
    def quarantine(self, *, at: int | None, include_closed: bool) -> Any: ...
    def claim_info(self, claim_id: str, *, at: int | None) -> Any: ...
    def conflict(self, conflict_id: str, *, at: int | None) -> Any: ...


def execute(reads: _Reads, op: str, args: dict[str, Any], at: int) -> Any:
    """Run one recorded read at ``at`` (the same call a run made)."""

    def n(x: Any) -> NodeLike:
        return tuple(x) if isinstance(x, list) else x

    if op == "edge":
        return reads.edge(args["edge_type"], n(args["subject"]), n(args["object"]), at=at)
    if op == "slot":
        return reads.slot(args["edge_type"], n(args["node"]), direction=args["direction"], at=at)
    if op == "neighbors":
        return reads.neighbors(
            n(args["node"]),
            edge_type=args["edge_type"],
            direction=args["direction"],
            at=at,
            include_absent=args["include_absent"],
        )
    if op == "history":
        return reads.history(args["edge_type"], n(args["subject"]), n(args["object"]), at=at)
    if op == "quarantine":
        return reads.quarantine(at=at, include_closed=args["include_closed"])
    if op == "claim_info":
        return reads.claim_info(args["claim_id"], at=at)
    if op == "conflict":
        return reads.conflict(args["conflict_id"], at=at)
    raise InputError(f"unknown read {op!r} (known: {', '.join(READ_OPS)})")


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
        agent: str,
        task: str = "",
        snapshot: Snapshot | None = None,
        run_id: str | None = None,
        lease: float = 3600.0,
    ) -> Run:
        """Start a run: pin a version (head, or ``snapshot``'s) and trace what it reads.

        Where the graph keeps a pin registry (embedded, or Kafka with a projection), the pinned
        version is also held against GC for ``lease`` seconds (renew with :meth:`Run.renew`);
        the pin is released when the run ends, or lapses with its lease if the process dies.
        """
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


def _pins_of(graph: Any) -> Any:
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
        registry = _pins_of(graph)
        if registry is not None and self.version >= 0:
            self.pin = registry.pin(self.version, owner=self.run_id, lease=lease)
        self.events: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        self._closed = False
        self._event("start", {"snapshot": self.snapshot_id})
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
        self._event(
            "read", {"query": {"op": op, "args": _jsonable(args)}, "digest": digest(result)}
        )
        return result

    def tool(self, name: str, input: Any = None, output: Any = None) -> None:
        """Record a tool call beside the reads and writes (any JSON-able input and output)."""
        self._event("tool", {"name": name, "input": _jsonable(input), "output": _jsonable(output)})

    def close(self, status: str = "ok") -> None:
        """End the run: write its ``end`` event (the pin is released) and flush the trace."""
        if self._closed:
            return
        reads = sum(1 for e in self.events if e["kind"] == "read")
        writes = sum(1 for e in self.events if e["kind"] == "write")
        # the run boundary: its blocked reads go to the log (exit conditions count runs)
        flush = getattr(self.graph, "flush_blocked", None)
        blocked = flush(agent=self.agent, run=self.run_id) if flush is not None else []
        self._event(
            "end", {"status": status, "reads": reads, "writes": writes, "blocked": len(blocked)}
        )
        self._closed = True
        self.flush()
        registry = _pins_of(self.graph)
        if self.pin is not None and registry is not None:
            registry.unpin(self.pin.pin_id)

    def renew(self, lease: float) -> None:
        """Extend the run's retention pin to ``lease`` seconds from now (long runs)."""
        registry = _pins_of(self.graph)
        if self.pin is not None and registry is not None:
            self.pin = registry.renew(self.pin.pin_id, lease)

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        self.close("ok" if exc_type is None else f"error: {exc_type.__name__}")

    # -- reads at the pinned version --------------------------------------------------------------

    def edge(self, edge_type: str, subject: NodeLike, obj: NodeLike) -> Any:
        """The edge as of the pinned version (recorded)."""
        g: Any = self.graph
        args = {"edge_type": edge_type, "subject": _node(subject), "object": _node(obj)}
        return self._read("edge", args, lambda: g.edge(edge_type, subject, obj, at=self.version))

    def slot(self, edge_type: str, node: NodeLike, *, direction: str = "out") -> Any:
        """An exclusive slot as of the pinned version (recorded)."""
        g: Any = self.graph
        args = {"edge_type": edge_type, "node": _node(node), "direction": direction}
        return self._read(
            "slot", args, lambda: g.slot(edge_type, node, direction=direction, at=self.version)
        )

    def neighbors(
        self,
        node: NodeLike,
        *,
        edge_type: str | None = None,
        direction: str = "out",
        include_absent: bool = False,
    ) -> Any:
        """A node's neighbours as of the pinned version (recorded)."""
        g: Any = self.graph
        args = {
            "node": _node(node),
            "edge_type": edge_type,
            "direction": direction,
            "include_absent": include_absent,
        }
        return self._read(
            "neighbors",
            args,
            lambda: g.neighbors(
                node,
                edge_type=edge_type,
                direction=direction,
                at=self.version,
                include_absent=include_absent,
            ),
        )

    def history(self, edge_type: str, subject: NodeLike, obj: NodeLike) -> Any:
        """An edge's history up to the pinned version (recorded)."""
        g: Any = self.graph
        args = {"edge_type": edge_type, "subject": _node(subject), "object": _node(obj)}
        return self._read(
            "history", args, lambda: g.history(edge_type, subject, obj, at=self.version)
        )

    def quarantine(self, *, include_closed: bool = False) -> Any:
        """Conflicts as of the pinned version (recorded)."""
        g: Any = self.graph
        return self._read(
            "quarantine",
            {"include_closed": include_closed},
            lambda: g.quarantine(at=self.version, include_closed=include_closed),
        )

    def claim_info(self, claim_id: str) -> Any:
        """A claim as of the pinned version (recorded)."""
        g: Any = self.graph
        return self._read(
            "claim_info", {"claim_id": claim_id}, lambda: g.claim_info(claim_id, at=self.version)
        )

    def conflict(self, conflict_id: str) -> Any:
        """A conflict as of the pinned version (recorded)."""
        g: Any = self.graph
        return self._read(
            "conflict",
            {"conflict_id": conflict_id},
            lambda: g.conflict(conflict_id, at=self.version),
        )

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

    def claim(self, edge_type: str, subject: NodeLike, obj: NodeLike, **kw: Any) -> Receipt:
        """A claim by the run's agent in its task, ``based_on_version`` = the pinned version."""
        g: Any = self.graph
        kw.setdefault("based_on_version", self.version)
        r: Receipt = g.claim(
            edge_type, subject, obj, agent=self.agent, task=self.task, run_id=self.run_id, **kw
        )
        return self._wrote(r)

    def assert_(self, edge_type: str, subject: NodeLike, obj: NodeLike, **kw: Any) -> Receipt:
        """Assert an edge within the run (see :meth:`claim`)."""
        return self.claim(edge_type, subject, obj, polarity="assert", **kw)

    def deny(self, edge_type: str, subject: NodeLike, obj: NodeLike, **kw: Any) -> Receipt:
        """Deny an edge within the run (see :meth:`claim`)."""
        return self.claim(edge_type, subject, obj, polarity="deny", **kw)

    def retract(self, claim_id: str, *, reason: str = "") -> Receipt:
        """Retract one of the agent's claims within the run."""
        g: Any = self.graph
        r: Receipt = g.retract(claim_id, agent=self.agent, task=self.task, reason=reason)
        return self._wrote(r)


def _node(n: NodeLike) -> list[str]:
    from claimgraph.service.api import node

    return list(node(n))


# -- summaries and replay -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run as the runs log tells it."""

    run_id: str
    agent: str
    task: str
    pinned_version: int
    snapshot_id: str | None
    started: int
    ended: int | None
    status: str | None
    reads: int
    writes: int
    tools: int

    @property
    def live(self) -> bool:
        """Started and not ended: its pinned version must stay readable."""
        return self.ended is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "agent": self.agent,
            "task": self.task,
            "pinned_version": self.pinned_version,
            "snapshot_id": self.snapshot_id,
            "started": self.started,
            "ended": self.ended,
            "status": self.status,
            "reads": self.reads,
            "writes": self.writes,
            "tools": self.tools,
            "live": self.live,
        }


def summarize(events: Iterable[dict[str, Any]]) -> list[RunSummary]:
    """Fold trace events into one summary per run, in the order runs started."""
    acc: dict[str, dict[str, Any]] = {}
    for e in events:
        s = acc.get(e["run_id"])
        if s is None:
            s = acc[e["run_id"]] = {
                "run_id": e["run_id"],
                "agent": e["agent"],
                "task": e["task"],
                "pinned_version": e["pinned_version"],
                "snapshot_id": e["snapshot_id"],
                "started": e["time"],
                "ended": None,
                "status": None,
                "reads": 0,
                "writes": 0,
                "tools": 0,
            }
        kind = e["kind"]
        if kind in ("read", "write", "tool"):
            s[kind + "s"] += 1
        elif kind == "end":
            s["ended"] = e["time"]
            s["status"] = str(_payload(e).get("status", ""))
    return [RunSummary(**s) for s in acc.values()]


def live_pins(events: Iterable[dict[str, Any]]) -> dict[str, int]:
    """run id → pinned version of every run that started and has not ended (for retention)."""
    return {s.run_id: s.pinned_version for s in summarize(events) if s.live}


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """The outcome of replaying a run: identical inputs, or the first read that differs."""

    run_id: str
    pinned_version: int
    reads: int
    identical: bool
    first_difference: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "pinned_version": self.pinned_version,
            "reads": self.reads,
            "identical": self.identical,
            "first_difference": self.first_difference,
        }


def replay(reads: _Reads, events: Sequence[dict[str, Any]]) -> ReplayReport:
    """Re-execute every recorded read at the pinned version; compare each result's digest."""
    if not events:
        raise InputError("nothing to replay: the run has no events")
    run_id = events[0]["run_id"]
    pinned = events[0]["pinned_version"]
    n = 0
    for e in events:
        if e["kind"] != "read":
            continue
        n += 1
        payload = _payload(e)
        q = payload.get("query")
        try:
            got = digest(execute(reads, q["op"], q["args"], pinned))  # type: ignore[index]
        except ClaimgraphError as exc:
            got = f"error: {type(exc).__name__}: {exc}"
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a malformed trace
            got = f"error: the recorded query cannot be executed: {type(exc).__name__}: {exc}"
        if got != payload.get("digest"):
            return ReplayReport(
                run_id,
                pinned,
                n,
                False,
                {"seq": e["seq"], "query": q, "recorded": payload["digest"], "replayed": got},
            )
    return ReplayReport(run_id, pinned, n, True)


def _payload(event: dict[str, Any]) -> dict[str, Any]:
    try:
        p = json.loads(event["payload"])
    except ValueError:
        return {}
    return p if isinstance(p, dict) else {}


def check_event(event: dict[str, Any]) -> None:
    """Raise InputError unless a trace event submitted from outside is well formed."""
    try:
        p = json.loads(event["payload"])
    except ValueError:
        raise InputError("payload must be a JSON object") from None
    if not isinstance(p, dict):
        raise InputError("payload must be a JSON object")
    if event["kind"] == "read":
        q = p.get("query")
        if not (
            isinstance(q, dict)
            and q.get("op") in READ_OPS
            and isinstance(q.get("args"), dict)
            and set(READ_OPS[q["op"]]) <= set(q["args"])
            and isinstance(p.get("digest"), str)
        ):
            raise InputError(
                "a read event's payload needs query.op (one of "
                f"{', '.join(READ_OPS)}), query.args with that read's arguments, and digest"
            )


def encode_events(events: Sequence[dict[str, Any]]) -> list[bytes]:
    """Trace events as runs-log records."""
    return [encode_run_event(e) for e in events]


def decode_events(values: Iterable[bytes], run_id: str | None = None) -> list[dict[str, Any]]:
    """Runs-log records as trace events (of one run, if ``run_id`` is given)."""
    out = []
    for v in values:
        e = decode_run_event(v)
        if run_id is None or e["run_id"] == run_id:
            out.append(e)
    return out
