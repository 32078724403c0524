"""Read replicas: the graph's reads over a projection another process writes.

See :mod:`claimgraph.projections.replica` for how a secondary RocksDB instance catches up.
"""

from __future__ import annotations

import json
from pathlib import Path

from claimgraph.errors import ConfigError
from claimgraph.projections.replica import SecondaryProjection
from claimgraph.service.reads import GraphReads

__all__ = ["Replica", "open_replica"]


class Replica(SecondaryProjection, GraphReads):
    """Read-only access to a projection another process writes (embedded or Kafka)."""

    def __enter__(self) -> Replica:
        return self


def open_replica(path: str | Path, *, refresh: float = 0.0) -> Replica:
    """A replica of the projection in data directory ``path`` (embedded, or a projector's)."""
    p = Path(path)
    try:
        name = str(json.loads((p / "graph.json").read_text("utf-8"))["graph"])
    except (OSError, ValueError, KeyError):
        raise ConfigError(f"{p} is not a claimgraph data or projector directory") from None
    if not (p / "projection").is_dir():
        raise ConfigError(f"{p} holds no projection yet")
    return Replica(p / "projection", name, refresh=refresh)
