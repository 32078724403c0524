"""Exit rules: how a conflict leaves quarantine without a verdict (pure).

A ``tick`` (log time passing) exits conflicts past their deadline; ``read_blocked`` counts
reads that hit a quarantined slot and exits at the declared threshold or run count; a
resolver's ``escalate`` hands a conflict to a human. An exit either releases the domain's
fallback value (``on_exit: fallback``) or escalates; either way it is recorded in ``exits``.
"""

from __future__ import annotations

from typing import cast

from claimgraph.core.entities import reader_key
from claimgraph.core.governance import iso_utc as _iso
from claimgraph.core.governor.base import Refusal, check_id, check_text
from claimgraph.core.governor.conflicts import (
    fallback_claims,
    open_conflict,
    release_into,
    require_resolver,
)
from claimgraph.core.governor.revisions import at_least
from claimgraph.core.model import (
    LIMITS,
    Command,
    Decision,
    EscalateCommand,
    Exit,
    ReadBlockedCommand,
    Reason,
)
from claimgraph.core.state import (
    ConflictState,
    GraphState,
)


def tick(state: GraphState, cmd: Command, d: Decision) -> None:
    """Time passes (log time): conflicts past their deadline exit quarantine."""
    d["kind"] = "accepted"
    d["reason"] = Reason.TICK.value
    now = d["log_time"]
    for cid in list(state.open_conflicts):
        if len(d["exits"]) >= LIMITS["exits"]:
            break  # the rest exit at the next tick
        conflict = state.conflicts[cid]
        if conflict.escalated_at is not None:
            continue
        et = state.edge_type(conflict.edge_type)
        if et is None or et.exits.deadline_ms is None:
            continue
        due = conflict.opened_time + et.exits.deadline_ms
        if now >= due:
            exit_conflict(
                state,
                conflict,
                "deadline",
                f"open since {_iso(conflict.opened_time)}; deadline passed at {_iso(due)}",
                d,
            )
    if d["exits"]:
        d["detail"] = f"{len(d['exits'])} conflict(s) reached their deadline"


def read_blocked(state: GraphState, cmd: Command, d: Decision) -> None:
    """Reads that hit a quarantined slot: counted, and an exit at the declared threshold."""
    c = cast(ReadBlockedCommand, cmd)
    check_id(c["conflict_id"], "conflict_id")
    if c["run_id"] is not None:
        check_id(c["run_id"], "run_id")
    if not 1 <= c["count"] <= 1_000_000:
        raise Refusal(Reason.INVALID_FIELD, f"count must be in 1..1000000, got {c['count']}")
    conflict = open_conflict(state, c["conflict_id"])
    count = c["count"]
    if at_least(d, 2):
        _counts_once(state, c, conflict, d)
        count = 1  # a (reader, run, conflict) counts once, however many reads it reports
    d["kind"] = "accepted"
    d["reason"] = Reason.READ_BLOCKED.value
    d["target"] = c["conflict_id"]
    d["count"] = count
    d["run_id"] = c["run_id"]
    total = conflict.blocked_reads + count
    d["detail"] = f"{count} blocked read(s); {total} in all"
    et = state.edge_type(conflict.edge_type)
    if et is None or conflict.escalated_at is not None:
        return
    limit = et.exits.max_blocked_reads
    runs = et.exits.escalate_after_runs
    run = c["run_id"]
    if limit is not None and total >= limit:
        exit_conflict(
            state, conflict, "blocked_reads", f"{total} blocked reads (threshold {limit})", d
        )
    elif (
        runs is not None
        and run is not None
        and run not in conflict.blocked_runs
        and len(conflict.blocked_runs) + 1 >= runs
    ):
        exit_conflict(
            state,
            conflict,
            "runs",
            f"outlived {len(conflict.blocked_runs) + 1} run(s) it blocked (run {run})",
            d,
        )


def _counts_once(
    state: GraphState, c: ReadBlockedCommand, conflict: ConflictState, d: Decision
) -> None:
    """Revision 2: only a run's reads count, once per (authenticated reader, run, conflict),
    and only from a run pinned at a version where the conflict was open — all decided from
    the command and the governor's own state, never from the runs log. Revision 5: reads
    outside an explicit run (no run_id; ``pinned_version`` the version read) count once per
    (reader, conflict)."""
    run, pinned = c["run_id"], c.get("pinned_version", -1)
    if run is None and not at_least(d, 5):
        raise Refusal(Reason.INVALID_FIELD, "a blocked read counts only from a run: run_id")
    if not 0 <= pinned <= state.known_head():
        raise Refusal(
            Reason.INVALID_FIELD,
            f"pinned_version must be the run's pinned version, 0..{state.known_head()}; "
            f"got {pinned}",
        )
    what = f"run {run[:80]!r}" if run is not None else "a read outside a run"
    if pinned < conflict.opened_at:
        raise Refusal(
            Reason.NOT_BLOCKED,
            f"{what} is at version {pinned}, before conflict "
            f"{conflict.conflict_id!r} opened at version {conflict.opened_at}: it did "
            "not meet it",
        )
    if reader_key(c["agent"], run or "") in conflict.readers:
        raise Refusal(
            Reason.ALREADY_COUNTED,
            f"{what} of {c['agent'][:80]!r} was counted for {conflict.conflict_id!r}",
        )


def exit_conflict(
    state: GraphState, conflict: ConflictState, trigger: str, detail: str, d: Decision
) -> None:
    """A conflict leaves quarantine: by the domain's fallback value, or to a human."""
    et = state.edge_type(conflict.edge_type)
    action = et.exits.on_exit if et is not None and trigger != "runs" else "escalate"
    if action == "fallback" and et is not None:
        winners = fallback_claims(state, conflict.claims, et, d)
        if winners:
            release_into(state, winners, d)
            d["dismissed"] += [x for x in conflict.claims if x not in winners]
            d["exits"].append(
                {
                    "conflict_id": conflict.conflict_id,
                    "trigger": trigger,
                    "action": "fallback",
                    "detail": f"{detail}; fallback {et.fallback.value}: "
                    f"released {', '.join(winners)}"[:500],
                }
            )
            return
        detail += f"; no claim holds the fallback value {et.fallback.value!r}"
    exit_: Exit = {
        "conflict_id": conflict.conflict_id,
        "trigger": trigger,
        "action": "escalate",
        "detail": detail[:500],
    }
    d["exits"].append(exit_)


def escalate(state: GraphState, cmd: Command, d: Decision) -> None:
    """A resolver hands a conflict to a human; it stays quarantined, now escalated."""
    c = cast(EscalateCommand, cmd)
    check_id(c["conflict_id"], "conflict_id")
    check_id(c["resolver"], "resolver")
    check_text(c["reason"], "reason", LIMITS["id"])
    require_resolver(state, c["agent"])
    conflict = open_conflict(state, c["conflict_id"])
    if conflict.escalated_at is not None:
        raise Refusal(
            Reason.ALREADY_ESCALATED,
            f"conflict {c['conflict_id']!r} was escalated at version {conflict.escalated_at}",
        )
    d["kind"] = "accepted"
    d["reason"] = Reason.ESCALATED.value
    d["target"] = conflict.conflict_id
    d["conflict_id"] = conflict.conflict_id
    d["detail"] = f"{c['resolver']}: {c['reason']}"
    d["exits"] = [
        {
            "conflict_id": conflict.conflict_id,
            "trigger": "resolver",
            "action": "escalate",
            "detail": f"{c['resolver']}: {c['reason']}"[:500],
        }
    ]
