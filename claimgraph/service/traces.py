"""Run traces: the events a run writes to the runs log, their digests, summaries and replay.

A trace is ``start`` (the pinned version), each ``read`` (its query and a SHA-256 digest of
the result), each ``write`` (its receipt), ``tool`` calls and ``end``. Replaying a run
re-executes its reads at the pinned version and compares digests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from claimgraph.core.commands import Kind, cut
from claimgraph.core.queries import QUERIES, QuerySpec, params_violation
from claimgraph.core.wire import decode_run_event, encode_run_event
from claimgraph.errors import ClaimgraphError, InputError
from claimgraph.service.api import node

__all__ = [
    "READS_REVISION",
    "ReplayReport",
    "RunSummary",
    "check_event",
    "decode_events",
    "digest",
    "encode_events",
    "execute",
    "jsonable",
    "live_pins",
    "replay",
    "summarize",
    "trace_args",
    "traced_read",
]


def jsonable(value: Any) -> Any:
    if hasattr(value, "traced"):  # what a run digests of it (a history: see HistoryView)
        return jsonable(value.traced())
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


def digest(result: Any) -> str:
    """SHA-256 of a read result's canonical JSON (sorted keys, no spaces): what a run saw."""
    raw = json.dumps(jsonable(result), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


# Read semantics a trace was recorded under, in its ``start`` event's payload (``reads``):
# from 2 on, reads of edge types (or slot sides) the schema does not define are errors;
# traces without it replay with the old meaning (``absent``).
READS_REVISION = 2


def traced_read(query: str, params: dict[str, Any]) -> QuerySpec:
    """The catalogue's read ``query`` if a run traces it and ``params`` fit it (a run reads
    at its pinned version: no ``at``, no ``timeout``); else :class:`InputError`."""
    spec = QUERIES.get(query) if isinstance(query, str) else None
    if spec is None or not spec.traced:
        traced = ", ".join(s.name for s in QUERIES.values() if s.traced)
        raise InputError(f"a run does not read {cut(query, 40)}; its reads are {traced}")
    known = {p.keyword for p in spec.params}
    extra = sorted(set(params) - known)
    if extra:
        raise InputError(
            f"{spec.name} in a run takes no {cut(extra[0], 40)} (it reads at its pinned version)"
        )
    problem = params_violation(spec, params)
    if problem is not None:
        raise InputError(problem)
    return spec


def trace_args(spec: QuerySpec, params: dict[str, Any]) -> dict[str, Any]:
    """A traced read's recorded arguments (catalogue names, nodes as ``[type, id]``): those
    the catalogue's ``recorded`` names always (defaults filled in), the ones added since only
    when given (traces recorded before them stay as they were)."""
    base = spec.recorded
    out: dict[str, Any] = {}
    for p in spec.params:
        v = params.get(p.keyword, None if p.required else p.default)
        if p.node and v is not None:
            t, i = node(v)
            v = [t, i]
        elif p.domain.kind is Kind.LIST:
            v = list(v) if v else None
        if p.name in base or v is not None:
            out[p.name] = v
    return out


class _Reads(Protocol):
    def read(self, query: str, /, **params: Any) -> Any: ...


def execute(reads: _Reads, op: str, args: dict[str, Any], at: int) -> Any:
    """Run one recorded read at ``at`` (the same call a run made), through ``read``: the
    arguments the catalogue's ``recorded`` names must be there (a trace without them is malformed:
    ``KeyError``), the ones added since default when absent."""
    spec = QUERIES.get(op) if isinstance(op, str) else None
    if spec is None or not spec.traced:
        known = ", ".join(s.name for s in QUERIES.values() if s.traced)
        raise InputError(f"unknown read {cut(op)} (known: {known})")
    params: dict[str, Any] = {}
    for p in spec.params:
        v = args[p.name] if p.name in spec.recorded else args.get(p.name)
        if v is None and not p.required:
            continue
        params[p.keyword] = tuple(v) if p.node and isinstance(v, list) else v
    return reads.read(op, **params, at=at)


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
    started = next((e for e in events if e["kind"] == "start"), None)
    recorded_under = _payload(started).get("reads", 1) if started is not None else 1
    lenient = getattr(reads, "lenient_reads", None)
    if recorded_under < READS_REVISION and lenient is not None:
        with lenient():
            return _replay(reads, events, run_id, pinned)
    return _replay(reads, events, run_id, pinned)


def _replay(
    reads: _Reads, events: Sequence[dict[str, Any]], run_id: str, pinned: int
) -> ReplayReport:
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
        op = q.get("op") if isinstance(q, dict) else None
        spec = QUERIES.get(op) if isinstance(op, str) else None
        if not (
            isinstance(q, dict)
            and spec is not None
            and spec.traced
            and isinstance(q.get("args"), dict)
            and set(spec.recorded) <= set(q["args"])
            and isinstance(p.get("digest"), str)
        ):
            known = ", ".join(s.name for s in QUERIES.values() if s.traced)
            raise InputError(
                f"a read event's payload needs query.op (one of {known}), query.args with "
                "that read's arguments, and digest"
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
