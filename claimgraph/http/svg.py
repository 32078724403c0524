"""A node's neighbourhood at a version, drawn as SVG on the server (pure: text in, text out).

The layout is deterministic — the node in the middle, its neighbours on a circle in sorted
order, one line per edge (arrows point from subject to object; dashed and amber when the
edge is unknown) — so the same graph at the same version draws the same bytes. At most
``max_nodes`` neighbours are drawn; the drawing says how many it left out. Every label is
escaped and stripped of characters XML cannot carry, and the SVG has no script, no style
element and no external reference, so it renders under the review page's CSP.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["Edge", "neighborhood_svg"]

WIDTH, HEIGHT = 760, 560
COLOURS = {"present": "#0a7d32", "unknown": "#a15c00", "absent": "#8a8f99"}
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


class Edge(NamedTuple):
    """One edge at the node: ``out`` (the node is the subject) or ``in``, to ``other``."""

    edge_type: str
    direction: str
    other: tuple[str, str]
    state: str
    conflict_id: str | None = None


def _esc(text: str) -> str:
    text = _NOT_XML.sub("\ufffd", text)
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
    )


def _short(text: str, n: int = 30) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _f(x: float) -> str:
    return f"{x:.1f}"


def neighborhood_svg(
    center: tuple[str, str], edges: Sequence[Edge], at: int, *, max_nodes: int = 24
) -> str:
    """The SVG document of ``center``'s neighbourhood at version ``at``."""
    by_node: dict[tuple[str, str], list[Edge]] = {}
    for e in edges:
        by_node.setdefault(e.other, []).append(e)
    nodes = sorted(by_node)
    drawn = nodes[:max_nodes]
    name = ":".join(center)
    cx, cy, radius = WIDTH / 2, HEIGHT / 2 + 14, min(WIDTH, HEIGHT) / 2 - 80
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="neighbourhood of {_esc(name)} at v{at}" data-testid="neighbourhood-svg">',
        "<defs>",
    ]
    for state, colour in COLOURS.items():
        out.append(
            f'<marker id="arrow-{state}" viewBox="0 0 10 10" refX="10" refY="5" '
            f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
        )
    out.append("</defs>")
    title = f"{name} at v{at}: {len(nodes)} neighbour{'s' * (len(nodes) != 1)}"
    out.append(f'<text x="12" y="22" font-size="14" fill="#1d2330">{_esc(title)}</text>')
    if len(drawn) < len(nodes):
        out.append(
            f'<text x="12" y="42" font-size="13" fill="#b00020" data-testid="svg-truncated">'
            f"truncated: {len(drawn)} of {len(nodes)} neighbours drawn</text>"
        )
    if not nodes:
        out.append(
            f'<text x="{_f(cx)}" y="{_f(cy + 40)}" font-size="13" fill="#555" '
            f'text-anchor="middle">no edges at this node at v{at}</text>'
        )
    for i, other in enumerate(drawn):
        angle = -math.pi / 2 + 2 * math.pi * i / len(drawn)
        x, y = cx + radius * math.cos(angle), cy + radius * math.sin(angle)
        group = sorted(by_node[other], key=lambda e: (e.direction, e.edge_type))
        dx, dy = x - cx, y - cy
        length = math.hypot(dx, dy) or 1.0
        ux, uy = dx / length, dy / length
        for k, e in enumerate(group):
            off = (k - (len(group) - 1) / 2) * 7
            ox, oy = -uy * off, ux * off  # parallel lines for several edges to one node
            a = (cx + ux * 16 + ox, cy + uy * 16 + oy)
            b = (x - ux * 11 + ox, y - uy * 11 + oy)
            start, end = (a, b) if e.direction == "out" else (b, a)
            state = e.state if e.state in COLOURS else "absent"
            dash = ' stroke-dasharray="6 4"' if state == "unknown" else ""
            label = f"{e.edge_type} ({e.state}{', ' + e.conflict_id if e.conflict_id else ''})"
            out.append(
                f'<g class="edge edge-{state}" data-edge-type="{_esc(e.edge_type)}">'
                f"<title>{_esc(label)}</title>"
                f'<line x1="{_f(start[0])}" y1="{_f(start[1])}" x2="{_f(end[0])}" '
                f'y2="{_f(end[1])}" stroke="{COLOURS[state]}" stroke-width="2"{dash} '
                f'marker-end="url(#arrow-{state})"/>'
                f'<text x="{_f(a[0] + (b[0] - a[0]) * 0.7 + ox)}" '
                f'y="{_f(a[1] + (b[1] - a[1]) * 0.7 + oy - 3)}" '
                f'font-size="11" fill="{COLOURS[state]}" text-anchor="middle">'
                f"{_esc(_short(e.edge_type, 24))}</text></g>"
            )
        anchor = "start" if ux > 0.2 else "end" if ux < -0.2 else "middle"
        lx, ly = x + ux * 14, y + uy * 14 + (4 if abs(uy) < 0.9 else 10 * math.copysign(1, uy))
        label = ":".join(other)
        out.append(
            f'<g class="node" data-node="{_esc(label)}" data-testid="svg-node">'
            f"<title>{_esc(label)}</title>"
            f'<circle cx="{_f(x)}" cy="{_f(y)}" r="9" fill="#fff" stroke="#3b6fd8" '
            f'stroke-width="2"/>'
            f'<text x="{_f(lx)}" y="{_f(ly)}" font-size="12" fill="#1d2330" '
            f'text-anchor="{anchor}">{_esc(_short(label))}</text></g>'
        )
    out.append(
        f'<g class="node center" data-node="{_esc(name)}" data-testid="svg-center">'
        f"<title>{_esc(name)}</title>"
        f'<circle cx="{_f(cx)}" cy="{_f(cy)}" r="14" fill="#3b6fd8"/>'
        f'<text x="{_f(cx)}" y="{_f(cy + 30)}" font-size="13" font-weight="bold" '
        f'fill="#1d2330" text-anchor="middle">{_esc(_short(name, 40))}</text></g>'
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"
