"""The answers of the queries beyond one hop over HTTP (``GET /v1/paths``, ``GET /v1/reach``,
routes derived from the query catalogue in :mod:`claimgraph.http.catalogue`), as models.

Bounded as :mod:`claimgraph.service.queries` documents (hops, results, expansions, time);
unknown edges met on the way come back in ``unknown`` with their conflict ids.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

__all__ = ["HopOut", "PathOut", "PathsOut", "ReachOut", "ReachedOut"]


class HopOut(BaseModel):
    """One edge on a walk, as walked (``subject`` → ``object``, each ``[type, id]``)."""

    edge_type: str
    subject: list[str]
    object: list[str]
    state: Literal["present", "unknown"]
    conflict_id: str | None
    claims: list[str]


class PathOut(BaseModel):
    """A simple path: ``unknown`` if one of its hops is, naming those conflicts."""

    state: Literal["present", "unknown"]
    length: int
    conflicts: list[str]
    hops: list[HopOut]


class PathsOut(BaseModel):
    """Paths from ``src`` to ``dst`` at ``version``, shortest first."""

    src: list[str]
    dst: list[str]
    version: int
    max_hops: int
    paths: list[PathOut]
    unknown: list[HopOut]
    truncated: bool
    truncated_by: Literal["limit", "expansions"] | None


class ReachedOut(BaseModel):
    """A node reached: in how many hops; ``certain`` unless only through unknown edges."""

    node: list[str]
    hops: int
    certain: bool
    conflicts: list[str]


class ReachOut(BaseModel):
    """Nodes within ``max_hops`` of ``node`` at ``version``, nearest first."""

    node: list[str]
    direction: Literal["out", "in", "both"]
    version: int
    max_hops: int
    nodes: list[ReachedOut]
    unknown: list[HopOut]
    truncated: bool
    truncated_by: Literal["limit", "expansions"] | None
