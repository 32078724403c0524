"""Reads of the versioned projection at any version: edge, slot, neighbors, history, quarantine.

Every read takes ``at`` (a version, i.e. a decisions-log offset) and sees exactly the
decisions with offset <= ``at``; a read below the projection's retention horizon raises
:class:`~claimgraph.errors.VersionPruned` (see :mod:`claimgraph.projections.retention`). Results are
tri-state: ``present``, ``absent`` or ``unknown`` (a quarantined edge or slot, with the id of
the conflict that holds it).
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from threading import get_ident
from typing import Any

from pydantic_core import from_json
from rocksdict import Rdict

from claimgraph.core.model import OnUnknown
from claimgraph.core.schema import GraphSchema, parse_schema
from claimgraph.core.state import SEP, edge_key, slot_keys
from claimgraph.errors import UnknownSlotError, VersionPruned
from claimgraph.logs.rocks import valid
from claimgraph.projections.damage import projection_place
from claimgraph.projections.iterators import track
from claimgraph.projections.projector import check_layout
from claimgraph.projections.retention import HORIZON_EPOCH, horizon_of
from claimgraph.projections.rows import (
    ADJ,
    CALIBRATION,
    CLAIM,
    CONFLICT,
    EDGE,
    HISTORY,
    RECORD,
    SCHEMA,
    SLOT,
    decode_history,
    decode_record,
    decode_status,
    inv,
    loads,
    version_of,
)

__all__ = ["EdgeView", "HistoryView", "NeighborView", "ProjectionReader", "SlotView"]

_INV, _MAX = struct.Struct(">Q"), (1 << 64) - 1  # rows.inv, inlined on the point-read path


@dataclass(frozen=True, slots=True)
class EdgeView:
    """An edge as of a version."""

    edge_type: str
    subject: tuple[str, str]
    object: tuple[str, str]
    state: str  # present | absent | unknown
    version: int
    conflict_id: str | None = None
    claims: tuple[str, ...] = ()
    fallback: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "edge_type": self.edge_type,
            "subject": list(self.subject),
            "object": list(self.object),
            "state": self.state,
            "version": self.version,
            "conflict_id": self.conflict_id,
            "claims": list(self.claims),
        } | ({"fallback": self.fallback} if self.fallback is not None else {})


@dataclass(frozen=True, slots=True)
class NeighborView:
    """One neighbour of a node as of a version."""

    edge_type: str
    direction: str  # out | in
    node: tuple[str, str]
    state: str
    conflict_id: str | None = None
    claims: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "edge_type": self.edge_type,
            "direction": self.direction,
            "node": list(self.node),
            "state": self.state,
            "conflict_id": self.conflict_id,
            "claims": list(self.claims),
        }


@dataclass(frozen=True, slots=True)
class SlotView:
    """An exclusive slot (edge type, node, side) as of a version."""

    edge_type: str
    node: tuple[str, str]
    direction: str
    state: str  # present (holds objects) | absent (empty) | unknown (quarantined)
    version: int
    conflict_id: str | None = None
    nodes: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    fallback: str | None = None  # unknown, in a fail-closed or default domain: act on this

    def as_dict(self) -> dict[str, Any]:
        return {
            "edge_type": self.edge_type,
            "node": list(self.node),
            "direction": self.direction,
            "state": self.state,
            "version": self.version,
            "conflict_id": self.conflict_id,
            "nodes": [list(n) for n in self.nodes],
        } | ({"fallback": self.fallback} if self.fallback is not None else {})


@dataclass(frozen=True, slots=True)
class HistoryView(Sequence[dict[str, Any]]):
    """An edge's history up to a version, oldest first, and where GC cut it.

    ``cut_below`` is the retention horizon when the edge had changes below it: those entries
    were compacted away, and this history is complete only from that version on. ``None``:
    nothing of this edge's history was cut. It reads like the list of its entries.
    """

    entries: tuple[dict[str, Any], ...]
    version: int
    cut_below: int | None = None

    @property
    def cut(self) -> bool:
        """Whether GC removed entries of this history (``cut_below`` says from where on)."""
        return self.cut_below is not None

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, i: Any) -> Any:
        return self.entries[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.entries)

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "history": list(self.entries), "cut_below": self.cut_below}

    def traced(self) -> Any:
        """What a run's trace digests: the entries, as before histories said where they
        were cut, and the cut too when there is one (so a replay after GC says it was cut)."""
        if self.cut_below is None:
            return list(self.entries)
        return {"history": list(self.entries), "cut_below": self.cut_below}


def _fallback(et: Any) -> str | None:
    """The value a fail-closed or default domain serves for an unknown slot, marked fallback."""
    if et is None or et.fallback.mode not in ("fail_closed", "default"):
        return None
    value: str | None = et.fallback.value
    return value


class ProjectionReader:
    """Read-only queries over a projection database (a primary or a secondary instance)."""

    def __init__(self, db: Rdict, *, cache_iterators: bool = False) -> None:
        check_layout(db)  # StorageError: rows of another layout would be misread
        self.db = db
        # (thread, use) -> (the database's sequence number, an iterator made at it); see
        # claimgraph.projections.iterators. None: a fresh iterator for every read.
        self._iters: dict[tuple[int, int], tuple[int, Any]] | None = None
        if cache_iterators:
            self._iters = {}
            track(self)
        self._place = projection_place(db)  # named in errors: a damaged block never ends a scan
        self._schemas: dict[int, GraphSchema] = {}
        # (versions of schema rows ascending, their schemas, known up to this version): one
        # tuple, replaced whole, so that threads serving reads never see half an update
        self._schema_cache: tuple[list[int], list[GraphSchema], int] = ([], [], -1)
        # (epoch, horizon): the retention horizon, re-read when retention's epoch moves
        self._horizon: tuple[int, int] = (-1, 0)

    # -- primitives ---------------------------------------------------------------------------

    def release(self) -> None:
        """Drop the cached iterators (they pin the database's files and keep it open)."""
        if self._iters is not None:
            self._iters.clear()

    def _iter(self, use: int) -> Any:
        """An iterator that sees every write so far: cached per thread and ``use`` (0: point
        reads, 1: the scan of neighbors), renewed when the sequence number moved."""
        iters = self._iters
        if iters is None:
            return self.db.iter()
        db = self.db
        seq = db.latest_sequence_number()
        key = (get_ident(), use)
        cached = iters.get(key)
        if cached is not None and cached[0] == seq:
            return cached[1]
        if cached is not None:  # the database changed: drop every thread's stale iterator,
            iters.clear()  # so idle threads do not pin old files
        it = db.iter()
        iters[key] = (seq, it)
        return it

    def _check(self, at: int) -> None:
        """Raise :class:`VersionPruned` if ``at`` is below the projection's horizon."""
        epoch, horizon = self._horizon
        if epoch != HORIZON_EPOCH[0]:
            epoch = HORIZON_EPOCH[0]  # first: a GC after this read bumps it again
            horizon = horizon_of(self.db)
            self._horizon = (epoch, horizon)
        if 0 <= at < horizon:
            raise VersionPruned(at, horizon)

    def _at(self, family: bytes, entity: str, at: int) -> bytes | None:
        row = self._row_at(family, entity, at)
        return row[1] if row is not None else None

    def _row_at(self, family: bytes, entity: str, at: int) -> tuple[int, bytes] | None:
        """(the version it was written at, the row) of ``entity`` as of ``at``."""
        if at < 0:
            return None
        prefix = family + entity.encode("utf-8") + b"\x00"
        it = self._iter(0)
        it.seek(prefix + _INV.pack(_MAX - at))
        if it.valid() or valid(it, self._place, "reading", at):
            k = it.key()
            if len(k) == len(prefix) + 8 and k.startswith(prefix):
                v: bytes = it.value()
                return _MAX - int(_INV.unpack_from(k, len(prefix))[0]), v
        return None

    def _scan_at(
        self, family: bytes, prefix: str, at: int, after: str | None = None, it: Any = None
    ) -> Iterator[tuple[str, bytes]]:
        """(entity, value as of ``at``) for every entity under ``prefix`` (after ``after``;
        with ``it``, an iterator no other read uses meanwhile; default a fresh one)."""
        if at < 0:
            return
        raw_prefix = family + prefix.encode("utf-8")
        target = inv(at)
        place = self._place
        it = self.db.iter() if it is None else it
        start = raw_prefix
        if after is not None:  # past every row of ``after``: its key is entity ‖ 0x00 ‖ version
            start = max(start, family + after.encode("utf-8") + b"\x01")
        it.seek(start)
        while it.valid() or valid(it, place, "scanning", at):
            k: bytes = it.key()
            if not k.startswith(raw_prefix):
                return
            ent = k[:-8]
            if k[-8:] < target:
                it.seek(ent + target)
                if not valid(it, place, "scanning", at):
                    return
                k = it.key()
                if k[:-8] != ent:
                    continue  # no row of this entity at or below ``at``; k is the next one
            yield ent[1:-1].decode("utf-8"), it.value()
            it.next()  # most entities have one or two rows: step before seeking past them
            if valid(it, place, "scanning", at) and it.key()[:-8] == ent:
                it.seek(ent[:-1] + b"\x01")

    def scan(
        self, family: bytes, at: int, *, after: str | None = None
    ) -> Iterator[tuple[str, bytes]]:
        """(entity, row as of ``at``) of every entity of ``family`` in key order, starting
        after the entity ``after``: the primitive that paging resumes from."""
        self._check(at)
        return self._scan_at(family, "", at, after)

    def schema(self, at: int) -> GraphSchema | None:
        """The schema in force at ``at`` (cached: reads must not re-parse it every time)."""
        cache = self._schema_cache
        if at > cache[2]:
            cache = self._load_schemas(at)
        versions, schemas, _ = cache
        i = bisect_right(versions, at) - 1
        return schemas[i] if i >= 0 else None

    def _load_schemas(self, at: int) -> tuple[list[int], list[GraphSchema], int]:
        prefix = SCHEMA + b"\x00"
        it = self.db.iter()
        it.seek(prefix)
        found: list[tuple[int, GraphSchema]] = []
        while valid(it, self._place, "reading the schemas", at):
            k = it.key()
            if not k.startswith(prefix):
                break
            v = version_of(k)
            if v <= at:
                row = loads(it.value())
                rev = int(row["revision"])
                parsed = self._schemas.get(rev)
                if parsed is None:
                    parsed = self._schemas[rev] = parse_schema(row["document"], row["source"])
                found.append((v, parsed))
            it.next()
        found.sort(key=lambda x: x[0])
        self._schema_cache = ([v for v, _ in found], [p for _, p in found], at)
        return self._schema_cache

    def schema_row(self, at: int) -> dict[str, Any] | None:
        self._check(at)
        raw = self._at(SCHEMA, "", at)
        return loads(raw) if raw is not None else None

    def _slot_conflict(self, slot: str, at: int) -> str | None:
        raw = self._at(SLOT, slot, at)
        if raw is None:
            return None
        c: str | None = from_json(raw)
        return c

    # -- queries ------------------------------------------------------------------------------

    def edge(
        self,
        edge_type: str,
        subject: tuple[str, str],
        obj: tuple[str, str],
        at: int,
        *,
        halt: bool = True,
    ) -> EdgeView:
        self._check(at)
        key = edge_key(edge_type, subject[0], subject[1], obj[0], obj[1])
        raw = self._at(EDGE, key, at)
        state, conflict, claims = ("absent", None, []) if raw is None else from_json(raw)
        schema = self.schema(at)
        et = schema.edge_types.get(edge_type) if schema else None
        if conflict is None:
            for s in slot_keys(et, key):
                conflict = self._slot_conflict(s, at)
                if conflict is not None:
                    state = "unknown"
                    break
        if state == "unknown" and halt and et is not None and et.on_unknown == OnUnknown.HALT:
            raise UnknownSlotError(f"edge {edge_type}({subject[1]} -> {obj[1]})", conflict or "")
        fallback = _fallback(et) if state == "unknown" else None
        return EdgeView(edge_type, subject, obj, state, at, conflict, tuple(claims), fallback)

    def slot(
        self,
        edge_type: str,
        node: tuple[str, str],
        at: int,
        direction: str = "out",
        *,
        halt: bool = True,
    ) -> SlotView:
        """The objects a subject holds (``out``) or the subjects holding an object (``in``)."""
        self._check(at)
        slot = SEP.join((edge_type, direction, node[0], node[1]))
        conflict = self._slot_conflict(slot, at)
        views = self.neighbors(node, at, edge_type=edge_type, direction=direction, halt=False)
        nodes = tuple(n.node for n in views if n.state == "present")
        schema = self.schema(at)
        et = schema.edge_types.get(edge_type) if schema else None
        exclusive = et is not None and (
            et.subject_exclusive if direction == "out" else et.object_exclusive
        )
        if conflict is None and exclusive:
            # one slot, one answer: an edge of an exclusive slot that reads unknown (a withheld
            # denial disputes its edge, not the slot's row) makes the slot unknown too, as its
            # edge read says — never a shorter "present" or "absent"
            conflict = next((n.conflict_id for n in views if n.state == "unknown"), None)
        if conflict is not None:
            if halt and et is not None and et.on_unknown == OnUnknown.HALT:
                raise UnknownSlotError(f"slot {edge_type}({node[1]}, {direction})", conflict)
            return SlotView(
                edge_type, node, direction, "unknown", at, conflict, nodes, _fallback(et)
            )
        return SlotView(
            edge_type, node, direction, "present" if nodes else "absent", at, None, nodes
        )

    def neighbors(
        self,
        node: tuple[str, str],
        at: int,
        *,
        edge_type: str | None = None,
        direction: str = "out",
        include_absent: bool = False,
        halt: bool = True,
    ) -> list[NeighborView]:
        if direction not in ("out", "in"):
            raise ValueError("direction must be 'out' or 'in'")
        self._check(at)
        prefix = SEP.join((node[0], node[1], direction)) + SEP
        if edge_type is not None:
            prefix += edge_type + SEP
        schema = self.schema(at)
        edge_types = schema.edge_types if schema else {}
        kinds: dict[str, tuple[Any, bool, bool]] = {}  # et -> (type, own slot?, other's?)
        own_slot: dict[str, str | None] = {}
        out: list[NeighborView] = []
        if at < 0:
            return out
        # the scan of _scan_at, inlined (the hot path of neighbors): one row per entity
        raw_prefix = ADJ + prefix.encode("utf-8")
        target = _INV.pack(_MAX - at)
        place = self._place
        it = self._iter(1)
        it.seek(raw_prefix)
        while it.valid() or valid(it, place, "scanning", at):
            k: bytes = it.key()
            if not k.startswith(raw_prefix):
                break
            ent = k[:-8]
            if k[-8:] < target:
                it.seek(ent + target)
                if not (it.valid() or valid(it, place, "scanning", at)):
                    break
                k = it.key()
                if k[:-8] != ent:
                    continue  # no row of this entity at or below ``at``; k is the next one
            raw = it.value()
            it.next()  # most entities have one or two rows: step before seeking past them
            if (it.valid() or valid(it, place, "scanning", at)) and it.key()[:-8] == ent:
                it.seek(ent[:-1] + b"\x01")
            _, _, _, et_name, o_type, o_id = ent[1:-1].decode("utf-8").split(SEP)
            state, conflict, claims = from_json(raw)
            kind = kinds.get(et_name)
            if kind is None:
                et = edge_types.get(et_name)
                sx = et is not None and et.subject_exclusive
                ox = et is not None and et.object_exclusive
                kind = kinds[et_name] = (et, sx, ox) if direction == "out" else (et, ox, sx)
            et, own_x, other_x = kind
            if conflict is None and et is not None:
                if own_x:
                    if et_name not in own_slot:
                        own_slot[et_name] = self._slot_conflict(
                            SEP.join((et_name, direction, node[0], node[1])), at
                        )
                    conflict = own_slot[et_name]
                if conflict is None and other_x:
                    other = "in" if direction == "out" else "out"
                    conflict = self._slot_conflict(SEP.join((et_name, other, o_type, o_id)), at)
                if conflict is not None:
                    state = "unknown"
            if state == "absent" and not include_absent:
                continue
            if state == "unknown" and halt and et is not None and et.on_unknown == OnUnknown.HALT:
                raise UnknownSlotError(f"neighbour {et_name}({o_id})", conflict or "")
            out.append(
                NeighborView(et_name, direction, (o_type, o_id), state, conflict, tuple(claims))
            )
        return out

    def history(
        self, edge_type: str, subject: tuple[str, str], obj: tuple[str, str], at: int
    ) -> list[dict[str, Any]]:
        """The edge's changes at versions in [horizon, ``at``], oldest first."""
        self._check(at)
        key = edge_key(edge_type, subject[0], subject[1], obj[0], obj[1])
        prefix = HISTORY + key.encode("utf-8") + b"\x00"
        it = self.db.iter()
        it.seek(prefix + horizon_of(self.db).to_bytes(8, "big"))
        out: list[dict[str, Any]] = []
        while valid(it, self._place, "reading history", at):
            k = it.key()
            if not k.startswith(prefix):
                break
            v = int.from_bytes(k[-8:], "big")
            if v > at:
                break
            entry = decode_history(it.value())
            entry["version"] = v
            out.append(entry)
            it.next()
        return out

    def history_cut(
        self, edge_type: str, subject: tuple[str, str], obj: tuple[str, str]
    ) -> int | None:
        """The retention horizon when the edge changed below it (its history there was
        compacted away by GC), else None. Every history entry is written with the edge's row,
        and GC keeps each row's newest version below the horizon: a row below the horizon
        means history below it existed and is gone."""
        horizon = horizon_of(self.db)
        if horizon <= 0:
            return None
        key = edge_key(edge_type, subject[0], subject[1], obj[0], obj[1])
        return horizon if self._row_at(EDGE, key, horizon - 1) is not None else None

    def claim(self, claim_id: str, at: int) -> dict[str, Any] | None:
        """The claim as of ``at``: its record, ``status`` and ``since`` (and ``erased``)."""
        self._check(at)
        record = self._row_at(RECORD, claim_id, at)
        if record is None:
            return None
        out, status = decode_record(claim_id, record[1])
        since = record[0]
        changed = self._row_at(CLAIM, claim_id, at)  # a status change after the decision
        if changed is not None:
            since, status = changed[0], decode_status(changed[1])
        erased = out.pop("erased", None)
        out["status"] = status
        out["since"] = since
        if erased is not None:
            out["erased"] = erased
        return out

    def conflict(self, conflict_id: str, at: int) -> dict[str, Any] | None:
        self._check(at)
        raw = self._at(CONFLICT, conflict_id, at)
        return loads(raw) if raw is not None else None

    def quarantine(self, at: int, *, include_closed: bool = False) -> list[dict[str, Any]]:
        self._check(at)
        out = []
        for _, raw in self._scan_at(CONFLICT, "", at):
            row = loads(raw)
            if row["open"] or include_closed:
                out.append(row)
        return out

    def edges(self, at: int, *, limit: int = 1000, include_absent: bool = False) -> list[EdgeView]:
        """Edges as of ``at`` in key order, at most ``limit`` (present and unknown by default)."""
        out: list[EdgeView] = []
        for ent, _ in self._scan_at(EDGE, "", at):
            et, st, si, ot, oi = ent.split(SEP)
            view = self.edge(et, (st, si), (ot, oi), at, halt=False)
            if view.state != "absent" or include_absent:
                out.append(view)
                if len(out) >= limit:
                    break
        return out

    def calibration(self, edge_type: str, at: int) -> dict[str, tuple[int, int]]:
        """agent → (wins, losses) in resolved conflicts of ``edge_type``, as of ``at``."""
        out: dict[str, tuple[int, int]] = {}
        for ent, raw in self._scan_at(CALIBRATION, edge_type + SEP, at):
            wins, losses = loads(raw)
            out[ent.split(SEP, 1)[1]] = (int(wins), int(losses))
        return out

    def rows_at(self, at: int) -> Iterator[tuple[bytes, bytes]]:
        """Every entity's row as of ``at`` (for digests), in key order.

        A claim's record (``R``) carries its status when decided; a later status change
        (``K``) is its status followed by ``u64_be(since)``, the version it was written at
        (layout 2 keeps ``since`` in the key only)."""
        self._check(at)
        for family in (ADJ, CALIBRATION, CONFLICT, EDGE, CLAIM, RECORD, SLOT, SCHEMA):
            if family == CLAIM:
                for ent, raw, since in self._scan_versions(family, at):
                    yield family + ent.encode("utf-8"), raw + _INV.pack(since)
                continue
            for ent, raw in self._scan_at(family, "", at):
                yield family + ent.encode("utf-8"), raw

    def _scan_versions(self, family: bytes, at: int) -> Iterator[tuple[str, bytes, int]]:
        """(entity, row, the version it was written at) as of ``at``, in key order."""
        for ent, raw in self._scan_at(family, "", at):
            row = self._row_at(family, ent, at)
            assert row is not None and row[1] == raw
            yield ent, raw, row[0]
