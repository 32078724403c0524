"""Row layout of the versioned (MVCC) projection in RocksDB (pure byte encoding).

Every entity (an edge, an adjacency entry, a slot, a claim, a claim's record, a conflict,
the schema, a writer's calibration record) is stored as one row per version at which it
changed::

    family(1 byte) ‖ entity (UTF-8, no NUL inside) ‖ 0x00 ‖ u64_be(2^64 - 1 - version)

The NUL terminator makes entity keys prefix-free, and the inverted version sorts the newest
row of an entity first, so "the entity as of version V" is one forward ``seek`` to
``entity ‖ 0x00 ‖ inv(V)``: the first key found, if it still belongs to the entity, is the
newest row with version <= V. History rows (family ``H``) use the plain version instead, so
they read in chronological order.

Projection layout 2 (``LAYOUT``, recorded in the row ``M layout``; an older projection is
re-projected from the log when its graph is opened):

* ``R`` claim id: the claim's immutable record, written once at the version the claim was
  decided (:func:`encode_record`; rewritten in place only by an erasure);
* ``K`` claim id: one row per status change, the value one byte (the status's token); the
  claim's ``since`` is the row's version, its record the ``R`` row. ``reader.claim`` joins
  them into the dict layout 1 stored whole at every status change;
* ``H`` edge: one row per change of the edge, a fixed sequence of fields
  (:func:`encode_history`);
* ``E``/``A`` edges and adjacency, ``S`` slots, ``C`` conflicts, ``Y`` the schema,
  ``B`` calibration: compact JSON with a fixed key order (:func:`dumps`).

The binary values (``R``, ``H``, ``K``) start with a tag byte (``R``/``H``: 1 = this layout,
0 = JSON follows) and use the string tokens described below, so a re-projection writes
identical bytes.
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
    "LAYOUT",
    "LAYOUT_KEY",
    "META",
    "RECORD",
    "RECORD_KEYS",
    "SCHEMA",
    "SLOT",
    "decode_history",
    "decode_record",
    "decode_status",
    "dumps",
    "encode_history",
    "encode_record",
    "encode_status",
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
RECORD = b"R"
LAYOUT = 2  # 1: claim rows held the whole record, history rows were JSON
LAYOUT_KEY = META + b"layout"  # value: u64_be(LAYOUT); absent in layout 1
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


# -- compact values (layout 2) ----------------------------------------------------------------
#
# Strings are tokens: ``varint(2*i)`` names string ``i`` of a table that starts with the
# frozen STATIC strings (index 0 is None) and grows by every literal string of the row, in
# order; ``varint(2*len+1) ‖ UTF-8`` is a literal. So a claim id repeated in a row (command
# id, claims, visible) costs its bytes once, and the names of statuses, kinds, reasons,
# states and command types cost one byte. Integers are ``i64_be``; ``confidence`` f64_be.

# Frozen with projection layout 2: changing this tuple changes the layout (bump LAYOUT).
STATIC: tuple[str | None, ...] = (
    None,
    # claim statuses, edge states, polarities
    "visible", "withheld", "lost", "superseded", "retired", "dismissed",
    "present", "absent", "unknown", "assert", "deny", "",
    # decision kinds
    "accepted", "conflicted", "quarantined", "rejected", "resolved",
    # command types
    "claim", "retract", "resolve", "publish_schema", "grant", "revoke", "tick",
    "read_blocked", "escalate", "invalid_input", "refused", "register_key", "revoke_key",
    "signed", "upgrade_rules", "erase", "place",
    # reasons
    "new", "corroborates", "supersedes", "older_than_current", "slot_conflict",
    "polarity_conflict", "joins_conflict", "stale_claim", "merge_pending", "merged",
    "outvoted", "merge_margin", "needs_human", "duplicate_command", "escalated", "retracted",
    "winner", "reject_all", "erased", "conflict_settled",
)  # fmt: skip
_STATIC_INDEX: dict[str | None, int] = {s: i for i, s in enumerate(STATIC)}
_NSTATIC = len(STATIC)
_VARINT1 = tuple(bytes([i]) for i in range(128))
_Q = struct.Struct(">q")
_D = struct.Struct(">d")
_NONE, _SOME = b"\x00", b"\x01"
HISTORY_V1, RECORD_V1, JSON_V0 = b"\x01", b"\x01", b"\x00"  # first byte of H and R values
RECORD_KEYS = (
    "claim_id", "agent", "task", "run_id", "edge_type", "subject_type", "subject_id",
    "object_type", "object_id", "polarity", "confidence", "evidence", "reasoning",
    "asserted_at", "based_on_version", "properties",
)  # fmt: skip
_RECORD_KEYS_ERASED = (*RECORD_KEYS, "erased")


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _VARINT1[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class _Out:
    """One row being encoded: its parts and its table of literal strings."""

    __slots__ = ("local", "parts")

    def __init__(self, tag: bytes) -> None:
        self.parts: list[bytes] = [tag]
        self.local: dict[str, int] = {}

    def s(self, value: str | None) -> None:
        i = _STATIC_INDEX.get(value)
        if i is None:
            assert value is not None
            i = self.local.get(value)
            if i is None:
                self.local[value] = _NSTATIC + len(self.local)
                b = value.encode("utf-8", "surrogatepass")
                self.parts.append(_varint(2 * len(b) + 1))
                self.parts.append(b)
                return
        self.parts.append(_varint(2 * i))

    def n(self, count: int) -> None:
        self.parts.append(_varint(count))

    def q(self, value: int) -> None:
        self.parts.append(_Q.pack(value))

    def opt_q(self, value: int | None) -> None:
        if value is None:
            self.parts.append(_NONE)
        else:
            self.parts.append(_SOME)
            self.parts.append(_Q.pack(value))

    def value(self) -> bytes:
        return b"".join(self.parts)


class _In:
    """One row being decoded (the mirror of :class:`_Out`)."""

    __slots__ = ("local", "pos", "raw")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self.pos = 1  # past the tag
        self.local: list[str] = []

    def n(self) -> int:
        raw, pos = self.raw, self.pos
        b = raw[pos]
        pos += 1
        if b < 0x80:
            self.pos = pos
            return b
        n, shift = b & 0x7F, 7
        while True:
            b = raw[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return n
            shift += 7

    def s(self) -> str | None:
        t = self.n()
        if t & 1:
            end = self.pos + (t >> 1)
            value = self.raw[self.pos : end].decode("utf-8", "surrogatepass")
            self.pos = end
            self.local.append(value)
            return value
        i = t >> 1
        return STATIC[i] if i < _NSTATIC else self.local[i - _NSTATIC]

    def text(self) -> str:
        value = self.s()
        if value is None:
            raise ValueError("a null where the row layout has a string")
        return value

    def q(self) -> int:
        value = int(_Q.unpack_from(self.raw, self.pos)[0])
        self.pos += 8
        return value

    def opt_q(self) -> int | None:
        flag = self.raw[self.pos]
        self.pos += 1
        return None if flag == 0 else self.q()

    def d(self) -> float:
        value = float(_D.unpack_from(self.raw, self.pos)[0])
        self.pos += 8
        return value

    def end(self) -> None:
        if self.pos != len(self.raw):
            raise ValueError(f"{len(self.raw) - self.pos} bytes left over in a row")


def encode_status(status: str) -> bytes:
    """A claim row (family ``K``): the status name's token; ``since`` is the key's version."""
    return _varint(2 * _STATIC_INDEX[status])


def decode_status(raw: bytes) -> str:
    if len(raw) != 1 or raw[0] & 1 or raw[0] >> 1 >= _NSTATIC or raw[0] == 0:
        raise ValueError(f"not a claim status row: {raw!r}")
    value = STATIC[raw[0] >> 1]
    assert value is not None
    return value


def encode_record(record: dict[str, Any]) -> bytes:
    """A claim's immutable record (family ``R``, written once at the claim's version;
    rewritten only by an erasure, which adds ``erased``). The claim id is the key's entity.
    A record of another shape (never the Avro claim record) is stored as JSON, tag 0."""
    keys = tuple(record)
    erased = record.get("erased") if keys == _RECORD_KEYS_ERASED else None
    r = record
    if (keys != RECORD_KEYS and erased is None) or not (
        type(r["confidence"]) is float
        and type(r["asserted_at"]) is int
        and (r["based_on_version"] is None or type(r["based_on_version"]) is int)
        and (erased is None or type(erased) is int)
        and type(r["properties"]) is dict
        and type(r["evidence"]) is list
    ):
        return JSON_V0 + dumps(record)
    o = _Out(RECORD_V1)
    s = o.s
    s(r["agent"])
    s(r["task"])
    s(r["run_id"])
    s(r["edge_type"])
    s(r["subject_type"])
    s(r["subject_id"])
    s(r["object_type"])
    s(r["object_id"])
    s(r["polarity"])
    o.parts.append(_D.pack(r["confidence"]))
    o.n(len(r["evidence"]))
    for e in r["evidence"]:
        s(e)
    s(r["reasoning"])
    o.q(r["asserted_at"])
    o.opt_q(r["based_on_version"])
    o.n(len(r["properties"]))
    for k, v in r["properties"].items():
        s(k)
        s(v)
    o.opt_q(erased)
    return o.value()


def decode_record(claim_id: str, raw: bytes) -> dict[str, Any]:
    if raw[:1] == JSON_V0:
        out: dict[str, Any] = loads(raw[1:])
        return out
    i = _In(raw)
    s = i.s
    r: dict[str, Any] = {
        "claim_id": claim_id,
        "agent": s(),
        "task": s(),
        "run_id": s(),
        "edge_type": s(),
        "subject_type": s(),
        "subject_id": s(),
        "object_type": s(),
        "object_id": s(),
        "polarity": s(),
        "confidence": i.d(),
    }
    r["evidence"] = [s() for _ in range(i.n())]
    r["reasoning"] = s()
    r["asserted_at"] = i.q()
    r["based_on_version"] = i.opt_q()
    props: dict[str, Any] = {}
    for _ in range(i.n()):
        k = i.text()
        props[k] = s()
    r["properties"] = props
    erased = i.opt_q()
    if erased is not None:
        r["erased"] = erased
    i.end()
    return r


def encode_history(
    kind: str,
    reason: str,
    command_id: str,
    command_type: str,
    agent: str,
    log_time: int,
    claims: list[tuple[str, str]],
    state: str,
    conflict_id: str | None,
    visible: list[str],
) -> bytes:
    """A history row (family ``H``): one change of an edge, its fields in this order."""
    o = _Out(HISTORY_V1)
    s = o.s
    s(kind)
    s(reason)
    s(command_id)
    s(command_type)
    s(agent)
    o.q(log_time)
    o.n(len(claims))
    for c, status in claims:
        s(c)
        s(status)
    s(state)
    s(conflict_id)
    o.n(len(visible))
    for c in visible:
        s(c)
    return o.value()


def decode_history(raw: bytes) -> dict[str, Any]:
    """A history row as the reader returns it (the keys of layout 1's JSON, in its order)."""
    i = _In(raw)
    s = i.s
    out: dict[str, Any] = {
        "kind": s(),
        "reason": s(),
        "command_id": s(),
        "command_type": s(),
        "agent": s(),
        "log_time": i.q(),
    }
    out["claims"] = [[s(), s()] for _ in range(i.n())]
    out["state"] = s()
    out["conflict_id"] = s()
    out["visible"] = [s() for _ in range(i.n())]
    i.end()
    return out
