"""Conflict rules: the calibrated merge, resolving a conflict, releasing claims (pure).

* ``confidence-weighted-merge``: every writer's latest claim on the edge's vote group counts
  once, weighted by confidence × the writer's calibrated accuracy (core.governance); a margin
  below the threshold, or a fail-closed domain whose leader is unsafe, quarantines instead;
* ``resolve``: a resolver (or, in a fail-closed domain, a human for an unsafe value) picks the
  winning claim of an open conflict or rejects every claim; the winners' outcome is released
  and what it contradicts superseded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from claimgraph.core.governance import Vote, label, merge, outcome_by
from claimgraph.core.governor.base import (
    Refusal,
    check_id,
    check_text,
    conflict_id_for,
    quarantine,
    require_schema,
)
from claimgraph.core.governor.revisions import at_least
from claimgraph.core.model import (
    LIMITS,
    ClaimCommand,
    Command,
    Decision,
    Reason,
    ResolveCommand,
)
from claimgraph.core.schema import EdgeType
from claimgraph.core.state import (
    LOST,
    SUPERSEDED,
    VISIBLE,
    ConflictState,
    GraphState,
    edge_key,
    edge_parts,
)


def vote_of(state: GraphState, claim_id: str, by: str) -> Vote:
    cs = state.claims[claim_id]
    return Vote(
        claim_id,
        cs.agent,
        vote_label(cs.edge, cs.asserts, by),
        cs.conf,
        cs.ts,
        cs.based,
    )


def vote_label(key: str, asserts: bool, by: str) -> str:
    _, st, si, ot, oi = edge_parts(key)
    return label("assert" if asserts else "deny", st, si, ot, oi, by)


def new_vote(c: ClaimCommand, by: str) -> Vote:
    key = edge_key(
        c["edge_type"], c["subject_type"], c["subject_id"], c["object_type"], c["object_id"]
    )
    return Vote(
        c["command_id"],
        c["agent"],
        vote_label(key, c["polarity"] == "assert", by),
        float(c["confidence"]),
        c["asserted_at"],
        c["based_on_version"],
    )


def merge_claim(
    state: GraphState,
    et: EdgeType,
    c: ClaimCommand,
    d: Decision,
    *,
    own: list[str],
    agreeing: list[str],
    opposing: list[str],
) -> None:
    """confidence-weighted-merge: the calibrated vote of every writer's latest claim decides.

    Writers' latest claims count whether they are visible or lost an earlier merge; the new
    claim replaces its writer's. The winning outcome becomes (or stays) the visible one.
    """
    by = outcome_by(et)
    key = edge_key(
        c["edge_type"], c["subject_type"], c["subject_id"], c["object_type"], c["object_id"]
    )
    latest = state.votes.get(state.vote_group(key), {})
    counted = [*agreeing, *opposing]
    for agent, cid in sorted(latest.items()):
        cs = state.claims.get(cid)
        if agent == c["agent"] or cid in counted or cs is None:
            continue
        if cs.status in (VISIBLE, LOST, SUPERSEDED):
            counted.append(cid)
    votes = sorted(
        (vote_of(state, x, by) for x in counted), key=lambda v: (v.asserted_at, v.claim_id)
    )
    mine = new_vote(c, by)
    votes.append(mine)
    m = merge(votes, state.record_of(et.name), prior=et.merge_prior, threshold=et.merge_margin)
    d["merge"] = m
    summary = (
        f"merged confidence {m['merged_confidence']:.3f}, margin {m['margin']:.3f} "
        f"(threshold {m['threshold']:g}) over {len(m['contributions'])} writer(s)"
    )
    winner_safe = True
    if m["winner"] is not None and et.fallback.fails_closed:
        if m["winner"] == c["command_id"]:
            w_asserts, w_object = c["polarity"] == "assert", c["object_id"]
        else:
            ws = state.claims[m["winner"]]
            w_asserts, w_object = ws.asserts, edge_parts(ws.edge)[4]
        winner_safe = et.fallback.is_safe(w_asserts, w_object, strict=at_least(d, 2))
    if m["winner"] is None or not winner_safe:
        why = (
            f"{m['outcome']} leads but domain {et.domain} fails closed: a person must decide"
            if m["winner"] is not None
            else "the best two outcomes are too close"
        )
        quarantine(
            d,
            conflict_id_for(c["command_id"]),
            Reason.NEEDS_HUMAN if m["winner"] is not None else Reason.MERGE_MARGIN,
            f"{why}: {summary}; claims withheld until a resolver decides",
            withheld=[*agreeing, *opposing],
            supersedes=own,
            against=opposing,
        )
        return
    outcome = {v.claim_id: v.outcome for v in votes}
    if m["outcome"] == mine.outcome:
        d["kind"] = "accepted"
        d["reason"] = Reason.MERGED.value
        d["supersedes"] = [*own, *opposing]
        d["released"] = [
            x for x in counted if outcome[x] == mine.outcome and state.claims[x].status != VISIBLE
        ]
        d["conflicts_with"] = list(opposing)
        d["detail"] = f"{m['outcome']} wins the merge: {summary}"
        return
    d["kind"] = "conflicted"
    d["reason"] = Reason.OUTVOTED.value
    d["supersedes"] = own
    d["conflicts_with"] = [x for x in counted if outcome[x] == m["outcome"]]
    d["detail"] = f"outvoted: {m['outcome']} wins the merge; {summary}"


def release(state: GraphState, claims: Sequence[str], d: Decision) -> None:
    """Release ``claims`` (which agree): make room by superseding what they contradict."""
    d["released"] = list(claims)
    if not claims:
        return
    first = state.claims[claims[0]]
    es = state.edges.get(first.edge)
    supersedes: list[str] = []
    if es is not None:
        supersedes += [c for c in es.visible if state.claims[c].asserts != first.asserts]
    if first.asserts:
        for s in state.slots_of(first.edge):
            holder = state.slot_holder.get(s)
            if holder is not None and holder != first.edge:
                supersedes += [c for c in state.edges[holder].visible if c not in supersedes]
    d["supersedes"] = supersedes


def claim_outcome(state: GraphState, claim_id: str) -> tuple[str, bool]:
    cs = state.claims[claim_id]
    return cs.edge, cs.asserts


def require_resolver(state: GraphState, agent: str) -> None:
    require_schema(state)
    assert state.schema is not None
    if not state.schema.is_resolver(agent):
        raise Refusal(
            Reason.NOT_RESOLVER,
            f"agent {agent!r} is not a resolver or admin in schema revision {state.schema_rev}",
        )


def open_conflict(state: GraphState, conflict_id: str) -> ConflictState:
    """The open conflict a resolve, escalate or read_blocked command names."""
    conflict = state.conflicts.get(conflict_id)
    if conflict is None:
        raise Refusal(Reason.UNKNOWN_CONFLICT, f"no conflict {conflict_id!r}")
    if not conflict.open:
        if conflict.outcome.startswith("merged into "):
            survivor = conflict.outcome.removeprefix("merged into ")
            raise Refusal(
                Reason.CONFLICT_CLOSED,
                f"conflict {conflict_id!r} was merged into {survivor!r}: name {survivor!r}",
            )
        raise Refusal(
            Reason.CONFLICT_CLOSED,
            f"conflict {conflict_id!r} is already closed ({conflict.outcome})",
        )
    return conflict


def resolve(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(ResolveCommand, cmd)
    check_id(c["conflict_id"], "conflict_id")
    check_id(c["resolver"], "resolver")
    check_text(c["rationale"], "rationale", LIMITS["reasoning"])
    check_text(c.get("inputs", ""), "inputs", LIMITS["document"])
    require_resolver(state, c["agent"])
    conflict = open_conflict(state, c["conflict_id"])
    d["kind"] = "resolved"
    d["target"] = conflict.conflict_id
    d["conflict_id"] = conflict.conflict_id
    winner = c["winner"]
    if winner is None:
        d["reason"] = Reason.REJECT_ALL.value
        d["dismissed"] = list(conflict.claims)
        d["detail"] = f"{c['resolver']}: every claim rejected. {c['rationale'][:200]}"
        return
    if winner not in conflict.claims:
        raise Refusal(
            Reason.NOT_IN_CONFLICT,
            f"claim {winner!r} is not held in conflict "
            f"{conflict.conflict_id!r} (held: {', '.join(conflict.claims)})"[:500],
        )
    et = state.edge_type(conflict.edge_type)
    human = state.schema is not None and state.schema.is_human(c["agent"])
    if et is not None and et.fallback.fails_closed and not human:
        ws = state.claims[winner]
        if not et.fallback.is_safe(ws.asserts, edge_parts(ws.edge)[4], strict=at_least(d, 2)):
            raise Refusal(
                Reason.NEEDS_HUMAN,
                f"domain {et.domain} fails closed: only a human (principals.humans) may pick "
                f"{'assert' if ws.asserts else 'deny'} {edge_parts(ws.edge)[4]!r}; "
                f"automatic resolvers may pick {', '.join(safe_values(et))} or reject all",
            )
    want = claim_outcome(state, winner)
    released = [x for x in conflict.claims if claim_outcome(state, x) == want]
    release(state, released, d)
    d["dismissed"] = [x for x in conflict.claims if x not in released]
    d["reason"] = Reason.WINNER.value
    d["detail"] = f"{c['resolver']}: {winner} wins. {c['rationale'][:200]}"


def fallback_claims(
    state: GraphState, claims: Sequence[str], et: EdgeType, d: Decision
) -> list[str]:
    """The claims holding the domain's fallback value (revision 1, failing closed: or a
    denial; from revision 2 a denial is not the safe value, and the conflict escalates)."""
    value = et.fallback.value
    pick = [
        x
        for x in claims
        if state.claims[x].asserts and edge_parts(state.claims[x].edge)[4] == value
    ]
    if not pick and et.fallback.fails_closed and not at_least(d, 2):
        pick = [x for x in claims if not state.claims[x].asserts]
    if not pick:
        return []
    want = claim_outcome(state, pick[0])
    return [x for x in claims if claim_outcome(state, x) == want]


def release_into(state: GraphState, claims: Sequence[str], d: Decision) -> None:
    """Like :func:`release`, adding to what the decision already releases and supersedes."""
    released, supersedes = list(d["released"]), list(d["supersedes"])
    release(state, claims, d)
    d["released"] = released + [x for x in d["released"] if x not in released]
    d["supersedes"] = supersedes + [x for x in d["supersedes"] if x not in supersedes]


def safe_values(et: EdgeType) -> list[str]:
    return [x for x in (et.fallback.value, *et.fallback.safe) if x]
