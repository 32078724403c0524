"""Cached RocksDB iterators for point reads: one per thread and use, renewed on every write.

Creating an iterator costs more than the seek it serves. A reader that opts in
(``ProjectionReader(db, cache_iterators=True)``) keeps one iterator per thread and per use,
and makes a new one whenever the database's latest sequence number moved: an iterator sees
the database as it was when it was made, so one made after the last write sees every row a
read may need. A cached iterator pins the files it reads, so whoever closes, reopens or
compacts the database first calls :func:`release_iterators` (or the reader's ``release``).
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol

__all__ = ["Releasable", "release_iterators", "track"]


class Releasable(Protocol):
    db: Any

    def release(self) -> None: ...


_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()


def track(reader: Releasable) -> None:
    """Remember ``reader`` so :func:`release_iterators` can reach its cached iterators."""
    _LIVE.add(reader)


def release_iterators(db: Any) -> None:
    """Drop every cached iterator over ``db`` (before closing or compacting it)."""
    for reader in list(_LIVE):
        if getattr(reader, "db", None) is db:
            reader.release()
