"""How far a graph's projection is behind its decisions log, for metrics and readiness.

The lag is a time: the age of the oldest *committed* decision of the graph that the
projection has not applied yet (0 when there is none). It grows while a projector stalls,
whatever else happens, and a reader that is caught up sees 0 however old the head is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Lagging", "ProjectionLag"]


@dataclass(frozen=True, slots=True)
class ProjectionLag:
    """The applied version and the age (s) of the oldest decision not applied yet (or 0)."""

    applied: int
    seconds: float
    behind: bool  # a committed decision of the graph is not applied yet


@runtime_checkable
class Lagging(Protocol):
    """A graph that can say how far its projection is behind its log (embedded, Kafka)."""

    def projection_lag(self) -> ProjectionLag: ...
