"""The encoder generator: one schema → ``encode(record) -> bytes``, fastavro's exact bytes.

Record fields in schema order (a missing field takes its default), arrays and maps as one
block (or just ``0`` when empty), map entries in iteration order, a union picks ``null`` for
``None`` and its other branch otherwise. When the generated function fails, the value is
walked again (slowly, once) to name the field that does not fit.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any, cast

from claimgraph.core.avro.codegen import Gen, indent
from claimgraph.core.avro.nodes import (
    Array,
    Enum,
    Map,
    Node,
    Optional,
    Prim,
    Record,
    describe,
    parse,
)
from claimgraph.core.avro.varints import LEN, LEN_TABLE, TABLE, VL, write_uint, write_ulong

__all__ = ["Encoder", "compile_encoder"]

Encoder = Callable[[Mapping[str, Any]], bytes]
"""``encoder(record) -> bytes``: the prefix given at compile time, then the Avro body."""

_PACK_D = struct.Struct("<d").pack


class _EncoderGen(Gen):
    """Statements that compute a value's pieces, and expressions (the pieces, as bytes)."""

    def __init__(self) -> None:
        super().__init__()
        self.namespace.update(
            _VL=VL, _LEN=LEN, _ulong=write_ulong, _uint=write_uint, _pack_d=_PACK_D
        )

    def gen(self, node: Node, expr: str) -> tuple[list[str], list[str]]:
        if isinstance(node, Prim):
            return self._prim(node.kind, expr)
        if isinstance(node, Enum):
            table = {s: VL[2 * i] for i, s in enumerate(node.symbols)}
            return [], [f"{self.const(table, '_E')}[{expr}]"]
        if isinstance(node, Optional):
            return self._optional(node, expr)
        if isinstance(node, Record):
            return self._record(node, expr)
        return self._block(node, expr)

    def _prim(self, kind: str, expr: str) -> tuple[list[str], list[str]]:
        if kind in ("string", "bytes"):
            s, n = self.var("s"), self.var("n")
            value = f"{expr}.encode()" if kind == "string" else expr
            prefix = f"(_LEN[{n}] if {n} < {LEN_TABLE} else _ulong({n} << 1))"
            return [f"{s} = {value}", f"{n} = len({s})"], [prefix, s]
        if kind in ("long", "int"):
            v = expr if expr.isidentifier() else self.var("v")
            z = self.var("z")
            slow = "_ulong" if kind == "long" else "_uint"
            return (
                [*([] if v == expr else [f"{v} = {expr}"]), f"{z} = ({v} << 1) ^ ({v} >> 63)"],
                [f"(_VL[{z}] if {z} < {TABLE} else {slow}({z}))"],
            )
        if kind == "double":
            return [], [f"_pack_d({expr})"]
        assert kind == "boolean"
        return [], [f"(b'\\x01' if {expr} else b'\\x00')"]

    def _optional(self, node: Optional, expr: str) -> tuple[list[str], list[str]]:
        v, tag = self.var("u"), self.var("t")
        stmts, parts = self.gen(node.inner, v)
        if len(parts) > 3:  # a nested record: one piece rather than many empty ones
            parts = [f"_join(({', '.join(parts)},))"]
        slots = [self.var("q") for _ in parts]
        null_tag, inner_tag = VL[2 * node.null_index], VL[2 * (1 - node.null_index)]
        lines = [f"{v} = {expr}", f"if {v} is None:", f"    {tag} = {null_tag!r}"]
        lines += [f"    {q} = b''" for q in slots]
        lines += ["else:", f"    {tag} = {inner_tag!r}"]
        lines += indent(stmts)
        lines += [f"    {q} = {part}" for q, part in zip(slots, parts, strict=True)]
        return lines, [tag, *slots]

    def _record(self, node: Record, expr: str) -> tuple[list[str], list[str]]:
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

    def _block(self, node: Array | Map, expr: str) -> tuple[list[str], list[str]]:
        a, out, piece, n = self.var("a"), self.var("o"), self.var("p"), self.var("m")
        lines = [
            f"{a} = {expr}",
            f"{n} = len({a})",  # as fastavro: len(), so that None is refused, not empty
            f"if {n}:",
            f"    {out} = [_LEN[{n}] if {n} < {LEN_TABLE} else _ulong({n} << 1)]",
        ]
        if isinstance(node, Array):
            x = self.var("x")
            stmts, parts = self.gen(node.items, x)
            lines.append(f"    for {x} in {a}:")
        else:
            k, x = self.var("k"), self.var("x")
            kstmts, kparts = self._prim("string", k)
            vstmts, vparts = self.gen(node.values, x)
            stmts, parts = kstmts + vstmts, kparts + vparts
            lines.append(f"    for {k}, {x} in {a}.items():")
        lines += indent(stmts, 2)
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
    node = parse(schema)
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
            *indent(stmts, 2),
            f"        return _join(({', '.join(parts)},))",
            "    except _ERRORS as exc:",
            "        raise _encode_error(_NODE, r, exc) from None",
            "",
        ]
    )
    return cast(Encoder, gen.build(src, "encode", describe(node)))


def _encode_error(node: Node, value: Any, exc: BaseException) -> Exception:
    """A TypeError or ValueError that says which part of ``value`` could not be encoded."""
    found = _problem(node, value, "")
    if found is None:
        return ValueError(f"cannot encode {describe(node)}: {type(exc).__name__}: {exc}")
    kind, where, what = found
    return kind(f"{where.lstrip('.') or describe(node)}: {what}")


def _problem(node: Node, value: Any, path: str) -> tuple[type[Exception], str, str] | None:
    """The first reason (error type, path, message) ``value`` does not fit ``node``, if any."""
    got = type(value).__name__
    if isinstance(node, Prim):
        return _prim_problem(node.kind, value, path)
    if isinstance(node, Enum):
        try:
            known = value in node.symbols
        except TypeError:
            known = False
        if not known:
            return ValueError, path, f"{value!r} is not a symbol of {node.name}"
        return None
    if isinstance(node, Optional):
        return None if value is None else _problem(node.inner, value, path)
    if isinstance(node, Record):
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
    if isinstance(node, Array):
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


def _prim_problem(kind: str, value: Any, path: str) -> tuple[type[Exception], str, str] | None:
    got = type(value).__name__
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
