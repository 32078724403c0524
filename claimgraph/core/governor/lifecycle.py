"""Lifecycle rules: an owner retracts its claim; an admin erases a claim's payload (pure).

Retraction is retirement, not contradiction: the claim leaves the head view and stays
readable at older versions. Retracting a withheld claim may leave its conflict with claims
that all agree, which are then released. Erasure changes no read of the graph's state.
"""

from __future__ import annotations

from typing import cast

from claimgraph.core.governor.base import Refusal, check_id, check_text
from claimgraph.core.governor.conflicts import claim_outcome, release
from claimgraph.core.model import (
    LIMITS,
    Command,
    Decision,
    EraseCommand,
    Reason,
    RetractCommand,
)
from claimgraph.core.state import (
    STATUS_NAMES,
    VISIBLE,
    WITHHELD,
    GraphState,
)


def retract(state: GraphState, cmd: Command, d: Decision) -> None:
    """Only the owner retracts, and only a visible or withheld claim."""
    c = cast(RetractCommand, cmd)
    check_id(c["claim_id"], "claim_id")
    check_text(c["reason"], "reason", LIMITS["reasoning"])
    target = c["claim_id"]
    cs = state.claims.get(target)
    if cs is None:
        raise Refusal(Reason.UNKNOWN_CLAIM, f"no claim {target!r} in this graph")
    if cs.agent != c["agent"]:
        raise Refusal(
            Reason.NOT_OWNER,
            f"claim {target!r} belongs to {cs.agent!r}; only its owner may retract it",
        )
    if cs.status not in (VISIBLE, WITHHELD):
        status = STATUS_NAMES[cs.status]
        reason = Reason.ALREADY_RETIRED if status == "retired" else Reason.NOT_LIVE
        raise Refusal(reason, f"claim {target!r} is {status}; nothing to retract")
    d["kind"] = "retired"
    d["reason"] = Reason.RETRACTED.value
    d["target"] = target
    d["detail"] = c["reason"][:200]
    if cs.status == WITHHELD and cs.conflict is not None:
        conflict = state.conflicts[cs.conflict]
        d["conflict_id"] = cs.conflict
        rest = [x for x in conflict.claims if x != target]
        if rest and len({claim_outcome(state, x) for x in rest}) == 1:
            release(state, rest, d)
            d["detail"] = f"retracted; the remaining claims of {cs.conflict} agree and are released"


def erase(state: GraphState, cmd: Command, d: Decision) -> None:
    """An admin removes one claim's payload from every read (see :mod:`claimgraph.core.erasure`).

    The claim keeps its place in the graph; the decision is the tombstone the projector acts on.
    """
    c = cast(EraseCommand, cmd)
    if state.schema is None:
        raise Refusal(Reason.NO_SCHEMA, "no schema has been published: there are no admins yet")
    if not state.schema.is_admin(c["agent"]):
        raise Refusal(
            Reason.NOT_ADMIN,
            f"agent {c['agent']!r} is not an admin in schema revision {state.schema_rev}",
        )
    claim_id = c["claim_id"]
    if not claim_id or len(claim_id) > 256 or not claim_id.isprintable():
        raise Refusal(Reason.INVALID_ID, "claim_id must be 1-256 printable characters")
    if claim_id not in state.claims:
        raise Refusal(Reason.UNKNOWN_CLAIM, f"no claim {claim_id!r} in this graph")
    d["kind"] = "accepted"
    d["reason"] = Reason.ERASED.value
    d["target"] = claim_id
    d["detail"] = f"payload of claim {claim_id} erased at every version: {c['reason'][:200]}"
