"""``claimgraph serve``'s stderr is one JSON object per line — its own events, uvicorn's and
the MCP SDK's records — with no traceback when MCP sessions end; SIGTERM stops it as Ctrl-C
does (the socket and the announcement are removed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

import claimgraph
from claimgraph.service.local import ANNOUNCEMENT, SOCKET
from tests.conftest import ROOT
from tests.test_review_page import _free_port
from tests.test_served_resolvers import REFUNDS, TOKENS, _tokens

Event = dict[str, Any]


class _Serve:
    """A ``serve`` process; its stderr lines kept as they come, parsed when they are JSON."""

    def __init__(self, data: Path, tokens: Path, *flags: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "claimgraph", *flags, "--data", str(data), "serve",
             "--port", str(self.port), "--tokens", str(tokens)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )  # fmt: skip
        self.lines: list[str] = []
        self.events: list[Event] = []
        self.out: list[str] = []
        self._new = threading.Condition()
        self._readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._drain, daemon=True),
        ]
        for t in self._readers:
            t.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._new:
                self.lines.append(line)
                try:
                    e = json.loads(line)
                except ValueError:
                    pass
                else:
                    if isinstance(e, dict):
                        self.events.append(e)
                self._new.notify_all()
        with self._new:
            self._new.notify_all()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        self.out.extend(self.proc.stdout)

    def wait(
        self, test: Callable[[Event], bool], count: int = 1, timeout: float = 60
    ) -> list[Event]:
        """The events passing ``test`` once there are ``count`` of them (or fail: the output
        so far), the process still running."""

        def found() -> list[Event]:
            return [e for e in self.events if test(e)]

        with self._new:
            self._new.wait_for(
                lambda: len(found()) >= count or self.proc.poll() is not None, timeout
            )
            got = found()
        assert len(got) >= count, "".join(self.lines)
        return got

    def up(self) -> None:
        self.wait(lambda e: e.get("message") == "Application startup complete.")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(60)
        for t in self._readers:
            t.join(30)
        return code


@contextmanager
def _served(tmp_path: Path, levels: str = "info,uvicorn=info") -> Iterator[_Serve]:
    """serve over a refunds graph (resolver chains), up once uvicorn says its startup is
    complete (an INFO record of uvicorn.error: the levels must show it)."""
    tmp_path.mkdir(exist_ok=True)
    data = tmp_path / "g"
    with claimgraph.open(data, create=True, graph="payments") as g:
        assert g.publish_schema(REFUNDS, agent="payments-admin").kind == "accepted"
    s = _Serve(data, _tokens(tmp_path / "tokens.json"), "--log-level", levels)
    try:
        s.up()
        yield s
    finally:
        s.stop()


@asynccontextmanager
async def _mcp(url: str, token: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as client,
        streamable_http_client(f"{url}/mcp", http_client=client) as (r, w, _),
        ClientSession(r, w) as session,
    ):
        await session.initialize()
        yield session


def test_serve_logs_one_json_object_per_line_and_no_traceback(tmp_path: Path) -> None:
    """MCP sessions opened and closed, a resolver pass, API requests: every stderr line of
    serve is one JSON object (ts, level, logger, event), uvicorn's and the SDK's records
    included; the SDK's record of each normal session close is DEBUG, without a traceback;
    nothing at ERROR; no traceback anywhere."""
    with _served(tmp_path, "info,uvicorn=info,mcp.server.streamable_http=debug") as s:

        async def sessions() -> None:
            for _ in range(3):
                async with _mcp(s.url, TOKENS["fraud-agent"][0]) as mcp:
                    tools = await mcp.list_tools()
                    assert "read_slot" in {t.name for t in tools.tools}
                    args = {"edge_type": "refund_decision", "node": "refund:R-0"}
                    r = await mcp.call_tool("read_slot", args)
                    assert not r.isError, r.content

        anyio.run(sessions)
        closed = s.wait(lambda e: "closed with the session" in e.get("message", ""), count=3)
        assert {e["level"] for e in closed} == {"debug"}
        with (
            claimgraph.connect(s.url, token=TOKENS["fraud-agent"][0]) as fraud,
            claimgraph.connect(s.url, token=TOKENS["experience-agent"][0]) as experience,
        ):
            fraud.assert_(
                "refund_decision",
                "refund:R-1",
                "verdict:BLOCK_TRANSACTION",
                agent="fraud-agent",
                confidence=0.6,
            )
            r = experience.assert_(
                "refund_decision",
                "refund:R-1",
                "verdict:APPROVE",
                agent="experience-agent",
                confidence=0.9,
            )
            assert r.kind == "quarantined"
            cid = r.decision["conflict_id"]
            (verdict,) = s.wait(
                lambda e: e["event"] == "resolvers.verdict" and e["conflict"] == cid
            )
            assert (verdict["resolver"], verdict["decision"]) == ("rules:block-wins", "resolved")
            assert fraud.wait_for(r.version + 1, 30) == r.version + 1
        assert s.stop() == 0
    text = "".join(s.lines)
    assert "Traceback" not in text and "│" not in text
    assert len(s.events) == len(s.lines), [x for x in s.lines if not x.startswith("{")]
    assert all(list(e)[:4] == ["ts", "level", "logger", "event"] for e in s.events)
    assert [e for e in s.events if e["level"] in ("error", "critical") or "exc" in e] == []
    mcp_requests = [
        e["method"] for e in s.events if e["event"] == "http.request" and e["route"] == "/mcp"
    ]
    assert mcp_requests.count("DELETE") == 3  # three sessions, each ended by its client
    loggers = {e["logger"] for e in s.events}
    assert {
        "uvicorn.error",
        "mcp.server.streamable_http",
        "claimgraph.http",
        "claimgraph.resolvers",
    } <= loggers
    assert s.events[-1]["event"] == "serve.stopped"


def test_sigterm_cleans_up_as_ctrl_c_does(tmp_path: Path) -> None:
    """SIGTERM (what kill, systemd and docker send) and SIGINT (Ctrl-C) both stop serve with
    exit 0 and remove its socket and announcement; the graph opens again at once."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        with _served(tmp_path / sig.name) as s:
            data = tmp_path / sig.name / "g"
            assert (data / SOCKET).exists() and (data / ANNOUNCEMENT).exists()
            assert httpx.get(f"{s.url}/healthz", timeout=10).status_code == 200
            assert s.stop(sig) == 0, "".join(s.lines)
        assert not (data / SOCKET).exists() and not (data / ANNOUNCEMENT).exists(), sig.name
        assert {e["logger"] for e in s.events if e["level"] in ("error", "critical")} == set()
        with claimgraph.open(data) as g:  # nothing holds it any more
            assert g.head() >= 0
