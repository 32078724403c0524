"""Where the native tables put claims beyond the memory they may use: a scratch RocksDB.

With ``CLAIMGRAPH_STATE_CLAIMS=N`` (or :func:`configure`), the native tables keep the newest
~N claims in memory (rounded up to chunks of 65,536) and move older chunks of claims to a
RocksDB of their own, with a bloom filter and a block cache (``CLAIMGRAPH_STATE_CACHE_MIB``,
default 32). A spilled claim is read back on use into a bounded cold cache; a change to it is
written back. The spill is scratch, not durable state: it lives in a temporary directory
(under ``CLAIMGRAPH_STATE_SPILL_DIR``, else the system's temporary directory), is written
without a WAL and is removed when its tables are. The durable truth stays the decisions log
and the checkpoints; a restart folds or loads the state again. A process killed with its
spill open leaves the directory behind (``claimgraph-state-<pid>-...``): the next spill made
in that base directory removes every one whose RocksDB lock no process holds (:func:`sweep`).

Claims, edge keys and edges spill (each table keeps its newest chunks in memory); agents,
conflict ids and confidences stay in memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import shutil
import sys
import tempfile
import weakref
from dataclasses import dataclass

from rocksdict import BlockBasedOptions, Cache, Options, Rdict, WriteBatch, WriteOptions

from claimgraph.procs import pid_alive

__all__ = ["SpillConfig", "SpillDB", "configure", "configured", "sweep"]

CHUNK_BITS = 16  # claims per chunk: 65,536


@dataclass(frozen=True, slots=True)
class SpillConfig:
    """Claims kept in memory (rounded up to chunks), the chunk size and the block cache."""

    claims: int
    chunk_bits: int = CHUNK_BITS
    cache_bytes: int = 32 << 20

    @property
    def keep(self) -> int:
        """Chunks of claims kept in memory (at least one: the chunk being filled)."""
        size = 1 << self.chunk_bits
        return max(1, -(-self.claims // size))


_CONFIG: list[SpillConfig | None] = []


def _from_env() -> SpillConfig | None:
    raw = os.environ.get("CLAIMGRAPH_STATE_CLAIMS", "").strip()
    if not raw:
        return None
    try:
        claims = int(raw)
        cache_mib = int(os.environ.get("CLAIMGRAPH_STATE_CACHE_MIB", "32"))
    except ValueError:
        raise ValueError(
            f"CLAIMGRAPH_STATE_CLAIMS={raw!r} / CLAIMGRAPH_STATE_CACHE_MIB: whole numbers"
        ) from None
    if claims < 1 or cache_mib < 1:
        raise ValueError("CLAIMGRAPH_STATE_CLAIMS and CLAIMGRAPH_STATE_CACHE_MIB must be >= 1")
    return SpillConfig(claims, cache_bytes=cache_mib << 20)


def configured() -> SpillConfig | None:
    """The spill configuration of this process (None: everything in memory)."""
    if not _CONFIG:
        _CONFIG.append(_from_env())
    return _CONFIG[0]


def configure(config: SpillConfig | None) -> None:
    """Set the spill for tables made from now on (tests; ``None``: no spill)."""
    _CONFIG[:] = [config]


_M_MMAP_THRESHOLD = -3
_MMAP: list[bool] = []


def _give_back_freed_chunks() -> None:
    """glibc: allocations of 1 MiB and more are mapped and unmapped on their own.

    By default glibc raises its mmap threshold each time a mapped block is freed, so once the
    spill frees its first chunks (2 MiB each), later chunks come from the heap and freeing
    them gives nothing back to the system: the spill would lower the state's size but not the
    process's RSS. Fixing the threshold (once, process-wide, only when a spill is configured)
    keeps chunks mapped, so a spilled chunk's memory is returned.
    """
    if _MMAP or not sys.platform.startswith("linux"):
        return
    _MMAP.append(True)
    with contextlib.suppress(OSError, AttributeError):  # not glibc: its allocator as it is
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, 1 << 20)


_PREFIX = "claimgraph-state-"
_OWNED = re.compile(rf"{_PREFIX}(\d+)-")


def _abandoned(path: str) -> bool:
    """Whether the spill at ``path`` is a dead process's: its owner (the pid in its name) is
    gone and no process holds its RocksDB lock.

    A live owner's spill is never abandoned, even with no lock held: between ``mkdtemp`` and
    RocksDB taking its lock a new spill has no lock yet, and a sweep that removed it, or took
    its lock for a moment to test it, failed its owner's open ("While lock file ...
    Resource temporarily unavailable", seen with two processes spilling at once). The lock
    decides only when the owner pid is not one this process can see (a dead process, or a
    process in another pid namespace sharing the directory); fcntl locks are per process, so
    this process's own spills are never tested by it."""
    m = _OWNED.match(os.path.basename(path))
    if m is not None and (int(m.group(1)) == os.getpid() or pid_alive(int(m.group(1)))):
        return False
    try:
        fd = os.open(os.path.join(path, "LOCK"), os.O_RDWR)
    except FileNotFoundError:
        return True  # no database was ever opened in it
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held: a live process's spill
    finally:
        os.close(fd)  # closing drops the lock taken above
    return True


def sweep(base: str | None = None) -> list[str]:
    """Remove the spill directories under ``base`` (default: where spills go) that a dead
    process left; return their paths."""
    base = base or os.environ.get("CLAIMGRAPH_STATE_SPILL_DIR") or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if entry.name.startswith(_PREFIX) and entry.is_dir() and _abandoned(entry.path):
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
    return removed


def _remove(db: Rdict, path: str) -> None:
    db.close()
    shutil.rmtree(path, ignore_errors=True)


class SpillDB:
    """The scratch RocksDB of one table store: ``get(key)`` and ``put([(key, value), ...])``."""

    def __init__(self, config: SpillConfig) -> None:
        _give_back_freed_chunks()
        base = os.environ.get("CLAIMGRAPH_STATE_SPILL_DIR") or None
        sweep(base)  # what killed processes left behind
        self.path = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=base)
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_write_buffer_size(8 << 20)
        opts.set_max_write_buffer_number(2)
        table = BlockBasedOptions()
        table.set_block_cache(Cache(config.cache_bytes))
        table.set_bloom_filter(10, False)
        opts.set_block_based_table_factory(table)
        self.db = Rdict(self.path, opts)
        self._wo = WriteOptions()
        self._wo.disable_wal = True  # type: ignore[method-assign,assignment]  # a property; the stub says method
        self.get = self.db.get
        weakref.finalize(self, _remove, self.db, self.path)

    def put(self, items: list[tuple[bytes, bytes]]) -> None:
        wb = WriteBatch(raw_mode=True)
        for k, v in items:
            wb.put(k, v)
        self.db.write(wb, self._wo)
