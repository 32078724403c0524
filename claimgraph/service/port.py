"""The graph port: the few operations every graph offers, whatever carries it.

Five implementations, one contract suite (``tests/test_graph_port.py``, and
``tests/test_query_catalogue.py`` for every catalogued read):

* :class:`claimgraph.service.graph.Graph` — the embedded graph, in process;
* :class:`claimgraph.service.kafka_graph.KafkaGraph` — commands to a Kafka cluster, reads from
  a projector's projection;
* :class:`claimgraph.sdk.http.HttpGraph` — the HTTP API (``claimgraph.connect``);
* :class:`claimgraph.service.attached.AttachedGraph` — an embedded graph another process
  writes: reads from RocksDB secondaries, writes over that process's socket (the CLI's view
  while ``serve`` runs);
* :class:`claimgraph.sdk.aio.AsyncGraph` — either of the first two, or HTTP, awaitable
  (:class:`AsyncGraphPort`).

:class:`GraphPort` is narrow: commands in (``submit``), any catalogued read out (``read``, by
the name :mod:`claimgraph.core.queries` gives it, at ``at=`` and waiting ``timeout``), the
version (``head``, ``wait_for``), the runs log and the blocked reads of runs, ``close``. Runs
(:class:`~claimgraph.service.runs.Run`) are typed against it and need nothing more.

What users call — one writer per client command, one typed read per catalogued read, runs —
is derived from the two catalogues over those operations: :class:`GraphAPI` (the writers of
:class:`~claimgraph.service.api.GraphWrites`, the reads of
:class:`~claimgraph.service.catalogue_reads.CatalogueReads`, generated from the query
catalogue by ``tools/gen_reads.py``, and :class:`~claimgraph.service.runs.RunsMixin`). Every
graph is one; the HTTP app serves a :class:`GraphAPI` (embedded or Kafka) and reads through
it. Ticks are not part of the port: the ticker writes them through the runtime it drives
(``Graph.tick``, ``KafkaGraph.tick``), never a client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from claimgraph.core.model import Command
from claimgraph.errors import InputError
from claimgraph.service.api import GraphWrites, Receipt
from claimgraph.service.catalogue_reads import CatalogueReads
from claimgraph.service.reads import BlockedReads
from claimgraph.service.runs import Run, RunsMixin, Snapshot

__all__ = ["AsyncGraphPort", "GraphAPI", "GraphPort"]


@runtime_checkable
class GraphPort(Protocol):
    """One graph: commands in, decisions and reads at any version out."""

    name: str
    # the run this thread's reads are attributed to (a run sets it around its reads): the
    # conflicts they meet are that run's blocked reads
    blocked_run: str | None

    def submit(self, commands: Sequence[Command | bytes]) -> list[Receipt]:
        """Send commands (or signed records); one receipt per command, in order."""
        ...

    def read(self, query: str, /, **params: Any) -> Any:
        """Any read of the query catalogue (:mod:`claimgraph.core.queries`) by name, checked
        against it first (``InputError`` naming what does not fit)."""
        ...

    def head(self) -> int:
        """The newest applied version."""
        ...

    def wait_for(self, version: int, timeout: float = 0.0) -> int:
        """Wait until ``version`` is applied (``VersionNotYetAvailable`` after ``timeout``)."""
        ...

    def flush_blocked(
        self,
        *,
        agent: str = "reader",
        run: str | None = None,
        pinned: int | None = None,
        task: str = "",
    ) -> list[Receipt]:
        """Report the blocked reads of ``run`` (all runs' when None) as ``read_blocked``."""
        ...

    def append_run_events(self, events: Sequence[dict[str, Any]]) -> None:
        """Append trace events to the runs log."""
        ...

    def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Trace events from the runs log (of one run, or all), in log order."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncGraphPort(Protocol):
    """The graph port, awaitable (the async SDK's graphs)."""

    name: str

    async def submit(self, commands: Sequence[Command | bytes]) -> list[Receipt]: ...

    async def read(self, query: str, /, **params: Any) -> Any: ...

    async def head(self) -> int: ...

    async def wait_for(self, version: int, timeout: float = 0.0) -> int: ...

    async def append_run_events(self, events: Sequence[dict[str, Any]]) -> None: ...

    async def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]: ...

    async def aclose(self) -> None: ...


class GraphAPI(BlockedReads, GraphWrites, CatalogueReads, RunsMixin):
    """A graph port with what users call, derived from the catalogues over its operations:
    a writer per client command, a typed read per catalogued read, runs and their replay.

    Every graph (embedded, Kafka, attached, HTTP) is one; subclasses provide the port's
    operations (and may answer reads in their own methods, which ``read`` then calls).
    """

    name: str

    def submit(self, commands: Sequence[Command | bytes]) -> list[Receipt]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def run(
        self,
        *,
        agent: str | None = None,
        task: str | None = None,
        snapshot: Snapshot | None = None,
        run_id: str | None = None,
        lease: float = 3600.0,
    ) -> Run:
        """Start a run: pin a version (head, or ``snapshot``'s) and trace what it reads.

        ``agent`` and ``task`` default to the graph's (over HTTP: the token's agent and its
        one literal task; in process there is none: name the agent). Where the graph keeps a
        pin registry (embedded, or Kafka with a projection), the pinned version is also held
        against GC for ``lease`` seconds (renew with :meth:`Run.renew`); the pin is released
        when the run ends, or lapses with its lease if the process dies.
        """
        agent = getattr(self, "default_agent", None) if agent is None else agent
        if agent is None:
            raise InputError("run: name the agent (agent=...): this graph has no default")
        task = getattr(self, "default_task", "") if task is None else task
        return Run(self, agent=agent, task=task, snapshot=snapshot, run_id=run_id, lease=lease)
