"""What the review page reads, at scale: pages that add up to the whole, search, truncation said,
the neighbourhood drawing, and the security headers — through the real app, in process."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import claimgraph
from claimgraph.http.app import create_app
from claimgraph.http.headers import CSP
from claimgraph.http.svg import Edge, neighborhood_svg
from claimgraph.service.graph import Graph
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, token_file

AUTH = {"Authorization": f"Bearer {TOKENS['reviewer']}"}
N_CONFLICTS, N_HUB = 13, 17


def populate(g: Graph, conflicts: int = N_CONFLICTS, hub: int = N_HUB) -> None:
    """``conflicts`` quarantined ownership slots (db0..), and service:hub depending on
    ``hub`` services (s00..), as a batch."""
    cmds: list[dict[str, Any]] = []
    for i in range(conflicts):
        base = {"type": "assert", "edge_type": "owns", "object": f"database:db{i}"}
        cmds.append({**base, "subject": f"service:svc{i}", "agent": "inventory", "task": "t"})
        cmds.append({**base, "subject": f"service:alt{i}", "agent": "dba", "task": "audit-1"})
    for j in range(hub):
        cmds.append(
            {"type": "assert", "edge_type": "depends_on", "subject": "service:hub",
             "object": f"service:s{j:02d}", "agent": "inventory", "task": "t"}
        )  # fmt: skip
    from claimgraph.service.inputs import parse_command

    for i, c in enumerate(cmds):
        c.update(command_id=f"c{i:04d}", confidence=0.8)
    kinds = [r.kind for r in g.submit([parse_command(c, g.name) for c in cmds])]
    assert kinds.count("quarantined") == conflicts, kinds


@pytest.fixture
def app_graph(tmp_path: Path) -> Iterator[tuple[httpx.Client, Graph]]:
    g = claimgraph.open(tmp_path / "g", create=True, graph="scale")
    g.publish_schema(SCHEMA, agent="admin")
    populate(g)
    transport = httpx.ASGITransport(app=create_app(g, token_file()))  # type: ignore[arg-type]
    import anyio.from_thread

    with anyio.from_thread.start_blocking_portal() as portal:

        def handle(request: httpx.Request) -> httpx.Response:
            async def go() -> httpx.Response:
                resp = await transport.handle_async_request(request)
                body = await resp.aread()
                return httpx.Response(resp.status_code, headers=resp.headers, content=body)

            return portal.call(go)

        with httpx.Client(transport=httpx.MockTransport(handle), base_url="http://t") as c:
            yield c, g
    g.close()


def _walk(c: httpx.Client, path: str, what: str, **params: Any) -> list[list[Any]]:
    """Every page of a paged list, following next_cursor to the end."""
    pages, cursor = [], None
    for _ in range(100):
        r = c.get(path, params={**params, **({"cursor": cursor} if cursor else {})}, headers=AUTH)
        assert r.status_code == 200, r.text
        body = r.json()
        pages.append(body[what])
        assert body["truncated"] == (body["next_cursor"] is not None)
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
    raise AssertionError("paging did not end")


def _edge_key(e: dict[str, Any]) -> tuple[str, ...]:
    return (e["edge_type"], *e["subject"], *e["object"])


def test_edge_pages_add_up_to_the_graph(app_graph: tuple[httpx.Client, Graph]) -> None:
    """Pages of 7 edges: disjoint, in order, all but the last full, together every edge."""
    c, g = app_graph
    pages = _walk(c, "/v1/graph", "edges", limit=7)
    flat = [_edge_key(e) for p in pages for e in p]
    everything = [
        (e.edge_type, *e.subject, *e.object) for e in g.edges(limit=10_000)
    ]  # fmt: skip
    assert flat == everything and len(flat) == N_CONFLICTS * 2 + N_HUB
    assert all(len(p) == 7 for p in pages[:-1]) and 0 < len(pages[-1]) <= 7
    whole = c.get("/v1/graph", params={"limit": len(flat)}, headers=AUTH).json()
    assert not whole["truncated"] and whole["next_cursor"] is None  # exactly full: not cut
    cut = c.get("/v1/graph", params={"limit": len(flat) - 1}, headers=AUTH).json()
    assert cut["truncated"]  # one fewer than all: says more follow


def test_edge_search_filters_case_insensitively(app_graph: tuple[httpx.Client, Graph]) -> None:
    """q keeps the edges whose type, subject or object contains it, across pages."""
    c, _ = app_graph
    hub = [e for p in _walk(c, "/v1/graph", "edges", limit=5, q="HUB") for e in p]
    assert len(hub) == N_HUB and all(e["subject"] == ["service", "hub"] for e in hub)
    one = [e for p in _walk(c, "/v1/graph", "edges", q="database:db7") for e in p]
    assert {tuple(e["subject"]) for e in one} == {("service", "svc7"), ("service", "alt7")}
    none = c.get("/v1/graph", params={"q": "no-such-thing"}, headers=AUTH).json()
    assert none["edges"] == [] and not none["truncated"]


def test_search_budget_stops_early_and_says_where(app_graph: tuple[httpx.Client, Graph]) -> None:
    """A scan that runs out of budget returns a cursor, never a silently short answer;
    following it finds every match."""
    _, g = app_graph
    found, after, pages = [], None, 0
    while True:
        page = g.edges_page(after=after, q="s16", budget=4)
        pages += 1
        assert page.scanned <= 4
        found += page.items
        if page.after is None:
            break
        assert page.truncated
        after = page.after
    assert [e.object for e in found] == [("service", "s16")]
    assert pages > 10  # it really went 4 entities at a time


def test_quarantine_pages_and_search(app_graph: tuple[httpx.Client, Graph]) -> None:
    """Conflict pages of 5 add up to the open queue; q finds a conflict by its node."""
    c, g = app_graph
    pages = _walk(c, "/v1/quarantine", "conflicts", limit=5)
    assert [len(p) for p in pages] == [5, 5, 3]
    ids = [x["conflict_id"] for p in pages for x in p]
    assert ids == [x["conflict_id"] for x in g.quarantine()]
    assert all(x["claim_details"][0]["agent"] for p in pages for x in p)
    hit = c.get("/v1/quarantine", params={"q": "database:DB11"}, headers=AUTH).json()
    assert [x["slots"] for x in hit["conflicts"]] == [
        next(x for x in g.quarantine() if "db11" in str(x["slots"]))["slots"]
    ]
    assert not hit["truncated"]
    by_task = [x for p in _walk(c, "/v1/quarantine", "conflicts", q="AUDIT-1") for x in p]
    assert len(by_task) == N_CONFLICTS  # the dba's task, found through the claims
    assert c.get("/v1/quarantine", params={"q": "tracer"}, headers=AUTH).json()["conflicts"] == []
    old = c.get("/v1/quarantine", headers=AUTH).json()  # no paging asked: every conflict
    assert len(old["conflicts"]) == N_CONFLICTS and "next_cursor" not in old


def test_a_cursor_we_did_not_make_is_refused(app_graph: tuple[httpx.Client, Graph]) -> None:
    """A garbled cursor is a 422 problem, not a silently different page."""
    c, _ = app_graph
    r = c.get("/v1/graph", params={"cursor": "%%%not-base64"}, headers=AUTH)
    assert r.status_code == 422 and "cursor" in r.json()["detail"], r.text
    r = c.get("/v1/graph", params={"cursor": "no+t/b64"}, headers=AUTH)  # not the URL alphabet
    assert r.status_code == 422 and "cursor" in r.json()["detail"], r.text


def test_neighbourhood_svg_is_bounded_and_says_so(app_graph: tuple[httpx.Client, Graph]) -> None:
    """The hub's drawing shows max_nodes neighbours and says how many it left out."""
    c, _ = app_graph
    r = c.get("/v1/neighborhood.svg", params={"node": "service:hub", "max_nodes": 10}, headers=AUTH)
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/svg+xml")
    root = ET.fromstring(r.text)
    ns = "{http://www.w3.org/2000/svg}"
    nodes = [g for g in root.iter(f"{ns}g") if g.get("data-testid") == "svg-node"]
    assert len(nodes) == 10
    cut = [t for t in root.iter(f"{ns}text") if t.get("data-testid") == "svg-truncated"]
    assert cut and cut[0].text == f"truncated: 10 of {N_HUB} neighbours drawn"
    leaf = c.get("/v1/neighborhood.svg", params={"node": "service:s03"}, headers=AUTH)
    assert "svg-truncated" not in leaf.text and 'data-node="service:hub"' in leaf.text
    assert c.get("/v1/neighborhood.svg", params={"node": "service:hub"}).status_code == 401


def test_svg_is_deterministic_and_escapes_every_label() -> None:
    """Same input, same bytes; hostile ids stay text (well-formed XML, no markup injected)."""
    evil = ("service", '"><script>alert(1)</script>&\x01')
    edges = [
        Edge("depends_on", "out", evil, "present"),
        Edge("owns<x>", "in", ("team", "a'b"), "unknown", "cf:1"),
    ]
    a = neighborhood_svg(("service", "x&y"), edges, 7)
    assert a == neighborhood_svg(("service", "x&y"), list(reversed(edges)), 7)
    root = ET.fromstring(a)  # parses: every label escaped, the control character replaced
    assert "<script" not in a and "script" not in {el.tag.split("}")[1] for el in root.iter()}
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert 'service:"><script>alert(1)</script>&\ufffd' in titles
    assert "stroke-dasharray" in a  # the unknown edge is drawn dashed


def test_security_headers_on_page_api_and_errors(app_graph: tuple[httpx.Client, Graph]) -> None:
    """CSP without inline script, no framing, nosniff and no referrer, on every response."""
    c, _ = app_graph
    for path, headers in (("/review", {}), ("/v1/head", AUTH), ("/v1/head", {})):
        r = c.get(path, headers=headers)
        assert r.headers["content-security-policy"] == CSP, path
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "no-referrer"
    assert "'unsafe-inline'" not in CSP and "frame-ancestors 'none'" in CSP
    docs = c.get("/docs")
    assert "frame-ancestors 'none'" in docs.headers["content-security-policy"]
    assert "cdn.jsdelivr.net" in docs.headers["content-security-policy"]
