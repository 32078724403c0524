"""Request bodies and limits of the HTTP API (pydantic models: the edge's validation).

Every model is strict — a number is a JSON number (``"0.5"`` and ``true`` are not
confidences), an integer is not a float, text is text — and bounded: every string, list and
map has a maximum length (property names are ids), integers fit the wire's 64 bits. The
gate (:mod:`claimgraph.http.middleware`) has bounded the body's size and nesting before any
of this runs.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union, cast

from fastapi import Query
from pydantic import BaseModel, ConfigDict, Field, create_model

from claimgraph.core.commands import I64, Kind
from claimgraph.core.model import LIMITS
from claimgraph.core.queries import REQUIRED, Param
from claimgraph.core.writes import WRITES, WriteSpec
from claimgraph.http.answers import DecisionAnswer, documented
from claimgraph.http.problems import PROBLEM
from claimgraph.service.inputs import param_type
from claimgraph.service.limits import RUN_EVENT_PAYLOAD
from claimgraph.service.writes import fields_of

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

    write: ClassVar[str] = ""  # the write of the catalogue this is the body of

    def fields(self) -> dict[str, Any]:
        """The command's fields after the envelope, as the wire record has them: the body's
        parameters (by their catalogue names) through the one builder."""
        spec = WRITES[self.write]
        values = {
            spec.param(k).keyword: v for k, v in self.model_dump(include=_PARAMS[spec.name]).items()
        }
        for p in spec.params:
            if p.domain.kind is Kind.BYTES and isinstance(values.get(p.keyword), str):
                values[p.keyword] = bytes.fromhex(values[p.keyword])
        return fields_of(spec, values)


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


# -- the command bodies, derived from the write catalogue (core.writes) ---------------------

# What a parameter defaults to over HTTP when not the catalogue's: where a schema came from.
_HTTP_DEFAULTS = {("publish_schema", "source"): "<http>"}


def _body_field(spec: WriteSpec, p: Param) -> tuple[Any, Any]:
    """A write parameter as a body field: its type (``param_type``, the one mapping HTTP and
    MCP share) and its default."""
    default = _HTTP_DEFAULTS.get((spec.command, p.name), p.default)
    t = param_type(spec, p, optional=default is None)
    if default is REQUIRED:
        return t, ...
    if isinstance(default, tuple):  # a sequence's default: an empty list
        return t, Field(default_factory=list)
    if p.domain.kind is Kind.MAP and default is None:
        return t, Field(default_factory=dict)
    return t, default


_PARAMS = {s.name: {p.name for p in s.params} for s in WRITES.values()}


def _body(spec: WriteSpec, base: type[In] = In) -> type[In]:
    """The body of ``spec``'s command route: its parameters by their catalogue names."""
    name = "".join(w.title() for w in spec.command.split("_")) + "In"
    fields = {p.name: _body_field(spec, p) for p in spec.params}
    model = create_model(name, __base__=base, __doc__=spec.summary, **fields)  # type: ignore[call-overload]
    model.write = spec.name
    return cast("type[In]", model)


_DERIVED = {s.command: _body(s) for s in WRITES.values() if s.body}
ClaimIn = _DERIVED["claim"]
RetractIn = _DERIVED["retract"]
ResolveIn = _DERIVED["resolve"]
EscalateIn = _DERIVED["escalate"]
ReadBlockedIn = _DERIVED["read_blocked"]
GrantIn = _DERIVED["grant"]
RevokeIn = _DERIVED["revoke"]
RegisterKeyIn = _DERIVED["register_key"]
RevokeKeyIn = _DERIVED["revoke_key"]
EraseIn = _DERIVED["erase"]
UpgradeRulesIn = _DERIVED["upgrade_rules"]


_PublishSchemaIn: Any = _DERIVED["publish_schema"]


class SchemaIn(_PublishSchemaIn):  # type: ignore[misc]
    """A schema to publish, or (``dry_run``) to try against the logged commands."""

    dry_run: bool = Field(
        False,
        description="Publish nothing: answer what the schema would have decided of the "
        "logged commands (a what-if, run read-only in a process of its own; embedded graphs).",
    )
    what_if: WhatIfIn | None = Field(None, description="The what-if's range (with dry_run).")


# The body of each client command's route, keyed by command type (derived from the write
# catalogue; tested complete against the command catalogue, claimgraph.core.commands).
BODIES: dict[str, type[In]] = {**_DERIVED, "publish_schema": SchemaIn}


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
    decision: Annotated[dict[str, Any], documented(DecisionAnswer)]


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
