"""The SDK's HTTP transport: ``claimgraph.connect(url, token=...)`` (httpx).

:class:`HttpGraph` has the interface of the embedded graph — the same command builders
(:class:`~claimgraph.service.api.GraphWrites`), the same reads at ``at=`` returning the same views,
``wait``, ``run`` and ``snapshot`` (:class:`~claimgraph.service.runs.RunsMixin`) —
over the HTTP API.
The agent a command names must be the token's principal: the server refuses (and records)
anything else. A rejected command comes back as a receipt, as it does in process; refusals of
identity raise :class:`~claimgraph.errors.AuthError`.

``connect(url, token=..., app=asgi_app)`` drives an ASGI app in process through
``httpx.ASGITransport`` (the real app, no network), which is how the SDK tests run.

The client takes the token's agent and, when the token has exactly one literal task, that
task as the defaults of every writer and of ``run`` (``g.assert_(...)`` needs neither). It
honours the server's limits through the transport's retries (:func:`retry_policy`,
``httpx-retries``): a 429 is retried after its ``Retry-After``, a 503 with bounded backoff,
at most ``retries`` times. A write is retried only with its ``command_id`` (every command
the SDK builds carries one), so a retry is never a second command: one decided before is
rejected as a duplicate. Trace events (no id of their own) are retried only on 429, which the
server answers before doing any of the work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import httpx
from httpx_retries import Retry, RetryTransport

from claimgraph.core.commands import CLIENT_COMMANDS
from claimgraph.core.model import Command
from claimgraph.core.queries import Cut, QuerySpec
from claimgraph.errors import (
    AuthError,
    ClaimgraphError,
    FencedError,
    InputError,
    LimitError,
    NotFoundError,
    StorageError,
    UnknownSlotError,
    VersionNotYetAvailable,
    VersionPruned,
)
from claimgraph.sdk.wire_reads import (
    PAGE,
    blocked_key,
    decision_of,
    read_answer,
    read_request,
)
from claimgraph.service.api import Receipt
from claimgraph.service.port import GraphAPI
from claimgraph.service.reads import catalogued
from claimgraph.service.traces import ReplayReport, RunSummary

if TYPE_CHECKING:
    from claimgraph.service.port import GraphPort

__all__ = [
    "RETRIES",
    "RETRY_WAIT",
    "HttpGraph",
    "connect",
    "only_on_429",
    "read_result",
    "retry_policy",
]

RETRIES = 3  # retries of one request after a 429 or a 503
RETRY_WAIT = 10.0  # seconds at most between two tries (a longer Retry-After is cut to this)


def retry_policy(retries: int = RETRIES, max_wait: float = RETRY_WAIT) -> Retry:
    """How the SDK retries: a 429 after its ``Retry-After``, a 503 with exponential backoff
    (and its ``Retry-After``), each wait at most ``max_wait`` seconds, at most ``retries``
    times; a connection that could not be made (nothing was sent), too. Every request the
    SDK sends under it is a read or a command with its id; see :func:`only_on_429`."""
    return Retry(
        total=retries,
        allowed_methods=("GET", "POST"),
        status_forcelist=(429, 503),
        retry_on_exceptions=(httpx.ConnectError,),
        backoff_factor=0.5,
        max_backoff_wait=max_wait,
        respect_retry_after_header=True,
    )


def only_on_429(policy: Retry) -> dict[str, Any]:
    """The request extensions that retry only a 429 (refused before any work): for requests
    that carry no id to make a retry harmless (trace events, run starts)."""
    return {"retry": policy.copy_with(status_forcelist=(429,), retry_on_exceptions=())}


def defaults_of(whoami: dict[str, Any]) -> tuple[str, str]:
    """The agent and the default task a token's principal (``GET /v1/whoami``) gives a client:
    its one literal task, or '' (patterns only, or several: name the task)."""
    tasks = [str(t) for t in whoami.get("tasks", [])]
    literal = [t for t in tasks if not any(c in t for c in "*?[")]
    return str(whoami["agent"]), literal[0] if len(tasks) == 1 and literal else ""


def run_summaries(r: dict[str, Any]) -> list[RunSummary]:
    """``GET /v1/runs``'s body as summaries."""
    fields = RunSummary.__dataclass_fields__
    return [RunSummary(**{k: v for k, v in x.items() if k in fields}) for x in r["runs"]]


def receipt_of(ctype: str, status: int, body: dict[str, Any]) -> Receipt | None:
    """A write's receipt from ``POST /v1/commands/<type>``'s answer (None: not a decision of
    that command, e.g. a refusal: raise from the body)."""
    if status == 200:
        d = decision_of(body["decision"])
        return Receipt(body["command_id"], body["position"], body["version"], d)
    if "decision" in body and body.get("decision", {}).get("command_type") == ctype:
        d = decision_of(body["decision"])  # the governor rejected it: a receipt, as in process
        return Receipt(d["command_id"], d["input_offset"], body["version"], d)
    return None


def command_body(command: Command) -> tuple[str, dict[str, Any]]:
    """A built command as (type, JSON body of ``POST /v1/commands/<type>``)."""
    c = dict(cast(dict[str, Any], command))
    ctype = c.pop("type", "claim")
    c.pop("graph", None)
    if not c.get("command_id"):  # a retry must name the same command, never make a second
        c["command_id"] = str(uuid.uuid4())
    if ctype == "claim":
        c["subject"] = f"{c.pop('subject_type')}:{c.pop('subject_id')}"
        c["object"] = f"{c.pop('object_type')}:{c.pop('object_id')}"
    elif ctype == "register_key":
        c["public_key"] = bytes(c["public_key"]).hex()
    return ctype, c


BATCH = 1000  # commands per POST /v1/commands (the server's default --max-batch)
_CLIENT_TYPES = frozenset(s.type for s in CLIENT_COMMANDS)


def only_clients(types: list[str]) -> bool:
    """Whether every type may go in a batch; a system-only type (``tick``…) goes to its own
    route instead, which records the refusal and answers 403, as a single command would."""
    return all(t in _CLIENT_TYPES for t in types)


def batch_body(commands: Sequence[Command | bytes]) -> tuple[list[str], dict[str, Any]]:
    """Command types and the body of ``POST /v1/commands`` for built commands."""
    types, items = [], []
    for c in commands:
        if isinstance(c, bytes | bytearray):
            raise InputError(
                "signed records go to the commands log directly; over HTTP the server "
                "authenticates the token and signs (serve --signing-key)"
            )
        ctype, body = command_body(c)
        types.append(ctype)
        items.append({"type": ctype, **body})
    return types, {"commands": items}


def batch_receipts(types: list[str], body: dict[str, Any]) -> list[Receipt]:
    """The receipts of a ``POST /v1/commands`` answer, in order; if an item was refused
    (no decision of its own command: a token, agent, task or role the server refused),
    its error is raised once every item is read (all of them were recorded)."""
    out: list[Receipt] = []
    refused: dict[str, Any] | None = None
    for ctype, item in zip(types, body["results"], strict=True):
        r = receipt_of(ctype, item["status"], item)
        if r is None:
            refused = refused or item
        else:
            out.append(r)
    if refused is not None:
        d = refused["decision"]
        raise_problem(refused["status"], {"reason": d["reason"], "detail": d["detail"]})
    return out


def raise_for(resp: httpx.Response) -> None:
    """Raise the claimgraph error an HTTP problem answer stands for."""
    try:
        body: dict[str, Any] = resp.json()
    except ValueError:
        body = {}
    raise_problem(resp.status_code, body, resp.text[:200])


def raise_problem(status: int, body: dict[str, Any], text: str = "") -> None:
    """Raise the claimgraph error a problem (its status and JSON body) stands for."""
    reason = str(body.get("reason", ""))
    detail = str(body.get("detail", text))
    if status in (401, 403) and reason:
        raise AuthError(reason, detail, status)
    if reason == "future_version":
        raise VersionNotYetAvailable(-1, int(body.get("head", -1)), 0.0)
    if reason == "version_pruned":
        raise VersionPruned(-1, int(body.get("horizon", -1)))
    if reason == "unknown_slot":
        raise UnknownSlotError(detail, str(body.get("conflict_id", "")))
    if reason == "not_found":
        raise NotFoundError(detail)
    if reason == "unavailable":
        raise StorageError(detail)
    if reason == "fenced":
        raise FencedError(detail)
    if status in (413, 429):
        raise LimitError(reason or "too_large", str(body.get("limit", "")), detail, status)
    if status == 422:
        raise InputError(f"{reason}: {detail}")
    raise ClaimgraphError(f"HTTP {status} {reason}: {detail}")


def read_result(spec: QuerySpec, params: dict[str, Any], resp: httpx.Response) -> Any:
    """A read's result from its answer (:func:`~claimgraph.sdk.wire_reads.read_answer`), or
    the error the answer stands for (a version not there in time names the one asked)."""
    if resp.status_code == 200 or (resp.status_code == 404 and spec.cut is Cut.ABSENT):
        return read_answer(spec, params, resp.status_code, resp.json())
    try:
        raise_for(resp)
    except VersionNotYetAvailable as exc:
        at = params.get("at")
        wanted = at if at is not None else -1
        raise VersionNotYetAvailable(wanted, exc.head, params.get("timeout", 0.0)) from None
    raise AssertionError("unreachable")


class _SyncASGI(httpx.BaseTransport):
    """A synchronous transport over ``httpx.ASGITransport``, on an event loop of its own."""

    def __init__(self, app: Any) -> None:
        self._asgi = httpx.ASGITransport(app=app)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        req = httpx.Request(request.method, request.url, headers=request.headers, content=body)

        async def go() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
            resp = await self._asgi.handle_async_request(req)
            content = await resp.aread()
            return resp.status_code, resp.headers.raw, content

        status, headers, content = asyncio.run_coroutine_threadsafe(go(), self._loop).result()
        return httpx.Response(status, headers=headers, content=content, request=request)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()


def connect(
    url: str,
    token: str | None = None,
    *,
    app: Any = None,
    timeout: float = 30.0,
    retries: int = RETRIES,
    retry_wait: float = RETRY_WAIT,
) -> HttpGraph:
    """A graph over the HTTP API at ``url`` (or, with ``app``, an ASGI app in process).

    Writers and runs default to the token's agent and its one literal task. A 429 or 503 is
    retried at most ``retries`` times (0: never), waiting at most ``retry_wait`` seconds
    between tries (:func:`retry_policy`)."""
    inner: httpx.BaseTransport = _SyncASGI(app) if app is not None else httpx.HTTPTransport()
    policy = retry_policy(retries, retry_wait)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    client = httpx.Client(
        base_url=url,
        headers=headers,
        timeout=timeout,
        transport=RetryTransport(transport=inner, retry=policy),
    )
    return HttpGraph(client, policy)


class HttpGraph(GraphAPI):
    """One graph behind the HTTP API (every read of :class:`GraphReads` goes over HTTP).

    Reads that come back unknown are noted as in process, so a run reports its blocked reads
    (``read_blocked``) at its end, as the governance exit conditions expect.
    """

    def __init__(self, client: httpx.Client, policy: Retry | None = None) -> None:
        self._http = client
        self._policy = policy or retry_policy()
        self.name = cast(str, self._get("/v1/head")["graph"])
        try:
            self.default_agent, self.default_task = defaults_of(self._get("/v1/whoami"))
        except AuthError:  # no token: reads of an open server still work; writes name agent
            self.default_agent, self.default_task = None, ""

    def close(self) -> None:
        self._http.close()  # closes its transport too

    def __enter__(self) -> HttpGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the wire ---------------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return self._http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise StorageError(f"cannot reach the claimgraph API: {exc}") from None

    @staticmethod
    def _raise(resp: httpx.Response) -> None:
        raise_for(resp)

    def _get(self, path: str, **params: Any) -> Any:
        resp = self._request("GET", path, params={k: v for k, v in params.items() if v is not None})
        if resp.status_code != 200:
            self._raise(resp)
        return resp.json()

    # -- writes -----------------------------------------------------------------------------------

    def submit(self, commands: Sequence[Command | bytes], batch: int = BATCH) -> list[Receipt]:
        """Send commands in batches of ``batch`` (``POST /v1/commands``); one receipt each.

        Each batch is decided in order in one synced write. A refused item (token, agent,
        task, role) raises its error after its batch, whose every item was recorded.
        """
        out: list[Receipt] = []
        for i in range(0, len(commands), batch):
            chunk = commands[i : i + batch]
            types, body = batch_body(chunk)
            if not only_clients(types):
                out += [self._one(cast(Command, c)) for c in chunk]
                continue
            resp = self._request("POST", "/v1/commands", json=body)
            if resp.status_code != 200:
                self._raise(resp)
            out += batch_receipts(types, resp.json())
        return out

    def _one(self, command: Command) -> Receipt:
        ctype, c = command_body(command)
        resp = self._request("POST", f"/v1/commands/{ctype}", json=c)
        body: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            body = resp.json()
        receipt = receipt_of(ctype, resp.status_code, body)
        if receipt is not None:
            return receipt
        self._raise(resp)
        raise AssertionError("unreachable")

    # -- versions and reads -----------------------------------------------------------------------

    def head(self) -> int:
        """The newest applied version."""
        return int(self._get("/v1/head")["head"])

    def wait_for(self, version: int, timeout: float = 0.0) -> int:
        """Wait (on the server) until ``version`` is applied; return head."""
        try:
            return int(self._get(f"/v1/versions/{version}", timeout=min(timeout, 30.0))["head"])
        except VersionNotYetAvailable as exc:
            raise VersionNotYetAvailable(version, exc.head, timeout) from None

    def read(self, query: str, /, **params: Any) -> Any:
        """Any read of the query catalogue, over its route (:mod:`claimgraph.sdk.wire_reads`):
        checked against the catalogue first, answered as the embedded graph answers it. A
        read in a run names it (``run=``); the conflicts it meets are the run's blocked reads.
        ``edges`` follows the server's pages (each a bounded scan) at one version."""
        spec = catalogued(query, params)
        if spec.cut is Cut.PAGE:
            return self._pages(spec, params)
        return self._read(spec, params)

    def _read(self, spec: QuerySpec, params: dict[str, Any]) -> Any:
        req = read_request(spec, params, self.blocked_run)
        resp = self._request(req.method, req.path, **req.kwargs())
        key = blocked_key(spec, params)
        try:
            out = read_result(spec, params, resp)
        except UnknownSlotError as exc:  # a halted read is a blocked read too
            self._note_blocked(exc.conflict_id, key)
            raise
        self.note_unknown(out, spec.name, key)
        return out

    def _pages(self, spec: QuerySpec, params: dict[str, Any]) -> list[Any]:
        limit: int = params.get("limit", spec.param("limit").default)
        at, cursor, out = params.get("at"), None, list[Any]()
        while True:  # the server's pages, at one version, until ``limit`` or the end
            page = {"limit": min(limit - len(out), PAGE), "at": at}
            req = read_request(spec, page, None)
            r = self._get(req.path, **req.params, cursor=cursor)
            out += read_answer(spec, page, 200, r)
            at, cursor = r["version"], r.get("next_cursor")
            if cursor is None or len(out) >= limit:
                return out[:limit]

    def whoami(self) -> dict[str, Any]:
        """The principal this client's token maps to."""
        return cast(dict[str, Any], self._get("/v1/whoami"))

    # -- runs -------------------------------------------------------------------------------------

    def append_run_events(self, events: Sequence[dict[str, Any]]) -> None:
        """Send trace events in requests the server's default limits accept (500 events,
        about 1 MiB each), in order."""
        batch: list[dict[str, Any]] = []
        size = 0
        for e in events:
            ev = {k: v for k, v in e.items() if k != "graph"}
            n = len(json.dumps(ev, ensure_ascii=False).encode())
            if batch and (len(batch) >= 500 or size + n > 1024 * 1024):
                self._post_events(batch)
                batch, size = [], 0
            batch.append(ev)
            size += n
        if batch:
            self._post_events(batch)

    def _post_events(self, batch: list[dict[str, Any]]) -> None:
        resp = self._request(
            "POST", "/v1/runs/events", json={"events": batch}, extensions=only_on_429(self._policy)
        )
        if resp.status_code != 200:
            self._raise(resp)

    def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        if run_id is None:
            raise InputError("over HTTP, ask for one run's events (GET /v1/runs lists runs)")
        try:
            return cast(list[dict[str, Any]], self._get(f"/v1/runs/{run_id}")["events"])
        except NotFoundError:
            return []

    def runs(self) -> list[RunSummary]:
        """Every run in the runs log, oldest first."""
        return run_summaries(self._get("/v1/runs"))

    def replay_run(self, run_id: str) -> ReplayReport:
        """Replay a run on the server (which reads each trace with the meaning it was
        recorded under); identical inputs, or the first difference."""
        resp = self._request("POST", f"/v1/runs/{run_id}/replay")
        if resp.status_code != 200:
            self._raise(resp)
        return ReplayReport(**resp.json())


if TYPE_CHECKING:  # mypy checks that the HTTP client implements the graph port

    def _conforms(g: HttpGraph) -> GraphPort:
        return g
