"""The vocabulary of claimgraph: commands, decisions, reason codes and limits (pure, no I/O).

Commands are what agents *ask*; decisions are what the governor *decided*. Both are plain
dictionaries shaped by the ``TypedDict`` classes below, because that is what the Avro codec
reads and writes without a copy; the Avro schemas under ``schemas/avro`` are the contract and
these types mirror them field for field.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Literal, NotRequired, TypedDict

from claimgraph.core.commands import COMMAND_TYPES, LIMITS

__all__ = [
    "COMMAND_TYPES",
    "LIMITS",
    "Cardinality",
    "ClaimCommand",
    "ClaimRecord",
    "Command",
    "ConflictPolicy",
    "Contribution",
    "Decision",
    "DecisionKind",
    "EraseCommand",
    "EscalateCommand",
    "Exit",
    "GrantCommand",
    "GrantRecord",
    "InvalidInputCommand",
    "KeyRecord",
    "MergeRecord",
    "OnStale",
    "OnUnknown",
    "PlaceCommand",
    "Polarity",
    "Progress",
    "PublishSchemaCommand",
    "ReadBlockedCommand",
    "Reason",
    "RefusedCommand",
    "RegisterKeyCommand",
    "ResolveCommand",
    "RetractCommand",
    "RevokeCommand",
    "RevokeKeyCommand",
    "SchemaRecord",
    "Signal",
    "SignedCommand",
    "TickCommand",
    "UpgradeRulesCommand",
]

# A progress callback for long work: (done, total).
Progress = Callable[[int, int], None]


class Polarity(StrEnum):
    """Whether a claim says the edge holds (``assert``) or does not (``deny``)."""

    ASSERT = "assert"
    DENY = "deny"


class Cardinality(StrEnum):
    """How many edges of a type a node may have; exclusive sides form *slots*."""

    ONE_TO_ONE = "one-to-one"
    MANY_TO_ONE = "many-to-one"  # a subject has at most one object
    ONE_TO_MANY = "one-to-many"  # an object has at most one subject
    MANY_TO_MANY = "many-to-many"


class ConflictPolicy(StrEnum):
    """What the governor does when two claims disagree."""

    LAST_WRITE_WINS = "last-write-wins-with-timestamp"
    CONFIDENCE_WEIGHTED_MERGE = "confidence-weighted-merge"
    QUARANTINE = "quarantine"


class OnStale(StrEnum):
    """What happens to a claim whose ``based_on_version`` predates a change of its slot."""

    REJECT = "reject"
    QUARANTINE = "quarantine"
    ACCEPT = "accept"


class OnUnknown(StrEnum):
    """What a reader of a quarantined slot gets."""

    UNKNOWN = "unknown"
    HALT = "halt"


class DecisionKind(StrEnum):
    """The outcome of one command; every command gets exactly one."""

    ACCEPTED = "accepted"
    CONFLICTED = "conflicted"
    QUARANTINED = "quarantined"
    REJECTED = "rejected"
    RETIRED = "retired"
    RESOLVED = "resolved"


class Reason(StrEnum):
    """Machine-readable reason codes carried by decisions (and by HTTP problem bodies)."""

    # accepted / conflict outcomes
    NEW = "new"
    CORROBORATES = "corroborates"
    SUPERSEDES = "supersedes"
    OLDER_THAN_CURRENT = "older_than_current"
    SLOT_CONFLICT = "slot_conflict"
    POLARITY_CONFLICT = "polarity_conflict"
    JOINS_CONFLICT = "joins_conflict"
    STALE_CLAIM = "stale_claim"
    MERGE_PENDING = "merge_pending"  # unused since calibrated merge; kept for old logs
    MERGED = "merged"  # confidence-weighted-merge: the claim's outcome won the merge
    OUTVOTED = "outvoted"  # ... the claim's outcome lost it
    MERGE_MARGIN = "merge_margin"  # ... the best two outcomes are too close: quarantined
    NEEDS_HUMAN = "needs_human"  # fail-closed domain: only a human may pick an unsafe outcome
    # rejections: input
    MALFORMED = "malformed"
    UNKNOWN_FINGERPRINT = "unknown_fingerprint"
    INVALID_FIELD = "invalid_field"
    FIELD_TOO_LARGE = "field_too_large"
    WRONG_GRAPH = "wrong_graph"
    DUPLICATE_COMMAND = "duplicate_command"
    # rejections: policy
    NO_SCHEMA = "no_schema"
    INVALID_SCHEMA = "invalid_schema"
    UNKNOWN_EDGE_TYPE = "unknown_edge_type"
    UNKNOWN_NODE_TYPE = "unknown_node_type"
    SUBJECT_TYPE_MISMATCH = "subject_type_mismatch"
    OBJECT_TYPE_MISMATCH = "object_type_mismatch"
    UNAUTHORIZED = "unauthorized"
    NOT_ADMIN = "not_admin"
    NOT_RESOLVER = "not_resolver"
    FUTURE_VERSION = "future_version"
    # rejections: lifecycle
    UNKNOWN_CLAIM = "unknown_claim"
    NOT_OWNER = "not_owner"
    ALREADY_RETIRED = "already_retired"
    NOT_LIVE = "claim_not_live"
    INVALID_ID = "invalid_id"
    UNKNOWN_CONFLICT = "unknown_conflict"
    CONFLICT_CLOSED = "conflict_closed"
    NOT_IN_CONFLICT = "not_in_conflict"
    CONFLICT_OVERLAP = "conflict_overlap"
    UNKNOWN_GRANT = "unknown_grant"
    ALREADY_ESCALATED = "already_escalated"
    # accepted administrative commands
    SCHEMA_PUBLISHED = "schema_published"
    GRANTED = "granted"
    REVOKED = "revoked"
    TICK = "tick"
    READ_BLOCKED = "read_blocked"
    ESCALATED = "escalated"
    # retirement and resolution
    RETRACTED = "retracted"
    WINNER = "winner"
    REJECT_ALL = "reject_all"
    # ingress and signatures (issue #5): refusals recorded by the HTTP ingress, signed commands
    UNAUTHENTICATED = "unauthenticated"
    AGENT_MISMATCH = "agent_mismatch"
    TASK_NOT_ALLOWED = "task_not_allowed"
    SYSTEM_ONLY = "system_only"  # a record only the system writes, sent by a client
    UNSIGNED = "unsigned"
    BAD_SIGNATURE = "bad_signature"
    UNKNOWN_KEY = "unknown_key"
    KEY_NOT_FOR_AGENT = "key_not_for_agent"
    KEY_REGISTERED = "key_registered"
    KEY_REVOKED = "key_revoked"
    # privacy
    ERASED = "erased"
    # governor rules revisions
    RULES_UPGRADED = "rules_upgraded"
    CONFLICT_SETTLED = "conflict_settled"  # the claims left in a conflict all agree: released
    NOT_BLOCKED = "not_blocked"  # a run pinned before the conflict opened never read it
    ALREADY_COUNTED = "already_counted"  # this reader's run was counted for the conflict
    # the Kafka runtime (issue #11): placement of graphs on partitions, decisions that fit
    PLACED = "placed"  # a place record: the graph lives on this partition from here on
    MISROUTED = "misrouted"  # rules >= 2: the graph is not placed on this partition
    TOO_LARGE = "too_large"  # rules >= 2: the decision would exceed LIMITS["decision_bytes"]
    NOT_OPERATOR = "not_operator"  # rules >= 6: a place by anyone but the configured operator
    # a total governor (rules >= 3 records it; a raise under an older revision too, see
    # core.governor): a rule failed unexpectedly, the command changed nothing
    INTERNAL_ERROR = "internal_error"


class _Envelope(TypedDict):
    command_id: str
    graph: str
    agent: str
    task: str


class ClaimCommand(_Envelope):
    """``assert`` or ``deny`` an edge: the command that carries a claim."""

    type: NotRequired[Literal["claim"]]
    run_id: str | None
    edge_type: str
    subject_type: str
    subject_id: str
    object_type: str
    object_id: str
    polarity: str
    confidence: float
    evidence: list[str]
    reasoning: str
    asserted_at: int  # event time, ms since the epoch (UTC)
    based_on_version: int | None
    properties: dict[str, str]


class RetractCommand(_Envelope):
    """An owner withdraws its own claim (retirement, not contradiction)."""

    type: NotRequired[Literal["retract"]]
    run_id: str | None
    claim_id: str
    reason: str


class ResolveCommand(_Envelope):
    """A resolver's verdict on a conflict: a winning claim, or ``winner=None`` to reject all."""

    type: NotRequired[Literal["resolve"]]
    conflict_id: str
    winner: str | None
    resolver: str
    rationale: str
    inputs: NotRequired[str]  # JSON: what the resolver saw and decided on


class EscalateCommand(_Envelope):
    """A resolver hands a conflict to a human (it stays quarantined, now escalated)."""

    type: NotRequired[Literal["escalate"]]
    conflict_id: str
    reason: str
    resolver: str


class PublishSchemaCommand(_Envelope):
    """An admin publishes a graph schema (policy) document."""

    type: NotRequired[Literal["publish_schema"]]
    document: str
    source: str


class GrantCommand(_Envelope):
    """An admin grants extra write scope for an edge type, optionally until ``expires_at``."""

    type: NotRequired[Literal["grant"]]
    grantee_agent: str
    grantee_task: str
    edge_type: str
    expires_at: int | None


class RevokeCommand(_Envelope):
    """An admin revokes a grant (named by the grant command's id)."""

    type: NotRequired[Literal["revoke"]]
    grant_id: str


class TickCommand(_Envelope):
    """A ticker's heartbeat: time enters the governor only through the log."""

    type: NotRequired[Literal["tick"]]


class ReadBlockedCommand(_Envelope):
    """Reads that hit a quarantined slot, counted in the log."""

    type: NotRequired[Literal["read_blocked"]]
    run_id: str | None
    conflict_id: str
    count: int
    pinned_version: NotRequired[int]  # the reporting run's pinned version (-1: not given)


class InvalidInputCommand(_Envelope):
    """Input the edge could not parse, kept so that its rejection is recorded."""

    type: NotRequired[Literal["invalid_input"]]
    raw: bytes
    error: str


class RefusedCommand(_Envelope):
    """A request the ingress refused, recorded so the log shows it (``agent``: who asked)."""

    type: NotRequired[Literal["refused"]]
    reason: str
    detail: str
    declared_agent: str
    refused_type: str


class RegisterKeyCommand(_Envelope):
    """An admin registers an Ed25519 public key for agents matching ``key_agent``."""

    type: NotRequired[Literal["register_key"]]
    key_id: str
    key_agent: str
    public_key: bytes


class RevokeKeyCommand(_Envelope):
    """An admin revokes a signing key."""

    type: NotRequired[Literal["revoke_key"]]
    key_id: str


class SignedCommand(TypedDict):
    """A command (its own encoding in ``body``) with an Ed25519 signature over it."""

    type: NotRequired[Literal["signed"]]
    key_id: str
    signature: bytes
    body: bytes


class UpgradeRulesCommand(_Envelope):
    """An admin moves the graph to a newer governor rules revision from here on."""

    type: NotRequired[Literal["upgrade_rules"]]
    to: int


class PlaceCommand(_Envelope):
    """The Kafka admin tool places the graph on ``partition`` of the commands topic.

    Written by ``claimgraph kafka place`` into that very partition; its decision (accepted
    ``placed`` only when ``partition`` is the partition it is in) records the placement in
    the graph's state, and under rules revision 2 that partition's governor rejects the
    commands of graphs not placed on it (``misrouted``).
    """

    type: NotRequired[Literal["place"]]
    partition: int


class EraseCommand(_Envelope):
    """An admin erases one claim's payload (evidence, reasoning, properties) for privacy."""

    type: NotRequired[Literal["erase"]]
    claim_id: str
    reason: str


Command = (
    ClaimCommand
    | RetractCommand
    | ResolveCommand
    | PublishSchemaCommand
    | GrantCommand
    | RevokeCommand
    | TickCommand
    | ReadBlockedCommand
    | EscalateCommand
    | InvalidInputCommand
    | RefusedCommand
    | RegisterKeyCommand
    | RevokeKeyCommand
    | EraseCommand
    | UpgradeRulesCommand
    | PlaceCommand
)
# A ``signed`` record (SignedCommand) decodes through the same path but wraps a Command; only
# claimgraph.core.governor.authority opens it, so it is not part of the union the handlers see.


class ClaimRecord(TypedDict):
    """A claim as carried by its decision, so the decisions log is self-contained."""

    claim_id: str
    agent: str
    task: str
    run_id: str | None
    edge_type: str
    subject_type: str
    subject_id: str
    object_type: str
    object_id: str
    polarity: str
    confidence: float
    evidence: list[str]
    reasoning: str
    asserted_at: int
    based_on_version: int | None
    properties: dict[str, str]


class SchemaRecord(TypedDict):
    """A published graph schema: its revision, digest and the document itself."""

    revision: int
    digest: str
    source: str
    document: str


class GrantRecord(TypedDict):
    """An accepted grant."""

    grant_id: str
    grantee_agent: str
    grantee_task: str
    edge_type: str
    expires_at: int | None


class KeyRecord(TypedDict):
    """A registered signing key."""

    key_id: str
    key_agent: str
    public_key: bytes


class Contribution(TypedDict):
    """One writer's part in a confidence-weighted merge."""

    claim_id: str
    agent: str
    outcome: str
    confidence: float
    accuracy: float
    weight: float


class MergeRecord(TypedDict):
    """The result of a confidence-weighted merge, with every contribution."""

    outcome: str
    winner: str | None
    merged_confidence: float
    margin: float
    threshold: float
    contributions: list[Contribution]


class Signal(TypedDict):
    """A decision-conflict finding: decision_conflict, low_confidence_outlier, stale_data."""

    kind: str
    detail: str
    claims: list[str]


class Exit(TypedDict):
    """A conflict leaving quarantine by an exit condition, and how."""

    conflict_id: str
    trigger: str  # deadline | blocked_reads | runs | resolver
    action: str  # escalate | fallback
    detail: str


class Decision(TypedDict):
    """The governor's one decision for one command. Its log offset is the graph version.

    Effects on the readable graph are explicit: ``supersedes`` (claims that leave the view),
    ``withheld`` (claims moved into quarantine), ``released`` (claims that become visible
    again, or for the first time, after a resolution), ``dismissed`` (claims that lost a
    resolution). ``conflict_id`` names the conflict a quarantine or resolution is about.
    """

    graph: str
    command_id: str
    command_type: str
    input_offset: int
    log_time: int
    kind: str
    reason: str
    detail: str
    schema_rev: int
    agent: str
    task: str
    claim: ClaimRecord | None
    target: str | None
    conflict_id: str | None
    conflicts_with: list[str]
    supersedes: list[str]
    withheld: list[str]
    released: list[str]
    dismissed: list[str]
    stale: bool
    schema: SchemaRecord | None
    grant: GrantRecord | None
    merge: MergeRecord | None
    signals: list[Signal]
    exits: list[Exit]
    count: int  # read_blocked: the reads it reports; an accepted place: the partition
    run_id: str | None
    key: KeyRecord | None
    signed_by: str | None
    rules: int  # the governor rules revision that made it (core.governor.revisions)
    command_sha256: str  # rules >= 2: SHA-256 of the raw command record decided
    prev_hash: str  # rules >= 2: the decisions hash chain before this decision
