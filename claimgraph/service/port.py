"""The graph port: what every graph offers its users, whatever carries it.

Four implementations, one contract suite (``tests/test_graph_port.py``):

* :class:`claimgraph.service.graph.Graph` — the embedded graph, in process;
* :class:`claimgraph.service.kafka_graph.KafkaGraph` — commands to a Kafka cluster, reads from
  a projector's projection;
* :class:`claimgraph.sdk.http.HttpGraph` — the HTTP API (``claimgraph.connect``).
* :class:`claimgraph.service.attached.AttachedGraph` — an embedded graph another process
  writes: reads from RocksDB secondaries, writes over that process's socket (the CLI's view
  while ``serve`` runs).

The HTTP app itself serves a :class:`GraphPort` (embedded or Kafka) and reads through it.
Writes take the command's fields by keyword (one method per client command of the catalogue,
:mod:`claimgraph.core.commands`); reads take ``at=`` (default: head) and may wait ``timeout``
seconds for a version not applied yet. Ticks are not part of the port: the ticker writes them
through the runtime it drives (``Graph.tick``, ``KafkaGraph.tick``), never a client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from claimgraph.core.model import Command, Decision
from claimgraph.projections.reader import EdgeView, HistoryView, NeighborView, SlotView
from claimgraph.service.api import NodeLike, Receipt
from claimgraph.service.queries import PathsResult, ReachResult
from claimgraph.service.reads import EdgeRef
from claimgraph.service.runs import Run, Snapshot
from claimgraph.service.traces import ReplayReport, RunSummary

__all__ = ["GraphPort"]


@runtime_checkable
class GraphPort(Protocol):
    """One graph: commands in, decisions and reads at any version out."""

    name: str

    # -- writes: one per client command -------------------------------------------------------

    def submit(self, commands: Sequence[Command | bytes]) -> list[Receipt]:
        """Send commands (or signed records); one receipt per command, in order."""
        ...

    def claim(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str,
        task: str = "",
        polarity: str = "assert",
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt: ...

    def assert_(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str,
        task: str = "",
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt: ...

    def deny(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str,
        task: str = "",
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt: ...

    def retract(
        self,
        claim_id: str,
        *,
        agent: str,
        task: str = "",
        reason: str = "",
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt: ...

    def resolve(
        self,
        conflict_id: str,
        *,
        agent: str,
        winner: str | None,
        resolver: str = "human",
        rationale: str = "",
        inputs: str = "",
        task: str = "",
        command_id: str | None = None,
    ) -> Receipt: ...

    def escalate(
        self,
        conflict_id: str,
        *,
        agent: str,
        reason: str,
        resolver: str = "human",
        command_id: str | None = None,
    ) -> Receipt: ...

    def read_blocked(
        self,
        conflict_id: str,
        count: int = 1,
        *,
        agent: str | None = None,
        run_id: str | None = None,
        pinned_version: int | None = None,
        task: str | None = None,
        command_id: str | None = None,
    ) -> Receipt: ...

    def publish_schema(
        self,
        document: str,
        *,
        agent: str,
        source: str = "<inline>",
        task: str = "",
        command_id: str | None = None,
    ) -> Receipt: ...

    def grant(
        self,
        grantee_agent: str,
        edge_type: str,
        *,
        agent: str,
        grantee_task: str = "*",
        expires_at: int | str | None = None,
        command_id: str | None = None,
    ) -> Receipt: ...

    def revoke(self, grant_id: str, *, agent: str, command_id: str | None = None) -> Receipt: ...

    def register_key(
        self,
        key_id: str,
        key_agent: str,
        public_key: bytes,
        *,
        agent: str,
        command_id: str | None = None,
    ) -> Receipt: ...

    def revoke_key(self, key_id: str, *, agent: str, command_id: str | None = None) -> Receipt: ...

    def erase(
        self, claim_id: str, *, agent: str, reason: str, command_id: str | None = None
    ) -> Receipt: ...

    def upgrade_rules(self, to: int, *, agent: str, command_id: str | None = None) -> Receipt: ...

    # -- versions -------------------------------------------------------------------------------

    def head(self) -> int: ...

    def wait_for(self, version: int, timeout: float = 0.0) -> int: ...

    def wait(self, receipt: Receipt, timeout: float = 10.0) -> Receipt: ...

    # -- reads at a version -----------------------------------------------------------------------

    def read(self, query: str, /, **params: Any) -> Any:
        """Any read of the query catalogue (:mod:`claimgraph.core.queries`) by name: the one
        read operation; the typed reads below are its catalogued forms."""
        ...

    def edge(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> EdgeView: ...

    def read_edges(
        self, edges: Sequence[EdgeRef], *, at: int | None = None, timeout: float = 0.0
    ) -> list[EdgeView]: ...

    def slot(
        self,
        edge_type: str,
        node: NodeLike,
        *,
        direction: str = "out",
        at: int | None = None,
        timeout: float = 0.0,
    ) -> SlotView: ...

    def neighbors(
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
    ) -> list[NeighborView]: ...

    def paths(
        self,
        src: NodeLike,
        dst: NodeLike,
        *,
        max_hops: int = 3,
        edge_types: Sequence[str] | None = None,
        direction: Literal["out", "in", "both"] = "out",
        limit: int = 100,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> PathsResult: ...

    def reach(
        self,
        node: NodeLike,
        *,
        direction: Literal["out", "in", "both"] = "out",
        max_hops: int = 2,
        edge_types: Sequence[str] | None = None,
        limit: int = 100,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> ReachResult: ...

    def edges(self, *, at: int | None = None, limit: int = 500) -> list[EdgeView]: ...

    def history(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> HistoryView: ...

    def quarantine(
        self, *, at: int | None = None, timeout: float = 0.0, include_closed: bool = False
    ) -> list[dict[str, Any]]: ...

    def claim_info(self, claim_id: str, *, at: int | None = None) -> dict[str, Any] | None: ...

    def conflict(self, conflict_id: str, *, at: int | None = None) -> dict[str, Any] | None: ...

    def schema_info(self, *, at: int | None = None) -> dict[str, Any] | None: ...

    def escalation(self, conflict_id: str, *, at: int | None = None) -> dict[str, Any] | None: ...

    def escalations(
        self, *, at: int | None = None, include_open: bool = False
    ) -> list[dict[str, Any]]: ...

    def calibration(
        self, edge_type: str, *, at: int | None = None
    ) -> dict[str, tuple[int, int]]: ...

    def decisions(self, start: int = 0, limit: int = 100) -> list[tuple[int, Decision]]: ...

    # -- runs -----------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot: ...

    def run(
        self,
        *,
        agent: str,
        task: str = "",
        snapshot: Snapshot | None = None,
        run_id: str | None = None,
        lease: float = 3600.0,
    ) -> Run: ...

    def append_run_events(self, events: Sequence[dict[str, Any]]) -> None: ...

    def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]: ...

    def runs(self) -> list[RunSummary]: ...

    def replay_run(self, run_id: str) -> ReplayReport: ...

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None: ...
