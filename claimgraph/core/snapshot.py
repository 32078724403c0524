"""The folded state as canonical bytes: one versioned, checksummed encoding (pure, no I/O).

A checkpoint (and a Kafka governor's snapshot) saves the :class:`GraphState` the fold built, so
a restart folds only the log's tail. The bytes are::

    b"CGSTATE\\n" ‖ u32_be(CODEC) ‖ u32_be(STATE_FORMAT) ‖ sha256(body) ‖ u64_be(len(body)) ‖ body

where ``body`` is compact JSON of one array with a fixed layout (below). Loading parses JSON and
calls our constructors: no code named by the data is ever run (unlike pickle). A wrong magic,
codec, state format, length or checksum is a :class:`~claimgraph.errors.DecodeError`, never a
state. The encoding is canonical: the same state always gives the same bytes, so
:func:`state_digest` identifies a state (tests compare a resumed fold with a full one by it,
and a future native core can be checked against the Python one the same way).

Mappings are written in the fold's own insertion order, not sorted: the order is part of the
state (open conflicts are visited in opening order, grants in grant order) and a loaded state
must iterate exactly as the folded one, or a resumed governor could decide differently. The
only unordered collection, ``other_commands`` (a set), is written sorted. Edge keys, which
claims and edges share, are written once in a string table and referred to by index.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic_core import from_json, to_json

from claimgraph.core.entities import (
    ClaimState,
    ConflictState,
    EdgeState,
    GrantState,
    KeyState,
    shared_float,
)
from claimgraph.core.model import GrantRecord
from claimgraph.core.schema import Pattern, parse_schema
from claimgraph.core.state import STATE_FORMAT, GraphState
from claimgraph.errors import DecodeError

__all__ = ["CODEC", "MAGIC", "decode_state", "encode_state", "state_digest"]

MAGIC = b"CGSTATE\n"
CODEC = 1  # the layout below; bump it with any change to it
_HEAD = struct.Struct(">8sII32sQ")

# Every attribute of a GraphState, so that a field added to the fold without a place in the
# encoding fails loudly (``_sides`` is a cache rebuilt on demand, never saved).
_FIELDS = frozenset(
    {
        "graph", "schema", "schema_rev", "claims", "edges", "slot_holder", "slot_conflict",
        "slot_changed", "conflicts", "grants", "open_conflicts", "votes", "record", "keys",
        "keys_active", "other_commands", "_sides", "head", "offsets", "last_log_time",
        "decisions", "rules", "chain", "placed",
    }
)  # fmt: skip


# ... and of the objects inside it, in the order the layout writes them
_SHAPES: dict[type, tuple[str, ...]] = {
    ClaimState: ("agent", "asserts", "based", "conf", "conflict", "edge", "status", "ts"),
    EdgeState: ("changed", "visible", "withheld"),
    ConflictState: (
        "conflict_id", "edge_type", "opened_at", "claims", "slots", "closed_at", "outcome",
        "members", "blocked_reads", "opened_time", "blocked_runs", "escalated_at", "escalation",
        "readers",
    ),
    GrantState: ("record", "revoked"),
    KeyState: ("key_id", "key_agent", "public", "revoked"),
}  # fmt: skip


def _check_shapes(st: GraphState) -> None:
    names = set(vars(st))
    if names != _FIELDS:
        raise TypeError(f"GraphState fields changed: {sorted(names ^ _FIELDS)}: update the codec")
    for cls, shape in _SHAPES.items():
        fields = getattr(cls, "__dataclass_fields__", None)
        have = tuple(fields) if fields is not None else tuple(getattr(cls, "__slots__", ()))
        if have != shape:
            raise TypeError(f"{cls.__name__} fields changed to {have}: update the codec")


def _body(st: GraphState) -> list[Any]:
    _check_shapes(st)
    table: dict[str, int] = {}  # edge key → index, in first-use order

    def ref(key: str) -> int:
        i = table.get(key)
        if i is None:
            i = table[key] = len(table)
        return i

    claims = [
        [cid, ref(c.edge), c.agent, c.asserts, c.ts, c.status, c.conflict, c.conf, c.based]
        for cid, c in st.claims.items()
    ]
    edges = [[ref(k), list(e.visible), list(e.withheld), e.changed] for k, e in st.edges.items()]
    conflicts = [
        [
            c.conflict_id, c.edge_type, c.opened_at, c.claims, c.slots, c.closed_at, c.outcome,
            c.members, c.blocked_reads, c.opened_time, c.blocked_runs, c.escalated_at,
            c.escalation, sorted(c.readers),
        ]
        for c in st.conflicts.values()
    ]  # fmt: skip
    grants = [
        [
            g.record["grant_id"], g.record["grantee_agent"], g.record["grantee_task"],
            g.record["edge_type"], g.record["expires_at"], g.revoked,
        ]
        for g in st.grants.values()
    ]  # fmt: skip
    keys = [
        [k.key_id, k.key_agent.text, k.public.public_bytes_raw().hex(), k.revoked]
        for k in st.keys.values()
    ]
    schema = None if st.schema is None else [st.schema.source, st.schema.document]
    return [
        st.graph,
        st.head,
        st.decisions,
        st.last_log_time,
        st.schema_rev,
        schema,
        st.offsets,
        list(table),
        claims,
        edges,
        list(st.slot_holder.items()),
        list(st.slot_conflict.items()),
        list(st.slot_changed.items()),
        conflicts,
        grants,
        list(st.open_conflicts),
        [[group, list(agents.items())] for group, agents in st.votes.items()],
        [[t, a, wins, losses] for (t, a), (wins, losses) in st.record.items()],
        keys,
        st.keys_active,
        sorted(st.other_commands),
        st.rules,
        st.chain.hex(),
        st.placed,
    ]


def encode_state(state: GraphState) -> bytes:
    """The canonical bytes of ``state`` (see the module docstring)."""
    body: bytes = to_json(_body(state))
    head = _HEAD.pack(MAGIC, CODEC, STATE_FORMAT, hashlib.sha256(body).digest(), len(body))
    return head + body


def state_digest(state: GraphState) -> str:
    """SHA-256 of the canonical encoding: equal digests, equal states."""
    return hashlib.sha256(encode_state(state)).hexdigest()


def decode_state(data: bytes) -> GraphState:
    """A GraphState from :func:`encode_state` bytes; anything else raises DecodeError."""
    if len(data) < _HEAD.size:
        raise DecodeError("state_truncated", f"{len(data)} bytes is shorter than the header")
    magic, codec, fmt, digest, size = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise DecodeError("state_magic", "not a claimgraph state (bad magic)")
    if codec != CODEC or fmt != STATE_FORMAT:
        raise DecodeError(
            "state_version",
            f"codec {codec}, state format {fmt}; this claimgraph reads codec {CODEC}, "
            f"state format {STATE_FORMAT}",
        )
    body = data[_HEAD.size :]
    if len(body) != size:
        raise DecodeError("state_truncated", f"body is {len(body)} bytes, the header says {size}")
    if hashlib.sha256(body).digest() != digest:
        raise DecodeError("state_checksum", "the state's SHA-256 does not match its header")
    try:
        return _build(from_json(body, cache_strings=False))
    except (ValueError, TypeError, KeyError, IndexError) as exc:  # a checksummed bad body: a bug
        raise DecodeError("state_layout", f"{type(exc).__name__}: {exc}") from None


def _build(b: list[Any]) -> GraphState:
    (
        graph, head, decisions, last_log_time, schema_rev, schema, offsets, table, claims,
        edges, slot_holder, slot_conflict, slot_changed, conflicts, grants, open_conflicts,
        votes, record, keys, keys_active, other_commands, rules, chain, placed,
    ) = b  # fmt: skip
    intern = sys.intern
    st = GraphState(graph)
    st.head, st.decisions, st.last_log_time = head, decisions, last_log_time
    st.schema_rev = schema_rev
    if schema is not None:
        st.schema = parse_schema(schema[1], schema[0])
    st.offsets = offsets
    table = [intern(k) for k in table]
    out_claims = st.claims
    for cid, edge, agent, asserts, ts, status, conflict, conf, based in claims:
        out_claims[cid] = ClaimState(
            table[edge], intern(agent), asserts, ts, status, conflict, shared_float(conf), based
        )
    for edge, visible, withheld, changed in edges:
        es = EdgeState()
        es.visible, es.withheld, es.changed = tuple(visible), tuple(withheld), changed
        st.edges[table[edge]] = es
    st.slot_holder = {s: intern(k) for s, k in slot_holder}
    st.slot_conflict = dict(slot_conflict)
    st.slot_changed = dict(slot_changed)
    for c in conflicts:
        (cid, et, opened_at, cl, slots, closed_at, outcome, members, blocked_reads,
         opened_time, blocked_runs, escalated_at, escalation, readers) = c  # fmt: skip
        st.conflicts[cid] = ConflictState(
            cid, et, opened_at, cl, slots, closed_at, outcome, members, blocked_reads,
            opened_time, blocked_runs, escalated_at, escalation, set(readers),
        )  # fmt: skip
    for gid, agent, task, et, expires_at, revoked in grants:
        rec: GrantRecord = {
            "grant_id": gid,
            "grantee_agent": agent,
            "grantee_task": task,
            "edge_type": et,
            "expires_at": expires_at,
        }
        st.grants[gid] = GrantState(rec, revoked)
    st.open_conflicts = dict.fromkeys(open_conflicts)
    st.votes = {group: dict(agents) for group, agents in votes}
    st.record = {(t, a): [wins, losses] for t, a, wins, losses in record}
    for key_id, agent, public, revoked in keys:
        st.keys[key_id] = KeyState(
            key_id,
            Pattern.of(agent),
            Ed25519PublicKey.from_public_bytes(bytes.fromhex(public)),
            revoked,
        )
    st.keys_active = keys_active
    st.other_commands = set(other_commands)
    st.rules = rules
    st.chain = bytes.fromhex(chain)
    st.placed = placed
    return st
