"""A served graph for MCP tests: the real app (API + /mcp) under uvicorn in a thread."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

import claimgraph
from claimgraph.http.app import create_app
from claimgraph.mcp.transports import HttpSessions, mount
from claimgraph.service.graph import Graph
from tests.conftest import SCHEMA
from tests.http_fixtures import token_file


class _Server(uvicorn.Server):
    """uvicorn that says when it is listening (tests wait on the event, not on a clock)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.up = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.up.set()


@contextmanager
def served(
    path: Path, schema: str = SCHEMA, **app_options: Any
) -> Iterator[tuple[str, Graph, HttpSessions]]:
    """(base URL, the embedded graph behind it, the MCP sessions) with the schema published;
    ``app_options`` go to ``create_app`` (limits=...)."""
    g = claimgraph.open(path, create=True, graph="test")
    g.publish_schema(schema, agent="admin")
    app = create_app(g, token_file(), **app_options)
    sessions = mount(app)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    failed: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # surfaced below
            failed.append(exc)
            server.up.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert server.up.wait(30), "the server did not start"
    if failed:
        raise failed[0]
    try:
        yield f"http://127.0.0.1:{port}", g, sessions
    finally:
        server.should_exit = True
        t.join(30)
        sock.close()
        g.close()


def result(r: Any) -> dict[str, Any]:
    """A tool call's structured result (the SDK's own client types)."""
    import json

    assert not r.isError, r.content
    if r.structuredContent is not None:
        out = r.structuredContent
        return dict(out.get("result", out)) if set(out) == {"result"} else dict(out)
    return dict(json.loads(r.content[0].text))
