"""How ``claimgraph paths`` and ``claimgraph reach`` print: queries beyond one hop, at a version.

Their arguments come from the query catalogue (:mod:`claimgraph.cli.catalogue`).

Limits (hops, results, expansions, time) are those of :mod:`claimgraph.service.queries`;
quarantined edges met on the way are printed with their conflict ids, never left out.
"""

from __future__ import annotations

from typing import Any

from claimgraph.cli.catalogue import renders
from claimgraph.cli.common import emit, say
from claimgraph.service.queries import Hop

__all__ = ["paths", "reach"]


def _hop(h: Hop) -> str:
    s = f"{h.subject[0]}:{h.subject[1]} -{h.edge_type}-> {h.object[0]}:{h.object[1]}"
    return s + (f" [unknown: {h.conflict_id}]" if h.state == "unknown" else "")


@renders("paths")
def paths(g: Any, q: dict[str, Any], *, at: int | None, wait: float, as_json: bool) -> None:
    """Simple paths from SRC to DST at a version, shortest first."""
    res = g.paths(**q, at=at, timeout=wait)
    if as_json:
        emit(res.as_dict())
        return
    src, dst, hops = q["src"], q["dst"], q["max_hops"]
    say(f"{len(res.paths)} path(s) {src} → {dst} at v{res.version} (max {hops} hops)")
    for p in res.paths:
        say(f"  [{p.state}] " + "  ".join(_hop(h) for h in p.hops))
    for h in res.unknown:
        say(f"  quarantined on the way: {_hop(h)}")
    if res.truncated:
        say(f"  (cut short by the {res.truncated_by} limit)")


@renders("reach")
def reach(g: Any, q: dict[str, Any], *, at: int | None, wait: float, as_json: bool) -> None:
    """Every node within MAX_HOPS of NODE at a version, nearest first."""
    res = g.reach(**q, at=at, timeout=wait)
    if as_json:
        emit(res.as_dict())
        return
    node, max_hops = q["node"], q["max_hops"]
    say(f"{len(res.nodes)} node(s) within {max_hops} hops of {node} at v{res.version}")
    for r in res.nodes:
        note = "" if r.certain else f"  (only through quarantined: {', '.join(r.conflicts)})"
        say(f"  {r.hops}  {r.node[0]}:{r.node[1]}{note}")
    if res.truncated:
        say(f"  (cut short by the {res.truncated_by} limit)")
