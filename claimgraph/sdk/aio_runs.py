"""Runs over the async SDK: ``async with graph.run(agent=..., task=...) as run:``.

The same trace as a sync :class:`~claimgraph.service.runs.Run` (start with the pinned version
and read semantics, each read's query and digest, writes, tool calls, end), so ``runs replay``
treats both alike; reads that meet a quarantine are reported as blocked reads when it ends.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from claimgraph.errors import InputError, UnknownSlotError
from claimgraph.projections.reader import EdgeView
from claimgraph.sdk.aio_reads import AsyncRunReads
from claimgraph.sdk.aio_writes import AsyncRunWrites
from claimgraph.service.api import Receipt
from claimgraph.service.queries import PathsResult, ReachResult
from claimgraph.service.reads import EdgeRef, edge_refs
from claimgraph.service.runs import Snapshot
from claimgraph.service.traces import READS_REVISION, digest, jsonable, trace_args, traced_read
from claimgraph.service.writes import spec_of

if TYPE_CHECKING:
    from claimgraph.sdk.aio import AsyncGraph

__all__ = ["READING_IN", "AsyncRun"]

# the run whose read is in progress in this task: an HTTP graph names it (``run=``), so the
# server leaves the run's blocked reads to the run (it reports them when it ends)
READING_IN: ContextVar[str | None] = ContextVar("claimgraph_reading_in", default=None)

T = TypeVar("T")
Walk = Literal["out", "in", "both"]


class AsyncRun(AsyncRunReads, AsyncRunWrites):
    """A run over an :class:`AsyncGraph`: the sync :class:`~claimgraph.service.runs.Run`'s
    trace, reads and writes, awaited (``async with graph.run(...) as run:``)."""

    def __init__(
        self,
        graph: AsyncGraph,
        *,
        agent: str,
        task: str,
        snapshot: Snapshot | None = None,
        run_id: str | None = None,
        lease: float = 3600.0,
    ) -> None:
        self.graph = graph
        self.agent = agent
        self.task = task
        self.run_id = run_id or f"run-{uuid.uuid4()}"
        self.snapshot_id = snapshot.snapshot_id if snapshot else None
        self._snapshot = snapshot
        self._lease = lease
        self.version = -1
        self.pin: Any = None
        self.events: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        self._blocked: dict[str, set[str]] = {}
        self._started = False
        self._closed = False

    async def start(self) -> AsyncRun:
        """Pin the version (head, or the snapshot's) and write the ``start`` event."""
        if self._started:
            return self
        snap = self._snapshot
        self.version = snap.version if snap is not None else await self.graph.head()
        self.pin = await self.graph._pin(self.version, self.run_id, self._lease)
        self._started = True
        self._event("start", {"snapshot": self.snapshot_id, "reads": READS_REVISION})
        await self.flush()
        return self

    async def __aenter__(self) -> AsyncRun:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        await self.close("ok" if exc_type is None else f"error: {exc_type.__name__}")

    def _event(self, kind: str, payload: dict[str, Any]) -> None:
        if self._closed or not self._started:
            raise InputError(f"run {self.run_id} is not open; start a run")
        ev = {
            "run_id": self.run_id,
            "seq": len(self.events),
            "kind": kind,
            "graph": self.graph.name,
            "agent": self.agent,
            "task": self.task,
            "pinned_version": self.version,
            "snapshot_id": self.snapshot_id,
            "time": time.time_ns() // 1_000_000,
            "payload": json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str),
        }
        self.events.append(ev)
        self._pending.append(ev)

    async def flush(self) -> None:
        """Write the trace events not yet in the runs log."""
        if self._pending:
            pending, self._pending = self._pending, []
            await self.graph.append_run_events(pending)

    def _note(self, result: Any, query: str) -> None:
        """Remember conflicts this run's read met (reported as blocked reads at the end)."""
        items: list[Any] = result if isinstance(result, list) else [result]
        for x in items:
            if isinstance(x, PathsResult | ReachResult):
                for h in x.unknown:
                    self._blocked.setdefault(h.conflict_id or "", set()).add(query)
            elif getattr(x, "state", None) == "unknown" and getattr(x, "conflict_id", None):
                self._blocked.setdefault(x.conflict_id, set()).add(query)

    async def read(self, query: str, /, **params: Any) -> Any:
        """A read the run traces (the catalogue's ``traced`` reads), at the pinned version,
        recorded as a sync run records it (:func:`~claimgraph.service.traces.trace_args`)."""
        spec = traced_read(query, params)
        args = trace_args(spec, params)
        key = f"{spec.name} {json.dumps(jsonable(args), sort_keys=True)}"
        token = READING_IN.set(self.run_id)  # over HTTP: the read names this run (run=)
        try:
            result = await self.graph.read(spec.name, **params, at=self.version)
        except UnknownSlotError as exc:
            self._blocked.setdefault(exc.conflict_id, set()).add(key)
            raise
        finally:
            READING_IN.reset(token)
        self._note(result, key)
        self._event(
            "read", {"query": {"op": spec.name, "args": jsonable(args)}, "digest": digest(result)}
        )
        return result

    async def renew(self, lease: float) -> None:
        """Extend the run's retention pin to ``lease`` seconds from now."""
        self.pin = await self.graph._renew(self.pin, lease)

    async def tool(self, name: str, input: Any = None, output: Any = None) -> None:
        """Record a tool call beside the reads and writes."""
        self._event("tool", {"name": name, "input": jsonable(input), "output": jsonable(output)})

    async def close(self, status: str = "ok") -> None:
        """End the run: report its blocked reads, write ``end``, release the pin."""
        if self._closed or not self._started:
            return
        reads = sum(1 for e in self.events if e["kind"] == "read")
        writes = sum(1 for e in self.events if e["kind"] == "write")
        blocked = 0
        for conflict_id, queries in sorted(self._blocked.items()):
            if conflict_id:
                await self.graph.read_blocked(
                    conflict_id,
                    len(queries),
                    agent=self.agent,
                    run_id=self.run_id,
                    pinned_version=self.version,
                    task=self.task,  # the server checks the token may act in it
                )
                blocked += 1
        self._event("end", {"status": status, "reads": reads, "writes": writes, "blocked": blocked})
        self._closed = True
        await self.flush()
        await self.graph._unpin(self.pin)

    # -- reads at the pinned version -------------------------------------------------------------

    async def read_edges(self, edges: Sequence[EdgeRef]) -> list[EdgeView]:
        """Several edges as of the pinned version in one read (over HTTP, one request); each
        answer is recorded as its own ``edge`` read, as a sync run records it."""
        wanted = edge_refs(edges)
        token = READING_IN.set(self.run_id)
        try:
            out: list[EdgeView] = await self.graph.read("read_edges", edges=wanted, at=self.version)
        except UnknownSlotError as exc:
            self._blocked.setdefault(exc.conflict_id, set()).add(f"read_edges {len(wanted)}")
            raise
        finally:
            READING_IN.reset(token)
        for (t, s, o), e in zip(wanted, out, strict=True):
            args = {"edge_type": t, "subject": list(s), "object": list(o)}
            query = f"edge {json.dumps(jsonable(args), sort_keys=True)}"
            self._note(e, query)
            self._event(
                "read", {"query": {"op": "edge", "args": jsonable(args)}, "digest": digest(e)}
            )
        return out

    # -- writes as the run's agent, based on the pinned version ----------------------------------

    async def _wrote(self, receipt: Receipt) -> Receipt:
        d = receipt.decision
        self._event(
            "write",
            {
                "command_id": receipt.command_id,
                "version": receipt.version,
                "kind": d["kind"],
                "reason": d["reason"],
                "command_type": d["command_type"],
            },
        )
        await self.flush()
        return receipt

    async def write(self, name: str, /, **params: Any) -> Receipt:
        """A write of the catalogue a run offers, by name: as the run's agent in its task and
        run, a claim based on the pinned version unless given (as a sync run's)."""
        spec = spec_of(name)
        if not spec.run:
            raise InputError(f"a run does not send {name}: write it on the graph")
        for k in ("agent", "task", "run_id"):
            if k in params:
                raise InputError(f"a run's writes are its own: {k} is the run's")
        if spec.command == "claim" and params.get("based_on_version") is None:
            params["based_on_version"] = self.version
        r = await self.graph.write(
            name, agent=self.agent, task=self.task, run_id=self.run_id, **params
        )
        return await self._wrote(r)
