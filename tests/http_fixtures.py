"""Fixtures for the HTTP API and the SDK's two transports (the real app, in process)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.http.app import create_app
from claimgraph.http.auth import TokenFile
from claimgraph.service.graph import Graph
from tests.conftest import SCHEMA

# one token per principal the tests act as; roles as the token file grants them
PRINCIPALS: list[dict[str, Any]] = [
    {"agent": "admin", "roles": ["admin"]},
    {"agent": "reviewer", "roles": ["resolver"]},
    {"agent": "inventory"},
    {"agent": "tracer"},
    {"agent": "dba", "tasks": ["audit-*"]},
    {"agent": "release-bot", "tasks": ["promote"]},
    {"agent": "intern"},
]
TOKENS = {p["agent"]: f"token-of-{p['agent']}-{i:04d}" for i, p in enumerate(PRINCIPALS)}


def token_file() -> TokenFile:
    """The test principals as a token file (the admin's entry by digest, the rest in clear)."""
    from claimgraph.http.auth import token_digest

    entries = []
    for p in PRINCIPALS:
        e = dict(p)
        if p["agent"] == "admin":
            e["sha256"] = token_digest(TOKENS["admin"])
        else:
            e["token"] = TOKENS[p["agent"]]
        entries.append(e)
    return TokenFile.parse(json.dumps({"tokens": entries}), "test-tokens")


SdkFactory = Callable[[str], Any]


@pytest.fixture(params=["embedded", "http"])
def sdk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[SdkFactory, Graph]]:
    """(as_agent, graph): ``as_agent(name)`` is the SDK as that principal, over one transport.

    Embedded: the graph itself (the process is trusted). HTTP: ``claimgraph.connect`` with the
    principal's token, through httpx.ASGITransport into the real FastAPI app over that graph.
    """
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    assert g.publish_schema(SCHEMA, agent="admin", source="conftest").kind == "accepted"
    clients: list[Any] = []
    if request.param == "embedded":

        def as_agent(agent: str) -> Any:
            return g

    else:
        app = create_app(g, token_file())

        def as_agent(agent: str) -> Any:
            c = claimgraph.connect("http://claimgraph.test", token=TOKENS[agent], app=app)
            clients.append(c)
            return c

    yield as_agent, g
    for c in clients:
        c.close()
    g.close()
