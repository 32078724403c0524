"""A projection opened as a RocksDB *secondary* instance in another process (for replicas).

RocksDB allows one writer per database; any number of other processes can open it as a
secondary and call ``try_catch_up_with_primary()`` to see what the writer (the embedded graph,
or a Kafka projector) has written since. So reads scale across processes on one machine.

A replica (:mod:`claimgraph.service.replica`) serves reads at any version like the primary:
``at=`` is honoured, a version it has not seen yet is waited for (catching up until it
arrives or the timeout passes), and a version below the horizon raises VersionPruned.
Versions at or below the head a replica has already seen never change, so reads at them
need no catch-up; ``head()`` catches up at most every ``refresh`` seconds.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocksdict import AccessType, Options, Rdict

from claimgraph.errors import StorageError, VersionNotYetAvailable
from claimgraph.logs.rocks import rocksdb_errors
from claimgraph.projections.projector import ProjectionStore
from claimgraph.projections.reader import ProjectionReader
from claimgraph.projections.retention import catch_up, horizon_of

__all__ = ["SecondaryProjection", "wait_caught_up"]


class SecondaryProjection:
    """A projection another process writes (embedded or Kafka), opened read-only."""

    def __init__(self, projection: Path, name: str, *, refresh: float = 0.0) -> None:
        self.projection = projection
        self.name = name
        self.refresh = refresh
        self._scratch = Path(tempfile.mkdtemp(prefix="claimgraph-replica-"))
        opts = Options(raw_mode=True)
        opts.set_max_open_files(-1)  # keep files the primary compacts away readable until caught up
        try:
            with rocksdb_errors(f"cannot open {projection} as a replica"):
                self.db = Rdict(
                    str(projection), opts, access_type=AccessType.secondary(str(self._scratch))
                )
        except StorageError:
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise
        self.reader = ProjectionReader(self.db)
        self._seen = -1
        self._caught_up = 0.0
        self.catch_up()

    def catch_up(self) -> int:
        """See what the primary has written since; return the head now served."""
        with rocksdb_errors(f"replica of {self.projection} cannot catch up"):
            catch_up(self.db)
        self._caught_up = time.monotonic()
        self._seen = max(self._seen, ProjectionStore.applied_of(self.db))
        return self._seen

    def head(self) -> int:
        """The newest version this replica serves (catching up if ``refresh`` has passed)."""
        if time.monotonic() - self._caught_up >= self.refresh:
            return self.catch_up()
        return self._seen

    def horizon(self) -> int:
        return horizon_of(self.db)

    def wait_for(self, version: int, timeout: float = 0.0) -> int:
        return wait_caught_up(self.catch_up, self._seen, version, timeout)

    def status(self) -> dict[str, Any]:
        return {
            "graph": self.name,
            "replica_of": str(self.projection),
            "head": self.head(),
            "horizon": self.horizon(),
        }

    def close(self) -> None:
        self.db.close()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> SecondaryProjection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_caught_up(catch_up: Callable[[], int], seen: int, version: int, timeout: float) -> int:
    """Head once a secondary that ``catch_up`` refreshes has applied ``version``: polled, as a
    secondary has no notification of the primary's writes; VersionNotYetAvailable past
    ``timeout``."""
    if version <= seen:
        return seen
    deadline = time.monotonic() + timeout
    while True:
        h = catch_up()
        if version <= h:
            return h
        if time.monotonic() >= deadline:
            raise VersionNotYetAvailable(version, h, timeout)
        time.sleep(0.01)
