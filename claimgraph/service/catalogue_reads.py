"""Every catalogued read as a typed method over ``read``, for graphs and runs.

Generated from the query catalogue (:mod:`claimgraph.core.queries`) by ``tools/gen_reads.py``:
do not edit; change the catalogue and regenerate (a test fails while they differ).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    from claimgraph.core.model import Decision
    from claimgraph.projections.reader import EdgeView, HistoryView, NeighborView, SlotView
    from claimgraph.service.api import NodeLike
    from claimgraph.service.queries import PathsResult, ReachResult
    from claimgraph.service.reads import EdgeRef

__all__ = ["CatalogueReads", "RunReads"]

_ = (Any, Literal, Sequence)  # the signatures below name them


class CatalogueReads:
    """Each read of the catalogue as a typed method: ``read(name, ...)``."""

    def read(self, query: str, /, **params: Any) -> Any:
        """The one read operation (the subclass answers it)."""
        raise NotImplementedError

    def edge(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> EdgeView:
        """One edge at a version: present, absent or unknown (with the conflict id)."""
        return cast(
            "EdgeView",
            self.read(
                "edge",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
                at=at,
                timeout=timeout,
            ),
        )

    def read_edges(
        self,
        edges: Sequence[EdgeRef],
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> list[EdgeView]:
        """Several edges at one version, in order: one answer each, as edge gives it."""
        return cast(
            "list[EdgeView]",
            self.read(
                "read_edges",
                edges=edges,
                at=at,
                timeout=timeout,
            ),
        )

    def slot(
        self,
        edge_type: str,
        node: NodeLike,
        *,
        direction: Literal["out", "in"] = "out",
        at: int | None = None,
        timeout: float = 0.0,
    ) -> SlotView:
        """What an exclusive slot holds at a version."""
        return cast(
            "SlotView",
            self.read(
                "slot",
                edge_type=edge_type,
                node=node,
                direction=direction,
                at=at,
                timeout=timeout,
            ),
        )

    def neighbors(
        self,
        node: NodeLike,
        *,
        edge_type: str | None = None,
        direction: Literal["out", "in"] = "out",
        include_absent: bool = False,
        min_confidence: float | None = None,
        writer: str | None = None,
        asserted_after: int | None = None,
        asserted_before: int | None = None,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> list[NeighborView]:
        """A node's neighbours at a version, optionally filtered by their claims."""
        return cast(
            "list[NeighborView]",
            self.read(
                "neighbors",
                node=node,
                edge_type=edge_type,
                direction=direction,
                include_absent=include_absent,
                min_confidence=min_confidence,
                writer=writer,
                asserted_after=asserted_after,
                asserted_before=asserted_before,
                at=at,
                timeout=timeout,
            ),
        )

    def paths(
        self,
        src: NodeLike,
        dst: NodeLike,
        *,
        max_hops: int = 3,
        edge_types: Sequence[str] | None = None,
        direction: Literal["out", "in", "both"] = "out",
        limit: int = 100,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> PathsResult:
        """Simple paths src -> dst at a version, shortest first (unknown edges named)."""
        return cast(
            "PathsResult",
            self.read(
                "paths",
                src=src,
                dst=dst,
                max_hops=max_hops,
                edge_types=edge_types,
                direction=direction,
                limit=limit,
                at=at,
                timeout=timeout,
            ),
        )

    def reach(
        self,
        node: NodeLike,
        *,
        direction: Literal["out", "in", "both"] = "out",
        max_hops: int = 2,
        edge_types: Sequence[str] | None = None,
        limit: int = 100,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> ReachResult:
        """Every node within max_hops of a node at a version, nearest first."""
        return cast(
            "ReachResult",
            self.read(
                "reach",
                node=node,
                direction=direction,
                max_hops=max_hops,
                edge_types=edge_types,
                limit=limit,
                at=at,
                timeout=timeout,
            ),
        )

    def edges(
        self,
        *,
        limit: int = 500,
        at: int | None = None,
    ) -> list[EdgeView]:
        """The graph's edges at a version (present and unknown), at most limit."""
        return cast(
            "list[EdgeView]",
            self.read(
                "edges",
                limit=limit,
                at=at,
            ),
        )

    def history(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> HistoryView:
        """Every decision that touched an edge, up to a version (cut_below after GC)."""
        return cast(
            "HistoryView",
            self.read(
                "history",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
                at=at,
                timeout=timeout,
            ),
        )

    def quarantine(
        self,
        *,
        include_closed: bool = False,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> list[dict[str, Any]]:
        """Conflicts withheld from the readable graph at a version."""
        return cast(
            "list[dict[str, Any]]",
            self.read(
                "quarantine",
                include_closed=include_closed,
                at=at,
                timeout=timeout,
            ),
        )

    def claim_info(
        self,
        claim_id: str,
        *,
        at: int | None = None,
    ) -> dict[str, Any] | None:
        """A claim's record and status at a version."""
        return cast(
            "dict[str, Any] | None",
            self.read(
                "claim_info",
                claim_id=claim_id,
                at=at,
            ),
        )

    def conflict(
        self,
        conflict_id: str,
        *,
        at: int | None = None,
    ) -> dict[str, Any] | None:
        """A conflict at a version, with its claims."""
        return cast(
            "dict[str, Any] | None",
            self.read(
                "conflict",
                conflict_id=conflict_id,
                at=at,
            ),
        )

    def schema_info(
        self,
        *,
        at: int | None = None,
    ) -> dict[str, Any] | None:
        """The graph schema in force at a version."""
        return cast(
            "dict[str, Any] | None",
            self.read(
                "schema_info",
                at=at,
            ),
        )

    def escalation(
        self,
        conflict_id: str,
        *,
        at: int | None = None,
    ) -> dict[str, Any] | None:
        """One conflict's self-contained escalation payload at a version."""
        return cast(
            "dict[str, Any] | None",
            self.read(
                "escalation",
                conflict_id=conflict_id,
                at=at,
            ),
        )

    def escalations(
        self,
        *,
        include_open: bool = False,
        at: int | None = None,
    ) -> list[dict[str, Any]]:
        """Escalated conflicts' evidence payloads (every open one with include_open)."""
        return cast(
            "list[dict[str, Any]]",
            self.read(
                "escalations",
                include_open=include_open,
                at=at,
            ),
        )

    def calibration(
        self,
        edge_type: str,
        *,
        at: int | None = None,
    ) -> dict[str, tuple[int, int]]:
        """Each writer's resolved-conflict record for an edge type (wins, losses)."""
        return cast(
            "dict[str, tuple[int, int]]",
            self.read(
                "calibration",
                edge_type=edge_type,
                at=at,
            ),
        )

    def decisions(
        self,
        start: int = 0,
        limit: int = 100,
    ) -> list[tuple[int, Decision]]:
        """The decisions log from a version on: (version, decision)."""
        return cast(
            "list[tuple[int, Decision]]",
            self.read(
                "decisions",
                start=start,
                limit=limit,
            ),
        )


class RunReads:
    """Each read a run traces as a typed method, at the run's pinned version."""

    def read(self, query: str, /, **params: Any) -> Any:
        """The one read operation (the subclass answers it)."""
        raise NotImplementedError

    def edge(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
    ) -> EdgeView:
        """One edge at a version: present, absent or unknown (with the conflict id).

        At the run's pinned version, recorded in its trace."""
        return cast(
            "EdgeView",
            self.read(
                "edge",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
            ),
        )

    def slot(
        self,
        edge_type: str,
        node: NodeLike,
        *,
        direction: Literal["out", "in"] = "out",
    ) -> SlotView:
        """What an exclusive slot holds at a version.

        At the run's pinned version, recorded in its trace."""
        return cast(
            "SlotView",
            self.read(
                "slot",
                edge_type=edge_type,
                node=node,
                direction=direction,
            ),
        )

    def neighbors(
        self,
        node: NodeLike,
        *,
        edge_type: str | None = None,
        direction: Literal["out", "in"] = "out",
        include_absent: bool = False,
        min_confidence: float | None = None,
        writer: str | None = None,
        asserted_after: int | None = None,
        asserted_before: int | None = None,
    ) -> list[NeighborView]:
        """A node's neighbours at a version, optionally filtered by their claims.

        At the run's pinned version, recorded in its trace."""
        return cast(
            "list[NeighborView]",
            self.read(
                "neighbors",
                node=node,
                edge_type=edge_type,
                direction=direction,
                include_absent=include_absent,
                min_confidence=min_confidence,
                writer=writer,
                asserted_after=asserted_after,
                asserted_before=asserted_before,
            ),
        )

    def paths(
        self,
        src: NodeLike,
        dst: NodeLike,
        *,
        max_hops: int = 3,
        edge_types: Sequence[str] | None = None,
        direction: Literal["out", "in", "both"] = "out",
        limit: int = 100,
    ) -> PathsResult:
        """Simple paths src -> dst at a version, shortest first (unknown edges named).

        At the run's pinned version, recorded in its trace."""
        return cast(
            "PathsResult",
            self.read(
                "paths",
                src=src,
                dst=dst,
                max_hops=max_hops,
                edge_types=edge_types,
                direction=direction,
                limit=limit,
            ),
        )

    def reach(
        self,
        node: NodeLike,
        *,
        direction: Literal["out", "in", "both"] = "out",
        max_hops: int = 2,
        edge_types: Sequence[str] | None = None,
        limit: int = 100,
    ) -> ReachResult:
        """Every node within max_hops of a node at a version, nearest first.

        At the run's pinned version, recorded in its trace."""
        return cast(
            "ReachResult",
            self.read(
                "reach",
                node=node,
                direction=direction,
                max_hops=max_hops,
                edge_types=edge_types,
                limit=limit,
            ),
        )

    def history(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
    ) -> HistoryView:
        """Every decision that touched an edge, up to a version (cut_below after GC).

        At the run's pinned version, recorded in its trace."""
        return cast(
            "HistoryView",
            self.read(
                "history",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
            ),
        )

    def quarantine(
        self,
        *,
        include_closed: bool = False,
    ) -> list[dict[str, Any]]:
        """Conflicts withheld from the readable graph at a version.

        At the run's pinned version, recorded in its trace."""
        return cast(
            "list[dict[str, Any]]",
            self.read(
                "quarantine",
                include_closed=include_closed,
            ),
        )

    def claim_info(
        self,
        claim_id: str,
    ) -> dict[str, Any] | None:
        """A claim's record and status at a version.

        At the run's pinned version, recorded in its trace."""
        return cast(
            "dict[str, Any] | None",
            self.read(
                "claim_info",
                claim_id=claim_id,
            ),
        )

    def conflict(
        self,
        conflict_id: str,
    ) -> dict[str, Any] | None:
        """A conflict at a version, with its claims.

        At the run's pinned version, recorded in its trace."""
        return cast(
            "dict[str, Any] | None",
            self.read(
                "conflict",
                conflict_id=conflict_id,
            ),
        )
