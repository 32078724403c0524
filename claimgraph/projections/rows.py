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

* ``R`` claim id: the claim's immutable record and the status it was decided with, written
  once at the version the claim was decided (:func:`encode_record`; rewritten in place only
  by an erasure);
* ``K`` claim id: one row per later status change, the value one byte (the status's token);
  ``since`` is the row's version. ``reader.claim`` joins the ``R`` row with the newest ``K``
  row as of the read (if any) into the dict layout 1 stored whole at every status change;
* ``H`` edge: one row per change of the edge, a fixed sequence of fields
  (:func:`encode_history`);
* ``E``/``A`` edges and adjacency, ``S`` slots, ``C`` conflicts, ``Y`` the schema,
  ``B`` calibration: compact JSON with a fixed key order (:func:`dumps`).

The binary values (``R``, ``H``) start with a tag byte (1 = this layout; ``R``: 0 = JSON
follows) and use the string tokens described below, so a re-projection writes identical
bytes. docs/storage.md describes every field.
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
# A binary value is a tag byte, a fixed header of numbers, then its strings, in a fixed order.
# Strings are tokens: ``varint(2*i)`` names string ``i`` of a table that starts with the
# frozen STATIC strings (index 0 is None) and grows by every literal string of the row, in
# order; ``varint(2*len+1) ‖ UTF-8`` is a literal. So a claim id repeated in a row (command
# id, claims, visible) costs its bytes once, and the names of statuses, kinds, reasons,
# states and command types cost one byte. Integers are ``i64_be``, ``confidence`` f64_be,
# counts varints. (Strings last, numbers first: one loop encodes or decodes all strings.)

# Frozen with projection layout 2: changing this tuple changes the layout (bump LAYOUT).
# native/src/rows.rs's static_index is generated from it (tests/test_compact_rows.py).
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
_RECORD_HEAD = struct.Struct(">BBBdq")  # tag, status token, flags, confidence, asserted_at
HISTORY_V1, RECORD_V1, JSON_V0 = 1, 1, 0  # first byte of H and R values
_BASED, _ERASED = 1, 2  # flags of a record: based_on_version, erased follow (i64_be each)
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


def _put_strings(parts: list[bytes], values: list[Any]) -> None:
    """Append the tokens of ``values`` (str or None) to ``parts``."""
    local: dict[str, int] = {}
    static = _STATIC_INDEX.get
    small = _VARINT1
    put = parts.append
    for v in values:
        i = static(v)
        if i is None:
            i = local.get(v)
            if i is None:
                local[v] = _NSTATIC + len(local)
                b = v.encode("utf-8", "surrogatepass")
                n = 2 * len(b) + 1
                put(small[n] if n < 0x80 else _varint(n))
                put(b)
                continue
        n = 2 * i
        put(small[n] if n < 0x80 else _varint(n))


def _varint_at(raw: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = raw[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7


def _get_strings(raw: bytes, pos: int, count: int) -> list[Any]:
    """``count`` strings from ``pos``, which must end the value."""
    out: list[Any] = []
    local: list[str] = []
    put, keep = out.append, local.append
    static, nstatic = STATIC, _NSTATIC
    for _ in range(count):
        t = raw[pos]
        pos += 1
        if t >= 0x80:
            t, pos = _varint_at(raw, pos - 1)
        if t & 1:
            end = pos + (t >> 1)
            s = raw[pos:end].decode("utf-8", "surrogatepass")
            pos = end
            keep(s)
            put(s)
        else:
            i = t >> 1
            put(static[i] if i < nstatic else local[i - nstatic])
    if pos != len(raw):
        raise ValueError(f"{len(raw) - pos} bytes left over in a row")
    return out


def encode_status(status: str) -> bytes:
    """A claim row (family ``K``): the status name's token; ``since`` is the key's version."""
    return _VARINT1[2 * _STATIC_INDEX[status]]


def decode_status(raw: bytes) -> str:
    if len(raw) != 1 or raw[0] & 1 or raw[0] == 0 or raw[0] >> 1 >= _NSTATIC:
        raise ValueError(f"not a claim status row: {raw!r}")
    value = STATIC[raw[0] >> 1]
    assert value is not None
    return value


def encode_record(record: dict[str, Any], status: str) -> bytes:
    """A claim's record and its status when it was decided (family ``R``, written once at
    that version; rewritten only by an erasure, which adds ``erased``). The claim id is the
    key's entity. A record of another shape (never the Avro claim record) is stored as
    ``0x00 ‖ status token ‖ JSON``."""
    token = 2 * _STATIC_INDEX[status]
    keys = tuple(record)
    r = record
    erased = r.get("erased") if keys == _RECORD_KEYS_ERASED else None
    based = r["based_on_version"] if keys == RECORD_KEYS or erased is not None else None
    if (keys != RECORD_KEYS and erased is None) or not (
        type(r["confidence"]) is float
        and type(r["asserted_at"]) is int
        and (based is None or type(based) is int)
        and (erased is None or type(erased) is int)
        and type(r["properties"]) is dict
        and type(r["evidence"]) is list
    ):
        return bytes((JSON_V0, token)) + dumps(record)
    flags = (0 if based is None else _BASED) | (0 if erased is None else _ERASED)
    evidence: list[Any] = r["evidence"]
    props: dict[Any, Any] = r["properties"]
    parts = [_RECORD_HEAD.pack(RECORD_V1, token, flags, r["confidence"], r["asserted_at"])]
    if based is not None:
        parts.append(_Q.pack(based))
    if erased is not None:
        parts.append(_Q.pack(erased))
    parts.append(_varint(len(evidence)))
    parts.append(_varint(len(props)))
    values = [r["agent"], r["task"], r["run_id"], r["edge_type"], r["subject_type"],
              r["subject_id"], r["object_type"], r["object_id"], r["polarity"], r["reasoning"],
              *evidence]  # fmt: skip
    for kv in props.items():
        values += kv
    _put_strings(parts, values)
    return b"".join(parts)


def decode_record(claim_id: str, raw: bytes) -> tuple[dict[str, Any], str]:
    """(the record, with ``erased`` last if it was erased; its status when decided)."""
    status = decode_status(raw[1:2])
    if raw[0] == JSON_V0:
        out: dict[str, Any] = loads(raw[2:])
        return out, status
    if raw[0] != RECORD_V1:
        raise ValueError(f"not a claim record of layout 2 (tag {raw[0]})")
    _, _, flags, confidence, asserted_at = _RECORD_HEAD.unpack_from(raw)
    pos = _RECORD_HEAD.size
    based = erased = None
    if flags & _BASED:
        based = _Q.unpack_from(raw, pos)[0]
        pos += 8
    if flags & _ERASED:
        erased = _Q.unpack_from(raw, pos)[0]
        pos += 8
    n_ev, pos = _varint_at(raw, pos)
    n_props, pos = _varint_at(raw, pos)
    s = _get_strings(raw, pos, 10 + n_ev + 2 * n_props)
    props = s[10 + n_ev :]
    r: dict[str, Any] = {
        "claim_id": claim_id,
        "agent": s[0],
        "task": s[1],
        "run_id": s[2],
        "edge_type": s[3],
        "subject_type": s[4],
        "subject_id": s[5],
        "object_type": s[6],
        "object_id": s[7],
        "polarity": s[8],
        "confidence": confidence,
        "evidence": s[10 : 10 + n_ev],
        "reasoning": s[9],
        "asserted_at": asserted_at,
        "based_on_version": based,
        "properties": dict(zip(props[::2], props[1::2], strict=True)),
    }
    if erased is not None:
        r["erased"] = erased
    return r, status


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
    """A history row (family ``H``): ``0x01 ‖ i64_be(log_time) ‖ varint(len(claims)) ‖
    varint(len(visible))``, then the strings kind, reason, command_id, command_type, agent,
    each claim's id and status, state, conflict_id, the visible claims."""
    parts = [bytes((HISTORY_V1,)), _Q.pack(log_time), _varint(len(claims)), _varint(len(visible))]
    values: list[Any] = [kind, reason, command_id, command_type, agent]
    for c in claims:
        values += c
    values.append(state)
    values.append(conflict_id)
    values += visible
    _put_strings(parts, values)
    return b"".join(parts)


def decode_history(raw: bytes) -> dict[str, Any]:
    """A history row as the reader returns it (the keys of layout 1's JSON, in its order)."""
    if raw[0] != HISTORY_V1:
        raise ValueError(f"not a history row of layout 2 (tag {raw[0]})")
    log_time = _Q.unpack_from(raw, 1)[0]
    n_claims, pos = _varint_at(raw, 9)
    n_visible, pos = _varint_at(raw, pos)
    s = _get_strings(raw, pos, 7 + 2 * n_claims + n_visible)
    c = 5 + 2 * n_claims
    return {
        "kind": s[0],
        "reason": s[1],
        "command_id": s[2],
        "command_type": s[3],
        "agent": s[4],
        "log_time": log_time,
        "claims": [[s[i], s[i + 1]] for i in range(5, c, 2)],
        "state": s[c],
        "conflict_id": s[c + 1],
        "visible": s[c + 2 :],
    }
