"""What an operator sees of ``serve``: /metrics by route template, JSON request logs, /readyz."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

import claimgraph
from claimgraph.http.app import create_app
from claimgraph.service.graph import Graph, open_graph
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, token_file


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus text exposition: (name, labels) → value."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str):
    return found.get((name, frozenset(labels.items())))


def _client(app: Any) -> TestClient:
    return TestClient(app, base_url="http://t")


def test_metrics_label_routes_by_template_and_count_decisions(graph: Graph) -> None:
    """Requests are timed by route template and status (never the raw path); decisions of the
    server's writes are counted by kind; the graph's gauges are read at scrape time."""
    app = create_app(graph, token_file())
    auth = {"authorization": f"Bearer {TOKENS['inventory']}"}
    with claimgraph.connect("http://t", token=TOKENS["inventory"], app=app) as c:
        r = c.assert_("owns", "service:a", "database:x", agent="inventory")
        assert r.kind == "accepted"
    with claimgraph.connect("http://t", token=TOKENS["dba"], app=app) as c:
        r2 = c.assert_("owns", "service:b", "database:x", agent="dba", task="audit-q3")
        assert r2.kind == "quarantined"
    with _client(app) as h:
        assert h.get(f"/v1/versions/{r.version}", headers=auth).status_code == 200
        assert h.get("/v1/versions/999999", headers=auth).status_code == 409
        assert h.get("/no/such/path/secret-id-123").status_code == 404
        assert h.get("/v1/head").status_code == 401
        text = h.get("/metrics").text
    found = samples(text)
    hist = "claimgraph_http_request_duration_seconds_count"
    assert value(found, hist, route="/v1/versions/{version}", method="GET", status="200") == 1
    assert value(found, hist, route="/v1/versions/{version}", method="GET", status="409") == 1
    assert value(found, hist, route="unmatched", method="GET", status="404") == 1
    assert value(found, hist, route="/v1/head", method="GET", status="401") == 1
    labels = {v for _, lab in found for _, v in lab}
    assert not any("secret" in v or "999999" in v for v in labels)
    assert value(found, "claimgraph_http_decisions_total", kind="accepted") == 1
    assert value(found, "claimgraph_http_decisions_total", kind="quarantined") == 1
    assert value(found, "claimgraph_open_quarantines", graph="test") == 1
    assert value(found, "claimgraph_applied_version", graph="test") == graph.head()
    assert value(found, "claimgraph_projection_lag_seconds", graph="test") == 0
    assert value(found, "claimgraph_graph_up", graph="test") == 1
    assert value(found, "process_resident_memory_bytes") is not None


def test_gate_refusals_are_timed_under_the_route_they_were_sent_to(graph: Graph) -> None:
    """A body the gate refuses before routing still counts under its route template, with
    its status; a hostile method collapses into ``other``."""
    from claimgraph.http.limits import HttpLimits

    app = create_app(graph, token_file(), limits=HttpLimits(max_body=100))
    with _client(app) as h:
        big = h.post(
            "/v1/commands/claim",
            content=b"{" + b" " * 500 + b"}",
            headers={"content-length": "502"},
        )
        assert big.status_code == 413
        assert h.request("BREW", "/v1/head").status_code in (401, 405)
        found = samples(h.get("/metrics").text)
    hist = "claimgraph_http_request_duration_seconds_count"
    assert value(found, hist, route="/v1/commands/claim", method="POST", status="413") == 1
    assert sum(v for (n, lab), v in found.items() if n == hist and ("method", "other") in lab) == 1


def test_request_log_is_one_json_object_per_request_without_tokens(graph: Graph) -> None:
    """Each request logs method, route template, status, duration and principal; never the
    token, the raw path or the query."""
    lines: list[dict[str, Any]] = []
    app = create_app(graph, token_file(), request_log=lines.append)
    with _client(app) as h:
        auth = {"authorization": f"Bearer {TOKENS['inventory']}"}
        assert h.get("/v1/versions/0?x=private", headers=auth).status_code == 200
        assert h.get("/v1/head", headers={"authorization": "Bearer nope"}).status_code == 401
    assert [(x["method"], x["route"], x["status"], x["principal"]) for x in lines] == [
        ("GET", "/v1/versions/{version}", 200, "inventory"),
        ("GET", "/v1/head", 401, None),
    ]
    assert all(x["event"] == "http.request" and x["duration_ms"] >= 0 for x in lines)
    assert TOKENS["inventory"] not in repr(lines) and "private" not in repr(lines)


def test_readyz_follows_the_projection_lag_on_the_logs_clock(tmp_path: Path) -> None:
    """/readyz is 200 while the projection is caught up, 503 once a decision it has not
    applied is older than the bound, on the log's own clock."""
    now = [1_700_000_000_000]
    g = open_graph(tmp_path / "g", create=True, graph="test", clock=lambda: now[0])
    try:
        g.publish_schema(SCHEMA, agent="admin")
        app = create_app(g, token_file(), ready_lag=2.0)
        with _client(app) as h:
            ok = h.get("/readyz")
            assert ok.status_code == 200 and ok.json()["lag_seconds"] == 0
            # a decision logged, not projected (as when the projection's disk is full)
            record = g.logs.decisions.get(0)
            assert record is not None
            g.logs.decisions.append([record.value])
            now[0] += 1500
            within = h.get("/readyz")
            assert within.status_code == 200 and within.json()["lag_seconds"] == 1.5
            now[0] += 1000
            behind = h.get("/readyz")
            assert behind.status_code == 503
            assert behind.json() == {
                "ready": False,
                "graph": "test",
                "applied": 0,
                "lag_seconds": 2.5,
                "bound_seconds": 2.0,
            }
            found = samples(h.get("/metrics").text)
            assert value(found, "claimgraph_projection_lag_seconds", graph="test") == 2.5
    finally:
        g.close()
