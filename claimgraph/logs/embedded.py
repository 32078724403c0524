"""The embedded logs: commands, decisions and runs in one local RocksDB (no servers).

One database holds all three logs, so that the governor can write a batch of decisions
together with its input position in a single atomic, synced write batch: a crash at any point
leaves either the whole batch (and the advanced position) or none of it.

Keys: ``C``/``D``/``R`` ‖ u64_be(offset) → u64_be(append time ms) ‖ record bytes;
``M`` ‖ name → u64_be(value) for positions. Append times never go backwards.

A write that fails part-way (a full disk in the middle of a multi-MB batch) can leave the
write-ahead log ending in that batch's incomplete record. The batch was never acknowledged, so
dropping it loses nothing; but the logs open strictly (a WAL cut short otherwise means lost,
acknowledged data). The **guard** file beside them (``log.guard``, made at full size when the
logs are opened, so that marking it later needs no new disk space) records that the last write
failed and the ends the logs had before it. The next open — in this process or the next —
then tolerates exactly an incomplete last record, checks that no log ends before the recorded
ends, and clears the guard: the next write after space is freed simply succeeds.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rocksdict import Rdict, WriteBatch, WriteOptions

from claimgraph.errors import CorruptionError
from claimgraph.logs.base import LogRecord
from claimgraph.logs.rocks import (
    STRICT,
    TORN_TAIL,
    Place,
    close_named,
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

__all__ = ["GUARD", "LOG_REMEDY", "EmbeddedLog", "EmbeddedLogStore", "open_rdict"]

# What a user does when the logs are damaged: they are the graph's history, nothing rebuilds them.
LOG_REMEDY = (
    "The logs are the graph's history and nothing can rebuild them: restore the data directory "
    "from a backup, or, if only the end of the write-ahead log is damaged, keep what precedes "
    "it with `claimgraph --data DIR rebuild --salvage-log` (the decisions after it are lost)."
)

_U64 = struct.Struct(">Q")


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


GUARD = "log.guard"  # beside the logs' directory (see the module docstring)
_GUARD_SIZE = 256
_GUARD_HEAD = b"claimgraph log guard 1\n"


class _Guard:
    """The file that says whether the logs' last write failed, and their ends before it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def failed_ends(self) -> tuple[int, int, int] | None:
        """The ends recorded by a failed write, or None (no file, or a clean one)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CorruptionError(f"cannot read {self.path}: {exc}", str(self.path)) from None
        body = data[len(_GUARD_HEAD) :].split(b"\n", 1)[0].split()
        if not data.startswith(_GUARD_HEAD) or not body:
            raise CorruptionError(
                f"{self.path} is not a claimgraph log guard (damaged?): remove it only if "
                "the logs' last write did not fail",
                str(self.path),
            )
        if body[0] == b"clean":
            return None
        try:
            c, d, r = (int(x) for x in body[1:4])
        except ValueError:
            msg = f"{self.path} is damaged: {data[:80]!r}"
            raise CorruptionError(msg, str(self.path)) from None
        return c, d, r

    def _put(self, line: bytes) -> None:
        """Overwrite the file in place (its blocks exist: no new space is needed), synced."""
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.pwrite(fd, (_GUARD_HEAD + line + b"\n").ljust(_GUARD_SIZE, b" "), 0)
            os.fsync(fd)
        finally:
            os.close(fd)

    def prepare(self) -> None:
        """Make the file, at full size and clean, unless it is already there (best effort:
        on a disk too full for 256 bytes the logs open without a guard)."""
        try:
            if self.path.stat().st_size >= _GUARD_SIZE:
                return
        except FileNotFoundError:
            pass
        tmp = self.path.with_name(f".{GUARD}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as fh:
                fh.write((_GUARD_HEAD + b"clean\n").ljust(_GUARD_SIZE, b" "))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)

    def mark(self, ends: tuple[int, int, int]) -> bool:
        """Record a failed write and the ends before it; False if that could not be done."""
        try:
            self._put(b"failed %d %d %d" % ends)
        except OSError:
            return False
        return True

    def clear(self) -> None:
        self._put(b"clean")


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
        self.guard = _Guard(path.parent / GUARD)
        self._torn: tuple[int, int, int] | None = None  # ends before a failed write, if any
        if secondary is None:
            self.db = self._open_primary(open_rdict)
        else:
            self.db = open_secondary(path, secondary, remedy=self._remedy)
        self._sync = WriteOptions()
        self._sync.sync = True
        self.failed = False  # a write failed: reopen before the next one (see reopen)
        self.commands = EmbeddedLog(self, b"C", "commands")
        self.decisions = EmbeddedLog(self, b"D", "decisions")
        self.runs = EmbeddedLog(self, b"R", "runs")
        if secondary is None:
            self._settle_guard()

    def _open_primary(self, opener: Callable[..., Rdict]) -> Rdict:
        """Open the logs strictly — or, after a failed write, tolerating its torn record."""
        wal = self._wal
        if wal == STRICT:
            self._torn = self._torn or self.guard.failed_ends()
            if self._torn is not None:
                wal = TORN_TAIL
        return opener(self.path, create=self._create, wal=wal, remedy=self._remedy)

    def ends(self) -> tuple[int, int, int]:
        return (self.commands.end(), self.decisions.end(), self.runs.end())

    def _settle_guard(self) -> None:
        """After an open: a failed write's logs must end at least where they ended before it
        (only its own, never acknowledged record may be gone); then the guard is clean."""
        torn = self._torn
        if torn is not None:
            ends = self.ends()
            if any(e < t for e, t in zip(ends, torn, strict=True)):
                raise CorruptionError(
                    f"{self.path} lost records it had before its last, failed write: the logs "
                    f"end at commands/decisions/runs {ends}, they ended at {torn}. "
                    f"{self._remedy}",
                    str(self.path),
                )
            self.guard.clear()
            self._torn = None
        self.guard.prepare()

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
            self.reread_ends()
            # the WAL may now end in this batch's incomplete record: say so for the next open
            self._torn = self.ends()
            self.guard.mark(self._torn)
            raise

    def reread_ends(self) -> None:
        """Forget every end staged in a batch that was not written: the ends are the log's."""
        for log in (self.commands, self.decisions, self.runs):
            log.reset()

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
        self.db = self._open_primary(open_or_stand_in)
        for log in (self.commands, self.decisions, self.runs):
            log.reset()  # raises if the reopen failed: the store stays failed
        self._settle_guard()
        self.failed = False

    def stage_position(self, wb: WriteBatch, name: str, value: int) -> None:
        wb.put(b"M" + name.encode(), _U64.pack(value))

    def close(self) -> None:
        close_named(self.db, self.place, self.failed)
