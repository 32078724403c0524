"""Where a projection database lives and what a user does when it is damaged (for errors)."""

from __future__ import annotations

from pathlib import Path

from rocksdict import Rdict

from claimgraph.logs.rocks import Place

__all__ = ["PROJECTION_REMEDY", "projection_place", "projection_remedy"]

# A projection is derived data: the decisions log rebuilds it.
PROJECTION_REMEDY = (
    "The projection is derived from the decisions log and can be rebuilt from it: "
    "`claimgraph --data DIR rebuild` (embedded), or move the projection away and restart "
    "the projector (Kafka)."
)


def projection_place(db: Rdict) -> Place:
    """The database's directory and :data:`PROJECTION_REMEDY`, for the errors it raises."""
    return Place(db.path(), projection_remedy(Path(db.path())))


def projection_remedy(path: Path) -> str:
    """:data:`PROJECTION_REMEDY` for the projection in ``path`` (DIR is its parent)."""
    return PROJECTION_REMEDY.replace("DIR rebuild", f"{path.parent} rebuild")
