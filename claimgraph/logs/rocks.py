"""RocksDB access shared by the logs and the projections: every failure named, none a short answer.

RocksDB reports a damaged block (a checksum mismatch, a truncated file) through the
iterator's *status*, not by raising: the iterator just stops being ``valid()``, so a loop that
ends on ``not valid()`` would read a corrupt file as a shorter one. Every loop over a database
of ours therefore tests :func:`valid` instead, which calls ``status()`` whenever the iterator
stops and raises :class:`~claimgraph.errors.CorruptionError` naming the database (RocksDB's
message names the file and offset). Point reads, writes and opens go through :func:`get`,
:func:`write` and :func:`open_rdict`, which translate rocksdict's bare ``Exception`` the same way:

* ``Corruption: ...``              → :class:`CorruptionError` (exit 7), with what to do about it;
* ``No space left on device``      → :class:`DiskFullError` (exit 8, HTTP 507);
* anything else (a lock, an I/O error) → :class:`StorageError` (exit 8, HTTP 503).

Checksums are verified on every read (``ReadOptions.verify_checksums``) and on open
(``paranoid_checks``). How the write-ahead log is replayed on open is the caller's choice
(:data:`STRICT` for the logs, :data:`PREFIX` for the rebuildable projection): see the README's
"Guarantees and limits".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocksdict import (
    BlockBasedOptions,
    Cache,
    DbClosedError,
    DBRecoveryMode,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from claimgraph.errors import ClaimgraphError, CorruptionError, DiskFullError, StorageError

__all__ = [
    "BLOCK_CACHE",
    "MEMTABLES",
    "PREFIX",
    "SALVAGE",
    "STRICT",
    "TORN_TAIL",
    "WRITE_BUFFER",
    "Place",
    "close_named",
    "close_quietly",
    "db_options",
    "estimated_keys",
    "failure",
    "get",
    "is_locked",
    "named",
    "open_or_stand_in",
    "open_rdict",
    "open_secondary",
    "rocksdb_errors",
    "shared_block_cache",
    "uncached",
    "valid",
    "write",
]

# WAL recovery modes. STRICT: any damaged or cut-short record in the write-ahead log refuses the
# open (kAbsoluteConsistency) — every acknowledged log write was synced, so a WAL that ends
# mid-record lost data we promised. PREFIX: replay the WAL up to its first damaged record and
# drop the rest (kPointInTimeRecovery) — right for a projection, whose applied offset travels
# in the same batches as its rows and whose lost tail is re-projected from the log. SALVAGE is
# PREFIX used deliberately on a log, by ``claimgraph rebuild --salvage-log``. TORN_TAIL: a log
# whose last write is known to have failed (``logs.embedded``'s guard file says so) may end in
# that write's incomplete record, never acknowledged: it is dropped, any other damage still
# refuses the open (kTolerateCorruptedTailRecords), and the caller checks the ends it recorded.
STRICT = "strict"
PREFIX = "prefix"
SALVAGE = "salvage"
TORN_TAIL = "torn_tail"

# How a StorageError says that another process holds a database (RocksDB allows one writer).
_LOCKED = "in use by another claimgraph process (RocksDB lock held)"


def is_locked(exc: BaseException) -> bool:
    """Whether ``exc`` is the StorageError of a database another process holds."""
    return isinstance(exc, StorageError) and _LOCKED in str(exc)


@dataclass(frozen=True, slots=True)
class Place:
    """A database directory and what a user does when it is found damaged."""

    path: str
    remedy: str = ""

    def wal_files(self) -> list[str]:
        """The write-ahead log files in the directory (named in errors found on open)."""
        try:
            return sorted(str(p) for p in Path(self.path).glob("*.log"))
        except OSError:
            return []


def failure(
    exc: BaseException, place: Place, doing: str, version: int | None = None
) -> ClaimgraphError:
    """Our error for a rocksdict failure while ``doing`` something to ``place``."""
    if isinstance(exc, ClaimgraphError):
        return exc
    msg = str(exc).strip()
    remedy = f" {place.remedy}" if place.remedy else ""
    if version is not None:
        doing = f"{doing} at version {version}"
    if msg.startswith("Corruption") or "checksum mismatch" in msg:
        return CorruptionError(
            f"{place.path} is corrupt: {msg} (while {doing}).{remedy}", place.path, version
        )
    if "No space left on device" in msg or "ENOSPC" in msg:
        return DiskFullError(
            f"no space left on the device of {place.path} (while {doing}); nothing was lost: "
            "free some space and the graph resumes writing by itself",
            place.path,
        )
    if "lock" in msg.lower():
        return StorageError(f"{place.path}: it is {_LOCKED}")
    return StorageError(f"{place.path}: {msg} (while {doing})")


def _rocksdb(exc: Exception) -> bool:
    """rocksdict raises the bare ``Exception`` for every RocksDB status (and ``DbClosedError``
    after ``close``); anything else is not RocksDB's (a bug of ours) and goes through."""
    return type(exc) is Exception or isinstance(exc, DbClosedError)


@contextlib.contextmanager
def named(place: Place, doing: str) -> Iterator[None]:
    """Inside the block, a RocksDB failure while ``doing`` something to ``place`` is ours."""
    try:
        yield
    except Exception as exc:
        if not _rocksdb(exc):
            raise
        raise failure(exc, place, doing) from None


def rocksdb_errors(what: str, doing: str = "opening") -> contextlib.AbstractContextManager[None]:
    """:func:`named` for a database known by a description (``what``) rather than a place."""
    return named(Place(what), doing)


def estimated_keys(db: Rdict) -> int:
    """RocksDB's estimate of the number of keys, for progress bars (0 if it has none)."""
    try:
        with rocksdb_errors("estimate-num-keys", "sizing a scan"):
            return int(db.property_int_value("rocksdb.estimate-num-keys") or 0)
    except StorageError:  # the scan this sizes meets the same failure and names it
        return 0


def valid(it: Any, place: Place, doing: str = "reading", version: int | None = None) -> bool:
    """``it.valid()``; when the iterator stopped, its status must be OK or this raises.

    Use it for every test of an iterator that ends a loop or decides "no row": a damaged block
    makes RocksDB stop the iterator, and only ``status()`` tells that apart from the end.
    """
    if it.valid():
        return True
    try:
        it.status()
    except Exception as exc:
        if not _rocksdb(exc):
            raise
        raise failure(exc, place, doing, version) from None
    return False


def get(db: Rdict, key: bytes, place: Place, doing: str = "reading") -> bytes | None:
    """``db.get(key)``, with a damaged block raised as a CorruptionError naming the file."""
    try:
        value: bytes | None = db.get(key)
    except Exception as exc:
        if not _rocksdb(exc):
            raise
        raise failure(exc, place, doing) from None
    return value


def write(db: Rdict, wb: WriteBatch, wo: WriteOptions, place: Place, doing: str) -> None:
    """``db.write(wb, wo)``: a full disk raises DiskFullError; a batch lands whole or not at all."""
    try:
        db.write(wb, wo)
    except Exception as exc:
        if not _rocksdb(exc):
            raise
        raise failure(exc, place, doing) from None


def close_named(db: Rdict, place: Place, failed: bool = False) -> None:
    """Close a database; a failure RocksDB kept (a corruption it met) is ours, named.

    ``failed``: its last write failed and was reported — its close would only raise that
    failure again, so it closes quietly (:func:`close_quietly`). A background flush that met a
    full disk is not an error at close either (what it held is in the write-ahead log).
    """
    if failed:
        close_quietly(db)
        return
    try:
        db.close()
    except Exception as exc:
        if not _rocksdb(exc):
            raise
        err = failure(exc, place, "closing it")
        if not isinstance(err, DiskFullError):  # a flush that met a full disk lost nothing:
            raise err from None  # what it held is in the synced write-ahead log


def close_quietly(db: Rdict) -> None:
    """Close a database whose last write failed: ``close`` raises that failure again, and the
    handle must go anyway (RocksDB keeps a failed write's error until the database is reopened).
    """
    with contextlib.suppress(Exception):
        db.close()


class _Unavailable:
    """Stands in for a database that could not be reopened: every use raises why."""

    def __init__(self, error: ClaimgraphError) -> None:
        self._error = error

    def __getattr__(self, name: str) -> Any:
        raise self._error


def open_or_stand_in(path: Path, *, create: bool, wal: str, remedy: str) -> Rdict:
    """:func:`open_rdict`, or — if that fails — a stand-in that raises the failure on every use.

    For reopening a database after a failed write: the caller closes it (:func:`close_quietly`)
    and drops every reference to it first, since RocksDB's lock goes with the last handle.
    """
    try:
        return open_rdict(path, create=create, wal=wal, remedy=remedy)
    except ClaimgraphError as exc:
        stand_in: Any = _Unavailable(exc)
        return stand_in  # type: ignore[no-any-return]


def _mode(wal: str) -> Any:
    if wal == STRICT:
        return DBRecoveryMode.absolute_consistency()
    if wal == TORN_TAIL:
        return DBRecoveryMode.tolerate_corrupted_tail_records()
    if wal in (PREFIX, SALVAGE):
        return DBRecoveryMode.point_in_time()
    raise ValueError(f"unknown WAL recovery mode {wal!r}")


# RocksDB's own memory, bounded (README: "Memory"): every database of a process shares one
# LRU block cache, and each database keeps at most MEMTABLES write buffers of WRITE_BUFFER
# bytes. Index and filter blocks stay with the table readers (a few MiB per million rows):
# charged to the cache, a point read that missed would reload a whole index block. A graph
# opens two databases (log and projection): at most 64 MiB of block cache and 4 x 16 MiB of
# memtables.
BLOCK_CACHE = 64 << 20
WRITE_BUFFER = 16 << 20
MEMTABLES = 2
_CACHE: list[Cache] = []


def shared_block_cache() -> Cache:
    """The process's one block cache (made on first use)."""
    if not _CACHE:
        _CACHE.append(Cache(BLOCK_CACHE))
    return _CACHE[0]


_UNCACHED: list[ReadOptions] = []


def uncached() -> ReadOptions:
    """Read options for the writer's own reads: checksums verified, blocks not kept.

    The governor reads what it just wrote (pending commands, the log's end), and the log is
    read start to end by a fold or an audit: blocks cached for those would only push out the
    readers' blocks. Without it an ingest fills the whole shared cache (64 MiB) for nothing.
    """
    if not _UNCACHED:
        ro = ReadOptions()
        ro.set_verify_checksums(True)
        ro.fill_cache(False)  # type: ignore[call-arg]  # the stub omits the flag
        _UNCACHED.append(ro)
    return _UNCACHED[0]


def db_options(create: bool, wal: str) -> Options:
    """The options of every database we open (checksums, WAL recovery, the memory bounds)."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(create)
    opts.set_max_background_jobs(2)
    opts.set_keep_log_file_num(3)
    opts.set_paranoid_checks(True)
    opts.set_wal_recovery_mode(_mode(wal))
    opts.set_write_buffer_size(WRITE_BUFFER)
    opts.set_max_write_buffer_number(MEMTABLES)
    table = BlockBasedOptions()
    table.set_block_cache(shared_block_cache())
    opts.set_block_based_table_factory(table)
    return opts


def open_rdict(path: Path, *, create: bool, wal: str = PREFIX, remedy: str = "") -> Rdict:
    """Open a raw-mode RocksDB with checksums verified; name every failure (see the module)."""
    opts = db_options(create, wal)
    place = Place(str(path), remedy)
    try:
        # the default column family's options are given explicitly: rocksdict otherwise
        # reopens an existing database with the options stored in its OPTIONS file
        db = Rdict(str(path), opts, column_families={"default": opts})
    except Exception as exc:
        if type(exc) is not Exception:
            raise  # not RocksDB's (rocksdict raises the bare Exception): a bug of ours
        msg = str(exc)
        if msg.startswith("Corruption"):
            if ".sst" in msg or "MANIFEST" in msg:
                where = "found on open"  # RocksDB's message names the file
            else:
                wals = ", ".join(place.wal_files()) or "none"
                where = f"found on open, replaying the write-ahead log [{wals}]"
            raise CorruptionError(
                f"{path} is corrupt: {msg} ({where}).{' ' + remedy if remedy else ''}",
                str(path),
            ) from None
        if "lock" in msg.lower():
            raise StorageError(
                f"{path} is in use by another claimgraph process (RocksDB lock held)"
            ) from None
        err = failure(exc, place, "opening it")
        if isinstance(err, DiskFullError):
            raise err from None
        raise StorageError(f"cannot open {path}: {msg}") from None
    ro = ReadOptions()
    ro.set_verify_checksums(True)
    db.set_read_options(ro)
    return db


def open_secondary(path: Path, secondary: Path, *, remedy: str = "") -> Rdict:
    """Open a database another process writes as a read-only *secondary* instance.

    ``secondary`` is a scratch directory of this process. The instance takes no lock and sees
    what the primary wrote up to its last ``try_catch_up_with_primary()`` (whole write
    batches only); checksums are verified as by :func:`open_rdict`, failures named alike.
    """
    from rocksdict import AccessType

    opts = Options(raw_mode=True)
    opts.create_if_missing(False)
    opts.set_paranoid_checks(True)
    opts.set_max_open_files(-1)  # files the primary compacts away stay readable until caught up
    place = Place(str(path), remedy)
    try:
        db = Rdict(str(path), opts, access_type=AccessType.secondary(str(secondary)))
    except Exception as exc:
        if type(exc) is not Exception:
            raise  # not RocksDB's (rocksdict raises the bare Exception): a bug of ours
        raise failure(exc, place, "opening it as a secondary") from None
    ro = ReadOptions()
    ro.set_verify_checksums(True)
    db.set_read_options(ro)
    return db
