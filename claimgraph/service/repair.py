"""rebuild: re-project an embedded graph's projection from its decisions log.

The remedy the integrity errors offer for a projection that is damaged (a block fails its
checksum) or that leads its log (the log lost its tail). The decisions log is the graph's
history; the projection is derived from it, so it can always be rebuilt — into a scratch
directory first, swapped in only when complete, so a rebuild that fails or is interrupted
leaves the old projection where it was.

``salvage_log`` opens the log replaying its write-ahead log only up to the first damaged
record (RocksDB's point-in-time recovery) instead of refusing it: the decisions after that
point are lost for good, so it is never done without being asked. A damaged *table file* of
the log cannot be salvaged (the error says so); only a backup restores that.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from claimgraph.core.model import Progress
from claimgraph.errors import ClaimgraphError, IntegrityError
from claimgraph.logs.embedded import EmbeddedLogStore
from claimgraph.logs.rocks import SALVAGE, STRICT
from claimgraph.projections.checkpoints import list_checkpoints
from claimgraph.projections.projector import ProjectionStore
from claimgraph.service.graph import read_config, reproject
from claimgraph.streams.embedded import GOVERNOR_POSITION

__all__ = ["RebuildReport", "rebuild"]


@dataclass(frozen=True, slots=True)
class RebuildReport:
    """What a rebuild did."""

    head: int  # the rebuilt projection's applied version (the log's last decision)
    previous: int | None  # the replaced projection's applied version (None: unreadable/none)
    salvaged: bool  # the log was opened with --salvage-log
    pending: int = 0  # commands in the log without a decision (the next open decides them)
    checkpoints_ahead: list[str] = field(default_factory=list)  # checkpoints past the log's end

    def as_dict(self) -> dict[str, Any]:
        return {"ok": True, **asdict(self)}


def _applied(path: Path) -> int | None:
    """The applied version of a projection that may be damaged (None if it cannot be read)."""
    if not path.exists():
        return None
    try:
        store = ProjectionStore(path)
    except ClaimgraphError:
        return None
    try:
        return store.applied()
    except ClaimgraphError:
        return None
    finally:
        with contextlib.suppress(Exception):
            store.close()


def rebuild(
    path: Path, *, salvage_log: bool = False, progress: Progress | None = None
) -> RebuildReport:
    """Replace the projection of the graph in ``path`` with a re-projection of its log.

    The graph must not be open anywhere (the log's lock is held throughout).
    """
    cfg = read_config(path)
    logs = EmbeddedLogStore(path / "log", wal=SALVAGE if salvage_log else STRICT)
    try:
        end = logs.decisions.end()
        position = logs.position(GOVERNOR_POSITION)
        if position > logs.commands.end() or end != position:
            raise IntegrityError(
                f"cannot rebuild from {path / 'log'}: {logs.commands.end()} commands, {end} "
                f"decisions, governor position {position} — the log contradicts itself. "
                + logs.place.remedy,
                min(end, position),
            )
        live = path / "projection"
        previous = _applied(live)
        reproject(logs, str(cfg["graph"]), live, progress)
        ahead = [c.name for c in list_checkpoints(path / "checkpoints") if c.version > end - 1]
        pending = logs.commands.end() - position
        return RebuildReport(end - 1, previous, salvage_log, pending, ahead)
    finally:
        logs.close()
