"""What every rule module shares: the empty decision, the refusal, field checks (pure).

A rule raises :class:`Refusal` to reject a command; ``decide_command`` turns it into a
``rejected`` decision with the reason code and detail, and clears every effect the rule may
already have written into the decision.
"""

from __future__ import annotations

from typing import Any, cast

from claimgraph.core.governor.revisions import CURRENT
from claimgraph.core.model import (
    LIMITS,
    Command,
    Decision,
    Reason,
)
from claimgraph.core.state import GraphState


class Refusal(Exception):
    """A command is rejected with a reason code and a detail line (raised inside ``decide``)."""

    def __init__(self, reason: Reason, detail: str) -> None:
        self.reason = reason
        self.detail = detail


class RuleFailed(Exception):
    """An unexpected exception inside the rule ``rule``: ``decide`` records it as a
    ``rejected``/``internal_error`` decision (the governor is total)."""

    def __init__(self, rule: str, exc: Exception) -> None:
        super().__init__(rule, type(exc).__name__)
        self.rule = rule
        self.cls = type(exc).__name__


def conflict_id_for(command_id: str) -> str:
    """The id of the conflict a command opens (command ids are unique, so these are too)."""
    return f"cf:{command_id}"


def new_decision(
    state: GraphState,
    cmd: Command | None,
    ctype: str,
    offset: int,
    log_time: int,
    rules: int = CURRENT,
) -> Decision:
    """The decision a rule fills in: a rejection with no effects, under ``rules``."""
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
        "rules": rules,
        "command_sha256": "",
        "prev_hash": "",
    }


def check_id(value: object, name: str, *, empty_ok: bool = False) -> None:
    if not isinstance(value, str):
        raise Refusal(Reason.INVALID_FIELD, f"{name} must be a string")
    if not value:
        if empty_ok:
            return
        raise Refusal(Reason.INVALID_ID, f"{name} is empty")
    if len(value) > LIMITS["id"]:
        raise Refusal(
            Reason.FIELD_TOO_LARGE,
            f"{name} has {len(value)} characters; at most {LIMITS['id']} allowed",
        )
    if not value.isprintable():
        raise Refusal(Reason.INVALID_ID, f"{name} contains control or non-printable characters")


def check_text(value: str, name: str, limit: int) -> None:
    if len(value) > limit:
        raise Refusal(
            Reason.FIELD_TOO_LARGE, f"{name} has {len(value)} characters; at most {limit} allowed"
        )


def require_schema(state: GraphState) -> None:
    if state.schema is None:
        raise Refusal(
            Reason.NO_SCHEMA,
            "no graph schema has been published yet (claimgraph schema apply FILE)",
        )


def accept(d: Decision, supersedes: list[str], agreeing: list[str]) -> None:
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


def quarantine(
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
