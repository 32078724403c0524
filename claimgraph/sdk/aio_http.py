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

from claimgraph.core.model import Command, Decision
from claimgraph.errors import InputError, NotFoundError, StorageError, VersionNotYetAvailable
from claimgraph.projections.reader import EdgeView, HistoryView, NeighborView, SlotView
from claimgraph.sdk.aio import AsyncGraph, Walk
from claimgraph.sdk.aio_runs import READING_IN
from claimgraph.sdk.http import (
    _RUN_READS,
    BATCH,
    RETRIES,
    RETRY_WAIT,
    _decision,
    _edge_view,
    _node_str,
    batch_body,
    batch_receipts,
    command_body,
    defaults_of,
    history_view,
    neighbor_views,
    only_clients,
    only_on_429,
    paths_params,
    paths_result,
    raise_for,
    reach_params,
    reach_result,
    read_edges_body,
    read_edges_result,
    receipt_of,
    retry_policy,
    run_summaries,
    slot_view,
)
from claimgraph.service.api import GraphWrites, NodeLike, Receipt
from claimgraph.service.queries import PathsResult, ReachResult
from claimgraph.service.reads import EdgeRef
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


_WRITES = frozenset(
    (
        "claim",
        "retract",
        "resolve",
        "escalate",
        "read_blocked",
        "publish_schema",
        "grant",
        "revoke",
        "register_key",
        "revoke_key",
        "erase",
        "upgrade_rules",
    )
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
        run = READING_IN.get()
        if run is not None and path in _RUN_READS:
            q["run"] = run  # a run's read: the run reports its blocked reads
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
        if method in _WRITES:
            command = cast(Command, getattr(self._builder, method)(*args, **kw))
            return await self._post_command(command)
        raise NotImplementedError(method)  # every read is a method of its own below

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

    async def edge(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> EdgeView:
        r = await self._get(
            "/v1/edge",
            edge_type=edge_type,
            subject=_node_str(subject),
            object=_node_str(obj),
            at=at,
            timeout=timeout or None,
        )
        return _edge_view(r)

    async def read_edges(
        self, edges: Sequence[EdgeRef], *, at: int | None = None, timeout: float = 0.0
    ) -> list[EdgeView]:
        """Several edges at one version in one request, as the sync client's ``read_edges``."""
        body = read_edges_body(edges, at, timeout)
        run = READING_IN.get()
        if run is not None:
            body["run"] = run
        resp = await self._request("POST", "/v1/read/edges", json=body)
        if resp.status_code != 200:
            try:
                raise_for(resp)
            except VersionNotYetAvailable as exc:
                raise VersionNotYetAvailable(
                    at if at is not None else -1, exc.head, timeout
                ) from None
        return read_edges_result(len(body["edges"]), resp.json())

    async def slot(
        self,
        edge_type: str,
        node: NodeLike,
        *,
        direction: str = "out",
        at: int | None = None,
        timeout: float = 0.0,
    ) -> SlotView:
        r = await self._get(
            "/v1/slot",
            edge_type=edge_type,
            node=_node_str(node),
            direction=direction,
            at=at,
            timeout=timeout or None,
        )
        return slot_view(r)

    async def neighbors(
        self,
        node: NodeLike,
        *,
        edge_type: str | None = None,
        direction: str = "out",
        at: int | None = None,
        timeout: float = 0.0,
        include_absent: bool = False,
        min_confidence: float | None = None,
        writer: str | None = None,
        asserted_after: int | None = None,
        asserted_before: int | None = None,
    ) -> list[NeighborView]:
        r = await self._get(
            "/v1/neighbors",
            node=_node_str(node),
            edge_type=edge_type,
            direction=direction,
            include_absent=include_absent,
            at=at,
            timeout=timeout or None,
            min_confidence=min_confidence,
            writer=writer,
            asserted_after=asserted_after,
            asserted_before=asserted_before,
        )
        return neighbor_views(r)

    async def paths(
        self,
        src: NodeLike,
        dst: NodeLike,
        *,
        max_hops: int = 3,
        edge_types: Sequence[str] | None = None,
        direction: Walk = "out",
        limit: int = 100,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> PathsResult:
        q = paths_params(src, dst, max_hops, edge_types, direction, limit, at, timeout)
        return paths_result(await self._get("/v1/paths", **q))

    async def reach(
        self,
        node: NodeLike,
        *,
        direction: Walk = "out",
        max_hops: int = 2,
        edge_types: Sequence[str] | None = None,
        limit: int = 100,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> ReachResult:
        q = reach_params(node, direction, max_hops, edge_types, limit, at, timeout)
        return reach_result(await self._get("/v1/reach", **q))

    async def edges(self, *, at: int | None = None, limit: int = 500) -> list[EdgeView]:
        out: list[EdgeView] = []
        cursor = None
        while True:  # the server's pages, at one version, until ``limit`` or the end
            want = min(limit - len(out), 5000)
            r = await self._get("/v1/graph", at=at, limit=want, cursor=cursor)
            out += [_edge_view(e) for e in r["edges"]]
            at, cursor = r["version"], r.get("next_cursor")
            if cursor is None or len(out) >= limit:
                return out[:limit]

    async def history(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> HistoryView:
        r = await self._get(
            "/v1/history",
            edge_type=edge_type,
            subject=_node_str(subject),
            object=_node_str(obj),
            at=at,
            timeout=timeout or None,
        )
        return history_view(r)

    async def quarantine(
        self, *, at: int | None = None, timeout: float = 0.0, include_closed: bool = False
    ) -> list[dict[str, Any]]:
        r = await self._get(
            "/v1/quarantine", at=at, timeout=timeout or None, include_closed=include_closed
        )
        return [{k: v for k, v in c.items() if k != "claim_details"} for c in r["conflicts"]]

    async def _maybe(self, path: str, **params: Any) -> dict[str, Any] | None:
        try:
            return cast(dict[str, Any], await self._get(path, **params))
        except NotFoundError:
            return None

    async def claim_info(self, claim_id: str, *, at: int | None = None) -> dict[str, Any] | None:
        return await self._maybe(f"/v1/claims/{claim_id}", at=at)

    async def conflict(self, conflict_id: str, *, at: int | None = None) -> dict[str, Any] | None:
        c = await self._maybe(f"/v1/conflicts/{conflict_id}", at=at)
        if c is not None:
            c.pop("claim_details", None)
        return c

    async def schema_info(self, *, at: int | None = None) -> dict[str, Any] | None:
        return await self._maybe("/v1/schema", at=at)

    async def escalation(self, conflict_id: str, *, at: int | None = None) -> dict[str, Any] | None:
        return await self._maybe(f"/v1/escalations/{conflict_id}", at=at)

    async def escalations(
        self, *, at: int | None = None, include_open: bool = False
    ) -> list[dict[str, Any]]:
        r = await self._get("/v1/escalations", at=at, include_open=include_open)
        return cast(list[dict[str, Any]], r["escalations"])

    async def calibration(
        self, edge_type: str, *, at: int | None = None
    ) -> dict[str, tuple[int, int]]:
        r = await self._get("/v1/calibration", edge_type=edge_type, at=at)
        return {a: (int(w), int(lo)) for a, (w, lo) in r["record"].items()}

    async def decisions(self, start: int = 0, limit: int = 100) -> list[tuple[int, Decision]]:
        r = await self._get("/v1/decisions", **{"from": start, "limit": limit})
        return [(int(d["version"]), _decision(d)) for d in r["decisions"]]

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
