"""Avro schemas as a tree of frozen nodes: the subset the codec compiles, names resolved.

A schema (raw JSON-like, or as parsed by fastavro) becomes a tree of :data:`Node`: records,
enums, arrays, maps, two-branch unions of ``null`` and one type (:class:`Optional`), and the
primitives ``string``, ``bytes``, ``long``, ``int``, ``double``, ``boolean``. A named type
referred to again is the same node; recursive types, other unions, ``fixed``, ``float``,
``null`` on its own and logical types raise :class:`UnsupportedSchema`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Array",
    "Enum",
    "Field",
    "Map",
    "Node",
    "Optional",
    "Prim",
    "Record",
    "UnsupportedSchema",
    "describe",
    "min_size",
    "parse",
]


class UnsupportedSchema(ValueError):
    """The schema uses Avro features outside the subset this codec compiles."""


@dataclass(frozen=True)
class Prim:
    kind: str  # string, bytes, long, int, double, boolean


@dataclass(frozen=True)
class Enum:
    name: str
    symbols: tuple[str, ...]
    default: str | None = None  # the reader's symbol for a writer's symbol it lacks
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Array:
    items: Node


@dataclass(frozen=True)
class Map:
    values: Node


@dataclass(frozen=True)
class Optional:
    inner: Node
    null_index: int  # 0 for ["null", T], 1 for [T, "null"]


@dataclass(frozen=True)
class Field:
    name: str
    node: Node
    has_default: bool
    default: Any
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Record:
    name: str
    fields: tuple[Field, ...]
    aliases: tuple[str, ...] = ()


Node = Prim | Enum | Array | Map | Optional | Record

_PRIMITIVES = frozenset({"string", "bytes", "long", "int", "double", "boolean"})
_MIN_SIZE = {"string": 1, "bytes": 1, "long": 1, "int": 1, "double": 8, "boolean": 1}


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _fullname(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _aliases(schema: dict[str, Any], owner: str) -> tuple[str, ...]:
    aliases = schema.get("aliases", [])
    if not (isinstance(aliases, list) and all(isinstance(a, str) for a in aliases)):
        raise UnsupportedSchema(f"{owner} has aliases that are not a list of names")
    return tuple(aliases)


class _Names:
    """Turns a raw or fastavro-parsed schema into a tree of ``Node``, resolving names."""

    def __init__(self) -> None:
        self.names: dict[str, Node] = {}
        self.pending: set[str] = set()

    def node(self, schema: Any, ns: str) -> Node:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return Prim(schema)
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
            return self._enum(schema, ns)
        if kind == "array":
            return Array(self._sized(self.node(schema.get("items"), ns), "array items"))
        if kind == "map":
            return Map(self._sized(self.node(schema.get("values"), ns), "map values"))
        if isinstance(kind, str) and kind in _PRIMITIVES:
            return Prim(kind)
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

    def _named(self, ref: str, ns: str) -> Node:
        for full in (_fullname(ref, ns), ref):
            if full in self.pending:
                raise UnsupportedSchema(f"recursive type {full} is not supported")
            if full in self.names:
                return self.names[full]
        raise UnsupportedSchema(f"unknown type {ref!r}")

    def _enum(self, schema: dict[str, Any], ns: str) -> Enum:
        name, _ = self._name(schema, ns)
        symbols = schema.get("symbols")
        if not (isinstance(symbols, list) and all(isinstance(s, str) for s in symbols)):
            raise UnsupportedSchema(f"enum {name} has no list of symbols")
        if len(set(symbols)) != len(symbols) or not symbols:
            raise UnsupportedSchema(f"enum {name} has duplicate or no symbols")
        default = schema.get("default")
        if default is not None and default not in symbols:
            raise UnsupportedSchema(f"enum {name} has a default that is not one of its symbols")
        enum = Enum(name, tuple(symbols), default, _aliases(schema, f"enum {name}"))
        self.names[name] = enum
        return enum

    def _union(self, branches: list[Any], ns: str) -> Node:
        if len(branches) != 2 or branches.count("null") != 1:
            raise UnsupportedSchema(f"only unions of null and one type are supported: {branches}")
        null_index = branches.index("null")
        other = branches[1 - null_index]
        if isinstance(other, list):
            raise UnsupportedSchema(f"a union may not contain a union: {branches}")
        return Optional(self.node(other, ns), null_index)

    def _record(self, schema: dict[str, Any], ns: str) -> Record:
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
            node = self.node(f.get("type"), ns)
            aliases = _aliases(f, f"field {name}.{fname}")
            fields.append(Field(fname, node, "default" in f, f.get("default"), aliases))
        if len({f.name for f in fields}) != len(fields):
            raise UnsupportedSchema(f"record {name} has duplicate field names")
        self.pending.discard(name)
        record = Record(name, tuple(fields), _aliases(schema, f"record {name}"))
        self.names[name] = record
        return record

    @staticmethod
    def _sized(node: Node, what: str) -> Node:
        if min_size(node) == 0:
            # a count of zero-size items could not be bounded by the input's length
            raise UnsupportedSchema(f"{what} of a type that can encode to no bytes")
        return node


def min_size(node: Node) -> int:
    """The fewest bytes any value of ``node`` encodes to."""
    if isinstance(node, Prim):
        return _MIN_SIZE[node.kind]
    if isinstance(node, Record):
        return sum(min_size(f.node) for f in node.fields)
    return 1  # enum index, union index, array or map terminator


def parse(schema: Any) -> Node:
    """The node tree of ``schema`` (raw, or parsed by fastavro)."""
    return _Names().node(schema, "")


def describe(node: Node) -> str:
    """A short name for ``node`` in messages: ``array<string>``, ``union[null, long]``, ..."""
    if isinstance(node, Prim):
        return node.kind
    if isinstance(node, Enum | Record):
        return node.name
    if isinstance(node, Array):
        return f"array<{describe(node.items)}>"
    if isinstance(node, Map):
        return f"map<{describe(node.values)}>"
    return f"union[null, {describe(node.inner)}]"
