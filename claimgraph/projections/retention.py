"""Retention by version: the horizon, pins of live runs, and GC of a projection.

Theory of operation
-------------------
A projection keeps one row per entity per version at which the entity changed (see
:mod:`claimgraph.projections.rows`). A read *at V* sees, for each entity, its newest row with
version <= V. So for a **horizon** H, the rows any read at V >= H can see are:

* every row with version >= H, and
* for each entity, its newest row with version < H (what it looked like at H).

:func:`collect` deletes every other row (and the history and input-index rows below H), then
compacts the database so the space is really returned. Reads at V >= H are unchanged, byte for
byte; a read at V < H raises :class:`~claimgraph.errors.VersionPruned` naming the horizon
(the reader checks the horizon row on every read), never a silently wrong answer. Edge
``history`` keeps the entries at versions >= H. The decisions log is never touched: a
re-projection rebuilds every version.

The horizon row is written (and synced) *before* the first delete, so a reader that can see a
missing row can also see the horizon that explains it. The horizon never moves back.

**Pins.** A run pins the version it reads at (:mod:`claimgraph.projections.pins`): GC never
moves the horizon past the oldest live pin, and a pin below the current horizon is refused.

**Age.** A horizon given as an age (``keep_age``) is translated to a version through the log's
append times: the first version whose decision was appended at or after ``now - age``.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rocksdict import Rdict, WriteBatch, WriteOptions

from claimgraph.core.model import Progress
from claimgraph.errors import ConfigError
from claimgraph.logs.rocks import estimated_keys, get, named, valid, write
from claimgraph.projections.damage import projection_place
from claimgraph.projections.iterators import release_iterators
from claimgraph.projections.pins import Pin, PinRegistry
from claimgraph.projections.rows import HISTORY, INPUT, META, unpack_version

if TYPE_CHECKING:
    from claimgraph.service.graph import Graph

__all__ = [
    "HORIZON_EPOCH",
    "HORIZON_KEY",
    "GcReport",
    "Pin",
    "PinRegistry",
    "catch_up",
    "collect",
    "gc_graph",
    "gc_projection",
    "horizon_changed",
    "horizon_of",
    "parse_age",
    "resolve_horizon",
    "version_at_time",
]

HORIZON_KEY = META + b"horizon"
_U64 = struct.Struct(">Q")
_MAX = (1 << 64) - 1
_MVCC = frozenset(b"AEKRCSYXB")  # entity ‖ 0x00 ‖ inv(version) (R: claim records, X: erasure)


def horizon_of(db: Rdict) -> int:
    """The horizon recorded in a projection database (0: nothing was ever pruned)."""
    v = get(db, HORIZON_KEY, projection_place(db), "reading the retention horizon")
    return int(_U64.unpack(v)[0]) if v is not None else 0


# Readers cache the horizon (a RocksDB get per read cost ~2 µs, a fifth of a point read).
# A horizon can only change under a reader in this process in two ways: a GC in this
# process (the primary has one writer), or a secondary catching up with its primary. Both
# bump this epoch, and a reader re-reads the horizon when the epoch moved.
HORIZON_EPOCH = [0]


def horizon_changed() -> None:
    """Invalidate every reader's cached horizon in this process."""
    HORIZON_EPOCH[0] += 1


def catch_up(db: Rdict) -> None:
    """``try_catch_up_with_primary`` on a secondary; the primary may have moved its horizon."""
    db.try_catch_up_with_primary()
    horizon_changed()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_age(text: str) -> int:
    """``90s``, ``15m``, ``12h``, ``30d``, ``2w`` → milliseconds."""
    from claimgraph.core.schema import duration_ms

    ms = duration_ms(text)
    if ms is None:
        raise ConfigError(f"{text!r} is not an age: expected a number and s, m, h, d or w (30d)")
    return ms


# -- GC ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GcReport:
    """What one GC did."""

    requested: int
    horizon: int
    previous: int
    held_by: Pin | None
    scanned: int
    deleted: int
    kept: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__slots__}
        d["held_by"] = self.held_by.as_dict() if self.held_by else None
        return d


def _row_version(key: bytes) -> int:
    return _MAX - int(_U64.unpack_from(key, len(key) - 8)[0])


def collect(
    db: Rdict,
    horizon: int,
    *,
    progress: Progress | None = None,
    batch: int = 20_000,
    compact: bool = True,
) -> tuple[int, int, int]:
    """Prune ``db`` to ``horizon``: returns (rows scanned, rows deleted, rows kept).

    The caller is the database's only writer and has checked ``horizon`` <= applied. Memory
    is bounded by ``batch``: the scan streams and the deletes go out in batches.
    """
    if horizon <= 0:
        return 0, 0, 0
    place = projection_place(db)
    wo = WriteOptions()
    wo.sync = True
    if horizon > horizon_of(db):  # first, so a reader that misses a row sees why
        first = WriteBatch(raw_mode=True)
        first.put(HORIZON_KEY, _U64.pack(horizon))
        write(db, first, wo, place, "recording the retention horizon")
        horizon_changed()  # before any row goes
    wo_fast = WriteOptions()
    wo_fast.sync = False
    total = estimated_keys(db)
    scanned = deleted = 0
    wb = WriteBatch(raw_mode=True)
    pending = 0
    it = db.iter()  # an implicit snapshot: our own deletes do not disturb the scan
    it.seek_to_first()
    entity = b""
    below_seen = False  # the entity's newest row below the horizon was already kept
    while valid(it, place, "collecting garbage below the horizon", horizon):
        k: bytes = it.key()
        scanned += 1
        fam = k[0]
        drop = False
        if fam in _MVCC:
            ent = k[:-8]
            if ent != entity:
                entity, below_seen = ent, False
            if _row_version(k) < horizon:
                if below_seen:
                    drop = True
                else:
                    below_seen = True
        elif k[:1] == HISTORY:
            drop = int(_U64.unpack_from(k, len(k) - 8)[0]) < horizon
        elif k[:1] == INPUT:
            drop = unpack_version(it.value()) < horizon
        if drop:
            wb.delete(k)
            deleted += 1
            pending += 1
            if pending >= batch:
                write(db, wb, wo_fast, place, "deleting rows below the horizon")
                wb = WriteBatch(raw_mode=True)
                pending = 0
        if progress is not None and scanned % 50_000 == 0:
            progress(scanned, max(total, scanned))
        it.next()
    if pending:
        write(db, wb, wo_fast, place, "deleting rows below the horizon")
    del it
    release_iterators(db)  # cached iterators would keep the pruned rows' files
    with named(place, "compacting after garbage collection"):
        db.flush()
        if compact and deleted:
            db.compact_range(None, None)
    release_iterators(db)  # ... also one a read made while the compaction ran
    if progress is not None:
        progress(scanned, scanned)
    return scanned, deleted, scanned - deleted


def version_at_time(times: Callable[[int], int], end: int, t: int) -> int:
    """The first version in [0, end) appended at or after ``t`` (``end`` if none).

    ``times(v)`` is version v's append time; append times never go backwards.
    """
    lo, hi = 0, end
    while lo < hi:
        mid = (lo + hi) // 2
        if times(mid) < t:
            lo = mid + 1
        else:
            hi = mid
    return lo


def resolve_horizon(
    head: int,
    *,
    horizon: int | None = None,
    keep: int | None = None,
    keep_age_ms: int | None = None,
    version_at: Callable[[int], int] | None = None,
    now_ms: int | None = None,
) -> int:
    """The horizon asked for: a version, the newest ``keep`` versions, or an age."""
    given = [x is not None for x in (horizon, keep, keep_age_ms)]
    if sum(given) != 1:
        raise ConfigError("give exactly one of --horizon VERSION, --keep N, --keep-age AGE")
    if horizon is not None:
        if horizon < 0:
            raise ConfigError(f"horizon {horizon} is negative")
        if horizon > max(head, 0):
            raise ConfigError(f"horizon {horizon} is above head v{head}: head must stay readable")
        return horizon
    if keep is not None:
        if keep < 1:
            raise ConfigError("--keep must be at least 1 (head stays readable)")
        return max(0, head - keep + 1)
    assert keep_age_ms is not None and version_at is not None
    now = _now_ms() if now_ms is None else now_ms
    return min(version_at(now - keep_age_ms), max(head, 0))


def gc_graph(
    graph: Graph,
    *,
    horizon: int | None = None,
    keep: int | None = None,
    keep_age_ms: int | None = None,
    progress: Progress | None = None,
    now_ms: int | None = None,
) -> GcReport:
    """GC an embedded graph's projection to the asked horizon, held back by live pins."""
    t0 = time.perf_counter()
    with graph._lock:
        head = graph.head()
        decisions = graph.logs.decisions

        def ts(v: int) -> int:
            rec = decisions.get(v)
            return rec.timestamp if rec is not None else 0

        target = resolve_horizon(
            head,
            horizon=horizon,
            keep=keep,
            keep_age_ms=keep_age_ms,
            version_at=lambda t: version_at_time(ts, head + 1, t),
            now_ms=now_ms,
        )
        return gc_projection(graph.projection.db, graph.pins, target, progress=progress, t0=t0)


def gc_projection(
    db: Rdict,
    pins: PinRegistry,
    target: int,
    *,
    progress: Progress | None = None,
    t0: float | None = None,
) -> GcReport:
    """GC one projection database (its only writer) towards ``target``, held back by pins."""
    t0 = time.perf_counter() if t0 is None else t0
    previous = horizon_of(db)
    h, held = pins.advance(max(target, previous))
    scanned, deleted, kept = collect(db, h, progress=progress)
    return GcReport(target, h, previous, held, scanned, deleted, kept, time.perf_counter() - t0)
