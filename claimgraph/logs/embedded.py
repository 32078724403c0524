"""The embedded logs: commands, decisions and runs in one local RocksDB (no servers).

One database holds all three logs, so that the governor can write a batch of decisions
together with its input position in a single atomic, synced write batch: a crash at any point
leaves either the whole batch (and the advanced position) or none of it.

Keys: ``C``/``D``/``R`` ‖ u64_be(offset) → u64_be(append time ms) ‖ record bytes;
``M`` ‖ name → u64_be(value) for positions. Append times never go backwards.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rocksdict import WriteBatch, WriteOptions

from claimgraph.logs.base import LogRecord
from claimgraph.logs.rocks import (
    STRICT,
    Place,
    close_quietly,
    get,
    named,
    open_or_stand_in,
    open_rdict,
    open_secondary,
    uncached,
    valid,
    write,
)

__all__ = ["LOG_REMEDY", "EmbeddedLog", "EmbeddedLogStore", "open_rdict"]

# What a user does when the logs are damaged: they are the graph's history, nothing rebuilds them.
LOG_REMEDY = (
    "The logs are the graph's history and nothing can rebuild them: restore the data directory "
    "from a backup, or, if only the end of the write-ahead log is damaged, keep what precedes "
    "it with `claimgraph --data DIR rebuild --salvage-log` (the decisions after it are lost)."
)

_U64 = struct.Struct(">Q")


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class EmbeddedLog:
    """One log (commands, decisions or runs) inside an :class:`EmbeddedLogStore`."""

    def __init__(self, store: EmbeddedLogStore, prefix: bytes, name: str) -> None:
        self._store = store
        self._prefix = prefix
        self.name = name
        self._end = store._find_end(prefix)
        self._last_ts = 0

    def reset(self) -> None:
        """Forget ends staged in a batch that was never written (a failed write)."""
        self._end = self._store._find_end(self._prefix)

    def append(self, values: Sequence[bytes]) -> list[int]:
        wb = WriteBatch(raw_mode=True)
        offsets = self.stage(wb, values)
        self._store.write(wb)
        return offsets

    def stage(
        self, wb: WriteBatch, values: Sequence[bytes], timestamps: Sequence[int] | None = None
    ) -> list[int]:
        """Put records into ``wb`` (the caller writes it); advances the end optimistically.

        If the batch is then not written, :meth:`EmbeddedLogStore.write` re-reads the ends.
        """
        return [r.offset for r in self.stage_records(wb, values, timestamps)]

    def stage_records(
        self, wb: WriteBatch, values: Sequence[bytes], timestamps: Sequence[int] | None = None
    ) -> list[LogRecord]:
        """Like :meth:`stage`, returning the records as they will read back once written."""
        ts = max(self._store.clock(), self._last_ts)
        start = self._end
        out = []
        for i, v in enumerate(values):
            t = timestamps[i] if timestamps is not None else ts
            wb.put(self._prefix + _U64.pack(start + i), _U64.pack(t) + bytes(v))
            out.append(LogRecord(start + i, t, bytes(v)))
        self._end = start + len(values)
        if timestamps is None:
            self._last_ts = ts
        return out

    def read(self, start: int, limit: int) -> list[LogRecord]:
        out: list[LogRecord] = []
        it = self._store.db.iter(uncached())
        it.seek(self._prefix + _U64.pack(max(start, 0)))
        p = self._prefix
        place, doing = self._store.place, f"reading the {self.name} log from offset {start}"
        while len(out) < limit and valid(it, place, doing):
            k = it.key()
            if k[:1] != p:
                break
            v = it.value()
            out.append(LogRecord(_U64.unpack_from(k, 1)[0], _U64.unpack_from(v)[0], v[8:]))
            it.next()
        return out

    def get(self, offset: int) -> LogRecord | None:
        v = get(
            self._store.db,
            self._prefix + _U64.pack(offset),
            self._store.place,
            f"reading offset {offset} of the {self.name} log",
        )
        if v is None:
            return None
        return LogRecord(offset, _U64.unpack_from(v)[0], v[8:])

    def end(self) -> int:
        return self._end


class EmbeddedLogStore:
    """The local RocksDB that holds the commands, decisions and runs logs."""

    def __init__(
        self,
        path: Path,
        *,
        create: bool = False,
        clock: Callable[[], int] | None = None,
        wal: str = STRICT,
        secondary: Path | None = None,
    ) -> None:
        # append times (ms) come from the wall clock; a simulation or a test may pass its own
        self.clock: Callable[[], int] = clock or _wall_ms
        self.path = path
        self._remedy = LOG_REMEDY.replace("DIR", str(path.parent))
        self.place = Place(str(path), self._remedy)
        self._create = create
        self._wal = wal
        # secondary: read-only, in a process other than the writer's (see catch_up)
        self.secondary = secondary
        if secondary is None:
            self.db = open_rdict(path, create=create, wal=wal, remedy=self._remedy)
        else:
            self.db = open_secondary(path, secondary, remedy=self._remedy)
        self._sync = WriteOptions()
        self._sync.sync = True
        self.failed = False  # a write failed: reopen before the next one (see reopen)
        self.commands = EmbeddedLog(self, b"C", "commands")
        self.decisions = EmbeddedLog(self, b"D", "decisions")
        self.runs = EmbeddedLog(self, b"R", "runs")

    def _find_end(self, prefix: bytes) -> int:
        it = self.db.iter(uncached())
        it.seek_for_prev(prefix + b"\xff" * 8)
        if valid(it, self.place, f"finding the end of log {prefix.decode()}") and (
            it.key()[:1] == prefix
        ):
            return int(_U64.unpack_from(it.key(), 1)[0]) + 1
        return 0

    def write(self, wb: WriteBatch) -> None:
        """Write a batch, synced. On failure nothing of it landed and the ends are re-read."""
        try:
            write(self.db, wb, self._sync, self.place, "appending to the logs")
        except Exception:
            self.failed = True  # RocksDB refuses every later write until reopened
            for log in (self.commands, self.decisions, self.runs):
                log.reset()
            raise

    def catch_up(self) -> None:
        """A secondary: see what the writer has written since (whole batches only)."""
        with named(self.place, "catching up with the writer"):
            self.db.try_catch_up_with_primary()
        for log in (self.commands, self.decisions, self.runs):
            log.reset()

    def position(self, name: str) -> int:
        v = get(self.db, b"M" + name.encode(), self.place, f"reading position {name!r}")
        return int(_U64.unpack(v)[0]) if v is not None else 0

    def reopen(self) -> None:
        """Close and reopen the database: after a failed write RocksDB refuses every later
        write until it is reopened (its background error is sticky)."""
        close_quietly(self.db)
        del self.db  # the last handle: RocksDB's lock goes with it
        self.db = open_or_stand_in(
            self.path, create=self._create, wal=self._wal, remedy=self._remedy
        )
        for log in (self.commands, self.decisions, self.runs):
            log.reset()  # raises if the reopen failed: the store stays failed
        self.failed = False

    def stage_position(self, wb: WriteBatch, name: str, value: int) -> None:
        wb.put(b"M" + name.encode(), _U64.pack(value))

    def close(self) -> None:
        self.db.close()
