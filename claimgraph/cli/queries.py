"""``claimgraph paths`` and ``claimgraph reach``: queries beyond one hop, at a version.

Limits (hops, results, expansions, time) are those of :mod:`claimgraph.service.queries`;
quarantined edges met on the way are printed with their conflict ids, never left out.
"""

from __future__ import annotations

from typing import Annotated

import typer

from claimgraph.cli.common import AtOpt, JsonOpt, WaitOpt, app, emit, graph_session, say
from claimgraph.service.queries import Hop

__all__ = ["register"]

Types = Annotated[
    list[str] | None, typer.Option("--type", help="Follow only this edge type (repeatable).")
]
Direction = Annotated[str, typer.Option(help="out, in or both.")]


def _hop(h: Hop) -> str:
    s = f"{h.subject[0]}:{h.subject[1]} -{h.edge_type}-> {h.object[0]}:{h.object[1]}"
    return s + (f" [unknown: {h.conflict_id}]" if h.state == "unknown" else "")


def paths(
    src: Annotated[str, typer.Argument(help="From this node (type:id).")],
    dst: Annotated[str, typer.Argument(help="To this node (type:id).")],
    max_hops: Annotated[int, typer.Option(help="At most this many edges (1..6).")] = 3,
    edge_type: Types = None,
    direction: Direction = "out",
    limit: Annotated[int, typer.Option(help="At most this many paths (1..1000).")] = 100,
    at: AtOpt = None,
    wait: WaitOpt = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """Simple paths from SRC to DST at a version, shortest first."""
    with graph_session() as g:
        res = g.paths(
            src, dst, max_hops=max_hops, edge_types=edge_type, direction=direction,
            limit=limit, at=at, timeout=wait,
        )  # fmt: skip
    if as_json:
        emit(res.as_dict())
        return
    say(f"{len(res.paths)} path(s) {src} → {dst} at v{res.version} (max {max_hops} hops)")
    for p in res.paths:
        say(f"  [{p.state}] " + "  ".join(_hop(h) for h in p.hops))
    for h in res.unknown:
        say(f"  quarantined on the way: {_hop(h)}")
    if res.truncated:
        say(f"  (cut short by the {res.truncated_by} limit)")


def reach(
    node: Annotated[str, typer.Argument(help="From this node (type:id).")],
    max_hops: Annotated[int, typer.Option(help="At most this many edges (1..6).")] = 2,
    edge_type: Types = None,
    direction: Direction = "out",
    limit: Annotated[int, typer.Option(help="At most this many nodes (1..1000).")] = 100,
    at: AtOpt = None,
    wait: WaitOpt = 0.0,
    as_json: JsonOpt = False,
) -> None:
    """Every node within MAX_HOPS of NODE at a version, nearest first."""
    with graph_session() as g:
        res = g.reach(
            node, direction=direction, max_hops=max_hops, edge_types=edge_type, limit=limit,
            at=at, timeout=wait,
        )  # fmt: skip
    if as_json:
        emit(res.as_dict())
        return
    say(f"{len(res.nodes)} node(s) within {max_hops} hops of {node} at v{res.version}")
    for r in res.nodes:
        note = "" if r.certain else f"  (only through quarantined: {', '.join(r.conflicts)})"
        say(f"  {r.hops}  {r.node[0]}:{r.node[1]}{note}")
    if res.truncated:
        say(f"  (cut short by the {res.truncated_by} limit)")


def register(root: typer.Typer = app) -> None:
    """Add ``paths`` and ``reach`` to the CLI."""
    root.command("paths", rich_help_panel="Read")(paths)
    root.command("reach", rich_help_panel="Read")(reach)
