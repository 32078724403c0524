"""The embedded runner: governor and projector in one process over the local RocksDB logs.

``step()`` reads the next commands from the governor's stored position, decides each with the
core in use (:func:`claimgraph.native.batch.decide_batch`: one native call per run of commands
the native path covers — decide, fold and projection rows — else the pure core, its
specification), and writes the decisions together with the advanced position
in one synced batch. Only then does the projector write the rows of those decisions (with its
applied offset) to the projection. On start, the folded state is rebuilt from the decisions
log, and the projector re-applies whatever decisions it had not yet applied, so a crash
between any two writes neither loses nor duplicates a decision or a row. With a checkpoints
directory, the state starts from the newest usable checkpoint
(:mod:`claimgraph.projections.checkpoints`) and only the log's tail after it is folded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rocksdict import WriteBatch

from claimgraph.core.model import Decision, Progress, Reason
from claimgraph.core.state import GraphState
from claimgraph.logconf import events
from claimgraph.logs.base import LogRecord
from claimgraph.logs.embedded import EmbeddedLogStore
from claimgraph.native.batch import decide_batch, fold_batch
from claimgraph.projections.projector import ProjectionStore, Projector
from claimgraph.streams.gcbatch import batch_gc

__all__ = ["GOVERNOR_POSITION", "EmbeddedRuntime", "fold_decisions"]

_log = events("storage")
_governor = events("governor")  # a rule that failed is the governor's, embedded or Kafka

GOVERNOR_POSITION = "governor"


def fold_decisions(
    logs: EmbeddedLogStore,
    state: GraphState,
    projector: Projector | None,
    *,
    upto: int | None = None,
    progress: Progress | None = None,
    batch: int = 4096,
    start: int = 0,
) -> None:
    """Fold the decisions log from ``start`` into ``state``; stage rows above the applied offset."""
    end = logs.decisions.end() if upto is None else upto + 1
    applied = projector.applied if projector is not None else end
    pos = start
    while pos < end:
        records = logs.decisions.read(pos, min(batch, end - pos))
        if not records:
            break
        with batch_gc():
            fold_batch(state, records, projector, applied)
            pos = records[-1].offset + 1
            if projector is not None:
                projector.flush()
        if progress is not None:
            progress(pos, end)


class EmbeddedRuntime:
    """Decides pending commands and projects the decisions, durably and exactly once."""

    def __init__(
        self,
        logs: EmbeddedLogStore,
        projection: ProjectionStore,
        graph: str,
        *,
        progress: Progress | None = None,
        checkpoints: Path | None = None,
    ) -> None:
        self.logs = logs
        self.state = GraphState(graph)
        self.resumed_from: int | None = None  # the checkpoint version the state started at
        self.skipped: list[tuple[str, str]] = []  # checkpoints found unusable: (path, why)
        start = 0
        if checkpoints is not None:
            from claimgraph.projections.checkpoints import resume

            def record_at(v: int) -> bytes | None:
                rec = logs.decisions.get(v)
                return rec.value if rec is not None else None

            def skipped(path: Path, why: str) -> None:
                self.skipped.append((str(path), why))
                _log.warning("checkpoint.skipped", path=str(path), reason=why)

            found = resume(checkpoints, graph, projection.applied(), record_at, skipped)
            if found is not None:
                self.state = found[1]
                self.resumed_from = found[0].version
                start = found[0].version + 1
        self.projector = Projector(projection, self.state)
        self.projector.checkpoints = checkpoints
        fold_decisions(logs, self.state, self.projector, progress=progress, start=start)

    @property
    def position(self) -> int:
        """The offset of the next command to decide."""
        return self.logs.position(GOVERNOR_POSITION)

    def pending(self) -> int:
        return self.logs.commands.end() - self.position

    def step(self, max_commands: int = 2048) -> list[tuple[int, Decision]]:
        """Decide and project up to ``max_commands`` pending commands; return (version, d)."""
        records = self.logs.commands.read(self.position, max_commands)
        if not records:
            return []
        return self._decide(records, WriteBatch(raw_mode=True))

    def submit(self, values: Sequence[bytes]) -> list[tuple[int, Decision]]:
        """Append ``values`` to the commands log *and* decide them in one synced batch.

        No command is pending before (the caller decides those first). A write that fails
        leaves neither the commands nor their decisions: a command is never left appended but
        undecided, to be decided after its sender was told the write failed. If the batch was
        written and only the projection's write fails, the decisions stand (the projection
        catches up later). On any failure the in-memory state may be ahead of the log: the
        caller must drop this runtime. Returns (version, decision) in command order.
        """
        if self.pending():
            raise RuntimeError("decide the pending commands before submitting new ones")
        wb = WriteBatch(raw_mode=True)
        try:
            return self._decide(self.logs.commands.stage_records(wb, values), wb)
        except BaseException:
            # whatever failed, the logs' ends are what was written: the commands of a batch
            # that did not land are not pending (the next submit starts from the log itself)
            self.logs.reread_ends()
            raise

    def _decide(self, records: Sequence[LogRecord], wb: WriteBatch) -> list[tuple[int, Decision]]:
        state = self.state
        projector = self.projector
        version = self.logs.decisions.end()
        with batch_gc():
            decisions, encoded = decide_batch(state, records, version, projector)
            out = list(enumerate(decisions, version))
            times = [rec.timestamp for rec in records]
            self.logs.decisions.stage(wb, encoded, timestamps=times)
            self.logs.stage_position(wb, GOVERNOR_POSITION, records[-1].offset + 1)
            self.logs.write(wb)  # decisions and input position: one atomic, synced batch
            projector.flush()  # the projection follows, never leads, the decisions log
        for v, d in out:
            if d["reason"] == Reason.INTERNAL_ERROR:
                _governor.error(
                    "governor.internal_error",
                    graph=state.graph,
                    version=v,
                    command_id=d["command_id"],
                    detail=d["detail"],
                )
        return out

    def run_until_idle(self, max_commands: int = 2048, progress: Progress | None = None) -> int:
        """Step until no command is pending; return how many were decided."""
        total = 0
        goal = self.pending()
        while True:
            done = len(self.step(max_commands))
            if not done:
                return total
            total += done
            if progress is not None:
                progress(total, max(goal, total))
