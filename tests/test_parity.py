"""One scenario through every surface: the same decisions, limits and refusal classes.

The same commands go through the HTTP API (the sync and the async SDK), MCP (streamable HTTP
and stdio, with the official ``mcp`` client) and the writer socket (a CLI process beside a
running writer: :class:`~claimgraph.service.attached.AttachedGraph`), each on a fresh graph
under the same limits (max_batch 3, max_pins 1, max_run_trace 4). Every surface must record
the same decisions, reach each limit at the same threshold and refuse with the same class —
each in its own vocabulary (an exception of the SDK, a tool error or result of MCP, an error
frame of the socket), normalised here to a reason code. The checks are the service layer's
(:mod:`claimgraph.service.access`), so they cannot differ.

The writer socket is the local owner's door for writes (its peer is the directory's owner,
trusted as ``--agent`` is): it has no identity refusals, and its reads are the attached
process's own, so it is held to the decisions of the writes and to the run-trace limit.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

import claimgraph
from claimgraph.errors import ClaimgraphError
from claimgraph.http.app import create_app
from claimgraph.service.graph import Graph
from claimgraph.service.limits import Limits
from tests.conftest import ROOT, SCHEMA
from tests.http_fixtures import PRINCIPALS, TOKENS, token_file
from tests.mcp_fixtures import result, served

LIMITS = Limits(max_batch=3, max_pins=1, max_run_trace=4)
SURFACES = ["http-sync", "http-async", "mcp-http", "mcp-stdio", "writer-socket"]
CLAIM = {"edge_type": "owns", "object": "database:d"}
FOUR = [
    {"edge_type": "depends_on", "subject": "service:a", "object": f"service:x{i}"} for i in range(4)
]


def _class(exc: BaseException) -> str:
    """A refusal's class, whatever the surface raised it as: its reason code."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason:
        return reason
    text = str(exc)
    for code in ("too_large", "too_many", "not_resolver", "invalid_field"):
        if code in text:
            return code
    return type(exc).__name__


# -- the surfaces: one agent's operations, each answered as (what happened, its class) ------


class Sdk:
    """The HTTP API through the sync or the async SDK (the real app, in process)."""

    def __init__(self, g: Graph, flavour: str) -> None:
        self.app = create_app(g, token_file(), limits=LIMITS)
        self.flavour = flavour

    @asynccontextmanager
    async def agent(self, name: str) -> AsyncIterator[Any]:
        if self.flavour == "sync":
            h = claimgraph.connect("http://t", TOKENS[name], app=self.app, retries=0)
            try:
                yield _SyncOps(h)
            finally:
                h.close()
        else:
            from claimgraph.sdk.aio_http import aconnect

            h2 = await aconnect("http://t", TOKENS[name], app=self.app, retries=0)
            async with h2:
                yield _AsyncOps(h2)


class _SyncOps:
    def __init__(self, h: Any) -> None:
        self.h = h

    async def claim(self, subject: str, task: str | None = None) -> str:
        return str(self.h.assert_("owns", subject, "database:d", task=task).kind)

    async def read_slot(self) -> str:
        return str(self.h.slot("owns", "database:d", direction="in").state)

    async def escalate(self, conflict: str) -> str:
        return _outcome(lambda: self.h.escalate(conflict, reason="blocked"))

    async def four_claims(self) -> str:
        cmds = [_command(self.h, c) for c in FOUR]
        return _outcome(lambda: self.h.submit(cmds))

    async def two_runs(self) -> str:
        with self.h.run():
            return _outcome(lambda: self.h.run())

    async def long_trace(self) -> str:
        def go() -> None:
            with self.h.run() as run:
                for i in range(4):
                    run.edge("depends_on", "service:a", f"service:y{i}")

        return _outcome(go)


class _AsyncOps:
    def __init__(self, h: Any) -> None:
        self.h = h

    async def claim(self, subject: str, task: str | None = None) -> str:
        return str((await self.h.assert_("owns", subject, "database:d", task=task)).kind)

    async def read_slot(self) -> str:
        return str((await self.h.slot("owns", "database:d", direction="in")).state)

    async def escalate(self, conflict: str) -> str:
        return await _aoutcome(self.h.escalate(conflict, reason="blocked"))

    async def four_claims(self) -> str:
        cmds = [_command(self.h._builder, c) for c in FOUR]
        return await _aoutcome(self.h.submit(cmds))

    async def two_runs(self) -> str:
        async with self.h.run():
            return await _aoutcome(self.h.run().start())

    async def long_trace(self) -> str:
        async def go() -> None:
            async with self.h.run() as run:
                for i in range(4):
                    await run.edge("depends_on", "service:a", f"service:y{i}")

        return await _aoutcome(go())


def _command(builder: Any, c: dict[str, str]) -> Any:
    """The claim command the SDK's builders make (sent by submit, not yet)."""
    from claimgraph.sdk.aio_http import _Builder

    b = _Builder(builder.name)
    b.default_agent, b.default_task = builder.default_agent, builder.default_task
    return b.assert_(c["edge_type"], c["subject"], c["object"])


def _outcome(call: Callable[[], Any]) -> str:
    try:
        call()
    except ClaimgraphError as exc:
        return _class(exc)
    return "ok"


async def _aoutcome(aw: Any) -> str:
    try:
        await aw
    except ClaimgraphError as exc:
        return _class(exc)
    return "ok"


class Mcp:
    """MCP through the official client: streamable HTTP on a served graph, or stdio processes
    over the data directory (each as its token's principal)."""

    def __init__(self, transport: str, url: str = "", data: Path | None = None) -> None:
        self.transport, self.url, self.data = transport, url, data

    @asynccontextmanager
    async def agent(self, name: str) -> AsyncIterator[Any]:
        if self.transport == "http":
            headers = {"Authorization": f"Bearer {TOKENS[name]}"}
            async with (
                httpx.AsyncClient(headers=headers, timeout=30) as client,
                streamable_http_client(f"{self.url}/mcp", http_client=client) as (r, w, _),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                yield _McpOps(s)
            return
        assert self.data is not None
        args = ["-m", "claimgraph", "--data", str(self.data), "mcp", "--token", TOKENS[name]]
        args += ["--max-batch", "3", "--max-pins", "1", "--max-run-trace", "4"]
        params = StdioServerParameters(
            command=sys.executable, args=args, env={**os.environ, "PYTHONPATH": str(ROOT)}
        )
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            yield _McpOps(s)


class _McpOps:
    def __init__(self, s: ClientSession) -> None:
        self.s = s

    async def _tool(self, tool: str, **args: Any) -> tuple[bool, Any]:
        r = await self.s.call_tool(tool, args)
        if r.isError:
            return False, str(r.content[0].text)  # type: ignore[union-attr]
        return True, result(r)

    async def claim(self, subject: str, task: str | None = None) -> str:
        run = None
        if task is not None:  # a task is chosen by starting a run in it
            ok, run = await self._tool("start_run", task=task)
            assert ok, run
        ok, out = await self._tool(
            "assert_edge", subject=subject, run_id=run and run["run_id"], **CLAIM
        )
        if run is not None:
            await self._tool("end_run", run_id=run["run_id"])
        assert ok, out
        return str(out["decision"])

    async def read_slot(self) -> str:
        ok, out = await self._tool("read_slot", edge_type="owns", node="database:d", direction="in")
        assert ok, out
        return str(out["state"])

    async def escalate(self, conflict: str) -> str:
        ok, out = await self._tool("escalate_conflict", conflict_id=conflict, reason="blocked")
        return str(out["reason"]) if ok and out["decision"] == "refused" else _class_of(ok, out)

    async def four_claims(self) -> str:
        ok, out = await self._tool("write_claims", claims=FOUR)
        return _class_of(ok, out)

    async def two_runs(self) -> str:
        ok, first = await self._tool("start_run")
        assert ok, first
        ok, out = await self._tool("start_run")  # pinned before the first is ended
        await self._tool("end_run", run_id=first["run_id"])
        return _class_of(ok, out)

    async def long_trace(self) -> str:
        ok, run = await self._tool("start_run")
        assert ok, run
        for i in range(4):
            await self._tool(
                "read_edge", edge_type="depends_on", subject="service:a",
                object=f"service:y{i}", run_id=run["run_id"],
            )  # fmt: skip
        ok, out = await self._tool("end_run", run_id=run["run_id"])
        return _class_of(ok, out)


def _class_of(ok: bool, out: Any) -> str:
    if ok:
        return "ok"
    return _class(Exception(out))


class Socket:
    """The writer socket: an attached process's writes and traces, decided by the writer."""

    def __init__(self, g: Graph) -> None:
        from claimgraph.service.access import Access
        from claimgraph.service.attached import AttachedGraph
        from claimgraph.service.local_writer import WriterListener

        self.listener = WriterListener(g, access=Access(g, limits=LIMITS))
        self.attached = AttachedGraph(g.path, g.name, writer_wait=30)

    def close(self) -> None:
        self.attached.close()
        self.listener.close()

    @asynccontextmanager
    async def agent(self, name: str) -> AsyncIterator[Any]:
        yield _SocketOps(self.attached, name)


class _SocketOps:
    """The local owner writing as ``agent`` (it may: whoever owns the directory owns it)."""

    def __init__(self, a: Any, agent: str) -> None:
        self.a, self.agent = a, agent

    async def claim(self, subject: str, task: str | None = None) -> str:
        return str(
            self.a.assert_("owns", subject, "database:d", agent=self.agent, task=task or "").kind
        )

    async def escalate(self, conflict: str) -> str:
        r = self.a.escalate(conflict, agent=self.agent, reason="blocked")
        return str(r.reason)  # no identity to refuse: the governor rejects it, same class

    async def long_trace(self) -> str:
        def go() -> None:
            with self.a.run(agent=self.agent) as run:
                for i in range(4):
                    run.edge("depends_on", "service:a", f"service:y{i}")

        return _outcome(go)


# -- the scenario ------------------------------------------------------------------------------


def _decisions(g: Graph) -> list[tuple[str, str, str, str]]:
    """The decisions after the schema, as (agent, command, kind, reason): a refusal counts as
    the command it refused (the socket's owner is not refused: the governor rejects it)."""
    out = []
    for _, d in g.decisions(1, 1000):
        ctype = d["command_type"]
        if ctype == "refused":
            ctype = "escalate" if d["reason"] == "not_resolver" else f"refused {d['reason']}"
        out.append((d["agent"], ctype, d["kind"], d["reason"]))
    return out


def _fresh(path: Path) -> Graph:
    g = claimgraph.open(path, create=True, graph="test")
    assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
    return g


def _conflict_of(g: Graph) -> str:
    (c,) = g.quarantine()
    return str(c["conflict_id"])


WANT = {
    "claim": "accepted",
    "rival": "quarantined",
    "reads": ["unknown"] * 5,
    "escalate": "not_resolver",
    "two_runs": "too_many",
    "long_trace": "too_large",
    "four_claims": "too_large",
}
WANT_DECISIONS = [
    ("inventory", "claim", "accepted", "new"),
    ("dba", "claim", "quarantined", "slot_conflict"),
    ("tracer", "read_blocked", "accepted", "read_blocked"),
    ("tracer", "escalate", "rejected", "not_resolver"),
]


@pytest.mark.parametrize("surface", SURFACES)
def test_every_surface_decides_limits_and_refuses_alike(tmp_path: Path, surface: str) -> None:
    """The scenario through one surface: the decisions, limits and refusal classes every
    other surface gives."""
    if surface.startswith("http"):
        g = _fresh(tmp_path / "g")
        try:
            out = _run(Sdk(g, surface.removeprefix("http-")), g, reads=True, limits=True)
            got = _decisions(g)
        finally:
            g.close()
    elif surface == "mcp-http":
        with served(tmp_path / "g", limits=LIMITS) as (url, g, _sessions):
            out = _run(Mcp("http", url=url), g, reads=True, limits=True)
            got = _decisions(g)
    elif surface == "mcp-stdio":
        data = tmp_path / "g"
        _fresh(data).close()
        _write_tokens(data / "tokens.json")
        out = _run(Mcp("stdio", data=data), None, reads=True, limits=True, data=data)
        with claimgraph.open(data) as g:
            got = _decisions(g)
    else:
        g = _fresh(tmp_path / "g")
        sock = Socket(g)
        try:
            out = _run(sock, g, reads=False, limits=False)
            got = _decisions(g)
        finally:
            sock.close()
            g.close()
    want = {k: v for k, v in WANT.items() if k in out}
    assert out == want
    if surface == "writer-socket":  # no reads through the socket: no blocked read reported
        assert got == [d for d in WANT_DECISIONS if d[1] != "read_blocked"]
    else:
        assert got == WANT_DECISIONS


def _run(
    surface: Any, g: Graph | None, *, reads: bool, limits: bool, data: Path | None = None
) -> dict[str, Any]:
    """The scenario, with the conflict id learnt from the graph once it is quarantined."""

    async def go() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with surface.agent("inventory") as inv:
            out["claim"] = await inv.claim("service:a")
        async with surface.agent("dba") as dba:
            out["rival"] = await dba.claim("service:b", task="audit-owners")
        conflict = _conflict_of(g) if g is not None else _conflict_in(data)
        async with surface.agent("tracer") as tr:
            if reads:
                out["reads"] = [await tr.read_slot() for _ in range(5)]
            out["escalate"] = await tr.escalate(conflict)
            if limits:
                out["two_runs"] = await tr.two_runs()
            out["long_trace"] = await tr.long_trace()
        if limits:
            async with surface.agent("inventory") as inv:
                out["four_claims"] = await inv.four_claims()
        return out

    return anyio.run(go)


def _conflict_in(data: Path | None) -> str:
    assert data is not None
    with claimgraph.open(data) as g:
        return _conflict_of(g)


def _write_tokens(path: Path) -> None:
    entries = [{**p, "token": TOKENS[p["agent"]]} for p in PRINCIPALS]
    path.write_text(json.dumps({"tokens": entries}), encoding="utf-8")
    path.chmod(0o600)
