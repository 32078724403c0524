"""The log port: an append-only sequence of byte records addressed by offset.

Two implementations share this contract and one test suite: the embedded RocksDB log
(:mod:`claimgraph.logs.embedded`) and Kafka. Offsets only grow, but need not be dense — a
Kafka partition has gaps where transaction markers sit — so nothing may assume that the next
offset is ``offset + 1``; ``read`` returns the records that exist from ``start`` on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

__all__ = ["Log", "LogRecord"]


class LogRecord(NamedTuple):
    """One record: its offset, its append time (ms since the epoch) and its bytes."""

    offset: int
    timestamp: int
    value: bytes


class Log(Protocol):
    """An append-only log of byte records."""

    def append(self, values: Sequence[bytes]) -> list[int]:
        """Append records durably; return their offsets."""
        ...

    def read(self, start: int, limit: int) -> list[LogRecord]:
        """Up to ``limit`` records with offset >= ``start``, in offset order."""
        ...

    def end(self) -> int:
        """One past the last offset written (0 when empty)."""
        ...
