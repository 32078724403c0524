"""The decoder generator: one schema → ``decode(data, pos=0)``, fastavro's values, strictly.

The generated function reads the value at ``d[p]`` with ``N = len(d)`` and checks every
length, count and index against the bytes that remain before it slices or loops; whatever
the input, it returns the one value that takes up all of ``data[pos:]`` or raises
:class:`AvroDecodeError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

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
    min_size,
    parse,
)
from claimgraph.core.avro.varints import (
    SE,
    ZZ,
    AvroDecodeError,
    read_bytes,
    read_int,
    read_long,
    read_string,
    read_uvar,
)

__all__ = ["Decoder", "DecoderGen", "compile_decoder", "finish"]

Decoder = Callable[..., Any]
"""``decoder(data, pos=0)``: the value encoded in ``data[pos:]``, which must be all of it."""

_UNPACK_D = struct.Struct("<d").unpack_from


class DecoderGen(Gen):
    """Statements that read a value at ``d[p]`` (``N = len(d)``) into a target variable."""

    def __init__(self) -> None:
        super().__init__()
        self.namespace.update(
            _Err=AvroDecodeError,
            _SE=SE,
            _ZZ=ZZ,
            _uvar=read_uvar,
            _long=read_long,
            _int=read_int,
            _string=read_string,
            _bytes=read_bytes,
            _unpack_d=_UNPACK_D,
        )

    @staticmethod
    def varint() -> list[str]:
        """Read an unsigned varint (a zigzagged value) into ``u``; one byte is inline."""
        return ["u = d[p]", "p += 1", "if u > 127:", "    u, p = _uvar(d, p - 1)"]

    def gen(self, node: Node, target: str) -> list[str]:
        if isinstance(node, Prim):
            return self.prim(node.kind, target)
        if isinstance(node, Enum):
            return self.enum(node, node.symbols, target)
        if isinstance(node, Optional):
            return self.optional(node, target, lambda t: self.gen(node.inner, t))
        if isinstance(node, Record):
            lines: list[str] = []
            values = []
            for f in node.fields:
                v = self.var("f")
                lines += self.gen(f.node, v)
                values.append(f"{f.name!r}: {v}")
            lines.append(f"{target} = {{{', '.join(values)}}}")
            return lines
        item = node.items if isinstance(node, Array) else node.values
        return self.block(node, target, lambda x: self.gen(item, x))

    def enum(self, node: Enum, symbols: tuple[str, ...], target: str) -> list[str]:
        """Read ``node``'s index and take that one of ``symbols`` (one per symbol of node)."""
        n = len(node.symbols)
        return [
            *self.varint(),
            f"if u & 1 or u >= {2 * n}:",
            f"    raise _Err(f'enum index {{(u >> 1) ^ -(u & 1)}} out of range for {node.name}')",
            f"{target} = {self.const(symbols, '_S')}[u >> 1]",
        ]

    def optional(self, node: Optional, target: str, read: Callable[[str], list[str]]) -> list[str]:
        """Read ``node``'s branch index, then ``None`` or the other branch (by ``read``)."""
        null_z, inner_z = 2 * node.null_index, 2 * (1 - node.null_index)
        return [
            *self.varint(),
            f"if u == {null_z}:",
            f"    {target} = None",
            f"elif u == {inner_z}:",
            *indent(read(target)),
            "else:",
            "    raise _Err(f'union index {(u >> 1) ^ -(u & 1)} out of range')",
        ]

    def prim(self, kind: str, target: str) -> list[str]:
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

    def block(
        self, node: Array | Map, target: str, read_item: Callable[[str], list[str]]
    ) -> list[str]:
        """Read the blocks of an array or map; ``read_item(x)`` reads one item into ``x``."""
        c, end = self.var("c"), self.var("b")
        item = node.items if isinstance(node, Array) else node.values
        x = self.var("x")
        size = min_size(item) + (1 if isinstance(node, Map) else 0)  # + the key's length
        if isinstance(node, Array):
            read = [*read_item(x), f"{target}.append({x})"]
        else:
            k = self.var("k")
            read = self.prim("string", k) + read_item(x) + [f"{target}[{k}] = {x}"]
        return [
            f"{target} = {'[]' if isinstance(node, Array) else '{}'}",
            *self.varint(),
            "while u:",
            "    if u & 1:  # a negative count: the block's size in bytes follows",
            f"        {c} = (u >> 1) + 1",
            *indent(self.varint(), 2),
            f"        {end} = p + (u >> 1)",
            f"        if u & 1 or {end} > N:",
            "            raise _Err(f'block byte size {(u >> 1) ^ -(u & 1)} at byte {p} "
            "with {N - p} bytes left')",
            f"        if {c} * {size} > {end} - p:",
            f"            raise _Err(f'block of {{{c}}} items in {{{end} - p}} bytes "
            "at byte {p}')",
            f"        for _ in range({c}):",
            *indent(read, 3),
            f"        if p != {end}:",
            "            raise _Err(f'block ends at byte {p}, not at its stated size')",
            "    else:",
            f"        {c} = u >> 1",
            f"        if {c} * {size} > N - p:",
            f"            raise _Err(f'block of {{{c}}} items at byte {{p}} "
            "with {N - p} bytes left')",
            f"        for _ in range({c}):",
            *indent(read, 3),
            *indent(self.varint()),
        ]


def finish(gen: DecoderGen, body: list[str], title: str) -> Decoder:
    """Wrap ``body`` (which reads into ``value``) into ``decode(data, pos=0)`` and build it."""
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
            *indent(body, 2),
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
    return gen.build(src, "decode", title)


def compile_decoder(schema: Any) -> Decoder:
    """Compile ``schema`` (raw or parsed by fastavro) into ``decode(data, pos=0)``.

    The value must take up all of ``data[pos:]``; anything else raises
    :class:`AvroDecodeError` (and only that).
    """
    node = parse(schema)
    gen = DecoderGen()
    return finish(gen, gen.gen(node, "value"), describe(node))
