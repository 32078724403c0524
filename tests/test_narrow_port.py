"""The narrow graph port is enough: a run over a graph that offers only GraphPort's members
reads, writes, traces and replays as a run over the embedded graph does."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import claimgraph
from claimgraph.core.model import Command
from claimgraph.service.api import GraphWrites, Receipt
from claimgraph.service.port import GraphAPI, GraphPort
from claimgraph.service.runs import Run
from claimgraph.service.traces import replay
from tests.conftest import SCHEMA


class BarePort:
    """Only the port's members, passed to an embedded graph (no writers, no typed reads)."""

    def __init__(self, graph: GraphAPI) -> None:
        self._g = graph
        self.name = graph.name
        self.blocked_run: str | None = None

    def submit(self, commands: Sequence[Command | bytes]) -> list[Receipt]:
        return self._g.submit(commands)

    def read(self, query: str, /, **params: Any) -> Any:
        before, self._g.blocked_run = self._g.blocked_run, self.blocked_run
        try:
            return self._g.read(query, **params)
        finally:
            self._g.blocked_run = before

    def head(self) -> int:
        return self._g.head()

    def wait_for(self, version: int, timeout: float = 0.0) -> int:
        return self._g.wait_for(version, timeout)

    def flush_blocked(
        self,
        *,
        agent: str = "reader",
        run: str | None = None,
        pinned: int | None = None,
        task: str = "",
    ) -> list[Receipt]:
        return self._g.flush_blocked(agent=agent, run=run, pinned=pinned, task=task)

    def append_run_events(self, events: Sequence[dict[str, Any]]) -> None:
        self._g.append_run_events(events)

    def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        return self._g.run_events(run_id)

    def close(self) -> None:
        """The embedded graph is the test's to close."""


def test_a_run_over_the_bare_port_reads_writes_and_replays(tmp_path: Path) -> None:
    """GraphPort's ten members serve a whole run: its claim and retract are built and sent
    through submit (the bare port has no writers), its reads through read at the pinned
    version; the trace replays identically on the embedded graph."""
    with claimgraph.open(tmp_path / "g", create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin")
        port = BarePort(g)
        assert isinstance(port, GraphPort) and not isinstance(port, GraphWrites)
        with Run(port, agent="inventory", task="") as run:
            r = run.assert_("depends_on", "service:a", "service:b")
            assert r.kind == "accepted", r.decision
            e = run.edge("depends_on", "service:a", "service:b")
            assert e.state == "absent"  # read at the version pinned before the claim
            x = run.retract(r.command_id, reason="gone")
            assert x.decision["command_type"] == "retract" and x.kind == "retired"
        assert g.edge("depends_on", "service:a", "service:b").state == "absent"
        kinds = [e["kind"] for e in g.run_events(run.run_id)]
        assert kinds == ["start", "write", "read", "write", "end"]
        report = replay(g, g.run_events(run.run_id))
        assert report.identical and report.reads == 1
