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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rocksdict import DbClosedError, Options, Rdict, WriteBatch, WriteOptions

from claimgraph.errors import StorageError
from claimgraph.logs.base import LogRecord

__all__ = ["EmbeddedLog", "EmbeddedLogStore", "estimated_keys", "open_rdict", "rocksdb_errors"]

_U64 = struct.Struct(">Q")


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@contextmanager
def rocksdb_errors(what: str) -> Iterator[None]:
    """Inside the block, a RocksDB failure becomes ``StorageError(f"{what}: {detail}")``.

    rocksdict raises the bare ``Exception`` for every RocksDB status (IO error, corruption, a
    lock held by another process, ...) and ``DbClosedError`` after ``close``. Those are told
    apart by their exact type here, once, so that any other exception (a bug of ours, e.g. a
    ``KeyError`` for a str key in raw mode) goes through unchanged.
    """
    try:
        yield
    except Exception as exc:  # sorted by exact type below: rocksdict has no error class
        if type(exc) is not Exception and not isinstance(exc, DbClosedError):
            raise
        detail = str(exc)
        if "lock" in detail.lower():
            detail = "it is in use by another claimgraph process (RocksDB lock held)"
        raise StorageError(f"{what}: {detail}") from None


def estimated_keys(db: Rdict) -> int:
    """RocksDB's estimate of the number of keys, for progress bars (0 if it has none)."""
    try:
        with rocksdb_errors("estimate-num-keys"):
            return int(db.property_int_value("rocksdb.estimate-num-keys") or 0)
    except StorageError:  # the scan this sizes meets the same failure and names it
        return 0


def open_rdict(path: Path, *, create: bool) -> Rdict:
    """Open a raw-mode RocksDB, turning lock and corruption errors into StorageError."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(create)
    opts.set_max_background_jobs(2)
    opts.set_keep_log_file_num(3)
    with rocksdb_errors(f"cannot open {path}"):
        return Rdict(str(path), opts)


class EmbeddedLog:
    """One log (commands, decisions or runs) inside an :class:`EmbeddedLogStore`."""

    def __init__(self, store: EmbeddedLogStore, prefix: bytes) -> None:
        self._store = store
        self._prefix = prefix
        self._end = store._find_end(prefix)
        self._last_ts = 0

    def append(self, values: Sequence[bytes]) -> list[int]:
        wb = WriteBatch(raw_mode=True)
        offsets = self.stage(wb, values)
        self._store.write(wb)
        return offsets

    def stage(
        self, wb: WriteBatch, values: Sequence[bytes], timestamps: Sequence[int] | None = None
    ) -> list[int]:
        """Put records into ``wb`` (the caller writes it); advances the end optimistically."""
        ts = max(self._store.clock(), self._last_ts)
        start = self._end
        for i, v in enumerate(values):
            t = timestamps[i] if timestamps is not None else ts
            wb.put(self._prefix + _U64.pack(start + i), _U64.pack(t) + bytes(v))
        self._end = start + len(values)
        if timestamps is None:
            self._last_ts = ts
        return list(range(start, self._end))

    def read(self, start: int, limit: int) -> list[LogRecord]:
        out: list[LogRecord] = []
        it = self._store.db.iter()
        it.seek(self._prefix + _U64.pack(max(start, 0)))
        p = self._prefix
        while it.valid() and len(out) < limit:
            k = it.key()
            if k[:1] != p:
                break
            v = it.value()
            out.append(LogRecord(_U64.unpack_from(k, 1)[0], _U64.unpack_from(v)[0], v[8:]))
            it.next()
        return out

    def get(self, offset: int) -> LogRecord | None:
        v = self._store.db.get(self._prefix + _U64.pack(offset))
        if v is None:
            return None
        return LogRecord(offset, _U64.unpack_from(v)[0], v[8:])

    def end(self) -> int:
        return self._end


class EmbeddedLogStore:
    """The local RocksDB that holds the commands, decisions and runs logs."""

    def __init__(
        self, path: Path, *, create: bool = False, clock: Callable[[], int] | None = None
    ) -> None:
        # append times (ms) come from the wall clock; a simulation or a test may pass its own
        self.clock: Callable[[], int] = clock or _wall_ms
        self.path = path
        self.db = open_rdict(path, create=create)
        self._sync = WriteOptions()
        self._sync.sync = True
        self.commands = EmbeddedLog(self, b"C")
        self.decisions = EmbeddedLog(self, b"D")
        self.runs = EmbeddedLog(self, b"R")

    def _find_end(self, prefix: bytes) -> int:
        it = self.db.iter()
        it.seek_for_prev(prefix + b"\xff" * 8)
        if it.valid() and it.key()[:1] == prefix:
            return int(_U64.unpack_from(it.key(), 1)[0]) + 1
        return 0

    def write(self, wb: WriteBatch) -> None:
        self.db.write(wb, self._sync)

    def position(self, name: str) -> int:
        v = self.db.get(b"M" + name.encode())
        return int(_U64.unpack(v)[0]) if v is not None else 0

    def stage_position(self, wb: WriteBatch, name: str, value: int) -> None:
        wb.put(b"M" + name.encode(), _U64.pack(value))

    def close(self) -> None:
        self.db.close()
