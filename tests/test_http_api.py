"""The HTTP API against its own OpenAPI document: current, and robust to generated requests.

Schemathesis generates requests from the spec and sends them to the real app over a real
graph: no response may be a 5xx, and every 4xx must be a problem+json body with a reason code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

import claimgraph
from claimgraph.http.app import create_app
from tests.conftest import ROOT, SCHEMA
from tests.http_fixtures import TOKENS, token_file


def test_openapi_document_in_docs_is_current() -> None:
    """docs/openapi.json is what the app serves (regenerate: python tools/openapi.py)."""
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from openapi import render

    assert (ROOT / "docs" / "openapi.json").read_text(encoding="utf-8") == render()


def _app(tmp: Path) -> Any:
    g = claimgraph.open(tmp / "g", create=True, graph="fuzz")
    g.publish_schema(SCHEMA, agent="admin")
    g.assert_("depends_on", "service:a", "service:b", agent="inventory", command_id="c1")
    g.deny("depends_on", "service:a", "service:b", agent="tracer")  # an open conflict
    with g.run(agent="inventory") as run:
        run.edge("depends_on", "service:a", "service:b")
    return create_app(g, token_file())


_TMP = Path(__import__("tempfile").mkdtemp(prefix="claimgraph-fuzz-"))
schema = schemathesis.openapi.from_asgi("/openapi.json", _app(_TMP))


@schema.parametrize()
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
@pytest.mark.parametrize("who", ["admin", None])
def test_no_5xx_and_every_4xx_is_a_problem(case: schemathesis.Case, who: str | None) -> None:
    """Generated requests (as the admin, and with no token) never yield 5xx; 4xx are problems."""
    headers = {"Authorization": f"Bearer {TOKENS[who]}"} if who else {}
    response = case.call(headers=headers)
    assert response.status_code < 500, (case.method, case.path, response.text[:500])
    if 400 <= response.status_code < 500:
        assert response.headers["content-type"][0].startswith("application/problem+json"), (
            case.method,
            case.path,
            response.status_code,
        )
        body = json.loads(response.content)
        assert isinstance(body["reason"], str) and body["status"] == response.status_code
