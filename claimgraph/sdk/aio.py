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
from claimgraph.sdk.aio_writes import AsyncCatalogueWrites
from claimgraph.service.api import Receipt
from claimgraph.service.reads import catalogued
from claimgraph.service.runs import Snapshot, pins_of
from claimgraph.service.traces import ReplayReport, RunSummary

if TYPE_CHECKING:
    from claimgraph.service.port import GraphAPI

__all__ = ["AsyncEmbeddedGraph", "AsyncGraph", "aopen"]

T = TypeVar("T")
Walk = Literal["out", "in", "both"]


class AsyncGraph(AsyncCatalogueReads, AsyncCatalogueWrites):
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

    async def write(self, name: str, /, **params: Any) -> Receipt:
        """Any write of the write catalogue, by name (the typed methods call it): as the
        sync graph's :meth:`~claimgraph.service.api.GraphWrites.write`."""
        r: Receipt = await self._call("write", name, **params)
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
