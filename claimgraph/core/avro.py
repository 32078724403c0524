"""A small schema-compiled Avro binary codec, byte-for-byte compatible with fastavro.

fastavro's ``schemaless_writer``/``schemaless_reader`` interpret the schema for every record;
here each schema is compiled once into two specialised Python functions (source generated per
schema and ``exec``'d, as ``dataclasses`` and ``attrs`` do), which is several times cheaper.

Supported: records, ``string``, ``bytes``, ``long``, ``int``, ``double``, ``boolean``, enums,
arrays, maps, and two-branch unions of ``null`` and one of these (including a nested record),
with named-type references. Anything else raises :class:`UnsupportedSchema` at compile time.

Encoding gives exactly the bytes of ``fastavro.schemaless_writer``: record fields in schema
order (a missing field takes its default), arrays and maps as one block (or just ``0`` when
empty), map entries in iteration order, a union picks ``null`` for ``None`` and its other branch
otherwise. Bad values raise :class:`TypeError` or :class:`ValueError` naming the field; unlike
fastavro, a ``float`` given for a ``long`` is refused rather than truncated, and ``int`` values
must fit in 32 bits.

Decoding gives the dictionaries of ``fastavro.schemaless_reader`` (enums as strings, ``bytes``
as bytes, ``null`` as ``None``) and is strict: truncated input, varints longer than 10 bytes or
beyond 64 bits, ``int`` values beyond 32 bits, negative or oversized lengths and counts, block
byte sizes that disagree with their items, invalid UTF-8, booleans other than 0 or 1, enum or
union indexes out of range, and trailing bytes all raise :class:`AvroDecodeError`, and nothing
else escapes. Lengths are checked against the remaining bytes before anything is sliced, and
every loop is bounded by the input's size.
"""

from __future__ import annotations

import linecache
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import count
from typing import Any, cast

__all__ = [
    "AvroDecodeError",
    "Decoder",
    "Encoder",
    "UnsupportedSchema",
    "compile_decoder",
    "compile_encoder",
]

Encoder = Callable[[Mapping[str, Any]], bytes]
"""``encoder(record) -> bytes``: the prefix given at compile time, then the Avro body."""

Decoder = Callable[..., Any]
"""``decoder(data, pos=0)``: the value encoded in ``data[pos:]``, which must be all of it."""


class AvroDecodeError(ValueError):
    """The bytes are not one whole, well-formed value of the schema."""


class UnsupportedSchema(ValueError):
    """The schema uses Avro features outside the subset this codec compiles."""


# -- varints ---------------------------------------------------------------------------------

_TABLE = 1 << 14  # zigzag values below this come from a table (1 or 2 bytes)
_LEN_TABLE = _TABLE >> 1  # lengths and counts below this (their zigzag is 2n)
_U64 = 1 << 64


def _varint_slow(z: int) -> bytes:
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _pairs(high_flag: int) -> list[bytes]:
    """For x < 2**14: bytes((x & 0x7F | 0x80, x >> 7 | high_flag)), sliced from one buffer."""
    buf = bytearray(2 * _TABLE)
    buf[0::2] = bytes(range(0x80, 0x100)) * 128
    buf[1::2] = b"".join(bytes((h | high_flag,)) * 128 for h in range(128))
    raw = bytes(buf)
    return [raw[i : i + 2] for i in range(0, 2 * _TABLE, 2)]


# _VL[z]: the minimal varint of z < 2**14; _V14[x]: the 14 bits x as two bytes, both flagged
# "more follows". A long varint is a run of _V14 pieces ended by one _VL piece.
_VL: list[bytes] = [bytes((z,)) for z in range(0x80)] + _pairs(0)[0x80:]
_V14: list[bytes] = _pairs(0x80)
_LEN: list[bytes] = _VL[0::2]  # _LEN[n] is the varint of the zigzag of n >= 0


def _ulong(z: int) -> bytes:
    """The varint of an already zigzagged value ``z`` (0 <= z < 2**64)."""
    if z < 0x4000:
        return _VL[z]
    if z < 0x10000000:
        return _V14[z & 0x3FFF] + _VL[z >> 14]
    if z < 0x40000000000:
        return _V14[z & 0x3FFF] + _V14[(z >> 14) & 0x3FFF] + _VL[z >> 28]
    if z < 0x100000000000000:
        return _V14[z & 0x3FFF] + _V14[(z >> 14) & 0x3FFF] + _V14[(z >> 28) & 0x3FFF] + _VL[z >> 42]
    if z >= _U64:
        raise ValueError("value out of the signed 64-bit range of an Avro long")
    return (
        _V14[z & 0x3FFF]
        + _V14[(z >> 14) & 0x3FFF]
        + _V14[(z >> 28) & 0x3FFF]
        + _V14[(z >> 42) & 0x3FFF]
        + _VL[z >> 56]
    )


def _uint(z: int) -> bytes:
    """Like :func:`_ulong` for an Avro ``int`` (signed 32 bits)."""
    if z >> 32:
        raise ValueError("value out of the signed 32-bit range of an Avro int")
    return _ulong(z)


# The common cases inline, with tables indexed by a varint's first byte b: _SE[b] is where a
# string ends relative to its length byte when b is its whole (non-negative) length, and
# otherwise a huge offset that fails the bounds check and so takes the general path; _ZZ[b]
# is the long a one-byte varint b stands for, or None.
_FAR = 1 << 62
_SE = tuple((b >> 1) + 1 if b < 0x80 and not b & 1 else _FAR for b in range(256))
_ZZ = tuple((b >> 1) ^ -(b & 1) if b < 0x80 else None for b in range(256))


def _uvar(d: bytes, p: int) -> tuple[int, int]:
    """Read the varint at ``d[p]``: (its unsigned value, the position after it).

    At most 10 bytes, and the tenth may only carry bit 63: anything longer or larger is not
    an Avro long.
    """
    b = d[p]
    if b < 0x80:
        return b, p + 1
    v = b & 0x7F
    b = d[p + 1]
    if b < 0x80:
        return v | b << 7, p + 2
    v |= (b & 0x7F) << 7
    b = d[p + 2]
    if b < 0x80:
        return v | b << 14, p + 3
    v |= (b & 0x7F) << 14
    b = d[p + 3]
    if b < 0x80:
        return v | b << 21, p + 4
    v |= (b & 0x7F) << 21
    b = d[p + 4]
    if b < 0x80:
        return v | b << 28, p + 5
    v |= (b & 0x7F) << 28
    b = d[p + 5]
    if b < 0x80:
        return v | b << 35, p + 6
    v |= (b & 0x7F) << 35
    b = d[p + 6]
    if b < 0x80:
        return v | b << 42, p + 7
    v |= (b & 0x7F) << 42
    b = d[p + 7]
    if b < 0x80:
        return v | b << 49, p + 8
    v |= (b & 0x7F) << 49
    b = d[p + 8]
    if b < 0x80:
        return v | b << 56, p + 9
    v |= (b & 0x7F) << 56
    b = d[p + 9]
    if b < 2:
        return v | b << 63, p + 10
    if b < 0x80:
        raise AvroDecodeError(f"varint beyond 64 bits at byte {p}")
    raise AvroDecodeError(f"varint longer than 10 bytes at byte {p}")


def _long(d: bytes, p: int) -> tuple[int, int]:
    """Read the long at ``d[p]``: (its value, the position after it)."""
    u, p = _uvar(d, p)
    return (u >> 1) ^ -(u & 1), p


def _int(d: bytes, p: int) -> tuple[int, int]:
    """Read the int at ``d[p]``: (its value, the position after it)."""
    u, p = _uvar(d, p)
    if u >> 32:
        raise AvroDecodeError(f"int out of the 32-bit range before byte {p}")
    return (u >> 1) ^ -(u & 1), p


def _span(d: bytes, p: int, what: str) -> tuple[int, int]:
    """Where the string or bytes at ``d[p]`` (its length first) starts and ends."""
    u, start = _uvar(d, p)
    if u & 1:
        raise AvroDecodeError(f"negative {what} length {(u >> 1) ^ -(u & 1)} at byte {p}")
    end = start + (u >> 1)
    if end > len(d):
        raise AvroDecodeError(
            f"{what} length {u >> 1} at byte {p} with {len(d) - start} bytes left"
        )
    return start, end


def _string(d: bytes, p: int) -> tuple[str, int]:
    """Read the string at ``d[p]``: (its value, the position after it)."""
    start, end = _span(d, p, "string")
    return d[start:end].decode(), end


def _bytes(d: bytes, p: int) -> tuple[bytes, int]:
    """Read the bytes at ``d[p]``: (their value, the position after them)."""
    start, end = _span(d, p, "bytes")
    return d[start:end], end


# -- schemas ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Prim:
    kind: str  # string, bytes, long, int, double, boolean


@dataclass(frozen=True)
class _Enum:
    name: str
    symbols: tuple[str, ...]


@dataclass(frozen=True)
class _Array:
    items: _Node


@dataclass(frozen=True)
class _Map:
    values: _Node


@dataclass(frozen=True)
class _Optional:
    inner: _Node
    null_index: int  # 0 for ["null", T], 1 for [T, "null"]


@dataclass(frozen=True)
class _Field:
    name: str
    node: _Node
    has_default: bool
    default: Any


@dataclass(frozen=True)
class _Record:
    name: str
    fields: tuple[_Field, ...]


_Node = _Prim | _Enum | _Array | _Map | _Optional | _Record

_PRIMITIVES = frozenset({"string", "bytes", "long", "int", "double", "boolean"})
_MIN_SIZE = {"string": 1, "bytes": 1, "long": 1, "int": 1, "double": 8, "boolean": 1}


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _fullname(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _Resolver:
    """Turns a raw or fastavro-parsed schema into a tree of ``_Node``, resolving names."""

    def __init__(self) -> None:
        self.names: dict[str, _Node] = {}
        self.pending: set[str] = set()

    def node(self, schema: Any, ns: str) -> _Node:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _Prim(schema)
            return self._named(schema, ns)
        if isinstance(schema, list):
            return self._union(schema, ns)
        if not isinstance(schema, dict):
            raise UnsupportedSchema(f"not a schema: {schema!r}")
        if "logicalType" in schema:
            raise UnsupportedSchema(f"logical types are not supported: {schema['logicalType']!r}")
        kind = schema.get("type")
        if isinstance(kind, dict | list):
            return self.node(kind, ns)
        if kind == "record":
            return self._record(schema, ns)
        if kind == "enum":
            name, _ = self._name(schema, ns)
            symbols = schema.get("symbols")
            if not (isinstance(symbols, list) and all(isinstance(s, str) for s in symbols)):
                raise UnsupportedSchema(f"enum {name} has no list of symbols")
            if len(set(symbols)) != len(symbols) or not symbols:
                raise UnsupportedSchema(f"enum {name} has duplicate or no symbols")
            enum = _Enum(name, tuple(symbols))
            self.names[name] = enum
            return enum
        if kind == "array":
            return _Array(self._sized(self.node(schema.get("items"), ns), "array items"))
        if kind == "map":
            return _Map(self._sized(self.node(schema.get("values"), ns), "map values"))
        if isinstance(kind, str) and kind in _PRIMITIVES:
            return _Prim(kind)
        raise UnsupportedSchema(f"unsupported Avro type {kind!r}")

    def _name(self, schema: dict[str, Any], ns: str) -> tuple[str, str]:
        name = schema.get("name")
        if "." not in str(name):
            ns = schema.get("namespace", ns) or ""
        full = _fullname(name, ns) if isinstance(name, str) and isinstance(ns, str) else ""
        if not _NAME.fullmatch(full):
            raise UnsupportedSchema(f"not a valid Avro name: {name!r} (namespace {ns!r})")
        if full in self.names or full in self.pending:
            raise UnsupportedSchema(f"type {full} is defined twice")
        return full, full.rpartition(".")[0]

    def _named(self, ref: str, ns: str) -> _Node:
        for full in (_fullname(ref, ns), ref):
            if full in self.pending:
                raise UnsupportedSchema(f"recursive type {full} is not supported")
            if full in self.names:
                return self.names[full]
        raise UnsupportedSchema(f"unknown type {ref!r}")

    def _union(self, branches: list[Any], ns: str) -> _Node:
        if len(branches) != 2 or branches.count("null") != 1:
            raise UnsupportedSchema(f"only unions of null and one type are supported: {branches}")
        null_index = branches.index("null")
        other = branches[1 - null_index]
        if isinstance(other, list):
            raise UnsupportedSchema(f"a union may not contain a union: {branches}")
        return _Optional(self.node(other, ns), null_index)

    def _record(self, schema: dict[str, Any], ns: str) -> _Record:
        name, ns = self._name(schema, ns)
        raw_fields = schema.get("fields")
        if not isinstance(raw_fields, list):
            raise UnsupportedSchema(f"record {name} has no list of fields")
        self.pending.add(name)
        fields = []
        for f in raw_fields:
            fname = f.get("name") if isinstance(f, dict) else None
            if not isinstance(fname, str):
                raise UnsupportedSchema(f"record {name} has a field without a name")
            fields.append(
                _Field(fname, self.node(f.get("type"), ns), "default" in f, f.get("default"))
            )
        if len({f.name for f in fields}) != len(fields):
            raise UnsupportedSchema(f"record {name} has duplicate field names")
        self.pending.discard(name)
        record = _Record(name, tuple(fields))
        self.names[name] = record
        return record

    @staticmethod
    def _sized(node: _Node, what: str) -> _Node:
        if _min_size(node) == 0:
            # a count of zero-size items could not be bounded by the input's length
            raise UnsupportedSchema(f"{what} of a type that can encode to no bytes")
        return node


def _min_size(node: _Node) -> int:
    """The fewest bytes any value of ``node`` encodes to."""
    if isinstance(node, _Prim):
        return _MIN_SIZE[node.kind]
    if isinstance(node, _Record):
        return sum(_min_size(f.node) for f in node.fields)
    return 1  # enum index, union index, array or map terminator


def _parse(schema: Any) -> _Node:
    return _Resolver().node(schema, "")


def _describe(node: _Node) -> str:
    if isinstance(node, _Prim):
        return node.kind
    if isinstance(node, _Enum | _Record):
        return node.name
    if isinstance(node, _Array):
        return f"array<{_describe(node.items)}>"
    if isinstance(node, _Map):
        return f"map<{_describe(node.values)}>"
    return f"union[null, {_describe(node.inner)}]"


# -- code generation -------------------------------------------------------------------------

_PACK_D = struct.Struct("<d").pack
_UNPACK_D = struct.Struct("<d").unpack_from
_INDENT = "    "


def _indent(lines: list[str], depth: int = 1) -> list[str]:
    return [_INDENT * depth + line for line in lines]


class _Gen:
    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {}
        self._ids = count(1)

    def var(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def const(self, value: object, prefix: str = "_K") -> str:
        name = self.var(prefix)
        self.namespace[name] = value
        return name

    def build(self, src: str, func: str, title: str) -> Callable[..., Any]:
        filename = f"<avro_fast {title} #{next(_SERIAL)}>"
        code = compile(src, filename, "exec")
        # keep the source findable, so tracebacks and inspect show the generated lines
        linecache.cache[filename] = (len(src), None, src.splitlines(keepends=True), filename)
        exec(code, self.namespace)
        return cast(Callable[..., Any], self.namespace[func])


_SERIAL = count(1)


class _EncoderGen(_Gen):
    """Statements that compute a value's pieces, and expressions (the pieces, as bytes)."""

    def __init__(self) -> None:
        super().__init__()
        self.namespace.update(_VL=_VL, _LEN=_LEN, _ulong=_ulong, _uint=_uint, _pack_d=_PACK_D)

    def gen(self, node: _Node, expr: str) -> tuple[list[str], list[str]]:
        if isinstance(node, _Prim):
            return self._prim(node.kind, expr)
        if isinstance(node, _Enum):
            table = {s: _VL[2 * i] for i, s in enumerate(node.symbols)}
            return [], [f"{self.const(table, '_E')}[{expr}]"]
        if isinstance(node, _Optional):
            return self._optional(node, expr)
        if isinstance(node, _Record):
            return self._record(node, expr)
        return self._block(node, expr)

    def _prim(self, kind: str, expr: str) -> tuple[list[str], list[str]]:
        if kind in ("string", "bytes"):
            s, n = self.var("s"), self.var("n")
            value = f"{expr}.encode()" if kind == "string" else expr
            prefix = f"(_LEN[{n}] if {n} < {_LEN_TABLE} else _ulong({n} << 1))"
            return [f"{s} = {value}", f"{n} = len({s})"], [prefix, s]
        if kind in ("long", "int"):
            v = expr if expr.isidentifier() else self.var("v")
            z = self.var("z")
            slow = "_ulong" if kind == "long" else "_uint"
            return (
                [*([] if v == expr else [f"{v} = {expr}"]), f"{z} = ({v} << 1) ^ ({v} >> 63)"],
                [f"(_VL[{z}] if {z} < {_TABLE} else {slow}({z}))"],
            )
        if kind == "double":
            return [], [f"_pack_d({expr})"]
        assert kind == "boolean"
        return [], [f"(b'\\x01' if {expr} else b'\\x00')"]

    def _optional(self, node: _Optional, expr: str) -> tuple[list[str], list[str]]:
        v, tag = self.var("u"), self.var("t")
        stmts, parts = self.gen(node.inner, v)
        if len(parts) > 3:  # a nested record: one piece rather than many empty ones
            parts = [f"_join(({', '.join(parts)},))"]
        slots = [self.var("q") for _ in parts]
        null_tag, inner_tag = _VL[2 * node.null_index], _VL[2 * (1 - node.null_index)]
        lines = [f"{v} = {expr}", f"if {v} is None:", f"    {tag} = {null_tag!r}"]
        lines += [f"    {q} = b''" for q in slots]
        lines += ["else:", f"    {tag} = {inner_tag!r}"]
        lines += _indent(stmts)
        lines += [f"    {q} = {part}" for q, part in zip(slots, parts, strict=True)]
        return lines, [tag, *slots]

    def _record(self, node: _Record, expr: str) -> tuple[list[str], list[str]]:
        rec = expr if expr.isidentifier() else self.var("r")
        lines = [] if rec == expr else [f"{rec} = {expr}"]
        parts: list[str] = []
        for f in node.fields:
            if not f.has_default:
                fexpr = f"{rec}[{f.name!r}]"
            elif f.default is None:
                fexpr = f"{rec}.get({f.name!r})"
            else:
                fexpr = f"{rec}.get({f.name!r}, {self.const(f.default, '_D')})"
            stmts, fparts = self.gen(f.node, fexpr)
            lines += stmts
            parts += fparts
        return lines, parts

    def _block(self, node: _Array | _Map, expr: str) -> tuple[list[str], list[str]]:
        a, out, piece, n = self.var("a"), self.var("o"), self.var("p"), self.var("m")
        lines = [
            f"{a} = {expr}",
            f"{n} = len({a})",  # as fastavro: len(), so that None is refused, not empty
            f"if {n}:",
            f"    {out} = [_LEN[{n}] if {n} < {_LEN_TABLE} else _ulong({n} << 1)]",
        ]
        if isinstance(node, _Array):
            x = self.var("x")
            stmts, parts = self.gen(node.items, x)
            lines.append(f"    for {x} in {a}:")
        else:
            k, x = self.var("k"), self.var("x")
            kstmts, kparts = self._prim("string", k)
            vstmts, vparts = self.gen(node.values, x)
            stmts, parts = kstmts + vstmts, kparts + vparts
            lines.append(f"    for {k}, {x} in {a}.items():")
        lines += _indent(stmts, 2)
        lines.append(f"        {out} += ({', '.join(parts)},)")
        lines += [
            f"    {out}.append(b'\\x00')",
            f"    {piece} = _join({out})",
            "else:",
            f"    {piece} = b'\\x00'",
        ]
        return lines, [piece]


_ENCODE_ERRORS = (
    KeyError,
    AttributeError,
    TypeError,
    ValueError,
    IndexError,
    OverflowError,
    struct.error,
)


def compile_encoder(schema: Any, prefix: bytes = b"") -> Encoder:
    """Compile ``schema`` (raw or parsed by fastavro) into ``encode(record) -> bytes``.

    ``prefix`` (such as a single-object header) is written before the Avro body.
    """
    node = _parse(schema)
    gen = _EncoderGen()
    stmts, parts = gen.gen(node, "r")
    if prefix:
        parts.insert(0, gen.const(bytes(prefix), "_PREFIX"))
    if not parts:
        parts.append("b''")
    gen.namespace.update(
        _join=b"".join, _NODE=node, _ERRORS=_ENCODE_ERRORS, _encode_error=_encode_error
    )
    src = "\n".join(
        [
            "def encode(r):",
            "    try:",
            *_indent(stmts, 2),
            f"        return _join(({', '.join(parts)},))",
            "    except _ERRORS as exc:",
            "        raise _encode_error(_NODE, r, exc) from None",
            "",
        ]
    )
    return cast(Encoder, gen.build(src, "encode", _describe(node)))


def _encode_error(node: _Node, value: Any, exc: BaseException) -> Exception:
    """A TypeError or ValueError that says which part of ``value`` could not be encoded."""
    found = _problem(node, value, "")
    if found is None:
        return ValueError(f"cannot encode {_describe(node)}: {type(exc).__name__}: {exc}")
    kind, where, what = found
    return kind(f"{where.lstrip('.') or _describe(node)}: {what}")


def _problem(node: _Node, value: Any, path: str) -> tuple[type[Exception], str, str] | None:
    """The first reason (error type, path, message) ``value`` does not fit ``node``, if any."""
    got = type(value).__name__
    if isinstance(node, _Prim):
        kind = node.kind
        if kind == "string":
            if not isinstance(value, str):
                return TypeError, path, f"expected a string, got {got}"
            try:
                value.encode()
            except UnicodeError:
                return ValueError, path, "the string is not encodable as UTF-8"
        elif kind == "bytes":
            if not isinstance(value, bytes | bytearray):
                return TypeError, path, f"expected bytes, got {got}"
        elif kind in ("long", "int"):
            bits = 64 if kind == "long" else 32
            if not isinstance(value, int):
                return TypeError, path, f"expected an integer for an Avro {kind}, got {got}"
            if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
                return ValueError, path, f"{value} is out of the signed {bits}-bit range"
        elif kind == "double":
            try:
                _PACK_D(value)
            except (struct.error, TypeError):
                return TypeError, path, f"expected a number, got {got}"
            except OverflowError:
                return ValueError, path, "the number is too large for a double"
        return None
    if isinstance(node, _Enum):
        try:
            known = value in node.symbols
        except TypeError:
            known = False
        if not known:
            return ValueError, path, f"{value!r} is not a symbol of {node.name}"
        return None
    if isinstance(node, _Optional):
        return None if value is None else _problem(node.inner, value, path)
    if isinstance(node, _Record):
        if not isinstance(value, Mapping):
            return TypeError, path, f"expected a mapping for record {node.name}, got {got}"
        for f in node.fields:
            where = f"{path}.{f.name}"
            if f.name not in value and not f.has_default:
                return ValueError, where, "no value and no default"
            found = _problem(f.node, value.get(f.name, f.default), where)
            if found is not None:
                return found
        return None
    if isinstance(node, _Array):
        try:
            items = list(value)
            len(value)
        except TypeError:
            return TypeError, path, f"expected a list, got {got}"
        for i, item in enumerate(items):
            found = _problem(node.items, item, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if not isinstance(value, Mapping):
        return TypeError, path, f"expected a mapping, got {got}"
    for key, item in value.items():
        if not isinstance(key, str):
            return TypeError, path, f"map keys must be strings, got {type(key).__name__}"
        found = _problem(node.values, item, f"{path}[{key!r}]")
        if found is not None:
            return found
    return None


class _DecoderGen(_Gen):
    """Statements that read a value at ``d[p]`` (``N = len(d)``) into a target variable."""

    def __init__(self) -> None:
        super().__init__()
        self.namespace.update(
            _Err=AvroDecodeError,
            _SE=_SE,
            _ZZ=_ZZ,
            _uvar=_uvar,
            _long=_long,
            _int=_int,
            _string=_string,
            _bytes=_bytes,
            _unpack_d=_UNPACK_D,
        )

    @staticmethod
    def _varint() -> list[str]:
        """Read an unsigned varint (a zigzagged value) into ``u``; one byte is inline."""
        return ["u = d[p]", "p += 1", "if u > 127:", "    u, p = _uvar(d, p - 1)"]

    def gen(self, node: _Node, target: str) -> list[str]:
        if isinstance(node, _Prim):
            return self._prim(node.kind, target)
        if isinstance(node, _Enum):
            n = len(node.symbols)
            return [
                *self._varint(),
                f"if u & 1 or u >= {2 * n}:",
                f"    raise _Err(f'enum index {{(u >> 1) ^ -(u & 1)}} out of range "
                f"for {node.name}')",
                f"{target} = {self.const(node.symbols, '_S')}[u >> 1]",
            ]
        if isinstance(node, _Optional):
            null_z, inner_z = 2 * node.null_index, 2 * (1 - node.null_index)
            return [
                *self._varint(),
                f"if u == {null_z}:",
                f"    {target} = None",
                f"elif u == {inner_z}:",
                *_indent(self.gen(node.inner, target)),
                "else:",
                "    raise _Err(f'union index {(u >> 1) ^ -(u & 1)} out of range')",
            ]
        if isinstance(node, _Record):
            lines: list[str] = []
            values = []
            for f in node.fields:
                v = self.var("f")
                lines += self.gen(f.node, v)
                values.append(f"{f.name!r}: {v}")
            lines.append(f"{target} = {{{', '.join(values)}}}")
            return lines
        return self._block(node, target)

    def _prim(self, kind: str, target: str) -> list[str]:
        if kind in ("string", "bytes"):
            # one-byte length, fits: inline; anything else (long, negative, too long): _string
            value = "d[p + 1 : e].decode()" if kind == "string" else "d[p + 1 : e]"
            return [
                "e = p + _SE[d[p]]",
                "if e <= N:",
                f"    {target} = {value}",
                "else:",
                f"    {target}, e = {'_string' if kind == 'string' else '_bytes'}(d, p)",
                "p = e",
            ]
        if kind in ("long", "int"):
            return [
                f"{target} = _ZZ[d[p]]",
                f"if {target} is None:",
                f"    {target}, p = {'_long' if kind == 'long' else '_int'}(d, p)",
                "else:",
                "    p += 1",
            ]
        if kind == "double":
            return [f"{target} = _unpack_d(d, p)[0]", "p += 8"]
        assert kind == "boolean"
        return [
            "u = d[p]",
            "p += 1",
            "if u > 1:",
            "    raise _Err(f'boolean byte {u} at byte {p - 1}')",
            f"{target} = u == 1",
        ]

    def _block(self, node: _Array | _Map, target: str) -> list[str]:
        c, end = self.var("c"), self.var("b")
        item = node.items if isinstance(node, _Array) else node.values
        x = self.var("x")
        size = _min_size(item) + (1 if isinstance(node, _Map) else 0)  # + the key's length
        if isinstance(node, _Array):
            read = [*self.gen(item, x), f"{target}.append({x})"]
        else:
            k = self.var("k")
            read = self._prim("string", k) + self.gen(item, x) + [f"{target}[{k}] = {x}"]
        return [
            f"{target} = {'[]' if isinstance(node, _Array) else '{}'}",
            *self._varint(),
            "while u:",
            "    if u & 1:  # a negative count: the block's size in bytes follows",
            f"        {c} = (u >> 1) + 1",
            *_indent(self._varint(), 2),
            f"        {end} = p + (u >> 1)",
            f"        if u & 1 or {end} > N:",
            "            raise _Err(f'block byte size {(u >> 1) ^ -(u & 1)} at byte {p} "
            "with {N - p} bytes left')",
            f"        if {c} * {size} > {end} - p:",
            f"            raise _Err(f'block of {{{c}}} items in {{{end} - p}} bytes "
            "at byte {p}')",
            f"        for _ in range({c}):",
            *_indent(read, 3),
            f"        if p != {end}:",
            "            raise _Err(f'block ends at byte {p}, not at its stated size')",
            "    else:",
            f"        {c} = u >> 1",
            f"        if {c} * {size} > N - p:",
            f"            raise _Err(f'block of {{{c}}} items at byte {{p}} "
            "with {N - p} bytes left')",
            f"        for _ in range({c}):",
            *_indent(read, 3),
            *_indent(self._varint()),
        ]


def compile_decoder(schema: Any) -> Decoder:
    """Compile ``schema`` (raw or parsed by fastavro) into ``decode(data, pos=0)``.

    The value must take up all of ``data[pos:]``; anything else raises
    :class:`AvroDecodeError` (and only that).
    """
    node = _parse(schema)
    gen = _DecoderGen()
    body = gen.gen(node, "value")
    gen.namespace.update(_StructError=struct.error)
    src = "\n".join(
        [
            "def decode(d, p=0):",
            "    if type(d) is not bytes:",
            "        d = bytes(d)",
            "    N = len(d)",
            "    if p < 0 or p > N:",
            "        raise _Err(f'start position {p} outside the {N} bytes given')",
            "    try:",
            *_indent(body, 2),
            "    except (IndexError, _StructError):",
            "        raise _Err('truncated: the data ends inside the value') from None",
            "    except UnicodeDecodeError as exc:",
            "        raise _Err(f'invalid UTF-8 in a string at byte {p}: {exc.reason}') from None",
            "    if p != N:",
            "        raise _Err(f'{N - p} trailing byte(s) after the value')",
            "    return value",
            "",
        ]
    )
    return gen.build(src, "decode", _describe(node))
