"""The embedded graph: the composition root that wires logs, governor, projector and reads.

``claimgraph.open(path)`` returns a :class:`Graph`. Writes append commands to the commands
log and run the governor and projector until every pending command is decided, so each call
returns the decisions with the versions they landed at (read-your-writes). Reads take ``at``
(default: head).

A data directory holds one graph::

    DIR/graph.json     the graph's name and the layout version
    DIR/log/           commands, decisions and runs logs (RocksDB)
    DIR/projection/    the versioned projection (RocksDB), rebuildable from DIR/log; a
                       projection of an older row layout (claimgraph.projections.rows) is
                       re-projected from the log when the graph is opened (upgrade_projection)
    DIR/checkpoints/   checkpoints of the projection and folded state
                       (claimgraph.projections.checkpoints)
    DIR/pins.sqlite    pins of live runs and the agreed retention horizon
                       (claimgraph.projections.retention; replaces pins.json)
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from claimgraph.core.model import Command, Decision, Progress
from claimgraph.core.state import GraphState
from claimgraph.core.wire import decode_decision, encode_command
from claimgraph.errors import (
    ConfigError,
    DiskFullError,
    IntegrityError,
    StorageError,
    VersionNotYetAvailable,
)
from claimgraph.logconf import events
from claimgraph.logs.embedded import EmbeddedLogStore
from claimgraph.logs.rocks import named
from claimgraph.projections.projector import ProjectionStore, Projector
from claimgraph.projections.reader import ProjectionReader
from claimgraph.projections.retention import PinRegistry, horizon_of
from claimgraph.service.api import NodeLike, Receipt, TickerWrites
from claimgraph.service.inputs import now_millis
from claimgraph.service.lag import ProjectionLag
from claimgraph.service.port import GraphAPI
from claimgraph.service.reads import GraphReads
from claimgraph.service.traces import decode_events, encode_events
from claimgraph.streams.embedded import GOVERNOR_POSITION, EmbeddedRuntime, fold_decisions

if TYPE_CHECKING:
    from claimgraph.service.port import GraphPort

__all__ = [
    "DEFAULT_GRAPH",
    "RESUME_FREE_BYTES",
    "Graph",
    "NodeLike",
    "Receipt",
    "check_consistency",
    "open_graph",
    "read_config",
    "reproject",
    "upgrade_projection",
]

_log = events("storage")

DEFAULT_GRAPH = "default"
LAYOUT = 1
# After a write failed for lack of space, writes are retried (the stores reopened) once the
# data directory's disk has this much free again.
RESUME_FREE_BYTES = 4 << 20


def read_config(path: Path) -> dict[str, Any]:
    """``DIR/graph.json``: the graph's name and layout (ConfigError if it is not a graph)."""
    cfg_path = path / "graph.json"
    try:
        cfg: dict[str, Any] = json.loads(cfg_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{path} is not a claimgraph data directory (run: claimgraph --data {path} init)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {cfg_path}: {exc}") from None
    if cfg.get("layout") != LAYOUT:
        raise ConfigError(
            f"{path} has layout {cfg.get('layout')!r}; this claimgraph reads layout {LAYOUT}"
        )
    return cfg


def reproject(
    logs: EmbeddedLogStore, name: str, live: Path, progress: Progress | None = None
) -> int:
    """Replace the projection in ``live`` with a re-projection of the decisions log: built in
    ``live.rebuilding`` and swapped in only when complete (an interrupted one changes
    nothing). Returns the decisions projected."""
    staged = live.with_name(live.name + ".rebuilding")
    shutil.rmtree(staged, ignore_errors=True)
    fresh = ProjectionStore(staged, create=True)
    try:
        state = GraphState(name)
        projector = Projector(fresh, state)
        projector.set_graph(name)
        fold_decisions(logs, state, projector, progress=progress)
        with named(fresh.place, "flushing the rebuilt projection"):
            fresh.db.flush()
    except BaseException:
        fresh.close()
        shutil.rmtree(staged, ignore_errors=True)
        raise
    fresh.close()
    old = live.with_name(live.name + ".replaced")
    shutil.rmtree(old, ignore_errors=True)
    if live.exists():
        os.replace(live, old)
    os.replace(staged, live)
    shutil.rmtree(old, ignore_errors=True)
    return logs.decisions.end()


def upgrade_projection(
    path: Path, logs: EmbeddedLogStore, name: str, layout: int, progress: Progress | None
) -> None:
    """Re-project a projection of an older row layout (the data directory's writer, on open).

    Progress goes to ``progress`` and, as ``projection.upgrade`` lines, to stderr. Checkpoints
    hold projections of the old layout: they are removed (they are an optimisation; new ones
    are made as usual), so no copy of an erased payload outlives the upgrade in them either.
    """
    from claimgraph.projections.rows import LAYOUT

    end = logs.decisions.end()
    _log.info("projection.upgrade", path=str(path), layout=layout, to=LAYOUT, decisions=end)
    t0 = time.monotonic()
    step = max(end // 10, 1)
    shown = [0]

    def report(done: int, total: int) -> None:
        if progress is not None:
            progress(done, total)
        if done - shown[0] >= step and done < total:
            shown[0] = done
            _log.info("projection.upgrade.progress", done=done, total=total)

    reproject(logs, name, path / "projection", report)
    checkpoints = path / "checkpoints"
    removed = sorted(p.name for p in checkpoints.iterdir()) if checkpoints.is_dir() else []
    for n in removed:
        shutil.rmtree(checkpoints / n, ignore_errors=True)
    _log.info(
        "projection.upgraded",
        path=str(path),
        layout=LAYOUT,
        decisions=end,
        seconds=round(time.monotonic() - t0, 3),
        checkpoints_removed=removed,
    )


def open_graph(
    path: str | Path,
    *,
    create: bool = False,
    graph: str | None = None,
    progress: Progress | None = None,
    clock: Callable[[], int] | None = None,
) -> Graph:
    """Open (or with ``create=True`` initialise) the embedded graph in ``path``."""
    p = Path(path)
    if create:
        p.mkdir(parents=True, exist_ok=True)
        cfg_path = p / "graph.json"
        if cfg_path.exists():
            cfg = read_config(p)
            if graph is not None and cfg["graph"] != graph:
                raise ConfigError(f"{p} already holds graph {cfg['graph']!r}, not {graph!r}")
        else:
            cfg = {"graph": graph or DEFAULT_GRAPH, "layout": LAYOUT, "created_at": now_millis()}
            tmp = cfg_path.with_suffix(".tmp")  # atomic: a crash leaves no half-written file
            tmp.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
            os.replace(tmp, cfg_path)
    else:
        cfg = read_config(p)
        if graph is not None and cfg["graph"] != graph:
            raise ConfigError(f"{p} holds graph {cfg['graph']!r}, not {graph!r}")
    return Graph(p, cfg["graph"], progress=progress, clock=clock)


class Graph(TickerWrites, GraphReads, GraphAPI):
    """One embedded graph: write commands, read at any version, verify and audit."""

    def __init__(
        self,
        path: Path,
        name: str,
        *,
        progress: Progress | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.path = path
        self.name = name
        self._lock = threading.RLock()
        # readers waiting for a version wait on a lock of their own, never on the graph's
        self._advanced = threading.Condition(threading.Lock())
        # clock: where append times (the governor's "now") come from; wall clock by default
        self.logs = EmbeddedLogStore(path / "log", create=True, clock=clock)
        try:
            self.projection = ProjectionStore(path / "projection", create=True)
            if self.projection.outdated:  # rows of an older layout: re-project the log
                layout = self.projection.layout()
                self.projection.close()
                upgrade_projection(path, self.logs, name, layout, progress)
                self.projection = ProjectionStore(path / "projection", create=True)
        except BaseException:  # close what is open, whatever failed, and re-raise it
            self.logs.close()
            raise
        self._progress = progress
        self._runtime: EmbeddedRuntime | None = None
        self._pins: PinRegistry | None = None
        self.reader = ProjectionReader(self.projection.db, cache_iterators=True)
        self._closed = False
        try:
            check_consistency(path, self.logs, self.projection)
        except Exception:
            self.close()
            raise
        # Reads need only the projection; the governor's state (a fold of the whole decisions
        # log) is built on the first write, or now if the projection is behind the log.
        behind = self.projection.applied() < self.logs.decisions.end() - 1
        if behind or self.pending():
            self.process()

    @property
    def runtime(self) -> EmbeddedRuntime:
        """The governor and projector, built (by folding the decisions log) on first use."""
        with self._lock:
            if self._runtime is None:
                self._runtime = EmbeddedRuntime(
                    self.logs,
                    self.projection,
                    self.name,
                    progress=self._progress,
                    checkpoints=self.path / "checkpoints",
                )
                self._runtime.projector.set_graph(self.name)
            return self._runtime

    @property
    def pins(self) -> PinRegistry:
        """Pins of live runs: GC never moves the horizon past one (projections.retention)."""
        if self._pins is None:
            self._pins = PinRegistry(self.path)
        return self._pins

    def horizon(self) -> int:
        """The oldest readable version (reads below it raise VersionPruned)."""
        return horizon_of(self.projection.db)

    def pending(self) -> int:
        """Commands appended but not decided yet."""
        return self.logs.commands.end() - self.logs.position(GOVERNOR_POSITION)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self.reader.release()  # cached iterators keep the database open
                try:
                    self.projection.close()  # a corruption it met: CorruptionError, named
                finally:
                    self.logs.close()

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes ---------------------------------------------------------------------------------

    def append(self, commands: Iterable[Command | bytes]) -> list[int]:
        """Append commands (or raw records) to the commands log without deciding them."""
        values = [c if isinstance(c, bytes | bytearray) else encode_command(c) for c in commands]
        with self._lock:
            self._recover()
            return self.logs.commands.append(values)

    def process(self, batch: int = 2048, progress: Progress | None = None) -> int:
        """Decide and project every pending command; return how many were decided.

        If the projection cannot be written (a full disk) after decisions were logged, those
        decisions stand and are counted; the projection catches up on the next write.
        """
        with self._lock:
            self._recover()
            end = self.logs.decisions.end()
            try:
                n = self.runtime.run_until_idle(batch, progress)
            except Exception as exc:
                self._runtime = None  # its state may be ahead of the log: fold again
                n = self.logs.decisions.end() - end
                if not (n and isinstance(exc, StorageError)):
                    raise
                _log.warning("projection.behind", path=str(self.path), error=str(exc))
        if n:
            with self._advanced:
                self._advanced.notify_all()
        return n

    def submit(self, commands: Sequence[Command | bytes]) -> list[Receipt]:
        """Append commands, decide them, and return one receipt per command, in order.

        The commands and their decisions are written in one synced batch: a submit that
        raises decided nothing (a full disk raises DiskFullError), and one that returns
        reports the decisions its commands got — even when the projection could not be
        written after them (reads then lag until the next write catches it up).
        """
        if not commands:
            return []
        values = [c if isinstance(c, bytes | bytearray) else encode_command(c) for c in commands]
        with self._lock:
            self._recover()
            if self.pending():
                self.process()
            first = self.logs.decisions.end()
            try:
                out = self.runtime.submit(values)
            except Exception as exc:
                self._runtime = None  # its state may be ahead of the log: fold again
                if self.logs.decisions.end() == first or not isinstance(exc, StorageError):
                    raise  # nothing landed (the log's ends were re-read), or a bug
                _log.warning("projection.behind", path=str(self.path), error=str(exc))
                out = [
                    (r.offset, decode_decision(r.value))
                    for r in self.logs.decisions.read(first, len(values))
                ]
            with self._advanced:
                self._advanced.notify_all()
            return [Receipt(d["command_id"], d["input_offset"], v, d) for v, d in out]

    def _recover(self) -> None:
        """Before a write: reopen the stores a failed write left refusing writes.

        RocksDB keeps refusing writes after one failed (its background error is sticky) until
        the database is reopened. Reads go on meanwhile. A reopen is tried only once the disk
        has :data:`RESUME_FREE_BYTES` free again, so a full disk answers DiskFullError quickly.
        """
        if not (self.logs.failed or self.projection.failed):
            return
        free = _free_bytes(self.path)
        if free is not None and free < RESUME_FREE_BYTES:
            raise DiskFullError(
                f"the disk of {self.path} is still full ({free} bytes free): writes resume "
                f"by themselves once {RESUME_FREE_BYTES} bytes are free; reads go on meanwhile",
                str(self.path),
            )
        self._runtime = None
        if self.logs.failed:
            self.logs.reopen()
        if self.projection.failed:
            self.reader.release()
            del self.reader.db  # the old handle's last references go before the reopen
            try:
                self.projection.reopen()
            finally:
                self.reader.db = self.projection.db
        _log.warning("storage.recovered", path=str(self.path))

    def _one(self, command: Command) -> Receipt:
        return self.submit([command])[0]

    def _one_signed(self, record: bytes) -> Receipt:
        return self.submit([record])[0]

    # -- versions -------------------------------------------------------------------------------

    def head(self) -> int:
        """The newest applied version (-1 for an empty graph)."""
        return self.projection.applied()

    def projection_lag(self) -> ProjectionLag:
        """The age of the oldest decision the projection has not applied (0: caught up),
        measured on the log's own clock."""
        applied = self.projection.applied()
        if applied + 1 >= self.logs.decisions.end():
            return ProjectionLag(applied, 0.0, False)
        rec = self.logs.decisions.get(applied + 1)
        if rec is None:
            raise StorageError(f"decision {applied + 1} is missing from {self.path / 'log'}")
        return ProjectionLag(applied, max(0.0, (self.logs.clock() - rec.timestamp) / 1000), True)

    def wait_for(self, version: int, timeout: float = 0.0) -> int:
        """Block until ``version`` is applied (or raise VersionNotYetAvailable); return head."""
        head = self.head()
        if version <= head:
            return head  # applied versions never change: no lock needed
        deadline = time.monotonic() + timeout
        with self._advanced:  # not the graph's lock: a waiting reader never delays a writer
            while True:
                head = self.head()
                if version <= head:
                    return head
                left = deadline - time.monotonic()
                if left <= 0:
                    raise VersionNotYetAvailable(version, head, timeout)
                self._advanced.wait(min(left, 1.0))  # woken by process(); 1 s: belt and braces

    # -- runs (claimgraph.service.runs) ----------------------------------------------------

    def append_run_events(self, events: Sequence[dict[str, Any]]) -> None:
        """Append trace events to the runs log (``R`` in the embedded log store)."""
        values = encode_events(events)
        with self._lock:
            self._recover()
            self.logs.runs.append(values)

    def run_events(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """Trace events from the runs log, of one run or all, in log order."""
        out: list[dict[str, Any]] = []
        start = 0
        while True:
            recs = self.logs.runs.read(start, 4096)
            if not recs:
                return out
            out += decode_events((r.value for r in recs), run_id)
            start = recs[-1].offset + 1

    def decisions(self, start: int = 0, limit: int = 100) -> list[tuple[int, Decision]]:
        """Decisions from the decisions log: (version, decision)."""
        from claimgraph.core.erasure import scrub_decision
        from claimgraph.projections.erasure import erased_at

        def erased(claim_id: str) -> int | None:
            return erased_at(self.projection.db, claim_id)

        return [
            (r.offset, scrub_decision(decode_decision(r.value), erased))
            for r in self.logs.decisions.read(start, limit)
        ]


def _free_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def check_consistency(path: Path, logs: EmbeddedLogStore, projection: ProjectionStore) -> None:
    """Refuse a graph whose projection leads its log, or whose log contradicts itself.

    The projection is written only after the decisions it holds are synced to the log, so a
    projection ahead of the log means the log lost its tail (a restored or truncated log, a
    disk that dropped synced writes). Serving it would reuse the lost versions for new
    decisions and serve claims the log no longer has. Nothing is changed: the error says
    what to do.
    """
    end = logs.decisions.end()
    applied = projection.applied()
    data = path.resolve()
    if applied > end - 1:
        raise IntegrityError(
            f"the projection in {data / 'projection'} is at version {applied} but the "
            f"decisions log in {data / 'log'} ends at version {end - 1}: the log lost "
            f"versions {end}..{applied}. Nothing was changed. Restore the data directory from "
            f"a backup to keep them, or re-project from the log as it is with "
            f"`claimgraph --data {path} rebuild` (versions after v{end - 1} are then gone).",
            end,
        )
    for what, version in witnesses(path, logs):
        if version > end - 1:
            raise IntegrityError(
                f"{what} is at version {version} but the decisions log in {data / 'log'} ends "
                f"at version {end - 1}: the log lost versions {end}..{version}. Nothing was "
                "changed (a new write would reuse a lost version). Restore the data directory "
                f"from a backup to keep them; to go on with the log as it is, remove {what} "
                f"and re-project with `claimgraph --data {path} rebuild`.",
                end,
            )
    position, commands = logs.position(GOVERNOR_POSITION), logs.commands.end()
    if position > commands or end != position:
        raise IntegrityError(
            f"the logs in {data / 'log'} contradict each other: {commands} commands, "
            f"{end} decisions, governor position {position} (each decided command has one "
            "decision, written with the position in one batch): the log lost records. "
            + logs.place.remedy,
            min(end, position),
        )


_RUN_EVENTS_CHECKED = 256  # the newest trace events whose versions check_consistency reads


def witnesses(path: Path, logs: EmbeddedLogStore) -> list[tuple[str, int]]:
    """Everything beside the log that names a version it had: each checkpoint, the newest
    pin and the retention horizon, the newest runs' pinned versions and written versions."""
    from claimgraph.projections.checkpoints import list_checkpoints

    out = [(f"checkpoint {c.path}", c.version) for c in list_checkpoints(path / "checkpoints")]
    if (path / "pins.sqlite").exists():
        pins = PinRegistry(path)
        out += [(f"a pin of run {p.owner} in {pins.file}", p.version) for p in pins.live()[-1:]]
        horizon = pins.horizon()  # 0 until a GC moved it
        if horizon > 0:
            out.append((f"the retention horizon in {pins.file}", horizon))
    end = logs.runs.end()
    recs = logs.runs.read(max(0, end - _RUN_EVENTS_CHECKED), _RUN_EVENTS_CHECKED)
    for ev in decode_events(r.value for r in recs):
        where = f"run {ev['run_id']} in the runs log of {path / 'log'}"
        out.append((where, int(ev["pinned_version"])))
        try:
            written = json.loads(ev["payload"]).get("version") if ev["kind"] == "write" else None
        except (ValueError, AttributeError):
            written = None
        if isinstance(written, int):
            out.append((where, written))
    return out


if TYPE_CHECKING:  # mypy checks that this graph implements the graph port

    def _conforms(g: Graph) -> GraphPort:
        return g
