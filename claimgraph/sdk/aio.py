"""The async SDK: ``await claimgraph.aopen(path)`` and ``await claimgraph.aconnect(url, token=)``.

Both return an :class:`AsyncGraph`: the graph port's interface (the same writers, reads at
``at=``, ``wait``, ``snapshot``, ``run``, ``replay_run``) with every call awaitable.

* :class:`AsyncEmbeddedGraph` serves an embedded (or Kafka) graph without blocking the event
  loop: every call runs on the graph's own worker threads (named ``claimgraph-io-N``), where
  RocksDB does its work, and the coroutine awaits the result.
* :class:`~claimgraph.sdk.aio_http.AsyncHttpGraph` talks to the HTTP API with an
  ``httpx.AsyncClient`` (``app=`` drives an ASGI app in process, through
  ``httpx.ASGITransport``).

A run (:class:`~claimgraph.sdk.aio_runs.AsyncRun`) is ``async with graph.run(...) as run:``;
its reads are awaited, served at the pinned version and traced exactly as a sync run's (the
same trace events, so ``runs replay`` treats both alike), and its blocked reads are reported
when it ends.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from claimgraph.core.model import Command
from claimgraph.errors import InputError
from claimgraph.sdk.aio_reads import AsyncCatalogueReads
from claimgraph.sdk.aio_runs import AsyncRun
from claimgraph.service.api import NodeLike, Receipt
from claimgraph.service.reads import catalogued
from claimgraph.service.runs import Snapshot, pins_of
from claimgraph.service.traces import ReplayReport, RunSummary

if TYPE_CHECKING:
    from claimgraph.service.port import GraphAPI

__all__ = ["AsyncEmbeddedGraph", "AsyncGraph", "aopen"]

T = TypeVar("T")
Walk = Literal["out", "in", "both"]


class AsyncGraph(AsyncCatalogueReads):
    """The graph port, awaitable, with the typed reads of the catalogue over ``read``
    (:mod:`claimgraph.sdk.aio_reads`). Subclasses provide ``_call`` (and may override ``read``)."""

    name: str
    default_agent: str | None = None  # over HTTP: the token's agent
    default_task: str = ""  # ... and its one literal task

    async def _call(self, method: str, *args: Any, **kw: Any) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> AsyncGraph:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- writes: one per client command ----------------------------------------------------------

    async def submit(self, commands: Sequence[Command | bytes]) -> list[Receipt]:
        """Send commands (or signed records); one receipt per command, in order."""
        out: list[Receipt] = await self._call("submit", commands)
        return out

    async def claim(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str | None = None,
        task: str | None = None,
        polarity: str = "assert",
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Assert (or with ``polarity='deny'`` deny) an edge."""
        r: Receipt = await self._call(
            "claim",
            edge_type,
            subject,
            obj,
            agent=agent,
            task=task,
            polarity=polarity,
            confidence=confidence,
            evidence=evidence,
            reasoning=reasoning,
            asserted_at=asserted_at,
            based_on_version=based_on_version,
            properties=properties,
            run_id=run_id,
            command_id=command_id,
        )
        return r

    async def assert_(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str | None = None,
        task: str | None = None,
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Assert that an edge holds."""
        return await self.claim(
            edge_type,
            subject,
            obj,
            agent=agent,
            task=task,
            polarity="assert",
            confidence=confidence,
            evidence=evidence,
            reasoning=reasoning,
            asserted_at=asserted_at,
            based_on_version=based_on_version,
            properties=properties,
            run_id=run_id,
            command_id=command_id,
        )

    async def deny(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str | None = None,
        task: str | None = None,
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Deny that an edge holds."""
        return await self.claim(
            edge_type,
            subject,
            obj,
            agent=agent,
            task=task,
            polarity="deny",
            confidence=confidence,
            evidence=evidence,
            reasoning=reasoning,
            asserted_at=asserted_at,
            based_on_version=based_on_version,
            properties=properties,
            run_id=run_id,
            command_id=command_id,
        )

    async def retract(
        self,
        claim_id: str,
        *,
        agent: str | None = None,
        task: str | None = None,
        reason: str = "",
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Withdraw one's own claim."""
        r: Receipt = await self._call(
            "retract",
            claim_id,
            agent=agent,
            task=task,
            reason=reason,
            run_id=run_id,
            command_id=command_id,
        )
        return r

    async def resolve(
        self,
        conflict_id: str,
        *,
        agent: str | None = None,
        winner: str | None,
        resolver: str = "human",
        rationale: str = "",
        inputs: str = "",
        task: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """A resolver's verdict: ``winner`` (a claim id) or ``None`` to reject every claim."""
        r: Receipt = await self._call(
            "resolve",
            conflict_id,
            agent=agent,
            winner=winner,
            resolver=resolver,
            rationale=rationale,
            inputs=inputs,
            task=task,
            command_id=command_id,
        )
        return r

    async def escalate(
        self,
        conflict_id: str,
        *,
        agent: str | None = None,
        reason: str,
        resolver: str = "human",
        command_id: str | None = None,
    ) -> Receipt:
        """Hand a conflict to a person."""
        r: Receipt = await self._call(
            "escalate",
            conflict_id,
            agent=agent,
            reason=reason,
            resolver=resolver,
            command_id=command_id,
        )
        return r

    async def read_blocked(
        self,
        conflict_id: str,
        count: int = 1,
        *,
        agent: str | None = None,
        run_id: str | None = None,
        pinned_version: int | None = None,
        task: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Report reads of a run that hit a quarantined slot (``task``: the run's)."""
        r: Receipt = await self._call(
            "read_blocked",
            conflict_id,
            count,
            agent=agent,
            run_id=run_id,
            pinned_version=pinned_version,
            task=task,
            command_id=command_id,
        )
        return r

    async def publish_schema(
        self,
        document: str,
        *,
        agent: str | None = None,
        source: str = "<inline>",
        task: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Publish a graph schema document (YAML) as ``agent`` (an admin)."""
        r: Receipt = await self._call(
            "publish_schema",
            document,
            agent=agent,
            source=source,
            task=task,
            command_id=command_id,
        )
        return r

    async def grant(
        self,
        grantee_agent: str,
        edge_type: str,
        *,
        agent: str | None = None,
        grantee_task: str = "*",
        expires_at: int | str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Grant extra write scope (admin only)."""
        r: Receipt = await self._call(
            "grant",
            grantee_agent,
            edge_type,
            agent=agent,
            grantee_task=grantee_task,
            expires_at=expires_at,
            command_id=command_id,
        )
        return r

    async def revoke(self, grant_id: str, *, agent: str, command_id: str | None = None) -> Receipt:
        """Revoke a grant (admin only)."""
        r: Receipt = await self._call("revoke", grant_id, agent=agent, command_id=command_id)
        return r

    async def register_key(
        self,
        key_id: str,
        key_agent: str,
        public_key: bytes,
        *,
        agent: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Register an Ed25519 public key (admin only)."""
        r: Receipt = await self._call(
            "register_key", key_id, key_agent, public_key, agent=agent, command_id=command_id
        )
        return r

    async def revoke_key(
        self, key_id: str, *, agent: str, command_id: str | None = None
    ) -> Receipt:
        """Revoke a signing key (admin only)."""
        r: Receipt = await self._call("revoke_key", key_id, agent=agent, command_id=command_id)
        return r

    async def erase(
        self, claim_id: str, *, agent: str, reason: str, command_id: str | None = None
    ) -> Receipt:
        """Erase a claim's payload from every read (admin only)."""
        r: Receipt = await self._call(
            "erase", claim_id, agent=agent, reason=reason, command_id=command_id
        )
        return r

    async def upgrade_rules(self, to: int, *, agent: str, command_id: str | None = None) -> Receipt:
        """Move the graph to governor rules revision ``to`` (admin only)."""
        r: Receipt = await self._call("upgrade_rules", to, agent=agent, command_id=command_id)
        return r

    # -- versions --------------------------------------------------------------------------------

    async def read(self, query: str, /, **params: Any) -> Any:
        """Any read of the query catalogue, by name (the port's one read operation), checked
        against the catalogue first; answered as the read's own method does."""
        return await self._call("read", catalogued(query, params).name, **params)

    async def head(self) -> int:
        """The newest applied version."""
        v: int = await self._call("head")
        return v

    async def wait_for(self, version: int, timeout: float = 0.0) -> int:
        """Wait until ``version`` is applied; return head."""
        v: int = await self._call("wait_for", version, timeout)
        return v

    async def wait(self, receipt: Receipt, timeout: float = 10.0) -> Receipt:
        """Wait until reads see ``receipt``'s version; return it."""
        await self.wait_for(receipt.version, timeout)
        return receipt

    # -- runs ------------------------------------------------------------------------------------

    async def snapshot(self) -> Snapshot:
        """Pin the head version once, to hand to several runs."""
        return Snapshot(await self.head())

    def run(
        self,
        *,
        agent: str | None = None,
        task: str | None = None,
        snapshot: Snapshot | None = None,
        run_id: str | None = None,
        lease: float = 3600.0,
    ) -> AsyncRun:
        """A run (``async with graph.run(...) as run:``): pins a version when it starts.
        ``agent`` and ``task`` default to the graph's (over HTTP: the token's agent and its
        one literal task)."""
        agent = self.default_agent if agent is None else agent
        if agent is None:
            raise InputError("run: name the agent (agent=...): this graph has no default")
        task = self.default_task if task is None else task
        return AsyncRun(self, agent=agent, task=task, snapshot=snapshot, run_id=run_id, lease=lease)

    async def append_run_events(self, events: Sequence[dict[str, Any]]) -> None:
        """Append trace events to the runs log."""
        await self._call("append_run_events", events)

    async def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Trace events from the runs log (of one run, or all), in log order."""
        v: list[dict[str, Any]] = await self._call("run_events", run_id)
        return v

    async def runs(self) -> list[RunSummary]:
        """Every run in the runs log, oldest first."""
        v: list[RunSummary] = await self._call("runs")
        return v

    async def replay_run(self, run_id: str) -> ReplayReport:
        """Re-execute a run's recorded reads at its pinned version and compare digests."""
        v: ReplayReport = await self._call("replay_run", run_id)
        return v

    # -- pins (where the graph keeps a registry) -------------------------------------------------

    async def _pin(self, version: int, owner: str, lease: float) -> Any:
        return None

    async def _renew(self, pin: Any, lease: float) -> Any:
        return pin

    async def _unpin(self, pin: Any) -> None:
        return None


class AsyncEmbeddedGraph(AsyncGraph):
    """A graph in this process (embedded or Kafka), its calls on worker threads of its own."""

    def __init__(self, graph: GraphAPI, *, workers: int = 8) -> None:
        self.sync = graph
        self.name = graph.name
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="claimgraph-io")

    async def _in_pool(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kw))

    async def _call(self, method: str, *args: Any, **kw: Any) -> Any:
        return await self._in_pool(getattr(self.sync, method), *args, **kw)

    async def aclose(self) -> None:
        await self._in_pool(self.sync.close)
        self._pool.shutdown(wait=True)

    async def _pin(self, version: int, owner: str, lease: float) -> Any:
        registry = pins_of(self.sync)
        if registry is None or version < 0:
            return None
        return await self._in_pool(registry.pin, version, owner=owner, lease=lease)

    async def _renew(self, pin: Any, lease: float) -> Any:
        registry = pins_of(self.sync)
        if pin is None or registry is None:
            return pin
        return await self._in_pool(registry.renew, pin.pin_id, lease)

    async def _unpin(self, pin: Any) -> None:
        registry = pins_of(self.sync)
        if pin is not None and registry is not None:
            await self._in_pool(registry.unpin, pin.pin_id)


async def aopen(
    path: str | Path, *, create: bool = False, graph: str | None = None, workers: int = 8
) -> AsyncEmbeddedGraph:
    """The embedded graph in ``path``, async: its calls run on its own worker threads."""
    from claimgraph.service.graph import open_graph

    pool = ThreadPoolExecutor(1, thread_name_prefix="claimgraph-open")
    try:
        loop = asyncio.get_running_loop()
        g = await loop.run_in_executor(
            pool, functools.partial(open_graph, path, create=create, graph=graph)
        )
    finally:
        pool.shutdown(wait=False)
    return AsyncEmbeddedGraph(g, workers=workers)
