"""The governor's decision function: ``decide(state, command, input_offset, log_time)`` (pure).

No clock, no randomness, no I/O: the only inputs are the folded :class:`GraphState`, the
command's bytes, its position in the commands log and its log append time (the governor's
"now"). Replaying the commands log through ``decide`` + ``GraphState.evolve`` therefore
reproduces the decisions log byte for byte.

Every command gets exactly one decision. Anything invalid — undecodable bytes, a malformed
field, an unknown type, a writer the schema does not admit — becomes a ``rejected`` decision
with a machine-readable reason code (:class:`claimgraph.core.model.Reason`) and a detail line.

Policy, per edge type (``conflict_policy``), for a claim on edge E from agent A:

* the claim *replaces* A's own visible claims on E (and, for an assert, A's asserts elsewhere
  in E's exclusive slots); claims by other agents either *agree* (same edge, same polarity:
  corroboration) or *oppose* (the other polarity on E, or an assert of another object in an
  exclusive slot);
* ``last-write-wins-with-timestamp``: the newest event time wins, ties going to the later log
  position; a claim older than an opposing or own visible claim is ``conflicted`` and changes
  nothing, otherwise it is ``accepted`` and supersedes them;
* ``quarantine`` (and, until calibrated merge lands, ``confidence-weighted-merge``): opposing
  claims open a conflict; every claim involved is withheld and the edge and its slots read
  *unknown* until a ``resolve`` — or the retraction of all but one outcome — closes it. A
  claim touching a slot or edge under an open conflict joins that conflict;
* ``based_on_version`` older than the last change of E or its slots makes the claim *stale*:
  ``on_stale`` rejects it, quarantines it against the current claims, or accepts it
  (flagged ``stale``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, cast

from claimgraph.core.erasure import decide_erase
from claimgraph.core.governance import Vote, label, merge, outcome_by, signals
from claimgraph.core.governance import iso_utc as _iso
from claimgraph.core.governor.admission import HANDLERS as _ADMISSION
from claimgraph.core.governor.admission import Refusal as _Reject
from claimgraph.core.governor.admission import admit as _admit
from claimgraph.core.model import (
    LIMITS,
    ClaimCommand,
    ClaimRecord,
    Command,
    ConflictPolicy,
    Decision,
    EscalateCommand,
    Exit,
    GrantCommand,
    InvalidInputCommand,
    OnStale,
    PublishSchemaCommand,
    ReadBlockedCommand,
    Reason,
    ResolveCommand,
    RetractCommand,
    RevokeCommand,
)
from claimgraph.core.schema import EdgeType, parse_schema
from claimgraph.core.state import (
    LOST,
    SEP,
    SUPERSEDED,
    VISIBLE,
    WITHHELD,
    ConflictState,
    GraphState,
    edge_key,
    edge_parts,
)
from claimgraph.core.wire import decode_command
from claimgraph.errors import DecodeError, SchemaError

__all__ = ["conflict_id_for", "decide", "decide_command"]


def conflict_id_for(command_id: str) -> str:
    """The id of the conflict a command opens (command ids are unique, so these are too)."""
    return f"cf:{command_id}"


def _base(
    state: GraphState, cmd: Command | None, ctype: str, offset: int, log_time: int
) -> Decision:
    c = cast(dict[str, Any], cmd or {})
    return {
        "graph": state.graph,
        "command_id": c.get("command_id", ""),
        "command_type": ctype,
        "input_offset": offset,
        "log_time": log_time,
        "kind": "rejected",
        "reason": "",
        "detail": "",
        "schema_rev": state.schema_rev,
        "agent": c.get("agent", ""),
        "task": c.get("task", ""),
        "claim": None,
        "target": None,
        "conflict_id": None,
        "conflicts_with": [],
        "supersedes": [],
        "withheld": [],
        "released": [],
        "dismissed": [],
        "stale": False,
        "schema": None,
        "grant": None,
        "merge": None,
        "signals": [],
        "exits": [],
        "count": 0,
        "run_id": None,
        "key": None,
        "signed_by": None,
    }


def decide(state: GraphState, data: bytes, input_offset: int, log_time: int) -> Decision:
    """Decide one command given as bytes from the commands log."""
    try:
        cmd = decode_command(data)
    except DecodeError as exc:
        d = _base(state, None, "undecodable", input_offset, log_time)
        d["reason"] = exc.reason
        d["detail"] = exc.detail[: LIMITS["detail"]]
        return d
    # signed commands, and every command of a graph that requires signatures: admission.py
    if state.keys_active or cast(dict[str, Any], cmd).get("type") == "signed":
        return _admit(state, cmd, input_offset, log_time, decide_command, _base)
    return decide_command(state, cmd, input_offset, log_time)


def decide_command(state: GraphState, cmd: Command, input_offset: int, log_time: int) -> Decision:
    """Decide one decoded command."""
    ctype = cast(str, cmd.get("type", "claim"))
    d = _base(state, cmd, ctype, input_offset, log_time)
    try:
        _check_envelope(state, cmd, d)
        _HANDLERS[ctype](state, cmd, d)
        if d["claim"] is not None:
            _signals(state, d)
    except _Reject as r:
        d["kind"] = "rejected"
        d["reason"] = r.reason.value
        d["detail"] = r.detail[: LIMITS["detail"]]
        for k in ("conflicts_with", "supersedes", "withheld", "released", "dismissed"):
            d[k] = []
        d["claim"] = None
        d["schema"] = None
        d["grant"] = None
        d["key"] = None
        d["conflict_id"] = None
        d["target"] = None
        d["stale"] = False
        d["merge"] = None
        d["signals"] = []
        d["exits"] = []
        d["count"] = 0
        d["run_id"] = None
    return d


# -- validation -----------------------------------------------------------------------------


def _check_id(value: object, name: str, *, empty_ok: bool = False) -> None:
    if not isinstance(value, str):
        raise _Reject(Reason.INVALID_FIELD, f"{name} must be a string")
    if not value:
        if empty_ok:
            return
        raise _Reject(Reason.INVALID_ID, f"{name} is empty")
    if len(value) > LIMITS["id"]:
        raise _Reject(
            Reason.FIELD_TOO_LARGE,
            f"{name} has {len(value)} characters; at most {LIMITS['id']} allowed",
        )
    if not value.isprintable():
        raise _Reject(Reason.INVALID_ID, f"{name} contains control or non-printable characters")


def _check_envelope(state: GraphState, cmd: Command, d: Decision) -> None:
    cid = cmd["command_id"]
    if cmd.get("type") == "invalid_input" and not cid:
        return  # input too broken to carry an id: rejected below, remembered nowhere
    try:
        _check_id(cid, "command_id")
    except _Reject:
        d["command_id"] = ""  # an unusable id is not remembered; the detail keeps a prefix
        raise
    if cmd["graph"] != state.graph:
        raise _Reject(
            Reason.WRONG_GRAPH,
            f"command is for graph {cmd['graph'][:80]!r}; this is {state.graph!r}",
        )
    if state.seen(cid):
        raise _Reject(
            Reason.DUPLICATE_COMMAND,
            f"command {cid!r} was already decided; use a new command_id to retry",
        )
    if cmd.get("type") != "invalid_input":
        _check_id(cmd["agent"], "agent")
        _check_id(cmd["task"], "task", empty_ok=True)


def _check_text(value: str, name: str, limit: int) -> None:
    if len(value) > limit:
        raise _Reject(
            Reason.FIELD_TOO_LARGE, f"{name} has {len(value)} characters; at most {limit} allowed"
        )


def _check_claim_fields(c: ClaimCommand) -> None:
    for name in ("edge_type", "subject_type", "subject_id", "object_type", "object_id"):
        _check_id(c[name], name)
    if c["run_id"] is not None:
        _check_id(c["run_id"], "run_id")
    conf = c["confidence"]
    if not (isinstance(conf, float | int) and math.isfinite(conf) and 0.0 <= conf <= 1.0):
        raise _Reject(Reason.INVALID_FIELD, f"confidence must be in [0, 1], got {conf!r}")
    if len(c["evidence"]) > LIMITS["evidence_items"]:
        raise _Reject(
            Reason.FIELD_TOO_LARGE,
            f"evidence has {len(c['evidence'])} items; at most {LIMITS['evidence_items']} allowed",
        )
    for i, e in enumerate(c["evidence"]):
        _check_text(e, f"evidence[{i}]", LIMITS["evidence_item"])
    _check_text(c["reasoning"], "reasoning", LIMITS["reasoning"])
    if len(c["properties"]) > LIMITS["properties"]:
        raise _Reject(
            Reason.FIELD_TOO_LARGE,
            f"properties has {len(c['properties'])} "
            f"entries; at most {LIMITS['properties']} allowed",
        )
    for k, v in c["properties"].items():
        _check_id(k, "property name")
        _check_text(v, f"properties[{k!r}]", LIMITS["property_value"])
    if c["asserted_at"] < 0:
        raise _Reject(Reason.INVALID_FIELD, "asserted_at must be ms since the epoch (>= 0)")
    b = c["based_on_version"]
    if b is not None and b < -1:
        raise _Reject(Reason.INVALID_FIELD, "based_on_version must be >= -1")


def _require_schema(state: GraphState) -> None:
    if state.schema is None:
        raise _Reject(
            Reason.NO_SCHEMA,
            "no graph schema has been published yet (claimgraph schema apply FILE)",
        )


# -- claims ---------------------------------------------------------------------------------


def _authorised(state: GraphState, et: EdgeType, agent: str, task: str, now: int) -> bool:
    assert state.schema is not None
    if state.schema.may_write(et, agent, task):
        return True
    for g in state.grants.values():
        r = g.record
        if g.revoked or (r["expires_at"] is not None and now >= r["expires_at"]):
            continue
        if r["edge_type"] not in (et.name, "*"):
            continue
        from claimgraph.core.schema import Pattern  # small, cached by the regex module

        if Pattern.of(r["grantee_agent"]).matches(agent) and Pattern.of(r["grantee_task"]).matches(
            task
        ):
            return True
    return False


def _claim(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(ClaimCommand, cmd)
    _check_claim_fields(c)
    _require_schema(state)
    schema = state.schema
    assert schema is not None
    et = schema.edge_types.get(c["edge_type"])
    if et is None:
        raise _Reject(
            Reason.UNKNOWN_EDGE_TYPE,
            f"edge type {c['edge_type']!r} is not in "
            f"schema revision {state.schema_rev} (known: "
            f"{', '.join(sorted(schema.edge_types)) or 'none'})",
        )
    for end, want in (("subject", et.subject), ("object", et.object)):
        got = c["subject_type"] if end == "subject" else c["object_type"]
        if got not in schema.node_types:
            raise _Reject(
                Reason.UNKNOWN_NODE_TYPE,
                f"{end} type {got!r} is not a node type of schema revision {state.schema_rev}",
            )
        if got != want:
            reason = (
                Reason.SUBJECT_TYPE_MISMATCH if end == "subject" else Reason.OBJECT_TYPE_MISMATCH
            )
            raise _Reject(reason, f"{et.name} needs a {want} {end}, got {got!r}")
    agent, task = c["agent"], c["task"]
    if not _authorised(state, et, agent, task, d["log_time"]):
        writers = ", ".join(f"{w.agent.text}/{w.task.text}" for w in et.writers)
        raise _Reject(
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
            raise _Reject(
                Reason.FUTURE_VERSION,
                f"based_on_version {based} is above the graph's head {known}",
            )
        stale = state.changed_at(key) > state.seq_of(based)
        if stale and et.on_stale == OnStale.REJECT:
            raise _Reject(
                Reason.STALE_CLAIM,
                f"the slot changed after version {based}, which the claim was based on",
            )
    d["claim"] = _record(c)
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
    if len(touching) > 1:
        raise _Reject(
            Reason.CONFLICT_OVERLAP,
            f"the claim touches several open conflicts ({', '.join(sorted(touching))}); "
            "resolve one of them first",
        )
    open_conflict = state.edge_conflict(key) or (next(iter(touching)) if touching else None)
    if open_conflict is not None:
        _quarantine(
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
        _quarantine(
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
        _accept(d, own + opposing, agreeing)
        return
    if opposing and et.conflict_policy == ConflictPolicy.CONFIDENCE_WEIGHTED_MERGE:
        _merge_claim(state, et, c, d, own=own, agreeing=agreeing, opposing=opposing)
        return
    if opposing:
        reason = Reason.SLOT_CONFLICT if slot_opposing else Reason.POLARITY_CONFLICT
        what = (
            "another object for an exclusive slot"
            if slot_opposing
            else "the opposite polarity of an edge another writer claims"
        )
        _quarantine(
            d,
            conflict_id_for(c["command_id"]),
            reason,
            f"{what}: claims withheld until a resolver decides",
            withheld=[*agreeing, *opposing],
            supersedes=own,
            against=opposing,
        )
        return
    _accept(d, own, agreeing)


def _vote(state: GraphState, claim_id: str, by: str) -> Vote:
    cs = state.claims[claim_id]
    return Vote(
        claim_id,
        cs.agent,
        _label(cs.edge, cs.asserts, by),
        cs.conf,
        cs.ts,
        cs.based,
    )


def _label(key: str, asserts: bool, by: str) -> str:
    _, st, si, ot, oi = edge_parts(key)
    return label("assert" if asserts else "deny", st, si, ot, oi, by)


def _new_vote(c: ClaimCommand, by: str) -> Vote:
    key = edge_key(
        c["edge_type"], c["subject_type"], c["subject_id"], c["object_type"], c["object_id"]
    )
    return Vote(
        c["command_id"],
        c["agent"],
        _label(key, c["polarity"] == "assert", by),
        float(c["confidence"]),
        c["asserted_at"],
        c["based_on_version"],
    )


def _merge_claim(
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
        (_vote(state, x, by) for x in counted), key=lambda v: (v.asserted_at, v.claim_id)
    )
    mine = _new_vote(c, by)
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
        winner_safe = et.fallback.is_safe(w_asserts, w_object)
    if m["winner"] is None or not winner_safe:
        why = (
            f"{m['outcome']} leads but domain {et.domain} fails closed: a person must decide"
            if m["winner"] is not None
            else "the best two outcomes are too close"
        )
        _quarantine(
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


def _signals(state: GraphState, d: Decision) -> None:
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
            votes.append(_vote(state, x, by))
    if not votes:
        return
    votes.sort(key=lambda v: (v.asserted_at, v.claim_id))
    cmd_like = cast(ClaimCommand, {**claim, "command_id": claim["claim_id"]})
    votes.append(_new_vote(cmd_like, by))
    d["signals"] = signals(votes, et.decision)


def _accept(d: Decision, supersedes: list[str], agreeing: list[str]) -> None:
    d["kind"] = "accepted"
    d["supersedes"] = supersedes
    if supersedes:
        d["reason"] = Reason.SUPERSEDES.value
        d["detail"] = f"supersedes {', '.join(supersedes[:5])}" + (
            f" and {len(supersedes) - 5} more" if len(supersedes) > 5 else ""
        )
    elif agreeing:
        d["reason"] = Reason.CORROBORATES.value
        d["detail"] = f"agrees with {', '.join(agreeing[:5])}"
    else:
        d["reason"] = Reason.NEW.value


def _quarantine(
    d: Decision,
    conflict_id: str,
    reason: Reason,
    detail: str,
    *,
    withheld: list[str],
    supersedes: list[str],
    against: list[str],
) -> None:
    d["kind"] = "quarantined"
    d["reason"] = reason.value
    d["detail"] = detail
    d["conflict_id"] = conflict_id
    d["withheld"] = withheld
    d["supersedes"] = supersedes
    d["conflicts_with"] = against


def _record(c: ClaimCommand) -> ClaimRecord:
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


# -- lifecycle: retract and resolve -----------------------------------------------------------


def _release(state: GraphState, claims: Sequence[str], d: Decision) -> None:
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


def _outcome(state: GraphState, claim_id: str) -> tuple[str, bool]:
    cs = state.claims[claim_id]
    return cs.edge, cs.asserts


def _retract(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(RetractCommand, cmd)
    _check_id(c["claim_id"], "claim_id")
    _check_text(c["reason"], "reason", LIMITS["reasoning"])
    target = c["claim_id"]
    cs = state.claims.get(target)
    if cs is None:
        raise _Reject(Reason.UNKNOWN_CLAIM, f"no claim {target!r} in this graph")
    if cs.agent != c["agent"]:
        raise _Reject(
            Reason.NOT_OWNER,
            f"claim {target!r} belongs to {cs.agent!r}; only its owner may retract it",
        )
    if cs.status not in (VISIBLE, WITHHELD):
        from claimgraph.core.state import STATUS_NAMES

        status = STATUS_NAMES[cs.status]
        reason = Reason.ALREADY_RETIRED if status == "retired" else Reason.NOT_LIVE
        raise _Reject(reason, f"claim {target!r} is {status}; nothing to retract")
    d["kind"] = "retired"
    d["reason"] = Reason.RETRACTED.value
    d["target"] = target
    d["detail"] = c["reason"][:200]
    if cs.status == WITHHELD and cs.conflict is not None:
        conflict = state.conflicts[cs.conflict]
        d["conflict_id"] = cs.conflict
        rest = [x for x in conflict.claims if x != target]
        if rest and len({_outcome(state, x) for x in rest}) == 1:
            _release(state, rest, d)
            d["detail"] = f"retracted; the remaining claims of {cs.conflict} agree and are released"


def _require_resolver(state: GraphState, agent: str) -> None:
    _require_schema(state)
    assert state.schema is not None
    if not state.schema.is_resolver(agent):
        raise _Reject(
            Reason.NOT_RESOLVER,
            f"agent {agent!r} is not a resolver or admin in schema revision {state.schema_rev}",
        )


def _open_conflict(state: GraphState, conflict_id: str) -> ConflictState:
    """The open conflict a resolve, escalate or read_blocked command names."""
    conflict = state.conflicts.get(conflict_id)
    if conflict is None:
        raise _Reject(Reason.UNKNOWN_CONFLICT, f"no conflict {conflict_id!r}")
    if not conflict.open:
        raise _Reject(
            Reason.CONFLICT_CLOSED,
            f"conflict {conflict_id!r} is already closed ({conflict.outcome})",
        )
    return conflict


def _resolve(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(ResolveCommand, cmd)
    _check_id(c["conflict_id"], "conflict_id")
    _check_id(c["resolver"], "resolver")
    _check_text(c["rationale"], "rationale", LIMITS["reasoning"])
    _check_text(c.get("inputs", ""), "inputs", LIMITS["document"])
    _require_resolver(state, c["agent"])
    conflict = _open_conflict(state, c["conflict_id"])
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
        raise _Reject(
            Reason.NOT_IN_CONFLICT,
            f"claim {winner!r} is not held in conflict "
            f"{conflict.conflict_id!r} (held: {', '.join(conflict.claims)})"[:500],
        )
    et = state.edge_type(conflict.edge_type)
    human = state.schema is not None and state.schema.is_human(c["agent"])
    if et is not None and et.fallback.fails_closed and not human:
        ws = state.claims[winner]
        if not et.fallback.is_safe(ws.asserts, edge_parts(ws.edge)[4]):
            raise _Reject(
                Reason.NEEDS_HUMAN,
                f"domain {et.domain} fails closed: only a human (principals.humans) may pick "
                f"{'assert' if ws.asserts else 'deny'} {edge_parts(ws.edge)[4]!r}; "
                f"automatic resolvers may pick {', '.join(_safe_values(et))} or reject all",
            )
    want = _outcome(state, winner)
    released = [x for x in conflict.claims if _outcome(state, x) == want]
    _release(state, released, d)
    d["dismissed"] = [x for x in conflict.claims if x not in released]
    d["reason"] = Reason.WINNER.value
    d["detail"] = f"{c['resolver']}: {winner} wins. {c['rationale'][:200]}"


# -- administration ---------------------------------------------------------------------------


def _require_admin(state: GraphState, agent: str) -> None:
    _require_schema(state)
    assert state.schema is not None
    if not state.schema.is_admin(agent):
        raise _Reject(
            Reason.NOT_ADMIN,
            f"agent {agent!r} is not an admin in schema revision {state.schema_rev}",
        )


def _publish(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(PublishSchemaCommand, cmd)
    _check_text(c["source"], "source", LIMITS["id"])
    if len(c["document"]) > LIMITS["document"]:
        raise _Reject(
            Reason.FIELD_TOO_LARGE,
            f"schema document is larger than {LIMITS['document']} characters",
        )
    try:
        schema = parse_schema(c["document"], c["source"] or "<schema>")
    except SchemaError as exc:
        raise _Reject(Reason.INVALID_SCHEMA, exc.report()) from None
    if state.schema is None:
        if not schema.is_admin(c["agent"]):
            raise _Reject(
                Reason.NOT_ADMIN,
                f"the first schema of a graph must name its "
                f"publisher {c['agent']!r} among principals.admins",
            )
    else:
        _require_admin(state, c["agent"])
        clashes = state.slot_violations(schema)
        if clashes:
            raise _Reject(
                Reason.INVALID_SCHEMA,
                f"the new cardinalities would put several present edges in "
                f"{len(clashes)} exclusive slot(s), e.g. {clashes[0].replace(SEP, '/')}; "
                "retract or resolve them first",
            )
    d["kind"] = "accepted"
    d["reason"] = Reason.SCHEMA_PUBLISHED.value
    rev = state.schema_rev + 1
    d["detail"] = f"schema revision {rev} ({schema.digest}) is in force from this version"
    d["schema"] = {
        "revision": rev,
        "digest": schema.digest,
        "source": c["source"],
        "document": c["document"],
    }


def _grant(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(GrantCommand, cmd)
    _require_admin(state, c["agent"])
    assert state.schema is not None
    _check_id(c["grantee_agent"], "grantee_agent")
    _check_id(c["grantee_task"], "grantee_task")
    _check_id(c["edge_type"], "edge_type")
    if c["edge_type"] != "*" and c["edge_type"] not in state.schema.edge_types:
        raise _Reject(
            Reason.UNKNOWN_EDGE_TYPE,
            f"edge type {c['edge_type']!r} is not in schema revision {state.schema_rev}",
        )
    if c["expires_at"] is not None and c["expires_at"] <= d["log_time"]:
        raise _Reject(
            Reason.INVALID_FIELD,
            f"expires_at {c['expires_at']} is not after the log time {d['log_time']}",
        )
    d["kind"] = "accepted"
    d["reason"] = Reason.GRANTED.value
    d["target"] = c["command_id"]
    d["grant"] = {
        "grant_id": c["command_id"],
        "grantee_agent": c["grantee_agent"],
        "grantee_task": c["grantee_task"],
        "edge_type": c["edge_type"],
        "expires_at": c["expires_at"],
    }
    until = f" until {_iso(c['expires_at'])}" if c["expires_at"] is not None else ""
    d["detail"] = f"{c['grantee_agent']}/{c['grantee_task']} may write {c['edge_type']}{until}"


def _revoke(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(RevokeCommand, cmd)
    _require_admin(state, c["agent"])
    _check_id(c["grant_id"], "grant_id")
    g = state.grants.get(c["grant_id"])
    if g is None or g.revoked:
        what = "was already revoked" if g else "does not exist"
        raise _Reject(Reason.UNKNOWN_GRANT, f"grant {c['grant_id']!r} {what}")
    d["kind"] = "accepted"
    d["reason"] = Reason.REVOKED.value
    d["target"] = c["grant_id"]


def _tick(state: GraphState, cmd: Command, d: Decision) -> None:
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
            _exit(
                state,
                conflict,
                "deadline",
                f"open since {_iso(conflict.opened_time)}; deadline passed at {_iso(due)}",
                d,
            )
    if d["exits"]:
        d["detail"] = f"{len(d['exits'])} conflict(s) reached their deadline"


def _read_blocked(state: GraphState, cmd: Command, d: Decision) -> None:
    """Reads that hit a quarantined slot: counted, and an exit at the declared threshold."""
    c = cast(ReadBlockedCommand, cmd)
    _check_id(c["conflict_id"], "conflict_id")
    if c["run_id"] is not None:
        _check_id(c["run_id"], "run_id")
    if not 1 <= c["count"] <= 1_000_000:
        raise _Reject(Reason.INVALID_FIELD, f"count must be in 1..1000000, got {c['count']}")
    conflict = _open_conflict(state, c["conflict_id"])
    d["kind"] = "accepted"
    d["reason"] = Reason.READ_BLOCKED.value
    d["target"] = c["conflict_id"]
    d["count"] = c["count"]
    d["run_id"] = c["run_id"]
    total = conflict.blocked_reads + c["count"]
    d["detail"] = f"{c['count']} blocked read(s); {total} in all"
    et = state.edge_type(conflict.edge_type)
    if et is None or conflict.escalated_at is not None:
        return
    limit = et.exits.max_blocked_reads
    runs = et.exits.escalate_after_runs
    run = c["run_id"]
    if limit is not None and total >= limit:
        _exit(state, conflict, "blocked_reads", f"{total} blocked reads (threshold {limit})", d)
    elif (
        runs is not None
        and run is not None
        and run not in conflict.blocked_runs
        and len(conflict.blocked_runs) + 1 >= runs
    ):
        _exit(
            state,
            conflict,
            "runs",
            f"outlived {len(conflict.blocked_runs) + 1} run(s) it blocked (run {run})",
            d,
        )


def _exit(
    state: GraphState, conflict: ConflictState, trigger: str, detail: str, d: Decision
) -> None:
    """A conflict leaves quarantine: by the domain's fallback value, or to a human."""
    et = state.edge_type(conflict.edge_type)
    action = et.exits.on_exit if et is not None and trigger != "runs" else "escalate"
    if action == "fallback" and et is not None:
        winners = _fallback_claims(state, conflict.claims, et)
        if winners:
            _release_into(state, winners, d)
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


def _fallback_claims(state: GraphState, claims: Sequence[str], et: EdgeType) -> list[str]:
    """The claims holding the domain's fallback value (or, failing closed, a denial)."""
    value = et.fallback.value
    pick = [
        x
        for x in claims
        if state.claims[x].asserts and edge_parts(state.claims[x].edge)[4] == value
    ]
    if not pick and et.fallback.fails_closed:
        pick = [x for x in claims if not state.claims[x].asserts]
    if not pick:
        return []
    want = _outcome(state, pick[0])
    return [x for x in claims if _outcome(state, x) == want]


def _release_into(state: GraphState, claims: Sequence[str], d: Decision) -> None:
    """Like :func:`_release`, adding to what the decision already releases and supersedes."""
    released, supersedes = list(d["released"]), list(d["supersedes"])
    _release(state, claims, d)
    d["released"] = released + [x for x in d["released"] if x not in released]
    d["supersedes"] = supersedes + [x for x in d["supersedes"] if x not in supersedes]


def _safe_values(et: EdgeType) -> list[str]:
    return [x for x in (et.fallback.value, *et.fallback.safe) if x]


def _escalate(state: GraphState, cmd: Command, d: Decision) -> None:
    """A resolver hands a conflict to a human; it stays quarantined, now escalated."""
    c = cast(EscalateCommand, cmd)
    _check_id(c["conflict_id"], "conflict_id")
    _check_id(c["resolver"], "resolver")
    _check_text(c["reason"], "reason", LIMITS["id"])
    _require_resolver(state, c["agent"])
    conflict = _open_conflict(state, c["conflict_id"])
    if conflict.escalated_at is not None:
        raise _Reject(
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


def _invalid(state: GraphState, cmd: Command, d: Decision) -> None:
    c = cast(InvalidInputCommand, cmd)
    raise _Reject(Reason.MALFORMED, c["error"])


def _erase(state: GraphState, cmd: Command, d: Decision) -> None:
    rejected = decide_erase(state, cmd, d)
    if rejected is not None:
        raise _Reject(*rejected)


_HANDLERS: dict[str, Callable[[GraphState, Command, Decision], None]] = {
    "claim": _claim,
    "retract": _retract,
    "resolve": _resolve,
    "publish_schema": _publish,
    "grant": _grant,
    "revoke": _revoke,
    "tick": _tick,
    "read_blocked": _read_blocked,
    "escalate": _escalate,
    "invalid_input": _invalid,
    **_ADMISSION,  # register_key, revoke_key, refused
    "erase": _erase,
}

assert SEP  # edge keys are built with fold.SEP; ids are checked printable so it cannot clash
