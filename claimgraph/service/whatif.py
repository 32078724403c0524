"""What-if of a proposed graph schema: the commands log decided again under it, in scratch state.

Theory of operation
-------------------
The governor is pure, so "what would this schema have decided?" is a fold. Two states are
folded side by side from the decisions log (from the newest usable checkpoint below the range,
if any): **logged**, which only folds the logged decisions, and **proposed**, which folds the
same decisions up to version ``start - 1`` and then has the proposed schema put in force
(:meth:`GraphState.adopt_schema`) *without a decision*, so it takes no version: the versions of
the report are the log's. From ``start`` to ``end`` each command of the commands log is decided
again for the proposed state, under the rules revision its logged decision names, with its log
time (deadlines and grant expiries fall as they did), and the new decision is compared with the
logged one, matched by command (its id in the report, not its version: a real publish would
take a version and shift every later one by one). What is compared is the decision's
*outcome* (:func:`outcome`): its kind and reason, the conflict it names, the claims it
supersedes, withholds, releases or dismisses, the claims it disputes, its target, staleness,
count and exits. Its detail text, schema revision, merge figures, signals and hash-chain fields
are not compared: they name versions and revisions that a real publish would shift.

The log is taken as logged where a replay must not invent history:

* a ``publish_schema`` in the range applies as logged (accepted or not): the proposal stops
  being in force where a later schema was published, and the report lists each one, with what
  the governor would have decided of it under the proposal when that differs;
* ``resolve`` and ``escalate`` commands are the verdicts that were logged, decided again for
  the proposed state; one whose conflict no longer exists (or is already closed) is reported
  as *no longer needed*. Resolvers are not run again: a conflict that only the proposal opens
  stays open unless a logged command, a tick's deadline or a fallback closes it.

Before the range, the proposal itself is decided as a ``publish_schema`` by ``agent`` at
``start`` (authority, parse, the slot clashes new cardinalities would cause): if the governor
would refuse it, the report says why and nothing is replayed. After the range it is decided
again on the logged state (``now``): what a real publish would answer after ``end``.

This module does no I/O of its own beyond reading the two logs it is given (and checkpoints);
:mod:`claimgraph.service.whatif_run` opens them read-only in a process of their own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from claimgraph.core.governor import decide_command
from claimgraph.core.governor.revisions import CURRENT
from claimgraph.core.model import Command, Decision, Progress, Reason
from claimgraph.core.schema import parse_schema
from claimgraph.core.state import SEP, ConflictState, GraphState, edge_parts
from claimgraph.core.wire import decode_command, encode_decision
from claimgraph.errors import ConfigError, DecodeError, IntegrityError
from claimgraph.logs.base import LogRecord
from claimgraph.native.batch import decide_batch, fold_batch
from claimgraph.native.decide import decide, evolve
from claimgraph.streams.gcbatch import batch_gc

__all__ = [
    "FIRST",
    "Bounds",
    "Logs",
    "WhatIfReport",
    "outcome",
    "what_if",
]

FIRST = 20  # entries listed per category by default (every one is counted)
BATCH = 4096  # records read at once
# Reasons for which a logged verdict (resolve, escalate) is "no longer needed": its conflict
# does not exist under the proposal, or was already closed when it came.
NOT_NEEDED = ("unknown_conflict", "conflict_closed")
_VERDICTS = ("resolve", "escalate")
_PUBLISHED = Reason.SCHEMA_PUBLISHED.value.encode()


class _Log(Protocol):
    def read(self, start: int, limit: int) -> list[LogRecord]: ...
    def get(self, offset: int) -> LogRecord | None: ...
    def end(self) -> int: ...


class Logs(Protocol):
    """What a what-if reads: the commands and decisions logs (an embedded log store)."""

    @property
    def commands(self) -> _Log: ...
    @property
    def decisions(self) -> _Log: ...


@dataclass(frozen=True, slots=True)
class Bounds:
    """Which versions to decide again, and the bounds on the work.

    ``start``: the first version decided under the proposal (default: the version after the
    newest accepted ``publish_schema`` at or below ``end``, i.e. the traffic the schema now in
    force has governed; 0 if none). ``end``: the last version (default: head). ``limit``: at
    most this many commands decided again. ``seconds``: stop once this much time has passed
    (checked between batches). ``first``: how many entries each list of the report shows.
    """

    start: int | None = None
    end: int | None = None
    limit: int | None = None
    seconds: float | None = None
    first: int = FIRST

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ConfigError("the command limit of a what-if must be at least 1")
        if self.seconds is not None and self.seconds <= 0:
            raise ConfigError("the time bound of a what-if must be a positive number of seconds")
        if self.first < 0:
            raise ConfigError("the number of entries listed must not be negative")


def outcome(d: Decision) -> tuple[Any, ...]:
    """What a decision decided, without what depends on its version or schema revision."""
    return (
        d["kind"],
        d["reason"],
        d["conflict_id"],
        d["target"],
        d["stale"],
        d["count"],
        tuple(d["supersedes"]),
        tuple(d["withheld"]),
        tuple(d["released"]),
        tuple(d["dismissed"]),
        tuple(d["conflicts_with"]),
        tuple((x["conflict_id"], x["trigger"], x["action"]) for x in d["exits"]),
    )


@dataclass(slots=True)
class _Listing:
    """A count and the first entries of one category."""

    first: int
    count: int = 0
    entries: list[dict[str, Any]] = field(default_factory=list)

    def add(self, make: Callable[..., dict[str, Any]], *args: Any) -> None:
        """Count one more; list it (``make(*args)``) while fewer than ``first`` are listed."""
        self.count += 1
        if len(self.entries) < self.first:
            self.entries.append(make(*args))

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "first": self.entries}


CATEGORIES = ("rejected", "quarantined", "accepted", "other")


@dataclass(slots=True)
class WhatIfReport:
    """What a proposed schema would have decided differently (see the module)."""

    graph: str
    proposal: dict[str, Any]  # digest, source, and the governor's decision of it at start
    start: int
    end: int  # the last version decided again (start - 1 if none)
    requested_end: int
    head: int
    stopped: str | None = None  # None (the range is done), "limit", "time" or "refused"
    commands: int = 0
    changed: int = 0
    decisions: dict[str, _Listing] = field(default_factory=dict)
    not_needed: _Listing = field(default_factory=lambda: _Listing(FIRST))
    conflicts_appear: _Listing = field(default_factory=lambda: _Listing(FIRST))
    conflicts_vanish: _Listing = field(default_factory=lambda: _Listing(FIRST))
    slots: _Listing = field(default_factory=lambda: _Listing(FIRST))
    edges: _Listing = field(default_factory=lambda: _Listing(FIRST))
    publishes: list[dict[str, Any]] = field(default_factory=list)
    now: dict[str, Any] | None = None  # the governor's decision of it after the range
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """Whether every version of the requested range was decided again."""
        return self.stopped is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "proposal": self.proposal,
            "now": self.now,
            "from": self.start,
            "to": self.end,
            "requested_to": self.requested_end,
            "head": self.head,
            "complete": self.complete,
            "stopped": self.stopped,
            "commands": self.commands,
            "changed": self.changed,
            "decisions": {k: v.as_dict() for k, v in self.decisions.items()},
            "no_longer_needed": self.not_needed.as_dict(),
            "conflicts": {
                "appear": self.conflicts_appear.as_dict(),
                "vanish": self.conflicts_vanish.as_dict(),
            },
            "slots": self.slots.as_dict(),
            "edges": self.edges.as_dict(),
            "publishes": self.publishes,
            "seconds": round(self.seconds, 3),
        }


def what_if(
    logs: Logs,
    graph: str,
    document: str,
    *,
    source: str = "<what-if>",
    agent: str = "admin",
    bounds: Bounds | None = None,
    checkpoints: Path | None = None,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> WhatIfReport:
    """Decide the range of ``bounds`` again under the proposed schema ``document``; report
    the decisions, conflicts, slots and edges that would differ (see the module)."""
    b = bounds or Bounds()
    t0 = clock()
    head = logs.decisions.end() - 1
    if head < 0:
        raise ConfigError("the graph has no decisions yet: there is nothing to decide again")
    end = head if b.end is None else b.end
    if end > head:
        raise ConfigError(f"version {end} is above head v{head}")
    if end < 0:
        raise ConfigError(f"the version range ends at {end}, before the first version")
    start = _after_last_publish(logs, end) if b.start is None else b.start
    if start < 0 or start > end + 1:
        raise ConfigError(f"the version range [{start}, {end}] is empty")
    stop = end if b.limit is None else min(end, start + b.limit - 1)
    report = WhatIfReport(graph, {}, start, start - 1, end, head)
    report.decisions = {k: _Listing(b.first) for k in CATEGORIES}
    for name in ("not_needed", "conflicts_appear", "conflicts_vanish", "slots", "edges"):
        setattr(report, name, _Listing(b.first))

    def out_of_time() -> bool:
        return b.seconds is not None and clock() - t0 > b.seconds

    logged, proposed, first = _states(logs, graph, start, checkpoints)
    # progress counts the decisions folded before the range, then those decided in it
    work = max(1, start - first + stop - start + 1)

    def folded(pos: int) -> None:
        if progress is not None:
            progress(pos - first, work)

    report.proposal = {"source": source, "agent": agent, **_verdict_of(None, start)}
    if not _fold_prefix(logs, (logged, proposed), first, start, out_of_time, folded):
        report.stopped = "time"
        report.seconds = clock() - t0
        return report
    verdict = _publish(proposed, logs, graph, document, source, agent, start)
    report.proposal.update(_verdict_of(verdict, start))
    if verdict["kind"] == "rejected":
        report.stopped = "refused"
        report.seconds = clock() - t0
        return report
    proposed.adopt_schema(parse_schema(document, source), proposed.schema_rev)
    version = start
    while version <= stop:
        if out_of_time():
            report.stopped = "time"
            break
        n = min(BATCH, stop - version + 1)
        records = logs.decisions.read(version, n)
        if not records or records[0].offset != version:
            raise IntegrityError(f"the decisions log has no decision at version {version}", version)
        with batch_gc():
            decisions = fold_batch(logged, records, None, records[-1].offset)
            commands = _commands_of(logs, decisions)
            _decide_again(report, proposed, records, decisions, commands)
        version = records[-1].offset + 1
        report.end = version - 1
        folded(version)
    if report.stopped is None and stop < end:
        report.stopped = "limit"
    after = report.end + 1  # what publishing it would decide now (after the range)
    report.now = _verdict_of(_publish(logged, logs, graph, document, source, agent, after), after)
    _compare_states(report, logged, proposed)
    report.seconds = clock() - t0
    return report


# -- the range --------------------------------------------------------------------------------


def _after_last_publish(logs: Logs, end: int) -> int:
    """The version after the newest accepted ``publish_schema`` at or below ``end`` (0: none).

    Scans the decisions log backwards; only records that carry the reason code of an accepted
    publish (``schema_published``, a string on the wire) are decoded.
    """
    from claimgraph.core.wire import decode_decision

    hi = end + 1
    while hi > 0:
        lo = max(0, hi - BATCH)
        records = logs.decisions.read(lo, hi - lo)
        for rec in reversed(records):
            if rec.offset < hi and _PUBLISHED in rec.value:
                d = decode_decision(rec.value)
                if d["command_type"] == "publish_schema" and d["kind"] == "accepted":
                    return rec.offset + 1
        hi = lo
    return 0


def _states(
    logs: Logs, graph: str, start: int, checkpoints: Path | None
) -> tuple[GraphState, GraphState, int]:
    """The logged and the proposed state, from the newest usable checkpoint below ``start``
    (each loaded on its own), and the first version left to fold into them."""
    if checkpoints is not None and start > 0 and checkpoints.is_dir():
        from claimgraph.projections.checkpoints import load_state, resume

        def record_at(v: int) -> bytes | None:
            rec = logs.decisions.get(v)
            return rec.value if rec is not None else None

        found = resume(checkpoints, graph, start - 1, record_at)
        if found is not None:
            info, logged = found
            return logged, load_state(info), info.version + 1
    return GraphState(graph), GraphState(graph), 0


def _fold_prefix(
    logs: Logs,
    states: Sequence[GraphState],
    first: int,
    start: int,
    out_of_time: Callable[[], bool],
    folded: Callable[[int], None],
) -> bool:
    """Fold the logged decisions [first, start) into every state (False: out of time)."""
    pos = first
    while pos < start:
        if out_of_time():
            return False
        records = logs.decisions.read(pos, min(BATCH, start - pos))
        if not records or records[0].offset != pos:
            raise IntegrityError(f"the decisions log has no decision at version {pos}", pos)
        with batch_gc():
            for state in states:
                fold_batch(state, records, None, records[-1].offset)
        pos = records[-1].offset + 1
        folded(pos)
    return True


def _commands_of(logs: Logs, decisions: Sequence[Decision]) -> list[LogRecord]:
    """The command each logged decision decided (by its input offset)."""
    first = decisions[0]["input_offset"]
    records = logs.commands.read(first, len(decisions))
    out: list[LogRecord] = []
    for i, d in enumerate(decisions):
        want = d["input_offset"]
        rec = records[i] if i < len(records) and records[i].offset == want else None
        if rec is None:
            rec = logs.commands.get(want)
        if rec is None:
            raise IntegrityError(
                f"the command at offset {want} (decided by the decision at input offset "
                f"{want}) is not in the commands log"
            )
        out.append(rec)
    return out


def _verdict_of(d: Decision | None, at: int) -> dict[str, Any]:
    """The governor's decision of the proposal at version ``at`` (None: not decided)."""
    return {
        "at": at,
        "kind": d["kind"] if d else None,
        "reason": d["reason"] if d else None,
        "detail": d["detail"] if d else None,
        "digest": d["schema"]["digest"] if d and d["schema"] else None,
    }


def _publish(
    state: GraphState,
    logs: Logs,
    graph: str,
    document: str,
    source: str,
    agent: str,
    start: int,
) -> Decision:
    """The governor's decision of the proposal as a ``publish_schema`` by ``agent`` at
    ``start``, given ``state`` folded up to ``start - 1`` (not folded in: the proposal takes
    no version)."""
    at = logs.decisions.get(start) if start < logs.decisions.end() else None
    offset = logs.commands.end()
    log_time = state.last_log_time
    if at is not None:
        from claimgraph.core.wire import decode_decision

        d = decode_decision(at.value)
        offset, log_time = d["input_offset"], d["log_time"]
    cmd = cast(
        Command,
        {
            "type": "publish_schema",
            "command_id": f"what-if-{uuid.uuid4()}",
            "graph": graph,
            "agent": agent,
            "task": "",
            "document": document,
            "source": source,
        },
    )
    rules = CURRENT if state.rules is None else state.rules
    return decide_command(state, cmd, offset, log_time, rules)


# -- deciding again --------------------------------------------------------------------------

# Decided one at a time, not in a batch: a later schema (applied as logged) and a rules
# upgrade (after which the logged revision may differ from the proposed state's).
_ONE_BY_ONE = ("publish_schema", "upgrade_rules")


def _decide_again(
    report: WhatIfReport,
    state: GraphState,
    records: Sequence[LogRecord],
    logged: Sequence[Decision],
    commands: Sequence[LogRecord],
) -> None:
    """Decide ``commands`` again for the proposed ``state`` and compare each new decision with
    the ``logged`` one (at version ``records[i].offset``).

    Each command is decided under the rules revision its logged decision names. Runs of
    commands in which that is the revision the proposed state decides under anyway go to
    :func:`~claimgraph.native.batch.decide_batch` (decide, encode and fold in one native call
    per run where the native core covers them); the rest one at a time."""
    i, n = 0, len(records)
    while i < n:
        was = logged[i]
        rules = CURRENT if state.rules is None else state.rules
        j = i
        while (
            j < n and logged[j]["command_type"] not in _ONE_BY_ONE and logged[j]["rules"] == rules
        ):
            j += 1
        if j > i:  # a run, decided as the governor would have, under ``rules``
            ds, _ = decide_batch(state, commands[i:j], records[i].offset, None)
            for k, d in enumerate(ds, i):
                _compare(report, records[k].offset, logged[k], d, commands[k])
            i = j
            continue
        _one(report, state, records[i], was, commands[i])
        i += 1


def _one(
    report: WhatIfReport, state: GraphState, rec: LogRecord, was: Decision, cmd: LogRecord
) -> None:
    """Decide ``cmd`` again for the proposed ``state``, fold it in, compare with ``was``."""
    version = rec.offset
    if was["command_type"] == "publish_schema":
        report.commands += 1
        again = decide(state, cmd.value, cmd.offset, cmd.timestamp, rules=was["rules"])
        evolve(state, was, version, rec.value)  # a later schema applies as logged
        report.publishes.append(_publish_note(version, was, again))
        return
    d = decide(state, cmd.value, cmd.offset, cmd.timestamp, rules=was["rules"])
    evolve(state, d, version, encode_decision(d))
    _compare(report, version, was, d, cmd)


def _compare(
    report: WhatIfReport, version: int, was: Decision, d: Decision, cmd: LogRecord
) -> None:
    """Count ``d`` (decided again at ``version``) and list it if it differs from ``was``."""
    report.commands += 1
    if outcome(d) == outcome(was):
        return
    report.changed += 1
    report.decisions[_category(was, d)].add(_change, version, was, d, cmd)
    if (
        d["command_type"] in _VERDICTS
        and was["kind"] != "rejected"
        and d["kind"] == "rejected"
        and d["reason"] in NOT_NEEDED
    ):
        report.not_needed.add(_verdict, version, d)


def _verdict(version: int, d: Decision) -> dict[str, Any]:
    return {
        "version": version,
        "command_id": d["command_id"],
        "command_type": d["command_type"],
        "agent": d["agent"],
        "reason": d["reason"],
        "detail": d["detail"],
    }


def _category(was: Decision, d: Decision) -> str:
    for kind in ("rejected", "quarantined", "accepted"):
        if d["kind"] == kind and was["kind"] != kind:
            return kind
    return "other"


def _brief(d: Decision) -> dict[str, Any]:
    return {
        "kind": d["kind"],
        "reason": d["reason"],
        "conflict_id": d["conflict_id"],
        "detail": d["detail"],
    }


def _change(version: int, was: Decision, d: Decision, cmd: LogRecord) -> dict[str, Any]:
    return {
        "version": version,
        "command_id": was["command_id"],
        "command_type": was["command_type"],
        "agent": was["agent"],
        "task": was["task"],
        "edge": _edge_of(was, d, cmd),
        "logged": _brief(was),
        "what_if": _brief(d),
    }


def _edge_of(was: Decision, d: Decision, cmd: LogRecord) -> str | None:
    """``type(subject -> object)`` of a claim command, else None."""
    claim: Any = was["claim"] or d["claim"]
    if claim is None and was["command_type"] == "claim":
        try:
            claim = decode_command(cmd.value)
        except DecodeError:
            return None
    if claim is None:
        return None
    c = cast(dict[str, Any], claim)
    return (
        f"{c['edge_type']}({c['subject_type']}:{c['subject_id']} -> "
        f"{c['object_type']}:{c['object_id']})"
    )


def _publish_note(version: int, was: Decision, again: Decision) -> dict[str, Any]:
    schema = was["schema"]
    note: dict[str, Any] = {
        "version": version,
        "command_id": was["command_id"],
        "agent": was["agent"],
        "kind": was["kind"],
        "reason": was["reason"],
        "revision": schema["revision"] if schema else None,
        "applied": "as logged",
        "what_if": None,
    }
    if outcome(again) != outcome(was):
        note["what_if"] = _brief(again)
    return note


# -- the end of the range ---------------------------------------------------------------------


def _compare_states(report: WhatIfReport, logged: GraphState, proposed: GraphState) -> None:
    """Conflicts that appear or vanish in the range; slots and edges that read otherwise."""
    for ours, theirs, listing in (
        (proposed, logged, report.conflicts_appear),
        (logged, proposed, report.conflicts_vanish),
    ):
        for cid in sorted(c for c, x in ours.conflicts.items() if x.opened_at >= report.start):
            if cid not in theirs.conflicts:
                listing.add(_conflict, ours.conflicts[cid])
    slots = set(logged.slot_holder) | set(logged.slot_conflict)
    slots |= set(proposed.slot_holder) | set(proposed.slot_conflict)
    for s in sorted(slots):
        a, b = _slot_value(logged, s), _slot_value(proposed, s)
        if a != b:
            report.slots.add(_difference, "slot", _slot_name(s), a, b)
    for key in sorted(set(logged.edges) | set(proposed.edges)):
        a, b = _edge_value(logged, key), _edge_value(proposed, key)
        if a != b:
            report.edges.add(_difference, "edge", _edge_name(key), a, b)


def _conflict(c: ConflictState) -> dict[str, Any]:
    return {
        "conflict_id": c.conflict_id,
        "edge_type": c.edge_type,
        "opened_at": c.opened_at,
        "open": c.open,
        "claims": list(c.members),
    }


def _difference(what: str, name: str, logged: str, proposed: str) -> dict[str, Any]:
    return {what: name, "logged": logged, "what_if": proposed}


def _slot_value(state: GraphState, slot: str) -> str:
    """What a slot read gives: ``unknown (cf:...)``, the node of the present edge it holds,
    or ``empty`` (also when its edge is unknown through another slot, as a read says)."""
    conflict = state.slot_conflict.get(slot)
    if conflict is not None:
        return f"unknown ({conflict})"
    holder = state.slot_holder.get(slot)
    if holder is None or state.edge_read(holder)[0] != "present":
        return "empty"
    _, st, si, ot, oi = edge_parts(holder)
    side = slot.split(SEP)[1]
    return f"{ot}:{oi}" if side == "out" else f"{st}:{si}"


def _slot_name(slot: str) -> str:
    t, side, nt, ni = slot.split(SEP)
    return f"{t}({nt}:{ni} -> ?)" if side == "out" else f"{t}(? -> {nt}:{ni})"


def _edge_value(state: GraphState, key: str) -> str:
    read, conflict, _ = state.edge_read(key)
    return f"unknown ({conflict})" if conflict is not None else read


def _edge_name(key: str) -> str:
    t, st, si, ot, oi = edge_parts(key)
    return f"{t}({st}:{si} -> {ot}:{oi})"
