"""Avro schema resolution, compiled: read bytes written with one schema as values of another.

``compile_resolving_decoder(writer, reader)`` gives ``decode(data, pos=0)`` that reads what
``writer`` wrote and returns values shaped by ``reader``, as the Avro specification's schema
resolution (and ``fastavro.schemaless_reader(fp, writer, reader)``) does:

* record fields match by name, or by one of the reader field's ``aliases``; a writer field
  the reader lacks is read and dropped; a reader field the writer lacks takes its default
  (converted to the reader's type; a fresh copy for lists, maps and records);
* promotions: ``int`` → ``long``/``double``, ``long`` → ``double``, ``string`` ↔ ``bytes``;
* a writer's enum symbol the reader lacks becomes the reader enum's ``default``;
* a non-union writer value meets the non-null branch of a reader's union.

Records and enums must have the same unqualified name, or the reader names the writer's in
its ``aliases``. Keys come in the reader's field order (fastavro puts defaults last).

Where the specification fails at read time, this fails at compile time with
:class:`UnsupportedSchema`: a reader field with no writer field and no default, a writer's
enum symbol with nowhere to go, a writer's union read as a reader's non-union (its ``null``
would have nowhere to go), a type the writer's cannot be promoted to. Those changes need an
explicit upcaster (see :mod:`claimgraph.core.wire`). Bytes that are not a valid value of the
writer's schema raise :class:`AvroDecodeError`, exactly as the writer's own decoder would.
"""

from __future__ import annotations

import copy
from typing import Any

from claimgraph.core.avro.decoder import Decoder, DecoderGen, finish
from claimgraph.core.avro.nodes import (
    Array,
    Enum,
    Map,
    Node,
    Optional,
    Prim,
    Record,
    UnsupportedSchema,
    describe,
    parse,
)

__all__ = ["compile_resolving_decoder", "default_value"]

# writer primitive → the reader primitives it may be read as (besides itself)
_PROMOTIONS = {
    "int": ("long", "double"),
    "long": ("double",),
    "string": ("bytes",),
    "bytes": ("string",),
}


def _short(name: str) -> str:
    return name.rpartition(".")[2]


def _same_name(writer: Enum | Record, reader: Enum | Record) -> bool:
    names = {_short(reader.name), *(_short(a) for a in reader.aliases)}
    return _short(writer.name) in names


def _mismatch(writer: Node, reader: Node, where: str) -> UnsupportedSchema:
    return UnsupportedSchema(
        f"{where or 'the value'}: cannot resolve the writer's {describe(writer)} "
        f"as the reader's {describe(reader)}"
    )


class _ResolvingGen(DecoderGen):
    """Statements that read a writer's value at ``d[p]`` into a target, shaped by a reader."""

    def __init__(self) -> None:
        super().__init__()
        self.namespace.update(_copy=copy.deepcopy)

    def resolve(self, w: Node, r: Node, target: str, where: str) -> list[str]:
        if w == r:
            return self.gen(w, target)
        if isinstance(r, Optional) and not isinstance(w, Optional):
            return self.resolve(w, r.inner, target, where)
        if isinstance(w, Prim) and isinstance(r, Prim):
            return self._prim(w.kind, r.kind, target, where)
        if isinstance(w, Enum) and isinstance(r, Enum) and _same_name(w, r):
            return self._enum(w, r, target, where)
        if isinstance(w, Optional) and isinstance(r, Optional):
            return self.optional(w, target, lambda t: self.resolve(w.inner, r.inner, t, where))
        if isinstance(w, Array) and isinstance(r, Array):
            return self.block(w, target, lambda x: self.resolve(w.items, r.items, x, where + "[]"))
        if isinstance(w, Map) and isinstance(r, Map):
            return self.block(
                w, target, lambda x: self.resolve(w.values, r.values, x, where + "[]")
            )
        if isinstance(w, Record) and isinstance(r, Record) and _same_name(w, r):
            return self._record(w, r, target, where)
        raise _mismatch(w, r, where)

    def _prim(self, w: str, r: str, target: str, where: str) -> list[str]:
        if w == r:
            return self.prim(w, target)
        if r not in _PROMOTIONS.get(w, ()):
            raise _mismatch(Prim(w), Prim(r), where)
        if r == "double":
            return [*self.prim(w, target), f"{target} = float({target})"]
        return self.prim(r if w in ("string", "bytes") else w, target)

    def _enum(self, w: Enum, r: Enum, target: str, where: str) -> list[str]:
        symbols = []
        for s in w.symbols:
            if s in r.symbols:
                symbols.append(s)
            elif r.default is not None:
                symbols.append(r.default)
            else:
                raise UnsupportedSchema(
                    f"{where or 'the value'}: the writer's symbol {s!r} of {w.name} is not in "
                    f"the reader's {r.name}, which has no default (an upcaster is needed)"
                )
        return self.enum(w, tuple(symbols), target)

    def _record(self, w: Record, r: Record, target: str, where: str) -> list[str]:
        by_name = {f.name: f for f in r.fields}
        by_alias = {a: f for f in r.fields for a in f.aliases}
        read: dict[str, str] = {}  # reader field name → the variable holding its value
        lines: list[str] = []
        for wf in w.fields:
            rf = by_name.get(wf.name) or by_alias.get(wf.name)
            v = self.var("f")
            if rf is None or rf.name in read:
                lines += self.gen(wf.node, v)  # read, and dropped
                continue
            lines += self.resolve(wf.node, rf.node, v, f"{where}.{rf.name}".lstrip("."))
            read[rf.name] = v
        values = []
        for rf in r.fields:
            if rf.name in read:
                values.append(f"{rf.name!r}: {read[rf.name]}")
                continue
            if not rf.has_default:
                raise UnsupportedSchema(
                    f"{where or r.name}: the reader's field {rf.name!r} is not in the "
                    f"writer's {w.name} and has no default"
                )
            value = default_value(rf.node, rf.default, f"{where}.{rf.name}".lstrip("."))
            k = self.const(value, "_D")
            mutable = isinstance(value, list | dict)
            values.append(f"{rf.name!r}: {f'_copy({k})' if mutable else k}")
        lines.append(f"{target} = {{{', '.join(values)}}}")
        return lines


def default_value(node: Node, value: Any, where: str = "") -> Any:
    """The value a field's JSON ``default`` stands for in ``node`` (bytes from ISO-8859-1)."""
    bad = UnsupportedSchema(f"{where or 'the value'}: {value!r} is not a {describe(node)}")
    if isinstance(node, Optional):
        return None if value is None else default_value(node.inner, value, where)
    if isinstance(node, Prim):
        kind = node.kind
        if kind == "string" and isinstance(value, str):
            return value
        if kind == "bytes" and isinstance(value, str):
            try:
                return value.encode("latin-1")
            except UnicodeEncodeError:
                raise bad from None
        if kind in ("long", "int") and isinstance(value, int) and not isinstance(value, bool):
            bits = 64 if kind == "long" else 32
            if -(1 << (bits - 1)) <= value < 1 << (bits - 1):
                return value
        if kind == "double" and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if kind == "boolean" and isinstance(value, bool):
            return value
        raise bad
    if isinstance(node, Enum):
        if value in node.symbols:
            return value
        raise bad
    if isinstance(node, Array):
        if not isinstance(value, list):
            raise bad
        return [default_value(node.items, x, f"{where}[]") for x in value]
    if isinstance(node, Map):
        if not (isinstance(value, dict) and all(isinstance(k, str) for k in value)):
            raise bad
        return {k: default_value(node.values, x, f"{where}[]") for k, x in value.items()}
    if not isinstance(value, dict):
        raise bad
    out = {}
    for f in node.fields:
        if f.name in value:
            out[f.name] = default_value(f.node, value[f.name], f"{where}.{f.name}")
        elif f.has_default:
            out[f.name] = default_value(f.node, f.default, f"{where}.{f.name}")
        else:
            raise bad
    return out


def compile_resolving_decoder(writer: Any, reader: Any) -> Decoder:
    """Compile ``decode(data, pos=0)``: bytes of ``writer``, values shaped by ``reader``.

    Both schemas raw or parsed by fastavro. Raises :class:`UnsupportedSchema` when some value
    of ``writer`` could not be resolved as ``reader``.
    """
    w, r = parse(writer), parse(reader)
    gen = _ResolvingGen()
    body = gen.resolve(w, r, "value", "")
    return finish(gen, body, f"{describe(w)} as {describe(r)}")
