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

JSON text is parsed within bounds (:mod:`claimgraph.service.bounded`); JSON Lines become one
record per line, whatever the line holds (:mod:`claimgraph.service.jsonlines`).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, ClassVar, Literal, Union, cast

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    create_model,
)

from claimgraph.core.commands import CLIENT_COMMANDS, COMMANDS, I64, Kind, Sender, cut, violation
from claimgraph.core.model import LIMITS, Command
from claimgraph.core.queries import Param
from claimgraph.core.writes import WRITES, WriteSpec
from claimgraph.errors import InputError
from claimgraph.native.codec import encode_command  # the native writer: the same bytes, ~6x faster
from claimgraph.service.bounded import loads
from claimgraph.service.writes import fields_of, now_millis, to_millis

__all__ = [
    "I64",
    "CommandIn",
    "NodeRef",
    "declared",
    "fast_claim",
    "fast_record",
    "now_millis",
    "param_type",
    "parse_command",
    "parse_command_spec",
    "parse_node",
    "require_domain",
    "to_millis",
]

Id = Annotated[str, Field(min_length=1, max_length=LIMITS["id"])]
CLIENT_NAMES = tuple(n for spec in CLIENT_COMMANDS for n in spec.client_names)
_BY = {  # who writes the records no client may send
    Sender.INGRESS: "the system (an ingress, or a signing producer)",
    Sender.TICKER: "the ticker (claimgraph ticker, or serve --tick)",
}


def require_domain(command: Command, where: str = "") -> None:
    """Raise :class:`InputError` when a field of ``command`` lies outside its declared domain.

    The same check the governor makes under rules revision 3
    (:func:`claimgraph.core.commands.violation`): an ingress that answers its caller (HTTP,
    MCP, a CLI command) calls it before anything is recorded, so a value out of bounds is a
    422 naming the field and the bound, never a recorded rejection or a copy of the bound.
    """
    c = cast(dict[str, Any], command)
    spec = COMMANDS.get(c.get("type", "claim"))
    if spec is None:
        raise InputError(f"{where}unknown command type {str(c.get('type'))[:40]!r}")
    v = violation(spec, c)
    if v is not None:
        raise InputError(f"{where}{v.detail}")


def declared(ctype: str, name: str, **extra: Any) -> Any:
    """The pydantic constraints of a command field, from its declared domain: a strict
    ``Field`` to put in ``Annotated[type, declared(...)]`` (a model's bound is never written
    twice; ``"0.5"`` or ``true`` is never a number). ``extra`` goes to the ``Field`` too (a
    description)."""
    dom = COMMANDS[ctype].domains[name]
    if dom.kind in (Kind.INT, Kind.TIME):
        return Field(ge=dom.lo, le=dom.hi, strict=True, **extra)
    if dom.kind is Kind.FLOAT:
        return Field(ge=dom.lo, le=dom.hi, allow_inf_nan=False, strict=True, **extra)
    if dom.kind is Kind.ID and not dom.empty:
        return Field(min_length=1, max_length=dom.size, strict=True, **extra)
    return Field(max_length=dom.size, strict=True, **extra)


def param_type(spec: WriteSpec, p: Param, *, optional: bool = False, doc: str = "") -> Any:
    """A write parameter as a pydantic type: its JSON type and the command field's bounds,
    one mapping for every surface that takes a write's parameters as JSON (the HTTP command
    bodies, the MCP write tools). A node is ``'type:id'`` text (its two ids and the colon),
    bytes are hex; ``optional`` (or a nullable domain) admits ``null``."""
    d = p.domain
    kw: dict[str, Any] = {}
    t: Any
    if p.node:
        size = d.size or 0
        t = Annotated[str, Field(min_length=3, max_length=2 * size + 1, strict=True, **kw)]
    elif d.kind is Kind.ENUM:
        t = Annotated[Literal[tuple(d.values)], Field(**kw)]
    elif d.kind is Kind.LIST:
        assert d.item is not None
        item = Annotated[str, Field(max_length=d.item.size, strict=True)]
        t = Annotated[list[item], Field(max_length=d.size, **kw)]
    elif d.kind is Kind.MAP:
        assert d.item is not None and d.key is not None
        key = Annotated[str, Field(min_length=1, max_length=d.key.size, strict=True)]
        value = Annotated[str, Field(max_length=d.item.size, strict=True)]
        t = Annotated[dict[key, value], Field(max_length=d.size, **kw)]
    elif d.kind is Kind.BYTES:
        hexes = 2 * (d.size or 0)
        t = Annotated[str, Field(pattern=f"^[0-9a-fA-F]{{{hexes}}}$", strict=True, **kw)]
    elif d.kind is Kind.BOOL:
        t = Annotated[bool, Field(strict=True, **kw)]
    else:
        base = {Kind.INT: int, Kind.TIME: int, Kind.FLOAT: float}.get(d.kind, str)
        t = Annotated[base, declared(spec.command, p.name, **kw)]
    if optional or d.nullable:
        t = t | None
    return Annotated[t, Field(description=doc or p.doc)] if doc or p.doc else t


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
            raise ValueError(
                f"{cut(value)} is not a node: expected 'type:id', e.g. service:checkout"
            )
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


# -- the JSON Lines models, derived from the write catalogue (core.writes) -----------------


def _time(v: Any) -> Any:
    return None if v is None else to_millis(v)


def _line_field(spec: WriteSpec, p: Param) -> tuple[Any, Any]:
    """A write parameter as a JSON Lines field: a node as ``'type:id'`` or ``{type, id}``, a
    time as ms, seconds or ISO 8601 text; the rest as every JSON surface types it."""
    optional = p.default is None
    t: Any
    if p.node:
        t = Annotated[NodeRef, BeforeValidator(parse_node)]
    elif p.domain.kind is Kind.TIME:
        t = Annotated[int | None if optional else int, BeforeValidator(_time)]
    else:
        t = param_type(spec, p, optional=optional)
    if p.required:
        return t, ...
    if isinstance(p.default, tuple):  # a sequence's default: an empty list
        return t, Field(default_factory=list)
    return t, p.default


class _Line(_Base):
    """One command line: the write's parameters by their catalogue names, through the one
    builder (:func:`claimgraph.service.writes.fields_of`)."""

    write: ClassVar[str] = ""  # the write of the catalogue this line is (claim for assert/deny)

    def to_command(self, graph: str) -> Command:
        spec = WRITES[self.write]
        values: dict[str, Any] = {}
        for p in spec.params:
            v = self.type if p.name == "polarity" else getattr(self, p.name)  # type: ignore[attr-defined]
            if isinstance(v, NodeRef):
                v = (v.type, v.id)
            elif p.domain.kind is Kind.BYTES and isinstance(v, str):
                v = bytes.fromhex(v)
            values[p.keyword] = v
        return cast(
            Command,
            {**self.envelope(graph), "type": spec.command, **fields_of(spec, values)},
        )


def _line(spec: WriteSpec) -> type[_Line]:
    """The JSON Lines model of ``spec``'s command: ``type`` (a claim's is its polarity,
    ``assert`` or ``deny``) and its parameters."""
    names = COMMANDS[spec.command].client_names
    fields: dict[str, Any] = {"type": (Literal[names], ...)}
    fields |= {p.name: _line_field(spec, p) for p in spec.params if p.name != "polarity"}
    name = "".join(w.title() for w in spec.command.split("_")) + "In"
    model = create_model(name, __base__=_Line, __doc__=spec.summary, **fields)
    model.write = spec.name
    return model


_LINES = {s.command: _line(s) for s in WRITES.values() if s.body}
ClaimIn = _LINES["claim"]

# One command line, any of them (the JSON Lines reference is generated from it).
CommandIn: Any = Annotated[
    Union[tuple(_LINES.values())],  # noqa: UP007
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


_CLAIM_KEYS = frozenset(ClaimIn.model_fields) | {"type"}
_ID, _EVIDENCE, _EVIDENCE_ITEM = LIMITS["id"], LIMITS["evidence_items"], LIMITS["evidence_item"]
_REASONING, _PROPS, _PROP_VALUE = (
    LIMITS["reasoning"],
    LIMITS["properties"],
    LIMITS["property_value"],
)


def _id(v: Any) -> bool:
    return type(v) is str and 0 < len(v) <= _ID


def _opt_id(v: Any) -> bool:
    return v is None or (type(v) is str and 0 < len(v) <= _ID)


def _fast_node(v: Any) -> tuple[str, str] | None:
    if type(v) is not str:
        return None
    t, _, i = v.partition(":")
    return (t, i) if 0 < len(t) <= _ID and 0 < len(i) <= _ID else None


def fast_claim(value: dict[str, Any], graph: str) -> Command | None:
    """The command :func:`parse_command_spec` makes of a plain claim, or None to ask it.

    A fast path for the common line (``assert``/``deny`` with text nodes and plain values):
    it checks every field exactly as :class:`ClaimIn` does and answers None for anything it
    is not sure of (other shapes, a value out of bounds), so the spec decides those and
    writes the error. Text is not checked for lone surrogates: encode the result (as
    :func:`fast_record` does) before trusting it. Tests hold the two to identical records
    on generated input.
    """
    if value.get("type") not in ("assert", "deny") or not _CLAIM_KEYS.issuperset(value):
        return None
    get = value.get
    cid, g, agent, task = get("command_id"), get("graph"), get("agent"), get("task", "")
    if not (_opt_id(cid) and _opt_id(g) and _id(agent) and type(task) is str):
        return None
    et, run_id, reasoning = get("edge_type"), get("run_id"), get("reasoning", "")
    if not (_id(et) and _opt_id(run_id) and len(task) <= _ID):
        return None
    if type(reasoning) is not str or len(reasoning) > _REASONING:
        return None
    s, o = _fast_node(get("subject")), _fast_node(get("object"))
    if s is None or o is None:
        return None
    conf = get("confidence", 1.0)
    if type(conf) not in (float, int) or not 0.0 <= conf <= 1.0:  # NaN fails the comparison
        return None
    evidence = get("evidence", [])
    if type(evidence) is not list or len(evidence) > _EVIDENCE:
        return None
    for e in evidence:
        if type(e) is not str or len(e) > _EVIDENCE_ITEM:
            return None
    props = get("properties", {})
    if type(props) is not dict or len(props) > _PROPS:
        return None
    for k, pv in props.items():
        if not _id(k) or type(pv) is not str or len(pv) > _PROP_VALUE:
            return None
    based = get("based_on_version")
    if based is not None and (type(based) is not int or not -1 <= based <= I64):
        return None
    at = get("asserted_at")
    if at is None:
        at = now_millis()
    elif type(at) is int:
        if not -I64 - 1 <= at <= I64:
            return None
    else:
        return None  # seconds, ISO text, ...: the spec converts (and explains) them
    return cast(
        Command,
        {
            "command_id": cid or str(uuid.uuid4()),
            "graph": g or graph,
            "agent": agent,
            "task": task,
            "type": "claim",
            "run_id": run_id,
            "edge_type": et,
            "subject_type": s[0],
            "subject_id": s[1],
            "object_type": o[0],
            "object_id": o[1],
            "polarity": value["type"],
            "confidence": float(conf),
            "evidence": list(evidence),
            "reasoning": reasoning,
            "asserted_at": at,
            "based_on_version": based,
            "properties": dict(props),
        },
    )


def parse_command(value: str | bytes | dict[str, Any], graph: str) -> Command:
    """Validate one command (a JSON text or an already parsed object) into a wire command,
    inside its declared domain (:func:`require_domain`: a CLI command refuses what the
    governor would reject ``invalid_field``, and records nothing)."""
    if isinstance(value, str | bytes):
        value = loads(value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value)
    command = parse_command_spec(value, graph)
    require_domain(command)
    return command


def fast_record(value: Any, graph: str) -> bytes | None:
    """The encoded record of a plain claim (:func:`fast_claim`), or None to ask the spec.

    None also when the record cannot be encoded (text with lone surrogates, which the
    pydantic models refuse by name): the spec path then writes the error.
    """
    if type(value) is not dict:
        return None
    cmd = fast_claim(value, graph)
    if cmd is None:
        return None
    try:
        return encode_command(cmd)
    except (TypeError, ValueError, OverflowError):
        return None


def parse_command_spec(value: Any, graph: str) -> Command:
    """Validate one parsed JSON value into a wire command with the pydantic models."""
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
