"""The thin path of GET /v1/edge answers exactly what the FastAPI route answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx

import claimgraph
from claimgraph.http.app import create_app
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, token_file


def test_thin_edge_reads_answer_as_the_route_does(tmp_path: Path) -> None:
    """Present, absent, unknown and retired edges, at head and at older versions, with and
    without encoded characters: each answered by the thin path (its counter moves) with the
    very bytes, status and content type the FastAPI route gives (the same query plus
    `timeout=0`, which only the route takes); requests it must not take (no or unknown
    token, a repeated or unknown parameter, a bad node, a future or malformed version) are
    left to the route and answered as before."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    a = g.assert_("depends_on", "service:a", "service:b", agent="inventory")
    g.deny("depends_on", "service:a", "service:b", agent="tracer")  # unknown from here
    c = g.assert_("depends_on", "service:ü b", "service:b", agent="inventory")
    g.retract(c.command_id, agent="inventory")
    logs: list[dict[str, Any]] = []
    app = create_app(g, token_file(), request_log=logs.append)
    head = g.head()
    plain: list[dict[str, Any]] = []
    for s in ("service:a", "service:ü b", "service:zz"):
        for at in (None, a.version, c.version, head, -1, 0):
            q = {"edge_type": "depends_on", "subject": s, "object": "service:b"}
            plain.append(q if at is None else {**q, "at": str(at)})
    refused = [
        {"edge_type": "depends_on", "subject": "a", "object": "service:b"},
        {"edge_type": "depends_on", "subject": "service:a", "object": "service:b",
         "at": str(head + 5)},
        {"edge_type": "depends_on", "subject": "service:a", "object": "service:b", "at": "x"},
        {"edge_type": "nope", "subject": "service:a", "object": "service:b"},
        {"edge_type": "", "subject": "service:a", "object": "service:b"},
        {"edge_type": "depends_on", "subject": "service:" + "a" * 300, "object": "service:b"},
    ]  # fmt: skip

    async def go() -> None:
        headers = {"Authorization": f"Bearer {TOKENS['tracer']}"}
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t", headers=headers
        ) as cl:
            for q in plain:
                before = app.state.thin["answered"]
                thin = await cl.get("/v1/edge", params=q)
                # an unknown edge is a blocked read: the service layer's route counts it
                unknown = thin.json()["state"] == "unknown"
                assert app.state.thin["answered"] == before + (0 if unknown else 1), q
                route = await cl.get("/v1/edge", params={**q, "timeout": "0"})
                assert app.state.thin["answered"] == before + (0 if unknown else 1), q
                if unknown and "at" not in q:  # the first one's report moved head meanwhile
                    assert thin.json()["version"] + 1 >= route.json()["version"], q
                else:
                    assert (thin.status_code, thin.content) == (route.status_code, route.content)
                assert thin.headers["content-type"] == route.headers["content-type"]
            for q in refused:
                before = app.state.thin["answered"]
                r = await cl.get("/v1/edge", params=q)
                assert r.status_code >= 400 and r.json()["reason"], (q, r.text)
                assert app.state.thin["answered"] == before, q
                route = await cl.get("/v1/edge", params={**q, "timeout": "0"})
                assert (r.status_code, r.content) == (route.status_code, route.content), q
            q = plain[0]
            for bad_headers in ({"Authorization": ""}, {"Authorization": "Bearer nope"}):
                r = await cl.get("/v1/edge", params=q, headers=bad_headers)
                assert r.status_code == 401
            r = await cl.get("/v1/edge?edge_type=depends_on&edge_type=x&subject=service:a"
                             "&object=service:b")  # fmt: skip
            assert r.status_code in (200, 422)

    anyio.run(go)
    thin = [x for x in logs if x["status"] == 200 and x["method"] == "GET"]
    assert len(thin) >= len(plain) and {x["route"] for x in logs} == {"/v1/edge"}
    assert {x["principal"] for x in thin} == {"tracer"}  # logged as the route's answers are
    states = {
        g.edge("depends_on", "service:a", "service:b").state,
        g.edge("depends_on", "service:ü b", "service:b", at=c.version).state,
    }
    assert states == {"unknown", "present"}
    g.close()
