"""The async SDK over HTTP: ``await claimgraph.aconnect(url, token=...)`` (httpx.AsyncClient).

The same routes, bodies and parsing as the sync client (:mod:`claimgraph.sdk.http`); commands
are built by the sync writers (:class:`~claimgraph.service.api.GraphWrites`) without I/O, then
posted with ``await``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, cast

import httpx
from httpx_retries import Retry, RetryTransport

from claimgraph.core.model import Command
from claimgraph.core.queries import Cut, QuerySpec
from claimgraph.errors import InputError, NotFoundError, StorageError, VersionNotYetAvailable
from claimgraph.sdk.aio import AsyncGraph
from claimgraph.sdk.aio_runs import READING_IN
from claimgraph.sdk.http import (
    BATCH,
    RETRIES,
    RETRY_WAIT,
    batch_body,
    batch_receipts,
    command_body,
    defaults_of,
    only_clients,
    only_on_429,
    raise_for,
    read_result,
    receipt_of,
    retry_policy,
    run_summaries,
)
from claimgraph.sdk.wire_reads import PAGE, read_answer, read_request
from claimgraph.service.api import GraphWrites, Receipt
from claimgraph.service.reads import catalogued
from claimgraph.service.traces import ReplayReport, RunSummary

__all__ = ["AsyncHttpGraph", "aconnect"]


class _Builder(GraphWrites):
    """The sync writers' command building, without sending: ``_one`` hands the command back."""

    def __init__(self, name: str) -> None:
        self.name = name

    def _one(self, command: Command) -> Receipt:
        return cast(Receipt, command)

    def _one_signed(self, record: bytes) -> Receipt:
        raise InputError(
            "signed records go to the commands log directly; over HTTP the server "
            "authenticates the token and signs (serve --signing-key)"
        )


class AsyncHttpGraph(AsyncGraph):
    """A graph behind the HTTP API, over an ``httpx.AsyncClient``."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        name: str,
        policy: Retry | None = None,
        whoami: dict[str, Any] | None = None,
    ) -> None:
        self._http = client
        self.name = name
        self._policy = policy or retry_policy()
        self._builder = _Builder(name)
        if whoami is not None:
            self.default_agent, self.default_task = defaults_of(whoami)
            self._builder.default_agent = self.default_agent
            self._builder.default_task = self.default_task

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return await self._http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise StorageError(f"cannot reach the claimgraph API: {exc}") from None

    async def _get(self, path: str, **params: Any) -> Any:
        q = {k: v for k, v in params.items() if v is not None}
        resp = await self._request("GET", path, params=q)
        if resp.status_code != 200:
            raise_for(resp)
        return resp.json()

    async def _post_command(self, command: Command) -> Receipt:
        ctype, body = command_body(command)
        resp = await self._request("POST", f"/v1/commands/{ctype}", json=body)
        data: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            data = resp.json()
        receipt = receipt_of(ctype, resp.status_code, data)
        if receipt is None:
            raise_for(resp)
            raise AssertionError("unreachable")
        return receipt

    async def _call(self, method: str, *args: Any, **kw: Any) -> Any:
        raise NotImplementedError(method)  # every read and write is a method of its own below

    async def write(self, name: str, /, **params: Any) -> Receipt:
        """Any write of the write catalogue: built as the sync writers build it, posted to
        its command's route."""
        command = cast(Command, self._builder.write(name, **params))
        return await self._post_command(command)

    async def submit(
        self, commands: Sequence[Command | bytes], batch: int = BATCH
    ) -> list[Receipt]:
        """Send commands in batches (``POST /v1/commands``), as the sync client does."""
        out: list[Receipt] = []
        for i in range(0, len(commands), batch):
            chunk = commands[i : i + batch]
            types, body = batch_body(chunk)
            if not only_clients(types):  # a system-only type: refused and recorded by its route
                out += [await self._post_command(cast(Command, c)) for c in chunk]
                continue
            resp = await self._request("POST", "/v1/commands", json=body)
            if resp.status_code != 200:
                raise_for(resp)
            out += batch_receipts(types, resp.json())
        return out

    async def head(self) -> int:
        return int((await self._get("/v1/head"))["head"])

    async def wait_for(self, version: int, timeout: float = 0.0) -> int:
        try:
            r = await self._get(f"/v1/versions/{version}", timeout=min(timeout, 30.0))
        except VersionNotYetAvailable as exc:
            raise VersionNotYetAvailable(version, exc.head, timeout) from None
        return int(r["head"])

    async def read(self, query: str, /, **params: Any) -> Any:
        """Any read of the query catalogue over its route, as the sync client sends it
        (:mod:`claimgraph.sdk.wire_reads`); a read in a run names it (``run=``)."""
        spec = catalogued(query, params)
        if spec.cut is Cut.PAGE:
            return await self._pages(spec, params)
        req = read_request(spec, params, READING_IN.get())
        return read_result(spec, params, await self._request(req.method, req.path, **req.kwargs()))

    async def _pages(self, spec: QuerySpec, params: dict[str, Any]) -> list[Any]:
        limit: int = params.get("limit", spec.param("limit").default)
        at, cursor, out = params.get("at"), None, list[Any]()
        while True:  # the server's pages, at one version, until ``limit`` or the end
            page = {"limit": min(limit - len(out), PAGE), "at": at}
            req = read_request(spec, page, None)
            r = await self._get(req.path, **req.params, cursor=cursor)
            out += read_answer(spec, page, 200, r)
            at, cursor = r["version"], r.get("next_cursor")
            if cursor is None or len(out) >= limit:
                return out[:limit]

    async def _maybe(self, path: str, **params: Any) -> dict[str, Any] | None:
        try:
            return cast(dict[str, Any], await self._get(path, **params))
        except NotFoundError:
            return None

    async def whoami(self) -> dict[str, Any]:
        """The principal this client's token maps to."""
        return cast(dict[str, Any], await self._get("/v1/whoami"))

    async def append_run_events(self, events: Sequence[dict[str, Any]]) -> None:
        payload = [{k: v for k, v in e.items() if k != "graph"} for e in events]
        resp = await self._request(
            "POST",
            "/v1/runs/events",
            json={"events": payload},
            extensions=only_on_429(self._policy),
        )
        if resp.status_code != 200:
            raise_for(resp)

    async def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        if run_id is None:
            raise InputError("over HTTP, ask for one run's events (GET /v1/runs lists runs)")
        r = await self._maybe(f"/v1/runs/{run_id}")
        return [] if r is None else cast(list[dict[str, Any]], r["events"])

    async def runs(self) -> list[RunSummary]:
        return run_summaries(await self._get("/v1/runs"))

    async def replay_run(self, run_id: str) -> ReplayReport:
        resp = await self._request("POST", f"/v1/runs/{run_id}/replay")
        if resp.status_code != 200:
            raise_for(resp)
        return ReplayReport(**resp.json())


async def aconnect(
    url: str,
    token: str | None = None,
    *,
    app: Any = None,
    timeout: float = 30.0,
    retries: int = RETRIES,
    retry_wait: float = RETRY_WAIT,
) -> AsyncHttpGraph:
    """The graph behind a claimgraph HTTP API, async (``app``: an ASGI app in process).

    As :func:`claimgraph.sdk.http.connect`: the token's agent and one literal task are the
    defaults of writers and runs; a 429 or 503 is retried at most ``retries`` times."""
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)  # no churn at 64
    inner: httpx.AsyncBaseTransport = (
        httpx.ASGITransport(app=app) if app is not None else httpx.AsyncHTTPTransport(limits=limits)
    )
    policy = retry_policy(retries, retry_wait)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = httpx.AsyncClient(
        base_url=url,
        headers=headers,
        timeout=timeout,
        transport=RetryTransport(transport=inner, retry=policy),
    )
    try:
        resp = await client.get("/v1/head")
        if resp.status_code != 200:
            raise_for(resp)
        name = str(resp.json()["graph"])
        who = await client.get("/v1/whoami")
        whoami = who.json() if who.status_code == 200 else None
    except BaseException:
        await client.aclose()
        raise
    return AsyncHttpGraph(client, name, policy, whoami)
