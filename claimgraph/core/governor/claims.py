"""Claim rules: an ``assert`` or ``deny`` of an edge, judged by its edge type (pure).

For a claim on edge E from agent A: the claim replaces A's own visible claims on E (and, for
an assert, A's asserts elsewhere in E's exclusive slots); claims by other agents either agree
(same edge, same polarity: corroboration) or oppose (the other polarity on E, or an assert of
another object in an exclusive slot). Then, by ``conflict_policy``:

* ``last-write-wins-with-timestamp``: the newest event time wins, ties going to the later log
  position; a claim older than an opposing or own visible claim is ``conflicted`` and changes
  nothing, otherwise it is ``accepted`` and supersedes them;
* ``quarantine``: opposing claims open a conflict; every claim involved is withheld and the
  edge and its slots read *unknown* until a resolver — or the retraction of all but one
  outcome — closes it. A claim touching a slot or edge under an open conflict joins it;
* ``confidence-weighted-merge``: see :mod:`claimgraph.core.governor.conflicts`.

``based_on_version`` older than the last change of E or its slots makes the claim *stale*:
``on_stale`` rejects it, quarantines it against the current claims, or accepts it (flagged).
Decision checks (the second article's signals) are attached to every decided claim.
"""

from __future__ import annotations

import math
from typing import cast

from claimgraph.core.governance import iso_utc as _iso
from claimgraph.core.governance import outcome_by, signals
from claimgraph.core.governor.authority import authorised
from claimgraph.core.governor.base import (
    Refusal,
    accept,
    check_id,
    check_text,
    conflict_id_for,
    quarantine,
    require_schema,
)
from claimgraph.core.governor.conflicts import (
    claim_outcome,
    merge_claim,
    new_vote,
    release,
    vote_of,
)
from claimgraph.core.governor.revisions import at_least
from claimgraph.core.model import (
    LIMITS,
    ClaimCommand,
    ClaimRecord,
    Command,
    ConflictPolicy,
    Decision,
    OnStale,
    Reason,
)
from claimgraph.core.schema import EdgeType
from claimgraph.core.state import (
    VISIBLE,
    GraphState,
    edge_key,
)


def check_claim_fields(c: ClaimCommand) -> None:
    for name in ("edge_type", "subject_type", "subject_id", "object_type", "object_id"):
        check_id(c[name], name)
    if c["run_id"] is not None:
        check_id(c["run_id"], "run_id")
    conf = c["confidence"]
    if not (isinstance(conf, float | int) and math.isfinite(conf) and 0.0 <= conf <= 1.0):
        raise Refusal(Reason.INVALID_FIELD, f"confidence must be in [0, 1], got {conf!r}")
    if len(c["evidence"]) > LIMITS["evidence_items"]:
        raise Refusal(
            Reason.FIELD_TOO_LARGE,
            f"evidence has {len(c['evidence'])} items; at most {LIMITS['evidence_items']} allowed",
        )
    for i, e in enumerate(c["evidence"]):
        check_text(e, f"evidence[{i}]", LIMITS["evidence_item"])
    check_text(c["reasoning"], "reasoning", LIMITS["reasoning"])
    if len(c["properties"]) > LIMITS["properties"]:
        raise Refusal(
            Reason.FIELD_TOO_LARGE,
            f"properties has {len(c['properties'])} "
            f"entries; at most {LIMITS['properties']} allowed",
        )
    for k, v in c["properties"].items():
        check_id(k, "property name")
        check_text(v, f"properties[{k!r}]", LIMITS["property_value"])
    if c["asserted_at"] < 0:
        raise Refusal(Reason.INVALID_FIELD, "asserted_at must be ms since the epoch (>= 0)")
    b = c["based_on_version"]
    if b is not None and b < -1:
        raise Refusal(Reason.INVALID_FIELD, "based_on_version must be >= -1")


def claim(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(ClaimCommand, cmd)
    check_claim_fields(c)
    require_schema(state)
    schema = state.schema
    assert schema is not None
    et = schema.edge_types.get(c["edge_type"])
    if et is None:
        raise Refusal(
            Reason.UNKNOWN_EDGE_TYPE,
            f"edge type {c['edge_type']!r} is not in "
            f"schema revision {state.schema_rev} (known: "
            f"{', '.join(sorted(schema.edge_types)) or 'none'})",
        )
    for end, want in (("subject", et.subject), ("object", et.object)):
        got = c["subject_type"] if end == "subject" else c["object_type"]
        if got not in schema.node_types:
            raise Refusal(
                Reason.UNKNOWN_NODE_TYPE,
                f"{end} type {got!r} is not a node type of schema revision {state.schema_rev}",
            )
        if got != want:
            reason = (
                Reason.SUBJECT_TYPE_MISMATCH if end == "subject" else Reason.OBJECT_TYPE_MISMATCH
            )
            raise Refusal(reason, f"{et.name} needs a {want} {end}, got {got!r}")
    agent, task = c["agent"], c["task"]
    if not authorised(state, et, agent, task, d["log_time"]):
        writers = ", ".join(f"{w.agent.text}/{w.task.text}" for w in et.writers)
        raise Refusal(
            Reason.UNAUTHORIZED,
            f"agent {agent!r} in task {task!r} may not write "
            f"{et.name} (writers: {writers}; no active grant)",
        )
    key = edge_key(et.name, c["subject_type"], c["subject_id"], c["object_type"], c["object_id"])
    asserts = c["polarity"] == "assert"
    stale = False
    based = c["based_on_version"]
    if based is not None:
        known = state.known_head()
        if based > known:
            raise Refusal(
                Reason.FUTURE_VERSION,
                f"based_on_version {based} is above the graph's head {known}",
            )
        stale = state.changed_at(key) > state.seq_of(based)
        if stale and et.on_stale == OnStale.REJECT:
            raise Refusal(
                Reason.STALE_CLAIM,
                f"the slot changed after version {based}, which the claim was based on",
            )
    d["claim"] = claim_record(c)
    d["stale"] = stale

    own: list[str] = []
    agreeing: list[str] = []
    opposing: list[str] = []
    slot_opposing = False
    es = state.edges.get(key)
    if es is not None:
        for cid in es.visible:
            cs = state.claims[cid]
            if cs.agent == agent:
                own.append(cid)
            elif cs.asserts == asserts:
                agreeing.append(cid)
            else:
                opposing.append(cid)
    if asserts:
        for s in state.slots_of(key):
            holder = state.slot_holder.get(s)
            if holder is None or holder == key:
                continue
            for cid in state.edges[holder].visible:
                if cid in own or cid in opposing:
                    continue
                if state.claims[cid].agent == agent:
                    own.append(cid)
                else:
                    opposing.append(cid)
                    slot_opposing = True

    touching = state.conflicts_touching(key)
    would_hold = (stale and et.on_stale == OnStale.QUARANTINE) or (
        bool(opposing) and et.conflict_policy != ConflictPolicy.LAST_WRITE_WINS
    )
    if touching or would_hold:
        # the claims this one would withhold may be disputed through other slots of their edges
        for other in (*opposing, *agreeing):
            touching |= state.conflicts_touching(state.claims[other].edge)
    merged: list[str] = []  # claims of the conflicts merged into the one this claim joins
    if len(touching) > 1:
        if not at_least(d, 4):
            raise Refusal(
                Reason.CONFLICT_OVERLAP,
                f"the claim touches several open conflicts ({', '.join(sorted(touching))}); "
                "resolve one of them first",
            )
        # revision 4: conflicts that meet merge, under the older one (recorded as exits)
        survivor = min(touching, key=lambda x: (state.conflicts[x].opened_at, x))
        for other in sorted(touching - {survivor}):
            merged += state.conflicts[other].claims
            d["exits"].append(
                {
                    "conflict_id": other,
                    "trigger": "merged",
                    "action": "merge",
                    "detail": f"merged into {survivor}",
                }
            )
        touching = {survivor}
        open_conflict: str | None = survivor
    else:
        open_conflict = state.edge_conflict(key) or (next(iter(touching)) if touching else None)
    pool: list[str] = []  # the claims of the conflict it joins, merged ones included
    if open_conflict is not None:
        pool = [*state.conflicts[open_conflict].claims, *merged]
    # disputed: another writer's claim disagrees with this one (on the edge, in a slot, or in
    # the conflict it joins); revision 4 holds only a disputed claim for a human
    disputed = bool(opposing) or any(
        state.claims[x].agent != agent and claim_outcome(state, x) != (key, asserts) for x in pool
    )
    unsafe = _held_for_a_human(state, et, c, d, own, agreeing, disputed)
    if open_conflict is not None and at_least(d, 2):
        # a writer's new claim replaces its own earlier claims in the conflict too; when the
        # claims left then all agree with it, the conflict settles itself (recorded)
        mine = [x for x in pool if state.claims[x].agent == agent and x not in own]
        rest = [x for x in pool if x not in mine]
        agree = all(claim_outcome(state, x) == (key, asserts) for x in rest)
        if rest and agree and not opposing and not unsafe:
            release(state, rest, d)
            d["kind"] = "accepted"
            d["reason"] = Reason.CONFLICT_SETTLED.value
            d["conflict_id"] = open_conflict
            d["supersedes"] = [*own, *mine, *(x for x in d["supersedes"] if x not in own)]
            d["detail"] = f"every claim left in {open_conflict} now agrees with this one: settled"
            return
        moved = [x for x in merged if x not in mine]  # into the survivor, withheld still
        quarantine(
            d,
            open_conflict,
            Reason.JOINS_CONFLICT,
            f"the slot is under conflict {open_conflict}; the claim joins it"
            + (f" (merging {', '.join(x['conflict_id'] for x in d['exits'])})" if merged else ""),
            withheld=[*agreeing, *opposing, *(x for x in moved if x not in agreeing + opposing)],
            supersedes=[*own, *mine],
            against=opposing,
        )
        return
    if open_conflict is not None:
        quarantine(
            d,
            open_conflict,
            Reason.JOINS_CONFLICT,
            f"the slot is under conflict {open_conflict}; the claim joins it",
            withheld=[*agreeing, *opposing],
            supersedes=own,
            against=opposing,
        )
        return
    if stale and et.on_stale == OnStale.QUARANTINE:
        quarantine(
            d,
            conflict_id_for(c["command_id"]),
            Reason.STALE_CLAIM,
            f"based on version {based}, but the slot changed since; held for a resolver",
            withheld=[*own, *agreeing, *opposing],
            supersedes=[],
            against=opposing,
        )
        return
    if et.conflict_policy == ConflictPolicy.LAST_WRITE_WINS:
        ts = c["asserted_at"]
        newer = [x for x in (*own, *opposing) if state.claims[x].ts > ts]
        if newer:
            d["kind"] = "conflicted"
            d["reason"] = Reason.OLDER_THAN_CURRENT.value
            d["conflicts_with"] = newer
            d["detail"] = (
                f"asserted_at {_iso(ts)} is older than the current claim "
                f"{newer[0]} ({_iso(state.claims[newer[0]].ts)}); the newer claim "
                "stands"
            )
            return
        if unsafe:
            _hold(d, c, et, own=own, agreeing=agreeing, opposing=opposing)
            return
        accept(d, own + opposing, agreeing)
        return
    if opposing and et.conflict_policy == ConflictPolicy.CONFIDENCE_WEIGHTED_MERGE:
        merge_claim(state, et, c, d, own=own, agreeing=agreeing, opposing=opposing)
        return
    if opposing:
        reason = Reason.SLOT_CONFLICT if slot_opposing else Reason.POLARITY_CONFLICT
        what = (
            "another object for an exclusive slot"
            if slot_opposing
            else "the opposite polarity of an edge another writer claims"
        )
        quarantine(
            d,
            conflict_id_for(c["command_id"]),
            reason,
            f"{what}: claims withheld until a resolver decides",
            withheld=[*agreeing, *opposing],
            supersedes=own,
            against=opposing,
        )
        return
    if unsafe:
        _hold(d, c, et, own=own, agreeing=agreeing, opposing=opposing)
        return
    accept(d, own, agreeing)


def _held_for_a_human(
    state: GraphState,
    et: EdgeType,
    c: ClaimCommand,
    d: Decision,
    own: list[str],
    agreeing: list[str],
    disputed: bool,
) -> bool:
    """Revision 2: in a fail-closed domain only a human moves a decision slot off its safe
    value, by any route — a denial of the safe value included. True when ``c`` would.

    Revision 4 (DESIGN §2, the second article's ``fallback_strategy(conflict)``): the rule is
    for disagreement — a claim nobody disputes is decided as in any domain (an owner may
    always withdraw or change its own claim); only a ``disputed`` one is held for a human.
    """
    if not at_least(d, 2) or not et.fallback.fails_closed:
        return False
    if at_least(d, 4) and not disputed:
        return False
    assert state.schema is not None
    if state.schema.is_human(c["agent"]):
        return False
    asserts = c["polarity"] == "assert"
    if et.fallback.is_safe(asserts, c["object_id"], strict=True):
        return False
    key = edge_key(
        c["edge_type"], c["subject_type"], c["subject_id"], c["object_type"], c["object_id"]
    )
    # no move when the edge already reads this way (corroborating, or replacing one's own)
    return not any(
        state.claims[x].edge == key and state.claims[x].asserts == asserts
        and state.claims[x].status == VISIBLE
        for x in (*own, *agreeing)
    )  # fmt: skip


def _hold(
    d: Decision,
    c: ClaimCommand,
    et: EdgeType,
    *,
    own: list[str],
    agreeing: list[str],
    opposing: list[str],
) -> None:
    what = f"{c['polarity']} {c['object_id']!r}"
    quarantine(
        d,
        conflict_id_for(c["command_id"]),
        Reason.NEEDS_HUMAN,
        f"domain {et.domain} fails closed: only a human (principals.humans) may make {what} "
        "hold; held for a person",
        withheld=[*agreeing, *opposing],
        supersedes=own,
        against=opposing,
    )


def signals_of(state: GraphState, d: Decision) -> None:
    """Decision checks (second article) over the writers of the claim's slot or conflict."""
    claim = d["claim"]
    assert claim is not None
    et = state.edge_type(claim["edge_type"])
    if et is None or et.decision is None or d["kind"] == "rejected":
        return
    by = outcome_by(et)
    key = edge_key(
        claim["edge_type"],
        claim["subject_type"],
        claim["subject_id"],
        claim["object_type"],
        claim["object_id"],
    )
    ids: list[str] = []
    es = state.edges.get(key)
    if es is not None:
        ids += [*es.visible, *es.withheld]
    for s in state.slots_of(key):
        holder = state.slot_holder.get(s)
        if holder is not None and holder != key:
            ids += list(state.edges[holder].visible)
        conflict = state.slot_conflict.get(s)
        if conflict is not None:
            ids += state.conflicts[conflict].claims
    if d["conflict_id"] is not None and d["conflict_id"] in state.conflicts:
        ids += state.conflicts[d["conflict_id"]].claims
    ids += d["withheld"] + d["supersedes"] + d["conflicts_with"]
    seen: set[str] = set()
    votes = []
    for x in ids:
        if x in seen or x not in state.claims or x == claim["claim_id"]:
            continue
        seen.add(x)
        if state.claims[x].agent != claim["agent"]:
            votes.append(vote_of(state, x, by))
    if not votes:
        return
    votes.sort(key=lambda v: (v.asserted_at, v.claim_id))
    cmd_like = cast(ClaimCommand, {**claim, "command_id": claim["claim_id"]})
    votes.append(new_vote(cmd_like, by))
    d["signals"] = signals(votes, et.decision)


def claim_record(c: ClaimCommand) -> ClaimRecord:
    return {
        "claim_id": c["command_id"],
        "agent": c["agent"],
        "task": c["task"],
        "run_id": c["run_id"],
        "edge_type": c["edge_type"],
        "subject_type": c["subject_type"],
        "subject_id": c["subject_id"],
        "object_type": c["object_type"],
        "object_id": c["object_id"],
        "polarity": c["polarity"],
        "confidence": float(c["confidence"]),
        "evidence": list(c["evidence"]),
        "reasoning": c["reasoning"],
        "asserted_at": c["asserted_at"],
        "based_on_version": c["based_on_version"],
        "properties": dict(sorted(c["properties"].items())),
    }
