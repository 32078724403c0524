"""The projector: fold decisions into the versioned RocksDB projection.

For each decision at version ``v`` it asks the shared fold (:meth:`GraphState.evolve`) what
changed and writes one new row per changed entity at ``v``, plus history rows, into a write
batch that also carries the applied offset — data and position land together, so a projector
killed at any point restarts exactly after the last batch it wrote. A new claim's record is
written once (``R``, with the status it was decided with); its later status changes write
one-byte ``K`` rows (layout 2, :mod:`claimgraph.projections.rows`). The store records its
row layout (``M layout``) when it is created; :attr:`ProjectionStore.outdated` tells a
writer to re-project an older one.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from rocksdict import Rdict, WriteBatch, WriteOptions

from claimgraph.core.model import Decision
from claimgraph.core.state import SEP, STATUS_NAMES, Changes, GraphState
from claimgraph.errors import StorageError
from claimgraph.logs.rocks import (
    PREFIX,
    Place,
    close_named,
    close_quietly,
    get,
    open_or_stand_in,
    open_rdict,
    open_secondary,
    write,
)
from claimgraph.projections import rows
from claimgraph.projections.damage import projection_place, projection_remedy
from claimgraph.projections.rows import (
    ADJ,
    CALIBRATION,
    CLAIM,
    CONFLICT,
    EDGE,
    LAYOUT,
    LAYOUT_KEY,
    META,
    RECORD,
    SCHEMA,
    SLOT,
    dumps,
    encode_history,
    encode_record,
    encode_status,
    entity_key,
    history_key,
)

__all__ = [
    "ProjectionStore",
    "Projector",
    "adjacency_entity",
    "check_layout",
    "conflict_row",
    "layout_of",
]

_STATUS = {code: encode_status(name) for code, name in STATUS_NAMES.items()}  # K row values

_U64 = struct.Struct(">Q")
_APPLIED = META + b"applied"
_GRAPH = META + b"graph"


def adjacency_entity(
    node_type: str, node_id: str, direction: str, edge_type: str, other_type: str, other_id: str
) -> str:
    return SEP.join((node_type, node_id, direction, edge_type, other_type, other_id))


def conflict_row(state: GraphState, conflict_id: str) -> dict[str, Any]:
    c = state.conflicts[conflict_id]
    return {
        "conflict_id": c.conflict_id,
        "edge_type": c.edge_type,
        "opened_at": c.opened_at,
        "closed_at": c.closed_at,
        "open": c.open,
        "outcome": c.outcome,
        "claims": list(c.claims),
        "members": list(c.members),
        "slots": list(c.slots),
        "blocked_reads": c.blocked_reads,
        "blocked_runs": list(c.blocked_runs),
        "opened_time": c.opened_time,
        "escalated_at": c.escalated_at,
        "escalation": c.escalation,
    }


def _marker(db: Rdict) -> int | None:
    v = get(db, LAYOUT_KEY, projection_place(db), "reading the row layout")
    return int(_U64.unpack(v)[0]) if v is not None else None


def layout_of(db: Rdict) -> int:
    """The row layout of a projection database (one without rows is of this code's layout)."""
    marker = _marker(db)
    if marker is not None:
        return marker
    return LAYOUT if ProjectionStore.applied_of(db) < 0 else 1


def check_layout(db: Rdict) -> None:
    """Raise :class:`StorageError` if ``db`` holds rows of another layout (reads misread them)."""
    layout = layout_of(db)
    if layout != LAYOUT:
        raise StorageError(
            f"the projection in {projection_place(db).path} has row layout {layout}; this "
            f"claimgraph reads layout {LAYOUT}. Open the graph with its writer (this "
            "claimgraph), which re-projects it from the log, or rebuild it"
        )


class ProjectionStore:
    """A projection database: versioned rows plus the applied offset."""

    def __init__(self, path: Path, *, create: bool = False, secondary: Path | None = None) -> None:
        self.path = path
        self._create = create
        self._remedy = projection_remedy(path)
        self.place = Place(str(path), self._remedy)
        # PREFIX: a damaged or cut-short WAL keeps its consistent prefix (rows and applied
        # offset travel in the same batches) and the lost tail is re-projected from the log
        # secondary: opened read-only beside the process that writes it (open_secondary)
        self.db: Rdict = (
            open_rdict(path, create=create, wal=PREFIX, remedy=self._remedy)
            if secondary is None
            else open_secondary(path, secondary, remedy=self._remedy)
        )
        self._wo = WriteOptions()
        self._wo.sync = False  # the logs are the durable truth; a lost tail is re-projected
        self.failed = False  # a write failed: reopen before the next one (see reopen)
        self._db_place: tuple[Rdict, Place] | None = None  # (handle, its place): head is hot
        if create and secondary is None and self.applied() < 0 and self._marker() is None:
            wb = WriteBatch(raw_mode=True)  # a new (or empty) store: rows of this layout
            wb.put(LAYOUT_KEY, _U64.pack(LAYOUT))
            self.write(wb)

    def _marker(self) -> int | None:
        return _marker(self.db)

    def layout(self) -> int:
        """The row layout of the projection's rows (:data:`rows.LAYOUT` is this code's; a
        store written before the layout was recorded is layout 1)."""
        return layout_of(self.db)

    @property
    def outdated(self) -> bool:
        """Rows of another layout: re-project the log (the reads of this code misread them)."""
        return self.layout() != LAYOUT

    def applied(self) -> int:
        db = self.db
        cached = self._db_place
        if cached is None or cached[0] is not db:  # a reopen: a new handle (or a stand-in)
            cached = self._db_place = (db, projection_place(db))
        v = get(db, _APPLIED, cached[1], "reading the applied version")
        return int(_U64.unpack(v)[0]) - 1 if v is not None else -1

    @staticmethod
    def applied_of(db: Rdict) -> int:
        """The last applied version recorded in a projection database (-1: none)."""
        v = get(db, _APPLIED, projection_place(db), "reading the applied version")
        return int(_U64.unpack(v)[0]) - 1 if v is not None else -1

    def write(self, wb: WriteBatch) -> None:
        try:
            write(self.db, wb, self._wo, self.place, "writing projected rows")
        except Exception:
            self.failed = True  # RocksDB refuses every later write until reopened
            raise

    def reopen(self) -> None:
        """Close and reopen the database (after a failed write RocksDB refuses later writes)."""
        close_quietly(self.db)
        self._db_place = None
        del self.db  # the last handle (readers must drop theirs first): the lock goes with it
        self.db = open_or_stand_in(self.path, create=self._create, wal=PREFIX, remedy=self._remedy)
        self.applied()  # raises if the reopen failed: the store stays failed
        self.failed = False

    def close(self) -> None:
        close_named(self.db, self.place, self.failed)


class Projector:
    """Writes the rows of each folded decision into a :class:`ProjectionStore`."""

    def __init__(
        self, store: ProjectionStore, state: GraphState, *, index_inputs: bool = False
    ) -> None:
        self.store = store
        self.index_inputs = index_inputs  # Kafka: map command offsets to decision versions
        self.state = state
        self._wb = WriteBatch(raw_mode=True)
        self._pending = 0
        # claim records (R rows) in the current batch, so an erase later in the batch can
        # scrub them too: claim id -> (key, record, its status when decided)
        self._staged_records: dict[str, tuple[bytes, dict[str, Any], str]] = {}
        self.erased: list[tuple[str, int]] = []  # (claim, version) erased, not yet scrubbed
        self.checkpoints: Path | None = None  # checkpoints to scrub of erased payloads

    @property
    def applied(self) -> int:
        return self.store.applied()

    def stage(self, version: int, d: Decision, ch: Changes) -> None:
        """Stage the rows for one decision (already folded into ``self.state``)."""
        wb = self._wb
        st = self.state
        new_id: str | None = None if ch.new_claim is None else ch.new_claim["claim_id"]
        first: int | None = None  # the new claim's status: in its record, not a K row
        for claim_id, status in ch.claims:
            if claim_id == new_id:
                first = status  # the last one, as the last put of a key would win
            else:
                wb.put(entity_key(CLAIM, claim_id, version), _STATUS[status])
        if new_id is not None:  # the record, once, with the status it was decided with
            if first is None:
                raise ValueError(f"new claim {new_id!r} was given no status by the fold")
            record: dict[str, Any] = dict(ch.new_claim)  # type: ignore[arg-type]
            rkey = entity_key(RECORD, new_id, version)
            wb.put(rkey, encode_record(record, STATUS_NAMES[first]))
            self._staged_records[new_id] = (rkey, record, STATUS_NAMES[first])
        for key in ch.edges:
            state, conflict, visible = st.edge_own(key)
            value = dumps([state, conflict, visible])
            wb.put(entity_key(EDGE, key, version), value)
            t, s_type, s_id, o_type, o_id = key.split(SEP)
            wb.put(
                entity_key(ADJ, adjacency_entity(s_type, s_id, "out", t, o_type, o_id), version),
                value,
            )
            wb.put(
                entity_key(ADJ, adjacency_entity(o_type, o_id, "in", t, s_type, s_id), version),
                value,
            )
            wb.put(history_key(key, version), _history_row(d, key, ch, st))
        for s in ch.slots:
            wb.put(entity_key(SLOT, s, version), dumps(st.slot_conflict.get(s)))
        for c in ch.conflicts:
            wb.put(entity_key(CONFLICT, c, version), dumps(conflict_row(st, c)))
        for k in ch.calibration:
            wb.put(entity_key(CALIBRATION, SEP.join(k), version), dumps(st.record[k]))
        if d["schema"] is not None:
            wb.put(entity_key(SCHEMA, "", version), dumps(dict(d["schema"])))
        if d["command_type"] == "erase" and d["kind"] == "accepted" and d["target"]:
            from claimgraph.projections.erasure import stage_erase

            stage_erase(self, d["target"], version)
        if self.index_inputs:
            wb.put(rows.input_key(d["input_offset"]), rows.pack_version(version))
        self._pending += 1
        wb.put(_APPLIED, _U64.pack(version + 1))

    def staged_natively(self, count: int, last_version: int) -> None:
        """``count`` decisions, the last at ``last_version``, had their rows put into this
        batch by the native core (:mod:`claimgraph.native.batch`), as :meth:`stage` of each
        would have: count them and stage the applied offset."""
        self._pending += count
        self._wb.put(_APPLIED, _U64.pack(last_version + 1))

    def flush(self) -> None:
        """Write the staged rows and the applied offset in one batch."""
        if self._pending or not self._wb.is_empty():
            self.store.write(self._wb)
            self._wb = WriteBatch(raw_mode=True)
            self._pending = 0
        self._staged_records = {}
        if self.erased:
            from claimgraph.projections.erasure import purge, scrub_dir

            purge(self.store.db, self.erased)
            if self.checkpoints is not None:
                scrub_dir(self.checkpoints, self.erased)
            self.erased = []

    def set_graph(self, graph: str) -> None:
        wb = WriteBatch(raw_mode=True)
        wb.put(_GRAPH, graph.encode())
        self.store.write(wb)


def _history_row(d: Decision, key: str, ch: Changes, st: GraphState) -> bytes:
    claims = st.claims
    touched = [(c, STATUS_NAMES[claims[c].status]) for c, _ in ch.claims if claims[c].edge == key]
    state, conflict, visible = st.edge_read(key)
    return encode_history(
        d["kind"],
        d["reason"],
        d["command_id"],
        d["command_type"],
        d["agent"],
        d["log_time"],
        touched,
        state,
        conflict,
        visible,
    )
