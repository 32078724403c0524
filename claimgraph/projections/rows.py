"""Row layout of the versioned (MVCC) projection in RocksDB (pure byte encoding).

Every entity (an edge, an adjacency entry, a slot, a claim, a conflict, the schema, a
writer's calibration record) is stored
as one row per version at which it changed::

    family(1 byte) ‖ entity (UTF-8, no NUL inside) ‖ 0x00 ‖ u64_be(2^64 - 1 - version)

The NUL terminator makes entity keys prefix-free, and the inverted version sorts the newest
row of an entity first, so "the entity as of version V" is one forward ``seek`` to
``entity ‖ 0x00 ‖ inv(V)``: the first key found, if it still belongs to the entity, is the
newest row with version <= V. History rows (family ``H``) use the plain version instead, so
they read in chronological order. Values are compact JSON built with a fixed key order, so a
re-projection writes identical bytes.
"""

from __future__ import annotations

import struct
from typing import Any

from pydantic_core import from_json, to_json

__all__ = [
    "ADJ",
    "CALIBRATION",
    "CLAIM",
    "CONFLICT",
    "EDGE",
    "HISTORY",
    "INPUT",
    "META",
    "SCHEMA",
    "SLOT",
    "dumps",
    "entity_key",
    "history_key",
    "input_key",
    "inv",
    "loads",
    "pack_version",
    "unpack_version",
    "version_of",
]

EDGE, ADJ, SLOT, CLAIM, CONFLICT, SCHEMA, HISTORY, META, INPUT, CALIBRATION = (
    b"E", b"A", b"S", b"K", b"C", b"Y", b"H", b"M", b"I", b"B")  # fmt: skip
_U64 = struct.Struct(">Q")
_MAX = (1 << 64) - 1


def inv(version: int) -> bytes:
    """The inverted big-endian version suffix (newest first)."""
    return _U64.pack(_MAX - version)


def entity_key(family: bytes, entity: str, version: int) -> bytes:
    return family + entity.encode("utf-8") + b"\x00" + inv(version)


def history_key(entity: str, version: int) -> bytes:
    return HISTORY + entity.encode("utf-8") + b"\x00" + _U64.pack(version)


def input_key(input_offset: int) -> bytes:
    """Index row: the command at ``input_offset`` was decided at the version in the value."""
    key: bytes = INPUT + _U64.pack(input_offset)
    return key


def pack_version(version: int) -> bytes:
    return _U64.pack(version)


def unpack_version(raw: bytes) -> int:
    return int(_U64.unpack(raw)[0])


def version_of(key: bytes, value: bytes | None = None) -> int:
    """The version a row was written at (index rows carry it in their value)."""
    if key[:1] == INPUT and value is not None:
        return unpack_version(value)
    raw = _U64.unpack_from(key, len(key) - 8)[0]
    return int(raw) if key[:1] in (HISTORY, INPUT) else _MAX - int(raw)


def dumps(value: Any) -> bytes:
    """Compact JSON; deterministic because every row is built with a fixed key order."""
    out: bytes = to_json(value)
    return out


def loads(raw: bytes) -> Any:
    return from_json(raw)
