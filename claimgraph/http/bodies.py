"""Request bodies and limits of the HTTP API (pydantic models: the edge's validation).

Every model is strict — a number is a JSON number (``"0.5"`` and ``true`` are not
confidences), an integer is not a float, text is text — and bounded: every string, list and
map has a maximum length (property names are ids), integers fit the wire's 64 bits. The
gate (:mod:`claimgraph.http.middleware`) has bounded the body's size and nesting before any
of this runs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field, create_model

from claimgraph.core.commands import I64
from claimgraph.core.model import LIMITS
from claimgraph.http.problems import PROBLEM
from claimgraph.service.api import node
from claimgraph.service.inputs import declared, now_millis
from claimgraph.service.limits import RUN_EVENT_PAYLOAD

__all__ = [
    "BATCH_ITEMS",
    "BATCH_PER_REQUEST",
    "BODIES",
    "I64",
    "PROBLEM_RESPONSES",
    "RUN_EVENT_PAYLOAD",
    "STRICT",
    "WHAT_IF_SECONDS",
    "AtQuery",
    "BatchIn",
    "BatchOut",
    "BatchResult",
    "ClaimIn",
    "EdgeRef",
    "EdgesIn",
    "EraseIn",
    "EscalateIn",
    "GrantIn",
    "Id",
    "In",
    "ReadBlockedIn",
    "RegisterKeyIn",
    "ResolveIn",
    "RetractIn",
    "RevokeIn",
    "RevokeKeyIn",
    "RunEventIn",
    "RunEventsIn",
    "SchemaIn",
    "TimeoutQuery",
    "UpgradeRulesIn",
    "Version",
    "WhatIfIn",
]

Version = Annotated[int, Field(ge=-1, le=I64)]
AtQuery = Annotated[
    int | None, Query(ge=-1, le=I64, description="Read at this version (default: head).")
]
TimeoutQuery = Annotated[
    float, Query(ge=0, le=30, description="Seconds to wait for `at` to be applied.")
]
Id = Annotated[str, Field(min_length=1, max_length=LIMITS["id"])]
WHAT_IF_SECONDS = 300.0  # the longest time bound a dry-run publish may ask for
RUN_EVENTS_PER_REQUEST = 10_000  # the model's hard bound; HttpLimits.max_run_events is lower
Text = Annotated[str, Field(max_length=LIMITS["reasoning"])]
PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"description": desc, "content": {PROBLEM: {}}}
    for code, desc in (
        (401, "No or unknown bearer token (recorded for writes)"),
        (403, "Refused: spoofed agent, task or role not allowed, or rejected by policy"),
        (404, "No such claim, conflict, run or grant"),
        (409, "Rejected: duplicate, closed, stale, or a version not yet available"),
        (413, "Too large: a body, or a run's trace, past its limit (not recorded)"),
        (422, "Invalid input (rejected by the governor, or malformed request)"),
        (429, "Too many at once for this principal: requests, waits or pins (not recorded)"),
    )
}


# -- request bodies -------------------------------------------------------------------------


STRICT = ConfigDict(extra="forbid", strict=True)


class In(BaseModel):
    """Fields every command body may carry."""

    model_config = STRICT
    agent: str | None = Field(
        None,
        max_length=LIMITS["id"],
        description="Declared agent: must be the token's principal (or omitted).",
    )
    task: str = Field("", max_length=LIMITS["id"])
    command_id: Id | None = None

    def fields(self) -> dict[str, Any]:
        """The command's fields after the envelope, as the wire record has them."""
        return self.model_dump(exclude={"agent", "task", "command_id"})


class ClaimIn(In):
    edge_type: Id
    subject: Id = Field(description="'type:id'")
    object: Id = Field(description="'type:id'")
    polarity: Literal["assert", "deny"] = "assert"
    confidence: float = Field(1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    evidence: list[Annotated[str, Field(max_length=LIMITS["evidence_item"])]] = Field(
        default_factory=list, max_length=LIMITS["evidence_items"]
    )
    reasoning: Text = ""
    asserted_at: Annotated[int, declared("claim", "asserted_at")] | None = None
    based_on_version: Version | None = None
    properties: dict[Id, Annotated[str, Field(max_length=LIMITS["property_value"])]] = Field(
        default_factory=dict, max_length=LIMITS["properties"]
    )
    run_id: Id | None = None

    def fields(self) -> dict[str, Any]:
        (st, si), (ot, oi) = node(self.subject), node(self.object)
        return {
            "run_id": self.run_id,
            "edge_type": self.edge_type,
            "subject_type": st,
            "subject_id": si,
            "object_type": ot,
            "object_id": oi,
            "polarity": self.polarity,
            "confidence": self.confidence,
            "evidence": self.evidence,
            "reasoning": self.reasoning,
            "asserted_at": now_millis() if self.asserted_at is None else self.asserted_at,
            "based_on_version": self.based_on_version,
            "properties": self.properties,
        }


class RetractIn(In):
    claim_id: Id
    reason: Text = ""
    run_id: Id | None = None

    def fields(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "claim_id": self.claim_id, "reason": self.reason}


class ResolveIn(In):
    conflict_id: Id
    winner: Id | None = Field(None, description="The winning claim id; null rejects every claim.")
    resolver: Id = "human"
    rationale: Text = ""
    inputs: Annotated[str, declared("resolve", "inputs")] = Field(
        "", description="JSON: what the resolver saw and decided on."
    )


class EscalateIn(In):
    conflict_id: Id
    reason: Annotated[str, declared("escalate", "reason")] = ""
    resolver: Id = "human"


class ReadBlockedIn(In):
    conflict_id: Id
    count: Annotated[int, declared("read_blocked", "count")] = 1
    run_id: Id | None = None
    pinned_version: Version = Field(-1, description="The reporting run's pinned version.")


class WhatIfIn(BaseModel):
    """The range and bounds of a dry-run publish's what-if (docs: how-to/what-if)."""

    model_config = STRICT
    from_version: Version | None = Field(
        None,
        ge=0,
        description="The first version decided under the proposal (default: the version "
        "after the schema in force was published).",
    )
    to_version: Version | None = Field(
        None, ge=0, description="The last version decided again (default: head)."
    )
    limit: int | None = Field(
        None, ge=1, le=I64, description="Decide at most this many commands again."
    )
    seconds: float = Field(
        30.0,
        gt=0,
        le=WHAT_IF_SECONDS,
        allow_inf_nan=False,
        description="Stop after this many seconds; the report says where it stopped.",
    )
    first: int = Field(20, ge=0, le=1000, description="Entries listed per category.")


class SchemaIn(In):
    document: Annotated[str, declared("publish_schema", "document")]
    source: Annotated[str, declared("publish_schema", "source")] = "<http>"
    dry_run: bool = Field(
        False,
        description="Publish nothing: answer what the schema would have decided of the "
        "logged commands (a what-if, run read-only in a process of its own; embedded graphs).",
    )
    what_if: WhatIfIn | None = Field(None, description="The what-if's range (with dry_run).")

    def fields(self) -> dict[str, Any]:
        return {"document": self.document, "source": self.source}


class GrantIn(In):
    grantee_agent: Id
    edge_type: Id
    grantee_task: Id = "*"
    expires_at: Annotated[int, declared("grant", "expires_at")] | None = None


class RevokeIn(In):
    grant_id: Id


class RegisterKeyIn(In):
    key_id: Id
    key_agent: Id
    public_key: str = Field(pattern="^[0-9a-fA-F]{64}$", description="Raw Ed25519 key, hex.")

    def fields(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "key_agent": self.key_agent,
            "public_key": bytes.fromhex(self.public_key),
        }


class RevokeKeyIn(In):
    key_id: Id


class EraseIn(In):
    claim_id: Id
    reason: Annotated[str, declared("erase", "reason")]


class UpgradeRulesIn(In):
    to: Annotated[int, declared("upgrade_rules", "to")] = Field(
        description="The rules revision to take effect."
    )


# The body of each client command's route, keyed by command type (tested complete against
# the catalogue, claimgraph.core.commands).
BODIES: dict[str, type[In]] = {
    "claim": ClaimIn,
    "retract": RetractIn,
    "resolve": ResolveIn,
    "escalate": EscalateIn,
    "read_blocked": ReadBlockedIn,
    "publish_schema": SchemaIn,
    "grant": GrantIn,
    "revoke": RevokeIn,
    "register_key": RegisterKeyIn,
    "revoke_key": RevokeKeyIn,
    "erase": EraseIn,
    "upgrade_rules": UpgradeRulesIn,
}


BATCH_PER_REQUEST = 10_000  # the model's hard bound; HttpLimits.max_batch is lower


def _item(ctype: str, body: type[In]) -> type[In]:
    """``body`` with its command ``type``: one item of a batch (``POST /v1/commands``)."""
    tag: Any = Literal[ctype]
    return create_model(
        f"{body.__name__[:-2]}Item",
        __base__=body,
        __doc__=f"A {ctype} command in a batch.",
        type=(tag, Field(description="The command type.")),
    )


BATCH_ITEMS: dict[str, type[In]] = {t: _item(t, b) for t, b in BODIES.items()}
_Item: Any = Annotated[Union[tuple(BATCH_ITEMS.values())], Field(discriminator="type")]  # noqa: UP007


class BatchIn(BaseModel):
    """Commands to decide in order, in one synced write; at most ``max_batch`` of them."""

    model_config = STRICT
    commands: list[_Item] = Field(max_length=BATCH_PER_REQUEST)


class BatchResult(BaseModel):
    """One item's result: the status its own route would answer, and its receipt."""

    status: int
    command_id: str
    position: int
    version: int
    decision: dict[str, Any]


class BatchOut(BaseModel):
    results: list[BatchResult]


class EdgeRef(BaseModel):
    model_config = STRICT
    edge_type: Id
    subject: Id = Field(description="'type:id'")
    object: Id = Field(description="'type:id'")


class EdgesIn(BaseModel):
    """Edges to read at one version; at most ``max_batch`` of them."""

    model_config = STRICT
    edges: list[EdgeRef] = Field(max_length=BATCH_PER_REQUEST)
    at: Version | None = Field(None, description="Read at this version (default: head).")
    timeout: float = Field(0.0, ge=0, le=30, description="Seconds to wait for `at`.")
    run: Id | None = Field(None, description="Read in this run (as GET /v1/edge's run=).")


class RunEventIn(BaseModel):
    model_config = STRICT
    run_id: Id
    seq: int = Field(ge=0, le=I64)
    kind: Literal["start", "read", "write", "tool", "end"]
    agent: str | None = Field(None, max_length=LIMITS["id"])
    task: str = Field("", max_length=LIMITS["id"])
    pinned_version: Version
    snapshot_id: Id | None = None
    time: int = Field(ge=0, le=I64)
    payload: str = Field(max_length=RUN_EVENT_PAYLOAD, description="JSON object, as text.")


class RunEventsIn(BaseModel):
    """Trace events to append; how many one request may carry is ``max_run_events``."""

    model_config = STRICT
    events: list[RunEventIn] = Field(max_length=RUN_EVENTS_PER_REQUEST)
