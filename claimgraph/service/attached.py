"""A data directory another process writes: read it through secondaries, write through the writer.

RocksDB allows one writer per database, so while ``claimgraph serve`` (or a long ``submit``)
holds a data directory, another CLI process cannot open it as the embedded graph does. It
*attaches* instead (:func:`open_local` chooses):

* **reads** open ``DIR/log`` and ``DIR/projection`` as RocksDB *secondary* instances (no lock,
  read-only) and catch up with the writer before answering — the projection first, then the
  logs, so the logs hold every decision the projection has applied. Each answer is at the
  version caught up to, complete for that version (a projection batch and its applied offset
  are one atomic write; a secondary sees whole batches), never a mix of two versions;
* **writes** (commands, run traces, gc, checkpoints) go to the writer process over its unix
  socket (:mod:`claimgraph.service.local`), which decides them and answers with the receipts,
  or the error, the command would have given locally. If the writer has gone and the
  directory is free, this process opens it and becomes the writer itself.

A secondary needs a scratch directory of its own: ``DIR/.readers/PID@HOST.XXXX/``, removed
on close; those of processes of this host that died are removed by the next attach. (A
reader that may not write the data directory uses the system's temporary directory.)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from claimgraph.core.model import Command, Decision, Progress
from claimgraph.core.wire import encode_command
from claimgraph.errors import ConfigError, StorageError
from claimgraph.logs.embedded import EmbeddedLogStore
from claimgraph.logs.rocks import is_locked, named
from claimgraph.procs import pid_alive
from claimgraph.projections.checkpoints import CheckpointInfo
from claimgraph.projections.pins import Pin
from claimgraph.projections.projector import ProjectionStore
from claimgraph.projections.reader import ProjectionReader
from claimgraph.projections.replica import wait_caught_up
from claimgraph.projections.retention import GcReport, PinRegistry, horizon_changed, horizon_of
from claimgraph.service.api import Receipt, TickerWrites
from claimgraph.service.graph import Graph, open_graph, read_config
from claimgraph.service.local import (
    ANNOUNCEMENT,
    SOCKET,
    Announcement,
    WriterClient,
    batches,
    read_announcement,
)
from claimgraph.service.local_writer import WriterListener, listen, listening
from claimgraph.service.port import GraphAPI
from claimgraph.service.reads import GraphReads
from claimgraph.service.traces import decode_events, encode_events
from claimgraph.streams.embedded import GOVERNOR_POSITION

if TYPE_CHECKING:
    from claimgraph.service.port import GraphPort

_T = TypeVar("_T")

__all__ = ["READERS", "WRITER_WAIT", "AttachedGraph", "local_graph", "open_local"]

READERS = ".readers"  # DIR/.readers/PID-XXXX: the scratch directories of secondaries
# Seconds a write waits for the process holding the directory to announce its socket (it may
# be starting up, or folding a long log before it listens). CLAIMGRAPH_WRITER_WAIT overrides.
WRITER_WAIT = 10.0


def _writer_wait() -> float:
    try:
        return max(0.0, float(os.environ.get("CLAIMGRAPH_WRITER_WAIT", WRITER_WAIT)))
    except ValueError:
        raise ConfigError("CLAIMGRAPH_WRITER_WAIT must be a number of seconds") from None


def _sweep(readers: Path) -> None:
    """Remove the scratch directories of secondaries whose process is gone: ``PID@HOST.XXXX``
    of this host only (a pid means nothing in another container sharing the directory)."""
    here = socket.gethostname()
    with contextlib.suppress(OSError):
        for d in readers.iterdir():
            pid, _, rest = d.name.partition("@")
            if pid.isdigit() and rest.rpartition(".")[0] == here and not pid_alive(int(pid)):
                shutil.rmtree(d, ignore_errors=True)


def _scratch(path: Path) -> Path:
    """This process's scratch for its secondaries: in ``DIR/.readers`` (where the next reader
    sweeps it if this process dies), or in the system's temporary directory when the data
    directory is not writable by this user."""
    readers = path / READERS
    try:
        readers.mkdir(mode=0o700, exist_ok=True)
        _sweep(readers)
        return Path(tempfile.mkdtemp(prefix=f"{os.getpid()}@{socket.gethostname()}.", dir=readers))
    except OSError:
        return Path(tempfile.mkdtemp(prefix=f"claimgraph-reader-{os.getpid()}-"))


class AttachedGraph(TickerWrites, GraphReads, GraphAPI):
    """The embedded graph in a data directory another process holds (see the module)."""

    def __init__(self, path: Path, name: str, *, writer_wait: float | None = None) -> None:
        self.path = path
        self.name = name
        self.writer_wait = _writer_wait() if writer_wait is None else writer_wait
        self._lock = threading.RLock()  # catch-ups and reads that need one view (verify, audit)
        self._write_lock = threading.Lock()
        self._scratch = _scratch(path)
        self._client: WriterClient | None = None
        self._own: Graph | None = None  # this process became the writer (the other one left)
        self._listener: WriterListener | None = None
        self._closed = False
        projection: ProjectionStore | None = None
        try:
            projection = ProjectionStore(
                path / "projection", secondary=self._scratch / "projection"
            )
            logs = EmbeddedLogStore(path / "log", secondary=self._scratch / "log")
        except BaseException:
            if projection is not None:
                projection.close()
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise
        self.projection = projection
        self.logs = logs
        self.reader = ProjectionReader(projection.db)
        self._seen = -1
        self.catch_up()

    # -- the secondaries ----------------------------------------------------------------------

    def catch_up(self) -> int:
        """See what the writer has written: the projection, then the logs; the head now."""
        with self._lock:
            with named(self.projection.place, "catching up with the writer"):
                self.projection.db.try_catch_up_with_primary()
            horizon_changed()
            self.logs.catch_up()
            self._seen = max(self._seen, self.projection.applied())
            return self._seen

    def head(self) -> int:
        """The newest version the writer has applied (caught up now)."""
        return self.catch_up()

    def wait_for(self, version: int, timeout: float = 0.0) -> int:
        return wait_caught_up(self.catch_up, self._seen, version, timeout)

    def horizon(self) -> int:
        """The oldest readable version (reads below it raise VersionPruned)."""
        return horizon_of(self.projection.db)

    def pending(self) -> int:
        """Commands the writer has appended but not decided yet (as of the last catch-up)."""
        with self._lock:
            return self.logs.commands.end() - self.logs.position(GOVERNOR_POSITION)

    @property
    def pins(self) -> PinRegistry:
        """Pins of live runs (``DIR/pins.sqlite``, shared with the writer)."""
        return PinRegistry(self.path)

    def decisions(self, start: int = 0, limit: int = 100) -> list[tuple[int, Decision]]:
        """Decisions up to the head caught up now (the logs may hold a few more)."""
        from claimgraph.core.erasure import scrub_decision
        from claimgraph.core.wire import decode_decision
        from claimgraph.projections.erasure import erased_at

        with self._lock:
            head = self.catch_up()
            db = self.projection.db

            def erased(claim_id: str) -> int | None:
                return erased_at(db, claim_id)

            return [
                (r.offset, scrub_decision(decode_decision(r.value), erased))
                for r in self.logs.decisions.read(start, limit)
                if r.offset <= head
            ]

    def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Trace events from the runs log, of one run or all, in log order."""
        with self._lock:
            self.catch_up()
            out: list[dict[str, Any]] = []
            start = 0
            while True:
                recs = self.logs.runs.read(start, 4096)
                if not recs:
                    return out
                out += decode_events((r.value for r in recs), run_id)
                start = recs[-1].offset + 1

    # -- writes: through the writer -------------------------------------------------------------

    def _writer(self, deadline: float) -> WriterClient | Graph:
        """The announced writer, or this process once the directory is free; waits for one."""
        if self._own is not None:
            return self._own
        if self._client is not None:
            return self._client
        while True:
            ann = read_announcement(self.path)
            if ann is not None:  # whoever answers on the socket, whatever its pid says
                client = WriterClient(self.path, ann, self.name)
                if client.ping():
                    self._client = client
                    return client
            try:
                g = open_graph(self.path)
            except StorageError as exc:
                if not is_locked(exc):
                    raise
            else:  # the writer left: this process writes now, and listens in its place
                self._listener = listen(g)
                self._own = g
                return g
            if time.monotonic() >= deadline:
                raise StorageError(self._no_writer(ann))
            time.sleep(0.05)

    def _no_writer(self, ann: Announcement | None) -> str:
        where = f"{self.path} is held by another process that accepts no writes"
        if ann is None:
            why = f"it announced no socket in {self.path / ANNOUNCEMENT}"
        elif not ann.alive():
            why = f"{self.path / ANNOUNCEMENT} is stale: pid {ann.pid} is gone"
        else:
            why = f"pid {ann.pid} ({self.path / ANNOUNCEMENT}) does not answer on {SOCKET}"
        return (
            f"{where} ({why}, waited {self.writer_wait:g}s). Reads work meanwhile; write "
            "through that process (e.g. its HTTP API) or once it has stopped"
        )

    def _via_writer(
        self, here: Callable[[Graph], _T], there: Callable[[WriterClient], _T | None]
    ) -> _T:
        """``there(writer)`` — or ``here(graph)`` once this process is the writer — looking for
        the writer again while it is not there to greet (it sent nothing then)."""
        deadline = time.monotonic() + self.writer_wait
        with self._write_lock:
            while True:
                w = self._writer(deadline)
                if isinstance(w, Graph):
                    return here(w)
                done = there(w)
                if done is not None:
                    return done
                self._client = None
                if time.monotonic() >= deadline:
                    raise StorageError(self._no_writer(w.announcement))
                time.sleep(0.05)

    def submit(self, commands: Sequence[Command | bytes]) -> list[Receipt]:
        """Send commands to the writer; one receipt per command, in order (read-your-writes:
        the versions are applied by the time this returns, and the next read catches up)."""
        values = [c if isinstance(c, bytes | bytearray) else encode_command(c) for c in commands]
        out: list[Receipt] = []
        for batch in batches([bytes(v) for v in values]):
            out += self._submit_batch(batch)
        return out

    def _submit_batch(self, batch: list[bytes]) -> list[Receipt]:
        return self._via_writer(lambda g: g.submit(batch), lambda c: c.submit(batch))

    def _one(self, command: Command) -> Receipt:
        return self.submit([command])[0]

    def _one_signed(self, record: bytes) -> Receipt:
        return self.submit([record])[0]

    def append_run_events(self, events: Sequence[dict[str, Any]]) -> None:
        """Append trace events to the runs log, through the writer."""
        for batch in batches(encode_events(events)):
            self._runs_batch(batch)

    def _runs_batch(self, batch: list[bytes]) -> None:
        def here(g: Graph) -> bool:
            g.append_run_events(decode_events(batch))
            return True

        def there(c: WriterClient) -> bool | None:
            return True if c.append_runs(batch) else None

        self._via_writer(here, there)

    def _admin(self, op: str, **args: Any) -> dict[str, Any]:
        return self._via_writer(
            lambda g: _admin_locally(g, op, **args), lambda c: c.request(op, **args)
        )

    def gc(
        self, *, horizon: int | None = None, keep: int | None = None, keep_age_ms: int | None = None
    ) -> GcReport:
        """GC the projection, done by the writer (``projections.retention.gc_graph``)."""
        d = self._admin("gc", horizon=horizon, keep=keep, keep_age_ms=keep_age_ms)["report"]
        held = d.get("held_by")
        return GcReport(**{**d, "held_by": Pin(**held) if held else None})

    def checkpoint(self) -> CheckpointInfo:
        """Checkpoint the projection and folded state at head, done by the writer."""
        d = self._admin("checkpoint")["checkpoint"]
        return CheckpointInfo(**{**d, "path": Path(d["path"])})

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._listener is not None:
                    self._listener.close()
                if self._own is not None:
                    self._own.close()
            finally:
                try:
                    self.projection.close()
                    self.logs.close()
                finally:
                    shutil.rmtree(self._scratch, ignore_errors=True)
                    with contextlib.suppress(OSError):
                        (self.path / READERS).rmdir()  # only if no other reader is there

    def __enter__(self) -> AttachedGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _admin_locally(g: Graph, op: str, **args: Any) -> dict[str, Any]:
    if op == "gc":
        from claimgraph.projections.retention import gc_graph

        return {"report": gc_graph(g, **args).as_dict()}
    from claimgraph.projections.checkpoints import checkpoint_graph

    return {"checkpoint": checkpoint_graph(g).as_dict()}


def open_local(
    path: str | Path,
    *,
    create: bool = False,
    graph: str | None = None,
    progress: Progress | None = None,
) -> Graph | AttachedGraph:
    """The embedded graph in ``path``: as its writer if it is free, else attached to its writer.

    Only a directory that another process holds (RocksDB's lock) is attached to; every other
    failure to open it is raised as it is.
    """
    p = Path(path)
    try:
        return open_graph(p, create=create, graph=graph, progress=progress)
    except StorageError as exc:
        if not is_locked(exc):
            raise
    cfg = read_config(p)
    if graph is not None and cfg["graph"] != graph:
        raise ConfigError(f"{p} holds graph {cfg['graph']!r}, not {graph!r}")
    return AttachedGraph(p, cfg["graph"])


@contextlib.contextmanager
def local_graph(
    path: str | Path,
    *,
    create: bool = False,
    graph: str | None = None,
    progress: Progress | None = None,
) -> Iterator[Graph | AttachedGraph]:
    """:func:`open_local` for the length of a block; as the writer, it listens for others'
    writes meanwhile (:class:`~claimgraph.service.local.WriterListener`)."""
    g = open_local(path, create=create, graph=graph, progress=progress)
    try:
        with listening(g):
            yield g
    finally:
        g.close()


if TYPE_CHECKING:  # mypy checks that this graph implements the graph port

    def _conforms(g: AttachedGraph) -> GraphPort:
        return g
