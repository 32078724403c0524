"""The projector: fold decisions into the versioned RocksDB projection.

For each decision at version ``v`` it asks the shared fold (:meth:`GraphState.evolve`) what
changed and writes one new row per changed entity at ``v``, plus history rows, into a write
batch that also carries the applied offset — data and position land together, so a projector
killed at any point restarts exactly after the last batch it wrote.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from rocksdict import Rdict, WriteBatch, WriteOptions

from claimgraph.core.model import Decision
from claimgraph.core.state import SEP, STATUS_NAMES, Changes, GraphState
from claimgraph.logs.rocks import (
    PREFIX,
    Place,
    close_quietly,
    get,
    open_or_stand_in,
    open_rdict,
    open_secondary,
    uncached,
    valid,
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
    META,
    SCHEMA,
    SLOT,
    dumps,
    entity_key,
    history_key,
)

__all__ = ["ProjectionStore", "Projector", "adjacency_entity", "claim_row", "conflict_row"]

_U64 = struct.Struct(">Q")
_APPLIED = META + b"applied"
_GRAPH = META + b"graph"


def adjacency_entity(
    node_type: str, node_id: str, direction: str, edge_type: str, other_type: str, other_id: str
) -> str:
    return SEP.join((node_type, node_id, direction, edge_type, other_type, other_id))


def claim_row(record: dict[str, Any], status: int, version: int) -> dict[str, Any]:
    row = dict(record)
    row["status"] = STATUS_NAMES[status]
    row["since"] = version
    return row


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
        self.db.close()


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
        self._claim_records: dict[str, dict[str, Any]] = {}
        # claim rows in the current batch, so an erase later in the batch can scrub them too:
        # (key, record, status, version), the row being claim_row(record, status, version)
        self._staged_claims: dict[str, list[tuple[bytes, dict[str, Any], int, int]]] = {}
        self.erased: list[tuple[str, int]] = []  # (claim, version) erased, not yet scrubbed
        self.checkpoints: Path | None = None  # checkpoints to scrub of erased payloads

    @property
    def applied(self) -> int:
        return self.store.applied()

    def stage(self, version: int, d: Decision, ch: Changes) -> None:
        """Stage the rows for one decision (already folded into ``self.state``)."""
        wb = self._wb
        st = self.state
        if ch.new_claim is not None:
            self._claim_records[ch.new_claim["claim_id"]] = dict(ch.new_claim)
        for claim_id, status in ch.claims:
            record = self._claim_records.get(claim_id)
            if record is None:
                record = self._load_claim(claim_id)
            ckey = entity_key(CLAIM, claim_id, version)
            wb.put(ckey, dumps(claim_row(record, status, version)))
            self._staged_claims.setdefault(claim_id, []).append((ckey, record, status, version))
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
            wb.put(history_key(key, version), dumps(_history_entry(d, key, ch, st)))
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

    def _load_claim(self, claim_id: str) -> dict[str, Any]:
        """A claim's record from its newest row (claims staged in this batch are cached)."""
        it = self.store.db.iter(uncached())
        prefix = CLAIM + claim_id.encode("utf-8") + b"\x00"
        it.seek(prefix)
        if not valid(it, self.store.place, f"reading claim {claim_id!r}") or (
            not it.key().startswith(prefix)
        ):
            raise KeyError(f"claim {claim_id!r} has no row in the projection")
        row = rows.loads(it.value())
        row.pop("status", None)
        row.pop("since", None)
        record: dict[str, Any] = row
        self._claim_records[claim_id] = record
        return record

    def flush(self) -> None:
        """Write the staged rows and the applied offset in one batch."""
        if self._pending or not self._wb.is_empty():
            self.store.write(self._wb)
            self._wb = WriteBatch(raw_mode=True)
            self._pending = 0
        self._staged_claims = {}
        if self.erased:
            from claimgraph.projections.erasure import purge, scrub_dir

            purge(self.store.db, self.erased)
            if self.checkpoints is not None:
                scrub_dir(self.checkpoints, self.erased)
            self.erased = []
        if len(self._claim_records) > 8192:  # bounded: older records are read back
            self._claim_records.clear()

    def set_graph(self, graph: str) -> None:
        wb = WriteBatch(raw_mode=True)
        wb.put(_GRAPH, graph.encode())
        self.store.write(wb)


def _history_entry(d: Decision, key: str, ch: Changes, st: GraphState) -> dict[str, Any]:
    touched = [c for c, _ in ch.claims if st.claims[c].edge == key]
    state, conflict, visible = st.edge_read(key)
    return {
        "kind": d["kind"],
        "reason": d["reason"],
        "command_id": d["command_id"],
        "command_type": d["command_type"],
        "agent": d["agent"],
        "log_time": d["log_time"],
        "claims": [[c, STATUS_NAMES[st.claims[c].status]] for c in touched],
        "state": state,
        "conflict_id": conflict,
        "visible": visible,
    }
