"""Every catalogued read as a typed awaitable method over ``read``, for graphs and runs.

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

__all__ = ["AsyncCatalogueReads", "AsyncRunReads"]

_ = (Any, Literal, Sequence)  # the signatures below name them


class AsyncCatalogueReads:
    """Each read of the catalogue as a typed awaitable method: ``read(name, ...)``."""

    async def read(self, query: str, /, **params: Any) -> Any:
        """The one read operation (the subclass answers it)."""
        raise NotImplementedError

    async def edge(
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
            await self.read(
                "edge",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
                at=at,
                timeout=timeout,
            ),
        )

    async def read_edges(
        self,
        edges: Sequence[EdgeRef],
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> list[EdgeView]:
        """Several edges at one version, in order: one answer each, as edge gives it."""
        return cast(
            "list[EdgeView]",
            await self.read(
                "read_edges",
                edges=edges,
                at=at,
                timeout=timeout,
            ),
        )

    async def slot(
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
            await self.read(
                "slot",
                edge_type=edge_type,
                node=node,
                direction=direction,
                at=at,
                timeout=timeout,
            ),
        )

    async def neighbors(
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
            await self.read(
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

    async def paths(
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
            await self.read(
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

    async def reach(
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
            await self.read(
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

    async def edges(
        self,
        *,
        limit: int = 500,
        at: int | None = None,
    ) -> list[EdgeView]:
        """The graph's edges at a version (present and unknown), at most limit."""
        return cast(
            "list[EdgeView]",
            await self.read(
                "edges",
                limit=limit,
                at=at,
            ),
        )

    async def history(
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
            await self.read(
                "history",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
                at=at,
                timeout=timeout,
            ),
        )

    async def quarantine(
        self,
        *,
        include_closed: bool = False,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> list[dict[str, Any]]:
        """Conflicts withheld from the readable graph at a version."""
        return cast(
            "list[dict[str, Any]]",
            await self.read(
                "quarantine",
                include_closed=include_closed,
                at=at,
                timeout=timeout,
            ),
        )

    async def claim_info(
        self,
        claim_id: str,
        *,
        at: int | None = None,
    ) -> dict[str, Any] | None:
        """A claim's record and status at a version."""
        return cast(
            "dict[str, Any] | None",
            await self.read(
                "claim_info",
                claim_id=claim_id,
                at=at,
            ),
        )

    async def conflict(
        self,
        conflict_id: str,
        *,
        at: int | None = None,
    ) -> dict[str, Any] | None:
        """A conflict at a version, with its claims."""
        return cast(
            "dict[str, Any] | None",
            await self.read(
                "conflict",
                conflict_id=conflict_id,
                at=at,
            ),
        )

    async def schema_info(
        self,
        *,
        at: int | None = None,
    ) -> dict[str, Any] | None:
        """The graph schema in force at a version."""
        return cast(
            "dict[str, Any] | None",
            await self.read(
                "schema_info",
                at=at,
            ),
        )

    async def escalation(
        self,
        conflict_id: str,
        *,
        at: int | None = None,
    ) -> dict[str, Any] | None:
        """One conflict's self-contained escalation payload at a version."""
        return cast(
            "dict[str, Any] | None",
            await self.read(
                "escalation",
                conflict_id=conflict_id,
                at=at,
            ),
        )

    async def escalations(
        self,
        *,
        include_open: bool = False,
        at: int | None = None,
    ) -> list[dict[str, Any]]:
        """Escalated conflicts' evidence payloads (every open one with include_open)."""
        return cast(
            "list[dict[str, Any]]",
            await self.read(
                "escalations",
                include_open=include_open,
                at=at,
            ),
        )

    async def calibration(
        self,
        edge_type: str,
        *,
        at: int | None = None,
    ) -> dict[str, tuple[int, int]]:
        """Each writer's resolved-conflict record for an edge type (wins, losses)."""
        return cast(
            "dict[str, tuple[int, int]]",
            await self.read(
                "calibration",
                edge_type=edge_type,
                at=at,
            ),
        )

    async def decisions(
        self,
        start: int = 0,
        limit: int = 100,
    ) -> list[tuple[int, Decision]]:
        """The decisions log from a version on: (version, decision)."""
        return cast(
            "list[tuple[int, Decision]]",
            await self.read(
                "decisions",
                start=start,
                limit=limit,
            ),
        )


class AsyncRunReads:
    """Each read a run traces as a typed awaitable method, at the run's pinned version."""

    async def read(self, query: str, /, **params: Any) -> Any:
        """The one read operation (the subclass answers it)."""
        raise NotImplementedError

    async def edge(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
    ) -> EdgeView:
        """One edge at a version: present, absent or unknown (with the conflict id).

        At the run's pinned version, recorded in its trace."""
        return cast(
            "EdgeView",
            await self.read(
                "edge",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
            ),
        )

    async def slot(
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
            await self.read(
                "slot",
                edge_type=edge_type,
                node=node,
                direction=direction,
            ),
        )

    async def neighbors(
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
            await self.read(
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

    async def paths(
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
            await self.read(
                "paths",
                src=src,
                dst=dst,
                max_hops=max_hops,
                edge_types=edge_types,
                direction=direction,
                limit=limit,
            ),
        )

    async def reach(
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
            await self.read(
                "reach",
                node=node,
                direction=direction,
                max_hops=max_hops,
                edge_types=edge_types,
                limit=limit,
            ),
        )

    async def history(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
    ) -> HistoryView:
        """Every decision that touched an edge, up to a version (cut_below after GC).

        At the run's pinned version, recorded in its trace."""
        return cast(
            "HistoryView",
            await self.read(
                "history",
                edge_type=edge_type,
                subject=subject,
                obj=obj,
            ),
        )

    async def quarantine(
        self,
        *,
        include_closed: bool = False,
    ) -> list[dict[str, Any]]:
        """Conflicts withheld from the readable graph at a version.

        At the run's pinned version, recorded in its trace."""
        return cast(
            "list[dict[str, Any]]",
            await self.read(
                "quarantine",
                include_closed=include_closed,
            ),
        )

    async def claim_info(
        self,
        claim_id: str,
    ) -> dict[str, Any] | None:
        """A claim's record and status at a version.

        At the run's pinned version, recorded in its trace."""
        return cast(
            "dict[str, Any] | None",
            await self.read(
                "claim_info",
                claim_id=claim_id,
            ),
        )

    async def conflict(
        self,
        conflict_id: str,
    ) -> dict[str, Any] | None:
        """A conflict at a version, with its claims.

        At the run's pinned version, recorded in its trace."""
        return cast(
            "dict[str, Any] | None",
            await self.read(
                "conflict",
                conflict_id=conflict_id,
            ),
        )
