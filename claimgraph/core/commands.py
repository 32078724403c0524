"""The one command catalogue: every command type, its fields, who may send it (pure).

A command type is declared here once. Everything else is derived from this table or tested
complete against it: the Avro record a command is written as (``schemas/avro/<type>``), the
JSON Lines ``type`` names (:mod:`claimgraph.service.inputs`), the HTTP routes
``POST /v1/commands/<type>`` and their role checks (:mod:`claimgraph.http.commands`), the SDK
writers (:class:`claimgraph.service.api.GraphWrites`) and the HTTP client.

Two kinds of sender:

* **clients** — agents and people, through JSON Lines, HTTP or the SDK: ``assert``/``deny``
  (a ``claim``), ``retract``, ``resolve``, ``escalate``, ``read_blocked``,
  ``publish_schema``, ``grant``, ``revoke``, ``erase``, ``register_key``, ``revoke_key``,
  ``upgrade_rules``;
* **the system itself** — records no client may send: ``invalid_input`` and ``refused``
  (written by an ingress for input it could not accept), ``signed`` (the envelope a signing
  producer wraps a command in), ``place`` (written by ``claimgraph kafka place``: the graph
  lives on this partition of the Kafka commands topic) and ``tick`` (written by the ticker).
  A client transport refuses them with a clear reason.

Each field has its **domain** here too (:class:`Domain`: kind, range, length, item count):
the one declaration of what a command may carry. Under rules revision 3 the governor checks
every command against it before any rule runs (:func:`violation`) — the only check a raw
Kafka record or an old log meets — and rejects one outside it as ``invalid_field`` (or
``field_too_large``, ``invalid_id``) naming the field and the bound. The ingresses derive
their bounds from it (``service.inputs``, ``http.bodies``) and answer 422 from the same
check; the limits reference in the docs is generated from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "CLIENT_COMMANDS",
    "COMMANDS",
    "COMMAND_TYPES",
    "ENVELOPE",
    "I64",
    "LIMITS",
    "SYSTEM_COMMANDS",
    "CommandSpec",
    "Domain",
    "Kind",
    "Sender",
    "Violation",
    "client_command",
    "cut",
    "field_violation",
    "violation",
]

ENVELOPE = ("command_id", "graph", "agent", "task")

# Bounds on what one command may carry; the edge (pydantic) and the governor both enforce them.
LIMITS = {
    "id": 256,  # ids, names, agents, tasks, node and edge type names
    "evidence_items": 64,
    "evidence_item": 1024,
    "reasoning": 16 * 1024,
    "properties": 64,  # entries
    "property_value": 4096,
    "document": 256 * 1024,  # a graph schema document
    "detail": 4096,
    "raw": 64 * 1024,  # bytes kept of an invalid input
    "exits": 1000,  # conflicts one tick may let out of quarantine (the rest: next tick)
    # The encoded size of one decision record. Under rules revision 2 a decision that would be
    # larger is replaced by a ``rejected``/``too_large`` one (core.governor). ``kafka init``
    # sets max.message.bytes to this on the commands topic and to twice this on the decisions
    # topic, so every decision (with its key and the batch framing) is accepted.
    "decision_bytes": 1024 * 1024,
    # Every time a command carries (asserted_at, expires_at, ...), in ms since the epoch: the
    # last millisecond of year 9999, which every formatter and both cores can represent.
    "time_max": 253_402_300_799_999,
}

I64 = 2**63 - 1  # the wire's integers are Avro longs
I32 = 2**31 - 1  # ... and ints


class Kind(StrEnum):
    """What kind of value a field holds."""

    ID = "id"  # printable text of 1 to ``size`` characters (0 too when ``empty``)
    TEXT = "text"  # any text of at most ``size`` characters
    INT = "int"  # an integer in [lo, hi]
    TIME = "time"  # an integer in [lo, hi]: ms since the epoch (UTC)
    FLOAT = "float"  # a finite number in [lo, hi]
    BYTES = "bytes"  # at least ``min_size``, at most ``size`` bytes
    LIST = "list"  # at most ``size`` items, each in ``item``
    MAP = "map"  # at most ``size`` entries: keys in ``key``, values in ``item``
    ENUM = "enum"  # one of ``values``
    BOOL = "bool"  # true or false (read parameters; no command field is one)


@dataclass(frozen=True, slots=True)
class Domain:
    """The values one field may hold. ``limit`` names the :data:`LIMITS` key of its size."""

    kind: Kind
    size: int | None = None
    lo: int | float | None = None
    hi: int | float | None = None
    nullable: bool = False  # None is allowed
    empty: bool = False  # an ID may be the empty string
    min_size: int = 0  # BYTES: the fewest bytes
    item: Domain | None = None
    key: Domain | None = None
    values: tuple[str, ...] = ()
    limit: str = ""  # the LIMITS key ``size`` comes from ("" for none)
    note: str = ""  # what a number means, for errors and docs

    def describe(self) -> str:
        """The domain in a few words (for error details and the limits reference)."""
        null = " or null" if self.nullable else ""
        k = self.kind
        if k is Kind.ID:
            lo = 0 if self.empty else 1
            return f"{lo} to {self.size} printable characters{null}"
        if k is Kind.TEXT:
            return f"at most {self.size} characters{null}"
        if k in (Kind.INT, Kind.TIME, Kind.FLOAT):
            note = f" {self.note}" if self.note else ""
            what = "a number" if k is Kind.FLOAT else "an integer"
            return f"{what} in [{_num(self.lo)}, {_num(self.hi)}]{note}{null}"
        if k is Kind.BYTES:
            if self.min_size == self.size:
                return f"exactly {self.size} bytes{null}"
            return f"at most {self.size} bytes{null}"
        if k is Kind.LIST:
            assert self.item is not None
            return f"at most {self.size} items, each {self.item.describe()}{null}"
        if k is Kind.MAP:
            assert self.item is not None and self.key is not None
            return (
                f"at most {self.size} entries, names {self.key.describe()}, "
                f"values {self.item.describe()}{null}"
            )
        if k is Kind.BOOL:
            return f"true or false{null}"
        return f"one of {', '.join(self.values)}{null}"


def _num(v: int | float | None) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _id(*, nullable: bool = False, empty: bool = False) -> Domain:
    return Domain(Kind.ID, LIMITS["id"], nullable=nullable, empty=empty, limit="id")


def _text(limit: str, *, nullable: bool = False) -> Domain:
    return Domain(Kind.TEXT, LIMITS[limit], nullable=nullable, limit=limit)


def _int(lo: int, hi: int, note: str = "", *, nullable: bool = False) -> Domain:
    return Domain(Kind.INT, lo=lo, hi=hi, note=note, nullable=nullable)


def _bytes(limit: str, *, exactly: int | None = None) -> Domain:
    if exactly is not None:
        return Domain(Kind.BYTES, exactly, min_size=exactly)
    return Domain(Kind.BYTES, LIMITS[limit], limit=limit)


ID = _id()
TIME = Domain(Kind.TIME, lo=0, hi=LIMITS["time_max"], note="ms since the epoch (to year 9999)")
VERSION = _int(-1, I64, "(a log offset; -1: before the first)")
_ENVELOPE_DOMAINS: dict[str, Domain] = {
    "command_id": ID,
    "graph": ID,
    "agent": ID,
    "task": _id(empty=True),
}


class Sender(StrEnum):
    """Who may send a command type (the governor still judges each command)."""

    WRITER = "writer"  # a writer of the edge type (schema writers or a grant)
    OWNER = "owner"  # the owner of the claim it names
    READER = "reader"  # any authenticated principal
    RESOLVER = "resolver"  # a resolver, human or admin of the schema
    ADMIN = "admin"  # an admin of the schema
    INGRESS = "ingress"  # the system: an ingress, a signing producer or the Kafka admin tool
    TICKER = "ticker"  # the system: the ticker


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One command type."""

    type: str  # ``type`` on the wire; also the Avro record it is written as
    summary: str  # one line, for help texts and tool descriptions
    fields: tuple[str, ...]  # the record's fields after the envelope, in wire order
    sender: Sender
    names: tuple[str, ...] = ()  # what clients call it, when not its type (assert, deny)
    domains: Mapping[str, Domain] = field(default_factory=dict)  # every field, envelope included

    @property
    def enveloped(self) -> bool:
        """Whether the record carries the envelope (every type but ``signed``)."""
        return self.type != "signed"

    @property
    def client(self) -> bool:
        """Whether client transports (JSON Lines, HTTP, SDK) carry it."""
        return self.sender not in (Sender.INGRESS, Sender.TICKER)

    @property
    def client_names(self) -> tuple[str, ...]:
        """The JSON Lines ``type`` values (and SDK method names) of this command."""
        return self.names or (self.type,)


def _spec(
    ctype: str,
    summary: str,
    fields: dict[str, Domain],
    sender: Sender,
    names: tuple[str, ...] = (),
    envelope: dict[str, Domain] | None = None,
) -> CommandSpec:
    """A command type: its fields after the envelope, in wire order, with their domains."""
    env = {} if ctype == "signed" else {**_ENVELOPE_DOMAINS, **(envelope or {})}
    return CommandSpec(ctype, summary, tuple(fields), sender, names, {**env, **fields})


_SPECS = (
    _spec(
        "claim",
        "Assert that an edge holds, or deny it, with confidence, evidence and reasoning.",
        {
            "run_id": _id(nullable=True),
            "edge_type": ID,
            "subject_type": ID,
            "subject_id": ID,
            "object_type": ID,
            "object_id": ID,
            "polarity": Domain(Kind.ENUM, values=("assert", "deny")),
            "confidence": Domain(Kind.FLOAT, lo=0.0, hi=1.0),
            "evidence": Domain(
                Kind.LIST,
                LIMITS["evidence_items"],
                item=_text("evidence_item"),
                limit="evidence_items",
            ),
            "reasoning": _text("reasoning"),
            "asserted_at": TIME,
            "based_on_version": Domain(Kind.INT, lo=-1, hi=I64, nullable=True, note=VERSION.note),
            "properties": Domain(
                Kind.MAP,
                LIMITS["properties"],
                key=ID,
                item=_text("property_value"),
                limit="properties",
            ),
        },
        Sender.WRITER,
        names=("assert", "deny"),
    ),
    _spec(
        "retract",
        "Withdraw one's own claim: it leaves head and stays readable at older versions.",
        {"run_id": _id(nullable=True), "claim_id": ID, "reason": _text("reasoning")},
        Sender.OWNER,
    ),
    _spec(
        "resolve",
        "A resolver's verdict on a conflict: a winning claim, or none (reject all).",
        {
            "conflict_id": ID,
            "winner": _id(nullable=True),
            "resolver": ID,
            "rationale": _text("reasoning"),
            "inputs": _text("document"),
        },
        Sender.RESOLVER,
    ),
    _spec(
        "publish_schema",
        "Publish a graph schema (YAML): writers, cardinality and conflict policy.",
        {"document": _text("document"), "source": _text("id")},
        Sender.ADMIN,
    ),
    _spec(
        "grant",
        "Grant an agent extra write scope for an edge type, optionally until a time.",
        {
            "grantee_agent": ID,
            "grantee_task": ID,
            "edge_type": ID,
            "expires_at": Domain(Kind.TIME, lo=0, hi=TIME.hi, nullable=True, note=TIME.note),
        },
        Sender.ADMIN,
    ),
    _spec("revoke", "Revoke a grant.", {"grant_id": ID}, Sender.ADMIN),
    _spec("tick", "Time passes for the governor (quarantine deadlines).", {}, Sender.TICKER),
    _spec(
        "read_blocked",
        "Report reads of a run that hit a quarantined slot (its exit conditions count them).",
        {
            "run_id": _id(nullable=True),
            "conflict_id": ID,
            "count": _int(1, 1_000_000),
            "pinned_version": VERSION,
        },
        Sender.READER,
    ),
    _spec(
        "escalate",
        "Hand a conflict to a person: it stays quarantined, now escalated.",
        {"conflict_id": ID, "reason": _text("id"), "resolver": ID},
        Sender.RESOLVER,
    ),
    _spec(
        "invalid_input",
        "Input an ingress could not read as a command (recorded as a rejection).",
        {"raw": _bytes("raw"), "error": _text("detail")},
        Sender.INGRESS,
        # input too broken to carry an id or an agent is still recorded
        envelope={"command_id": _id(empty=True), "agent": _text("id"), "task": _text("id")},
    ),
    _spec(
        "refused",
        "A request an ingress refused (identity or role), recorded as a rejection.",
        {
            "reason": ID,
            "detail": _text("detail"),
            "declared_agent": _text("id"),
            "refused_type": _text("id"),
        },
        Sender.INGRESS,
    ),
    _spec(
        "register_key",
        "Register an Ed25519 public key that may sign the commands of an agent.",
        {"key_id": ID, "key_agent": ID, "public_key": _bytes("", exactly=32)},
        Sender.ADMIN,
    ),
    _spec("revoke_key", "Revoke a signing key.", {"key_id": ID}, Sender.ADMIN),
    _spec(
        "signed",
        "A command wrapped with its producer's Ed25519 signature.",
        {"key_id": ID, "signature": _bytes("", exactly=64), "body": _bytes("decision_bytes")},
        Sender.INGRESS,
    ),
    _spec(
        "upgrade_rules",
        "Move the graph to a newer governor rules revision from this position on.",
        {"to": _int(1, I32, "(a rules revision)")},
        Sender.ADMIN,
    ),
    _spec(
        "erase",
        "Erase a claim's payload (evidence, reasoning, properties) from every read.",
        {"claim_id": ID, "reason": _text("reasoning")},
        Sender.ADMIN,
    ),
    _spec(
        "place",
        "Place the graph on this partition of the Kafka commands topic (kafka place).",
        {"partition": _int(0, I32, "(a partition of the commands topic)")},
        Sender.INGRESS,
    ),
)

COMMANDS: Mapping[str, CommandSpec] = {s.type: s for s in _SPECS}
COMMAND_TYPES = tuple(COMMANDS)
CLIENT_COMMANDS: tuple[CommandSpec, ...] = tuple(s for s in _SPECS if s.client)
SYSTEM_COMMANDS: tuple[CommandSpec, ...] = tuple(s for s in _SPECS if not s.client)
_BY_NAME = {n: s for s in CLIENT_COMMANDS for n in s.client_names}


def client_command(name: str) -> CommandSpec | None:
    """The client command a JSON Lines ``type`` or route names (None: not one of them)."""
    return _BY_NAME.get(name)


# -- the check ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Violation:
    """A field outside its domain: the reason code, the field and what is wrong."""

    reason: str  # a Reason value: invalid_field, field_too_large or invalid_id
    field: str
    detail: str


def cut(value: object, n: int = 80) -> str:
    """``repr(value)`` of at most about ``n`` characters: an echo never carries a whole input."""
    if isinstance(value, str | bytes) and len(value) > n:
        return (
            f"{value[:n]!r}... ({len(value)} {'characters' if isinstance(value, str) else 'bytes'})"
        )
    text = repr(value)
    return text if len(text) <= n else f"{text[:n]}... ({len(text)} characters)"


def violation(spec: CommandSpec, command: Mapping[str, object]) -> Violation | None:
    """The first field of ``command`` (in declaration order) outside its domain, or None.

    Pure and total: any value of any type gives a violation or None, never an exception.
    """
    for name, dom in spec.domains.items():
        if name not in command:
            return Violation("invalid_field", name, f"{name} is missing")
        v = _check(name, dom, command[name])
        if v is not None:
            return v
    return None


def field_violation(name: str, dom: Domain, value: object) -> Violation | None:
    """Whether one value is outside ``dom`` (named ``name`` in the detail); pure and total."""
    return _check(name, dom, value)


def _check(name: str, dom: Domain, value: object) -> Violation | None:
    if value is None:
        if dom.nullable:
            return None
        return Violation("invalid_field", name, f"{name} is required: {dom.describe()}")
    k = dom.kind
    if k is Kind.ID or k is Kind.TEXT:
        if not isinstance(value, str):
            return Violation("invalid_field", name, f"{name} must be text, got {_type(value)}")
        assert dom.size is not None
        if not value and k is Kind.ID and not dom.empty:
            return Violation("invalid_id", name, f"{name} is empty")
        if len(value) > dom.size:
            return Violation(
                "field_too_large",
                name,
                f"{name} has {len(value)} characters; at most {dom.size} allowed",
            )
        if k is Kind.ID and not value.isprintable():
            return Violation(
                "invalid_id", name, f"{name} contains control or non-printable characters"
            )
        return None
    if k in (Kind.INT, Kind.TIME):
        if not isinstance(value, int) or isinstance(value, bool):
            return Violation(
                "invalid_field", name, f"{name} must be an integer, got {_type(value)}"
            )
        assert dom.lo is not None and dom.hi is not None
        if not dom.lo <= value <= dom.hi:
            return Violation(
                "invalid_field", name, f"{name} must be {dom.describe()}, got {cut(value, 24)}"
            )
        return None
    if k is Kind.FLOAT:
        if not isinstance(value, float | int) or isinstance(value, bool):
            return Violation("invalid_field", name, f"{name} must be a number, got {_type(value)}")
        assert dom.lo is not None and dom.hi is not None
        if not (math.isfinite(value) and dom.lo <= value <= dom.hi):
            return Violation(
                "invalid_field", name, f"{name} must be {dom.describe()}, got {cut(value, 24)}"
            )
        return None
    if k is Kind.BYTES:
        if not isinstance(value, bytes):
            return Violation("invalid_field", name, f"{name} must be bytes, got {_type(value)}")
        assert dom.size is not None
        if len(value) > dom.size or len(value) < dom.min_size:
            reason = "field_too_large" if len(value) > dom.size else "invalid_field"
            return Violation(
                reason, name, f"{name} has {len(value)} bytes; {dom.describe()} allowed"
            )
        return None
    if k is Kind.LIST:
        if not isinstance(value, list | tuple):
            return Violation("invalid_field", name, f"{name} must be a list, got {_type(value)}")
        assert dom.size is not None and dom.item is not None
        if len(value) > dom.size:
            return Violation(
                "field_too_large",
                name,
                f"{name} has {len(value)} items; at most {dom.size} allowed",
            )
        for i, x in enumerate(value):
            v = _check(f"{name}[{i}]", dom.item, x)
            if v is not None:
                return v
        return None
    if k is Kind.MAP:
        if not isinstance(value, Mapping):
            return Violation("invalid_field", name, f"{name} must be a map, got {_type(value)}")
        assert dom.size is not None and dom.item is not None and dom.key is not None
        if len(value) > dom.size:
            return Violation(
                "field_too_large",
                name,
                f"{name} has {len(value)} entries; at most {dom.size} allowed",
            )
        for key, x in value.items():
            v = _check(f"a name in {name}", dom.key, key) or _check(
                f"{name}[{cut(key, 40)}]", dom.item, x
            )
            if v is not None:
                return v
        return None
    if k is Kind.BOOL:
        if not isinstance(value, bool):
            return Violation(
                "invalid_field", name, f"{name} must be true or false, got {_type(value)}"
            )
        return None
    if not isinstance(value, str) or value not in dom.values:
        return Violation(
            "invalid_field", name, f"{name} must be {dom.describe()}, got {cut(value, 40)}"
        )
    return None


def _type(value: object) -> str:
    return type(value).__name__
