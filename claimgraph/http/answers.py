"""The 200 answers of the HTTP API's JSON routes, as models: what OpenAPI says each returns.

They *describe*: a route still builds its answer as a plain dict and answers it through the
response model it always had (``dict[str, Any]``, or ``Any``), so no answer changes on the
wire and nothing is validated or serialised again on the hot path. :func:`described` gives
a route the keyword arguments that make its documented 200 answer the model's
(``tests/test_http_answers.py`` holds every model to the real answers: each key an answer
carries is a declared field, each required field is there, the types validate).

No model allows keys beyond its fields: where an answer is open (a what-if's proposal and
its listed entries, a replayed query) the field is a plain object. Nested records — a claim,
an edge, a conflict, a decision, a merge — have one model each, reused wherever they appear.
"""

from __future__ import annotations

from types import UnionType
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Literal,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

from pydantic import BaseModel, Field, RootModel, WithJsonSchema, create_model

from claimgraph.core.commands import COMMANDS
from claimgraph.core.model import (
    ClaimRecord,
    Contribution,
    Decision,
    DecisionKind,
    Exit,
    GrantRecord,
    KeyRecord,
    MergeRecord,
    SchemaRecord,
    Signal,
)
from claimgraph.service.traces import RunSummary

__all__ = [
    "QUERY_ANSWERS",
    "AppendedAnswer",
    "CalibrationAnswer",
    "ClaimAnswer",
    "ClaimRecordAnswer",
    "ConflictAnswer",
    "DecisionAnswer",
    "DecisionsAnswer",
    "DryRunAnswer",
    "EdgeAnswer",
    "EscalationAnswer",
    "EscalationsAnswer",
    "GraphPageAnswer",
    "HeadAnswer",
    "HealthAnswer",
    "HistoryAnswer",
    "NeighborsAnswer",
    "PublishAnswer",
    "QuarantineAnswer",
    "ReadEdgesAnswer",
    "ReadyAnswer",
    "ReceiptAnswer",
    "ReplayAnswer",
    "RunEndAnswer",
    "RunHandleAnswer",
    "RunTraceAnswer",
    "RunsAnswer",
    "SchemaAnswer",
    "SlotAnswer",
    "WhoamiAnswer",
    "described",
    "documented",
]

Node = Annotated[list[str], Field(min_length=2, max_length=2, description="[type, id]")]
State = Literal["present", "absent", "unknown"]
Direction = Literal["out", "in"]
Cursor = Annotated[str | None, Field(description="next_cursor: pass it as cursor for more")]


def described(model: type[BaseModel], runtime: Any = dict[str, Any]) -> dict[str, Any]:
    """A route's keyword arguments: OpenAPI's 200 answer is ``model`` (by reference); the
    route keeps answering through ``runtime``, the response model it had, unchanged."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {
        "response_model": Annotated[runtime, WithJsonSchema(ref)],
        "responses": {200: {"model": model}},
    }


def documented(model: type[BaseModel]) -> WithJsonSchema:
    """A field's annotation: the field stays what it is (a plain dict), its JSON schema
    refers to ``model`` (so a response model that passes a dict through names its fields)."""
    return WithJsonSchema({"allOf": [{"$ref": f"#/components/schemas/{model.__name__}"}]})


# -- records met in many answers ------------------------------------------------------------


def _answer_of(
    record: type,
    name: str,
    types: dict[str, Any] | None = None,
    doc: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> type[BaseModel]:
    """The answer model of one of the core's records (a TypedDict of
    :mod:`claimgraph.core.model`): its fields and their types, read from the record itself,
    so a field added there is in the answer's model too. A nested record is its own answer
    model; bytes are hex text (as JSON carries them); ``types`` narrows a field to the
    values the core declares elsewhere (a decision's kind), ``doc`` describes one, ``extra``
    adds what the record's ``as_dict`` adds (a property)."""
    types, doc = types or {}, doc or {}
    fields: dict[str, Any] = {}
    for key, hint in {**get_type_hints(record), **(extra or {})}.items():
        t = types.get(key, _json_type(hint))
        if key in doc:
            t = Annotated[t, Field(description=doc[key])]
        if key in _RESERVED:  # a BaseModel attribute: the field has another Python name
            fields[key + "_"] = (t, Field(alias=key))
        else:
            fields[key] = (t, ...)
    model = create_model(name, __doc__=record.__doc__, **fields)
    _ANSWERS[record] = model
    return cast("type[BaseModel]", model)


_ANSWERS: dict[type, type[BaseModel]] = {}
_RESERVED = frozenset({"schema"})


def _json_type(hint: Any) -> Any:
    """A core record's field type as its answer's: nested records by their answer models."""
    if hint is bytes:
        return Annotated[str, Field(description="Hex.")]
    if hint in _ANSWERS:
        return _ANSWERS[hint]
    args = get_args(hint)
    if not args:
        return hint
    mapped = tuple(_json_type(a) for a in args)
    origin = get_origin(hint)
    if origin in (Union, UnionType):
        return Union[mapped]  # noqa: UP007  (built at run time)
    return origin[mapped] if len(mapped) > 1 else origin[mapped[0]]


_POLARITY = Literal[COMMANDS["claim"].domains["polarity"].values]  # type: ignore[valid-type]
_KINDS = Literal[tuple(k.value for k in DecisionKind)]  # type: ignore[valid-type]

if TYPE_CHECKING:  # the models are made at import; to mypy they are models
    ClaimRecordAnswer = BaseModel
    SchemaAnswer = BaseModel
    GrantAnswer = BaseModel
    KeyAnswer = BaseModel
    ContributionAnswer = BaseModel
    MergeAnswer = BaseModel
    SignalAnswer = BaseModel
    ExitAnswer = BaseModel
    DecisionAnswer = BaseModel
else:
    ClaimRecordAnswer = _answer_of(
        ClaimRecord,
        "ClaimRecordAnswer",
        {"polarity": _POLARITY},
        {"asserted_at": "Event time, ms since the epoch (UTC)."},
    )
    SchemaAnswer = _answer_of(SchemaRecord, "SchemaAnswer")
    GrantAnswer = _answer_of(GrantRecord, "GrantAnswer")
    KeyAnswer = _answer_of(KeyRecord, "KeyAnswer")
    ContributionAnswer = _answer_of(Contribution, "ContributionAnswer")
    MergeAnswer = _answer_of(MergeRecord, "MergeAnswer")
    SignalAnswer = _answer_of(Signal, "SignalAnswer")
    ExitAnswer = _answer_of(Exit, "ExitAnswer")
    DecisionAnswer = _answer_of(Decision, "DecisionAnswer", {"kind": _KINDS})


class ClaimAnswer(ClaimRecordAnswer):
    """A claim as of a version: its record, its ``status`` and the version it took it at."""

    status: str = Field(description="visible, withheld, superseded, dismissed, retracted, ...")
    since: int
    erased: int | None = Field(None, description="The version that erased it (only if erased).")


class EdgeAnswer(BaseModel):
    """An edge as of a version; ``claims`` hold it up, ``conflict_id`` names its quarantine."""

    edge_type: str
    subject: Node
    object: Node
    state: State
    version: int
    conflict_id: str | None
    claims: list[str]
    fallback: str | None = Field(
        None, description="Only when unknown in a fail-closed or default domain: act on this."
    )


class ConflictAnswer(BaseModel):
    """A conflict's record, with its claims' full evidence (``claim_details``)."""

    conflict_id: str
    edge_type: str
    opened_at: int
    closed_at: int | None
    open: bool
    outcome: str
    claims: list[str]
    members: list[str]
    slots: list[str]
    blocked_reads: int
    blocked_runs: list[str]
    opened_time: int
    escalated_at: int | None
    escalation: str
    claim_details: list[ClaimAnswer | None]


class VersionedDecisionAnswer(DecisionAnswer):
    """A decision with the graph version it made."""

    version: int


# -- commands -------------------------------------------------------------------------------


class ReceiptAnswer(BaseModel):
    """A write's receipt: where the command sits, its decision and the version it made."""

    command_id: str
    position: int
    version: int
    decision: DecisionAnswer


class WhatIfListing(BaseModel):
    count: int
    first: list[dict[str, Any]]


class WhatIfConflicts(BaseModel):
    appear: WhatIfListing
    vanish: WhatIfListing


class WhatIfReportAnswer(BaseModel):
    """What the proposed schema would have decided differently (docs: how-to/what-if)."""

    graph: str
    proposal: dict[str, Any]
    now: dict[str, Any] | None
    from_: int = Field(alias="from")
    to: int
    requested_to: int
    head: int
    complete: bool
    stopped: Literal["limit", "time", "refused"] | None
    commands: int
    changed: int
    decisions: dict[str, WhatIfListing]
    no_longer_needed: WhatIfListing
    conflicts: WhatIfConflicts
    slots: WhatIfListing
    edges: WhatIfListing
    publishes: list[dict[str, Any]]
    seconds: float


class DryRunAnswer(BaseModel):
    """A dry-run publish: nothing recorded; what the schema would have decided."""

    dry_run: Literal[True]
    what_if: WhatIfReportAnswer


class PublishAnswer(RootModel[ReceiptAnswer | DryRunAnswer]):
    """A publish's receipt, or (``dry_run``) its what-if."""


# -- reads ----------------------------------------------------------------------------------


class HeadAnswer(BaseModel):
    """The graph's name and its newest applied version."""

    graph: str
    head: int


class WhoamiAnswer(BaseModel):
    """The principal a token maps to: its agent, the tasks it may act in, its roles."""

    agent: str
    roles: list[str]
    tasks: list[str]


class HealthAnswer(BaseModel):
    ok: Literal[True]
    graph: str


class ReadyAnswer(BaseModel):
    """Readiness: the projection's lag behind the log, and the bound it is held to."""

    ready: bool
    graph: str
    bound_seconds: float
    applied: int | None = Field(None, description="The applied version (a lagging graph).")
    lag_seconds: float | None = Field(None, description="The projection's lag (ditto).")
    error: str | None = Field(None, description="Why the lag could not be read (503 only).")


class SlotAnswer(BaseModel):
    """An exclusive slot (edge type, node, side) as of a version: the nodes it holds."""

    edge_type: str
    node: Node
    direction: Direction
    state: State
    version: int
    conflict_id: str | None
    nodes: list[Node]
    fallback: str | None = Field(
        None, description="Only when unknown in a fail-closed or default domain: act on this."
    )


class NeighborAnswer(BaseModel):
    edge_type: str
    direction: Direction
    node: Node
    state: State
    conflict_id: str | None
    claims: list[str]


class NeighborsAnswer(BaseModel):
    version: int
    neighbors: list[NeighborAnswer]


class HistoryEntryAnswer(BaseModel):
    """One decision that changed an edge: what it did, and the edge's state after it."""

    kind: str
    reason: str
    command_id: str
    command_type: str
    agent: str
    log_time: int
    claims: list[tuple[str, str]] = Field(description="[claim id, status] pairs.")
    state: State
    conflict_id: str | None
    visible: list[str]
    version: int


class HistoryAnswer(BaseModel):
    version: int
    history: list[HistoryEntryAnswer]
    cut_below: int | None = Field(description="Where GC cut this history (None: not cut).")


class ReadEdgesAnswer(BaseModel):
    version: int
    edges: list[EdgeAnswer]


class QuarantineAnswer(BaseModel):
    """Conflicts withheld from the readable graph; the page fields only when paged."""

    version: int
    conflicts: list[ConflictAnswer]
    next_cursor: Cursor = None
    truncated: bool | None = None
    scanned: int | None = None


class GraphPageAnswer(BaseModel):
    """One page of the graph's edges at ``version`` (``head`` as it was when read)."""

    version: int
    head: int
    edges: list[EdgeAnswer]
    next_cursor: Cursor
    truncated: bool
    scanned: int


class WinsAnswer(BaseModel):
    wins: int
    losses: int


class EscalationClaimAnswer(BaseModel):
    """A claim held in an escalated conflict, with its writer's calibrated accuracy."""

    claim_id: str
    agent: str
    task: str
    run_id: str | None
    subject: str
    subject_type: str
    subject_id: str
    object: str
    object_type: str
    polarity: Literal["assert", "deny"]
    outcome: str
    confidence: float
    accuracy: float
    record: WinsAnswer = Field(description="The writer's record in resolved conflicts.")
    evidence: list[str]
    reasoning: str
    asserted_at: int
    asserted_at_iso: str
    based_on_version: int | None
    properties: dict[str, str]
    status: str


class MajorityAnswer(BaseModel):
    outcome: str | None
    counts: dict[str, int]


class VotesAnswer(BaseModel):
    majority: MajorityAnswer
    weighted: MergeAnswer


class FallbackAnswer(BaseModel):
    mode: str
    value: str | None
    safe: list[str]


class RecommendationAnswer(BaseModel):
    action: str
    claim_id: str | None
    outcome: str | None
    why: str


class EscalationAnswer(BaseModel):
    """A conflict with all its evidence, as one self-contained record (for a person)."""

    conflict_id: str
    graph: str
    version: int
    status: str
    edge_type: str
    domain: str | None
    policy: str | None
    schema_rev: int | None
    schema_digest: str | None
    opened_at: int
    opened_time: str
    escalated_at: int | None
    escalation_reason: str
    blocked_reads: int
    blocked_runs: list[str]
    claims: list[EscalationClaimAnswer]
    versions_read: dict[str, int | None]
    signals: list[SignalAnswer]
    votes: VotesAnswer
    fallback: FallbackAnswer | None
    recommended_action: RecommendationAnswer
    review: str


class EscalationsAnswer(BaseModel):
    version: int
    escalations: list[EscalationAnswer]


class CalibrationAnswer(BaseModel):
    """agent → [wins, losses] in resolved conflicts of ``edge_type``."""

    version: int
    edge_type: str
    record: dict[str, tuple[int, int]]


class DecisionsAnswer(BaseModel):
    decisions: list[VersionedDecisionAnswer]


# -- runs -----------------------------------------------------------------------------------


class RunHandleAnswer(BaseModel):
    """A run the server holds: its handle (``run_id``), pinned version, and head."""

    run_id: str
    agent: str
    task: str
    pinned_version: int
    snapshot_id: str | None
    head: int


class RunEndAnswer(BaseModel):
    ended: str
    pinned_version: int
    status: str


if TYPE_CHECKING:
    RunSummaryAnswer = BaseModel
else:
    RunSummaryAnswer = _answer_of(RunSummary, "RunSummaryAnswer", extra={"live": bool})


class RunsAnswer(BaseModel):
    runs: list[RunSummaryAnswer]


class RunEventAnswer(BaseModel):
    run_id: str
    seq: int
    kind: Literal["start", "read", "write", "tool", "end"]
    graph: str
    agent: str | None
    task: str
    pinned_version: int
    snapshot_id: str | None
    time: int
    payload: str = Field(description="JSON object, as text.")


class RunTraceAnswer(BaseModel):
    run_id: str
    events: list[RunEventAnswer]


class DifferenceAnswer(BaseModel):
    """The first read whose replay differs: its query and the two digests."""

    seq: int
    query: Any
    recorded: Any
    replayed: str


class ReplayAnswer(BaseModel):
    run_id: str
    pinned_version: int
    reads: int
    identical: bool
    first_difference: DifferenceAnswer | None


class AppendedAnswer(BaseModel):
    appended: int = Field(description="How many events were appended.")


# The answers of the catalogued reads routed generically (claimgraph.http.catalogue), by
# query name; those with a typed result (paths, reach) answer through their own model.
QUERY_ANSWERS: dict[str, type[BaseModel]] = {
    "edge": EdgeAnswer,
    "slot": SlotAnswer,
    "neighbors": NeighborsAnswer,
    "history": HistoryAnswer,
    "claim_info": ClaimAnswer,
    "conflict": ConflictAnswer,
    "schema_info": SchemaAnswer,
    "escalation": EscalationAnswer,
    "escalations": EscalationsAnswer,
    "calibration": CalibrationAnswer,
    "decisions": DecisionsAnswer,
}
