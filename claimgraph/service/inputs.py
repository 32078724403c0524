"""Commands as users write them (JSON lines, CLI flags), validated with pydantic at the edge.

One JSON object per command; ``type`` picks the kind::

    {"type": "assert", "edge_type": "deployment_target", "subject": "service:checkout",
     "object": "environment:prod", "agent": "release-agent", "task": "promote-release",
     "confidence": 0.9, "evidence": ["deploy-log#88"], "asserted_at": "2026-11-29T10:00:00Z"}

Nodes are ``"type:id"`` or ``{"type": ..., "id": ...}``. ``command_id`` defaults to a fresh
UUID, ``asserted_at`` to the time of submission, ``graph`` to the graph being written.
Validation errors name the line, the field and what was expected (:class:`InputError`).

Types are strict: a number is a JSON number (``"0.5"`` and ``true`` are not confidences), an
integer is not a float, text is text. Numbers must fit the wire (64-bit integers, finite
floats); ``NaN``, ``Infinity`` and numbers that overflow to them are refused.

Hostile input (JSON Lines, see :func:`line_record`): a line longer than
``InputLimits.max_line`` bytes is not read whole (:func:`read_lines`), a line nested deeper
than ``InputLimits.max_depth`` is refused before it is parsed (:func:`too_deep`), and
whatever a line holds, it becomes exactly one record: its command, or an ``invalid_input``
record carrying the error and at most ``LIMITS["raw"]`` bytes of the line.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import accumulate
from typing import IO, Annotated, Any, Literal, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from claimgraph.core.commands import CLIENT_COMMANDS, COMMANDS, Sender
from claimgraph.core.model import LIMITS, Command
from claimgraph.core.wire import encode_command
from claimgraph.errors import ClaimgraphError, InputError

__all__ = [
    "I64",
    "INPUT_LIMITS",
    "CommandIn",
    "InputLimits",
    "NodeRef",
    "line_record",
    "loads",
    "parse_command",
    "parse_node",
    "read_lines",
    "text",
    "to_millis",
    "too_deep",
]

I64 = 2**63 - 1  # the wire's integers are Avro longs
Id = Annotated[str, Field(min_length=1, max_length=LIMITS["id"])]
CLIENT_NAMES = tuple(n for spec in CLIENT_COMMANDS for n in spec.client_names)
_BY = {  # who writes the records no client may send
    Sender.INGRESS: "the system (an ingress, or a signing producer)",
    Sender.TICKER: "the ticker (claimgraph ticker, or serve --tick)",
}


@dataclass(frozen=True, slots=True)
class InputLimits:
    """Bounds on one JSON Lines line: its size in bytes and how deep it nests."""

    max_line: int = 1024 * 1024
    max_depth: int = 32


INPUT_LIMITS = InputLimits()


def _in_range(ms: int) -> int:
    if not -I64 - 1 <= ms <= I64:
        raise ValueError(f"{ms} ms is out of the signed 64-bit range of a time")
    return ms


def to_millis(value: object) -> int:
    """ms since the epoch from an int (ms), a float (s), an ISO 8601 string or a datetime."""
    if isinstance(value, bool):
        raise ValueError("expected a time, got a boolean")
    if isinstance(value, int):
        return _in_range(value)
    if isinstance(value, float):
        ms = value * 1000
        if not math.isfinite(ms):
            raise ValueError(f"{value!r} s is not a finite time")
        return _in_range(int(ms))
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"{value[:80]!r} is not an ISO 8601 time such as 2026-11-29T10:00:00Z"
            ) from None
        value = dt
    if not isinstance(value, datetime):
        raise ValueError(
            f"expected a time (ms, seconds or ISO 8601 text), got {type(value).__name__}"
        )
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


def now_millis() -> int:
    return int(datetime.now(tz=UTC).timestamp() * 1000)


class NodeRef(BaseModel):
    """A node: its type and id."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    type: Id
    id: Id


def parse_node(value: Any) -> NodeRef:
    """``"type:id"`` or ``{"type": ..., "id": ...}`` → NodeRef."""
    if isinstance(value, NodeRef):
        return value
    if isinstance(value, tuple | list) and len(value) == 2:
        return NodeRef(type=value[0], id=value[1])
    if isinstance(value, str):
        t, sep, i = value.partition(":")
        if not sep or not t or not i:
            raise ValueError(f"{value!r} is not a node: expected 'type:id', e.g. service:checkout")
        return NodeRef(type=t, id=i)
    if isinstance(value, dict):
        return NodeRef.model_validate(value)
    raise ValueError("expected a node as 'type:id' or {type, id}")


Node = Annotated[NodeRef, Field()]


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    command_id: Id | None = None
    graph: Id | None = None
    agent: Id
    task: Annotated[str, Field(max_length=LIMITS["id"])] = ""

    def envelope(self, graph: str) -> dict[str, Any]:
        return {
            "command_id": self.command_id or str(uuid.uuid4()),
            "graph": self.graph or graph,
            "agent": self.agent,
            "task": self.task,
        }


class ClaimIn(_Base):
    type: Literal["assert", "deny"]
    edge_type: Id
    subject: Node
    object: Node
    run_id: Id | None = None
    confidence: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = 1.0
    evidence: Annotated[
        list[Annotated[str, Field(max_length=LIMITS["evidence_item"])]],
        Field(max_length=LIMITS["evidence_items"]),
    ] = []
    reasoning: Annotated[str, Field(max_length=LIMITS["reasoning"])] = ""
    asserted_at: int | float | str | datetime | None = None
    based_on_version: Annotated[int, Field(ge=-1, le=I64)] | None = None
    properties: Annotated[
        dict[Id, Annotated[str, Field(max_length=LIMITS["property_value"])]],
        Field(max_length=LIMITS["properties"]),
    ] = {}

    @field_validator("subject", "object", mode="before")
    @classmethod
    def _node(cls, v: Any) -> NodeRef:
        return parse_node(v)

    @field_validator("asserted_at", mode="before")
    @classmethod
    def _time(cls, v: Any) -> int | None:
        return None if v is None else to_millis(v)

    def to_command(self, graph: str) -> Command:
        return cast(
            Command,
            {
                **self.envelope(graph),
                "type": "claim",
                "run_id": self.run_id,
                "edge_type": self.edge_type,
                "subject_type": self.subject.type,
                "subject_id": self.subject.id,
                "object_type": self.object.type,
                "object_id": self.object.id,
                "polarity": self.type,
                "confidence": float(self.confidence),
                "evidence": list(self.evidence),
                "reasoning": self.reasoning,
                "asserted_at": self.asserted_at
                if isinstance(self.asserted_at, int)
                else now_millis(),
                "based_on_version": self.based_on_version,
                "properties": dict(self.properties),
            },
        )


class RetractIn(_Base):
    type: Literal["retract"]
    claim_id: Id
    run_id: Id | None = None
    reason: Annotated[str, Field(max_length=LIMITS["reasoning"])] = ""

    def to_command(self, graph: str) -> Command:
        return cast(
            Command,
            {
                **self.envelope(graph),
                "type": "retract",
                "run_id": self.run_id,
                "claim_id": self.claim_id,
                "reason": self.reason,
            },
        )


class ResolveIn(_Base):
    type: Literal["resolve"]
    conflict_id: Id
    winner: Id | None = None
    reject_all: bool = False
    resolver: Id = "human"
    rationale: Annotated[str, Field(max_length=LIMITS["reasoning"])] = ""
    inputs: Annotated[str, Field(max_length=LIMITS["document"])] = ""

    def to_command(self, graph: str) -> Command:
        if (self.winner is None) == (not self.reject_all):
            raise ValueError("give exactly one of winner or reject_all: true")
        return cast(
            Command,
            {
                **self.envelope(graph),
                "type": "resolve",
                "conflict_id": self.conflict_id,
                "winner": self.winner,
                "resolver": self.resolver,
                "rationale": self.rationale,
                "inputs": self.inputs,
            },
        )


class PublishSchemaIn(_Base):
    type: Literal["publish_schema"]
    document: Annotated[str, Field(max_length=LIMITS["document"])]
    source: Annotated[str, Field(max_length=LIMITS["id"])] = "<inline>"

    def to_command(self, graph: str) -> Command:
        return cast(
            Command,
            {
                **self.envelope(graph),
                "type": "publish_schema",
                "document": self.document,
                "source": self.source,
            },
        )


class GrantIn(_Base):
    type: Literal["grant"]
    grantee_agent: Id
    grantee_task: Id = "*"
    edge_type: Id
    expires_at: int | float | str | datetime | None = None

    @field_validator("expires_at", mode="before")
    @classmethod
    def _time(cls, v: Any) -> int | None:
        return None if v is None else to_millis(v)

    def to_command(self, graph: str) -> Command:
        return cast(
            Command,
            {
                **self.envelope(graph),
                "type": "grant",
                "grantee_agent": self.grantee_agent,
                "grantee_task": self.grantee_task,
                "edge_type": self.edge_type,
                "expires_at": self.expires_at if isinstance(self.expires_at, int) else None,
            },
        )


class RevokeIn(_Base):
    type: Literal["revoke"]
    grant_id: Id

    def to_command(self, graph: str) -> Command:
        return cast(
            Command,
            {
                **self.envelope(graph),
                "type": "revoke",
                "grant_id": self.grant_id,
            },
        )


class EraseIn(_Base):
    type: Literal["erase"]
    claim_id: Id
    reason: str = Field(default="", max_length=LIMITS["detail"])

    def to_command(self, graph: str) -> Command:
        return cast(
            Command,
            {
                **self.envelope(graph),
                "type": "erase",
                "claim_id": self.claim_id,
                "reason": self.reason,
            },
        )


class RegisterKeyIn(_Base):
    type: Literal["register_key"]
    key_id: Id
    key_agent: Id
    public_key: Annotated[str, Field(pattern="^[0-9a-fA-F]{64}$")]

    def to_command(self, graph: str) -> Command:
        return cast(
            Command,
            {
                **self.envelope(graph),
                "type": "register_key",
                "key_id": self.key_id,
                "key_agent": self.key_agent,
                "public_key": bytes.fromhex(self.public_key),
            },
        )


class RevokeKeyIn(_Base):
    type: Literal["revoke_key"]
    key_id: Id

    def to_command(self, graph: str) -> Command:
        return cast(Command, {**self.envelope(graph), "type": "revoke_key", "key_id": self.key_id})


class EscalateIn(_Base):
    type: Literal["escalate"]
    conflict_id: Id
    reason: Id = "escalated"
    resolver: Id = "human"

    def to_command(self, graph: str) -> Command:
        return cast(
            Command,
            {
                **self.envelope(graph),
                "type": "escalate",
                "conflict_id": self.conflict_id,
                "reason": self.reason,
                "resolver": self.resolver,
            },
        )


class ReadBlockedIn(_Base):
    type: Literal["read_blocked"]
    conflict_id: Id
    count: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    run_id: Id | None = None

    def to_command(self, graph: str) -> Command:
        return cast(
            Command,
            {
                **self.envelope(graph),
                "type": "read_blocked",
                "conflict_id": self.conflict_id,
                "count": self.count,
                "run_id": self.run_id,
            },
        )


class UpgradeRulesIn(_Base):
    type: Literal["upgrade_rules"]
    to: Annotated[int, Field(ge=1, le=2**31 - 1)]

    def to_command(self, graph: str) -> Command:
        return cast(Command, {**self.envelope(graph), "type": "upgrade_rules", "to": self.to})


CommandIn = Annotated[
    ClaimIn
    | RetractIn
    | ResolveIn
    | PublishSchemaIn
    | GrantIn
    | RevokeIn
    | EscalateIn
    | ReadBlockedIn
    | EraseIn
    | RegisterKeyIn
    | RevokeKeyIn
    | UpgradeRulesIn,
    Field(discriminator="type"),
]
_ADAPTER: TypeAdapter[Any] = TypeAdapter(CommandIn)


def _explain(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors()[:3]:
        loc = ".".join(str(x) for x in e["loc"] if not str(x).endswith("In"))
        msg = e["msg"]
        if e["type"] == "union_tag_invalid":
            msg = f"unknown type; expected one of {', '.join(CLIENT_NAMES)}"
        if e["type"] == "union_tag_not_found":
            msg = f"missing 'type' (one of {', '.join(CLIENT_NAMES)})"
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = len(exc.errors()) - 3
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def parse_command(value: str | bytes | dict[str, Any], graph: str) -> Command:
    """Validate one command (a JSON text or an already parsed object) into a wire command."""
    if isinstance(value, str | bytes):
        value = loads(value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value)
    if not isinstance(value, dict):
        raise InputError(f"expected a JSON object, got {type(value).__name__}")
    ctype = value.get("type")
    system = COMMANDS.get(ctype) if isinstance(ctype, str) else None
    if system is not None and not system.client:
        raise InputError(f"{system.type} is written by {_BY[system.sender]}, never by a client")
    try:
        model = _ADAPTER.validate_python(value)
        cmd: Command = model.to_command(graph)
    except ValidationError as exc:
        raise InputError(_explain(exc)) from None
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return cmd


# -- JSON Lines: one record per line, whatever the line holds --------------------------------

_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_DELTA = tuple({91: 1, 123: 1, 93: -1, 125: -1}.get(b, 0) for b in range(256))  # [ { ] }


def too_deep(data: bytes, limit: int) -> bool:
    """Whether a JSON text nests arrays and objects more than ``limit`` deep (brackets inside
    strings do not count).

    Recursion-free, linear and in C but for one step per 64 KiB, so it runs *before* a parser
    that recurses: a text with at most ``limit`` opening brackets answers at once; otherwise
    strings are dropped, the brackets kept, and the running depth checked chunk by chunk
    (a deep text is caught in its first chunk). Unbalanced brackets are left to the parser.
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    # drop escapes (escaped backslashes first, as a parser pairs them), then whole strings
    # (the text between quotes, and an unterminated one to the end), then all but brackets
    plain = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(plain.split(b'"')[::2])
    brackets = outside.translate(None, _NOT_BRACKET)
    depth = 0
    for i in range(0, len(brackets), 65536):
        part = brackets[i : i + 65536]
        if max(accumulate(map(_DELTA.__getitem__, part), initial=depth)) > limit:
            return True
        depth += part.count(b"[") + part.count(b"{") - part.count(b"]") - part.count(b"}")
    return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    f = float(text)
    if not math.isfinite(f):
        raise ValueError(f"{text[:40]} overflows a 64-bit float")
    return f


def loads(data: bytes, limits: InputLimits = INPUT_LIMITS) -> Any:
    """Parse one JSON text strictly and within ``limits``; every failure is an InputError.

    Refused: more than ``max_line`` bytes, nesting deeper than ``max_depth`` (checked before
    parsing), text that is not UTF-8, ``NaN``/``Infinity`` and numbers that overflow to them,
    integers of more digits than Python converts.
    """
    if len(data) > limits.max_line:
        raise InputError(f"{len(data)} bytes; at most {limits.max_line} per line")
    if too_deep(data, limits.max_depth):
        raise InputError(f"nested more than {limits.max_depth} deep")
    try:
        doc = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc}") from None
    try:
        return json.loads(doc, parse_constant=_no_constant, parse_float=_finite)
    except ValueError as exc:  # JSONDecodeError, int digits, overflow
        raise InputError(f"not JSON: {text(str(exc), 300)}") from None
    except RecursionError:  # unreachable below max_depth; kept as a named failure anyway
        raise InputError(f"nested too deep; at most {limits.max_depth}") from None


def text(value: str, limit: int = LIMITS["detail"]) -> str:
    """``value`` as text a record can carry: valid UTF-8 (lone surrogates escaped), bounded."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")[:limit]


def read_lines(stream: IO[bytes], max_line: int) -> Iterator[tuple[int, bytes, int]]:
    """(line number, line without its newline, the line's full length) for each line.

    Never holds more than ``max_line`` + 1 bytes of a line: the rest of a longer line is read
    in chunks and dropped (its full length is still counted, for the error).
    """
    lineno = 0
    while True:
        raw = stream.readline(max_line + 1)
        if not raw:
            return
        lineno += 1
        if raw.endswith(b"\n"):
            raw = raw[:-1]
            size = len(raw)
        else:
            size = len(raw)
            while size > max_line:  # a longer line: drop the rest of it
                more = stream.readline(64 * 1024)
                if not more:
                    break
                if more.endswith(b"\n"):
                    size += len(more) - 1
                    break
                size += len(more)
        yield lineno, raw, size


def _id_of(obj: Any) -> str:
    """The line's command id, if it is one a record can carry (else the record has none)."""
    cid = obj.get("command_id") if isinstance(obj, dict) else None
    if not isinstance(cid, str) or not 0 < len(cid) <= LIMITS["id"]:
        return ""
    return cid if text(cid) == cid else ""


def line_record(
    raw: bytes,
    lineno: int,
    graph: str,
    agent: str | None = None,
    limits: InputLimits = INPUT_LIMITS,
    *,
    size: int | None = None,
) -> bytes:
    """The record for one JSON Lines line: its command, or an ``invalid_input`` record.

    Never raises for what the line holds: a line too long (``size`` is its full length when
    :func:`read_lines` cut it), too deep, not JSON, not a command, or a command the wire
    cannot carry becomes an ``invalid_input`` record with a clear error (the governor
    rejects it as ``malformed``), so every line gets exactly one decision.
    """
    obj: Any = None
    size = len(raw) if size is None else size
    try:
        if size > limits.max_line:
            raise InputError(f"the line has {size} bytes; at most {limits.max_line}")
        obj = loads(raw, limits)
        if isinstance(obj, dict) and agent and "agent" not in obj:
            obj["agent"] = agent
        try:
            return encode_command(parse_command(obj, graph))
        except (TypeError, ValueError, OverflowError) as exc:  # what the wire cannot carry
            raise InputError(f"cannot encode the command: {exc}") from None
    except ClaimgraphError as exc:
        error = str(exc)
    return encode_command(
        cast(
            Command,
            {
                "type": "invalid_input",
                "command_id": _id_of(obj),
                "graph": graph,
                "agent": text(agent or "", LIMITS["id"]),
                "task": "",
                "raw": raw[: LIMITS["raw"]],
                "error": text(f"line {lineno}: {error}"),
            },
        )
    )
