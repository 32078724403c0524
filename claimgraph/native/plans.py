"""Schema nodes (:mod:`claimgraph.core.avro.nodes`) as the plans the native codec runs.

A plan is a tree of tuples: ``("string",)``, ``("enum", read_symbols, own_symbols)``,
``("array", item, min_item_size)``, ``("map", value, min_entry_size)``, ``("optional",
null_index, inner)``, ``("record", ((name, node, has_default, default, mutable), ...))``, and,
for reading one version's bytes as another's values, ``("resolve", ((writer_node,
slot|None), ...), ((reader_name, slot|None, default, mutable), ...))`` and the promotions
``("int_as_double",)``, ``("long_as_double",)``. They mirror the Python generators
(:mod:`claimgraph.core.avro.decoder`, ``encoder``, ``resolution``) case for case; a schema pair
that Python resolution refuses raises here too.
"""

from __future__ import annotations

from typing import Any

from claimgraph.core.avro.nodes import (
    Array,
    Enum,
    Map,
    Node,
    Optional,
    Prim,
    Record,
    UnsupportedSchema,
    min_size,
    parse,
)
from claimgraph.core.avro.resolution import default_value

__all__ = ["plan", "resolving_plan"]

Plan = tuple[Any, ...]


def _plan(node: Node) -> Plan:
    if isinstance(node, Prim):
        return (node.kind,)
    if isinstance(node, Enum):
        return ("enum", node.symbols, node.symbols)
    if isinstance(node, Array):
        return ("array", _plan(node.items), min_size(node.items))
    if isinstance(node, Map):
        return ("map", _plan(node.values), min_size(node.values) + 1)
    if isinstance(node, Optional):
        return ("optional", node.null_index, _plan(node.inner))
    fields = []
    for f in node.fields:
        fields.append(
            (f.name, _plan(f.node), f.has_default, f.default, isinstance(f.default, list | dict))
        )
    return ("record", tuple(fields))


def plan(schema: Any) -> Plan:
    """The plan that reads and writes ``schema`` (raw or parsed by fastavro)."""
    return _plan(parse(schema))


def _short(name: str) -> str:
    return name.rpartition(".")[2]


def _same_name(w: Enum | Record, r: Enum | Record) -> bool:
    return _short(w.name) in {_short(r.name), *(_short(a) for a in r.aliases)}


_PROMOTIONS = {"int": ("long", "double"), "long": ("double",), "string": ("bytes",)}
_PROMOTIONS["bytes"] = ("string",)


def _resolve(w: Node, r: Node) -> Plan:
    if w == r:
        return _plan(w)
    if isinstance(r, Optional) and not isinstance(w, Optional):
        return _resolve(w, r.inner)
    if isinstance(w, Prim) and isinstance(r, Prim):
        if r.kind not in _PROMOTIONS.get(w.kind, ()):
            raise UnsupportedSchema(f"cannot promote {w.kind} to {r.kind}")
        if r.kind == "double":
            return (f"{w.kind}_as_double",)
        return (r.kind if w.kind in ("string", "bytes") else w.kind,)
    if isinstance(w, Enum) and isinstance(r, Enum) and _same_name(w, r):
        symbols = []
        for s in w.symbols:
            if s in r.symbols:
                symbols.append(s)
            elif r.default is not None:
                symbols.append(r.default)
            else:
                raise UnsupportedSchema(f"symbol {s!r} of {w.name} has nowhere to go")
        return ("enum", tuple(symbols), w.symbols)
    if isinstance(w, Optional) and isinstance(r, Optional):
        return ("optional", w.null_index, _resolve(w.inner, r.inner))
    if isinstance(w, Array) and isinstance(r, Array):
        return ("array", _resolve(w.items, r.items), min_size(w.items))
    if isinstance(w, Map) and isinstance(r, Map):
        return ("map", _resolve(w.values, r.values), min_size(w.values) + 1)
    if isinstance(w, Record) and isinstance(r, Record) and _same_name(w, r):
        by_name = {f.name: f for f in r.fields}
        by_alias = {a: f for f in r.fields for a in f.aliases}
        slots: dict[str, int] = {}
        reads: list[tuple[Plan, int | None]] = []
        for wf in w.fields:
            rf = by_name.get(wf.name) or by_alias.get(wf.name)
            if rf is None or rf.name in slots:
                reads.append((_plan(wf.node), None))
                continue
            slots[rf.name] = len(slots)
            reads.append((_resolve(wf.node, rf.node), slots[rf.name]))
        outs: list[tuple[str, int | None, Any, bool]] = []
        for rf in r.fields:
            if rf.name in slots:
                outs.append((rf.name, slots[rf.name], None, False))
                continue
            if not rf.has_default:
                raise UnsupportedSchema(f"reader field {rf.name!r} has no default")
            value = default_value(rf.node, rf.default, rf.name)
            outs.append((rf.name, None, value, isinstance(value, list | dict)))
        return ("resolve", tuple(reads), tuple(outs))
    raise UnsupportedSchema("the writer's type cannot be read as the reader's")


def resolving_plan(writer: Any, reader: Any) -> Plan:
    """The plan that reads bytes of ``writer`` as values of ``reader`` (Avro resolution)."""
    return _resolve(parse(writer), parse(reader))
