"""Checkpoints: a RocksDB checkpoint of a projection plus the folded state at the same version.

A checkpoint lives in ``DIR/checkpoints/v<version>/``::

    projection/        a RocksDB checkpoint of the projection (hard links where possible)
    state.pickle       the folded GraphState at ``version`` (what governor and projector hold)
    checkpoint.json    version, graph, runtime, horizon, sizes, and the SHA-256 of the
                       decision record at ``version`` (ties the checkpoint to its log)

Restart: a projector (and the embedded governor, which shares its state) loads the newest
checkpoint whose version is at or below the projection's applied offset and whose decision
digest matches the log, then folds only the log's tail after it; without one it replays the
whole decisions log. ``restore`` replaces a lost or damaged projection with a checkpoint's
copy; the tail is then re-projected on the next start. A checkpoint is written to a temporary
directory and renamed into place, so a crash leaves no half checkpoint.

``state.pickle`` is trusted local data, like the RocksDB files beside it: never load a
checkpoint directory from an untrusted source. A state is only as good as the code that
folded it, so every checkpoint records :func:`state_format`, the explicit version of the fold's
state (``claimgraph.core.state.STATE_FORMAT``, bumped with any change to what the fold builds);
checkpoints of another format are skipped and the log is replayed instead.
"""

from __future__ import annotations

import copyreg
import gc
import hashlib
import json
import os
import pickle
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rocksdict import Checkpoint

from claimgraph.core.state import STATE_FORMAT, ClaimState, EdgeState, GraphState
from claimgraph.errors import ConfigError, NotFoundError, StorageError
from claimgraph.projections.projector import ProjectionStore
from claimgraph.projections.retention import horizon_of

__all__ = [
    "CheckpointInfo",
    "checkpoint_graph",
    "create_checkpoint",
    "list_checkpoints",
    "load_state",
    "load_states",
    "pick",
    "prune_checkpoints",
    "restore_checkpoint",
    "restore_graph",
    "resume",
    "save_states",
    "state_format",
]

FORMAT = 1


def state_format() -> str:
    """The fold's state format: checkpoints of another format are skipped (never misread)."""
    return f"state-v{STATE_FORMAT}"


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """What ``checkpoint.json`` says about one checkpoint."""

    name: str
    path: Path
    version: int
    graph: str
    runtime: str
    created_at: int
    horizon: int
    decisions: int
    record_sha256: str
    bytes: int
    state_format: str = ""

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


def _rebuild(cls: Any, values: tuple[Any, ...]) -> Any:
    """Unpickle a slotted fold object from the tuple of its slot values."""
    obj = cls.__new__(cls)
    for name, value in zip(cls.__slots__, values, strict=True):
        setattr(obj, name, value)
    return obj


def _dump(obj: Any, path: Path) -> None:
    """Pickle ``obj`` with the millions of slotted claim/edge states as plain tuples.

    The default reduction of a slotted object builds a state dict per object on load; tuples
    cut the peak memory of loading a 1M-claim state by about a fifth and load faster.
    """
    with open(path, "wb") as f:
        p = pickle.Pickler(f, protocol=pickle.HIGHEST_PROTOCOL)
        table = copyreg.dispatch_table.copy()
        for cls in (ClaimState, EdgeState):
            slots = cls.__slots__

            def reduce(o: Any, cls: type = cls, slots: tuple[str, ...] = slots) -> Any:
                return _rebuild, (cls, tuple(getattr(o, s) for s in slots))

            table[cls] = reduce
        p.dispatch_table = table
        p.dump(obj)


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _sha(record: bytes | None) -> str:
    return hashlib.sha256(record).hexdigest() if record is not None else ""


def create_checkpoint(
    store: ProjectionStore,
    state: GraphState,
    root: Path,
    *,
    runtime: str,
    record: bytes | None,
) -> CheckpointInfo:
    """Checkpoint ``store`` and ``state`` (both at the store's applied version) under ``root``.

    ``record`` is the decision record at that version (its digest is checked on resume).
    Idempotent: a checkpoint of the same version is returned as it is.
    """
    version = store.applied()
    if version < 0:
        raise ConfigError("nothing to checkpoint: the projection is empty")
    if state.head != version:
        raise StorageError(
            f"cannot checkpoint: the folded state is at v{state.head} "
            f"but the projection at v{version} (let the projector catch up first)"
        )
    name = f"v{version:020d}"
    final = root / name
    if (final / "checkpoint.json").exists():
        return _read(final)
    tmp = root / f".{name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        store.db.flush()
        Checkpoint(store.db).create_checkpoint(str(tmp / "projection"))
        _dump(state, tmp / "state.pickle")
        meta = {
            "format": FORMAT,
            "version": version,
            "graph": state.graph,
            "runtime": runtime,
            "created_at": time.time_ns() // 1_000_000,
            "horizon": horizon_of(store.db),
            "decisions": state.decisions,
            "record_sha256": _sha(record),
            "state_format": state_format(),
        }
        meta["bytes"] = _du(tmp)
        (tmp / "checkpoint.json").write_text(json.dumps(meta, indent=1) + "\n", "utf-8")
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _read(final)


def _read(path: Path) -> CheckpointInfo:
    try:
        m = json.loads((path / "checkpoint.json").read_text("utf-8"))
        return CheckpointInfo(
            name=path.name,
            path=path,
            version=int(m["version"]),
            graph=str(m["graph"]),
            runtime=str(m["runtime"]),
            created_at=int(m["created_at"]),
            horizon=int(m["horizon"]),
            decisions=int(m["decisions"]),
            record_sha256=str(m["record_sha256"]),
            bytes=int(m["bytes"]),
            state_format=str(m.get("state_format", "")),
        )
    except (OSError, ValueError, KeyError) as exc:
        raise StorageError(f"checkpoint {path} is unreadable: {exc}") from None


def list_checkpoints(root: Path) -> list[CheckpointInfo]:
    """Complete checkpoints under ``root``, oldest first."""
    if not root.is_dir():
        return []
    out = [_read(p) for p in sorted(root.iterdir()) if (p / "checkpoint.json").is_file()]
    return sorted(out, key=lambda c: c.version)


def prune_checkpoints(root: Path, keep: int) -> list[CheckpointInfo]:
    """Delete all but the ``keep`` newest checkpoints under ``root``; return those deleted.

    A checkpoint pins the RocksDB files it was taken from (hard links), so old checkpoints
    hold disk space the live projection has already compacted away.
    """
    if keep < 1:
        raise ConfigError("keep at least one checkpoint (--keep 1)")
    found = list_checkpoints(root)
    gone = found[:-keep]
    for info in gone:
        shutil.rmtree(info.path)
    return gone


def load_state(info: CheckpointInfo) -> GraphState:
    """The folded state saved with a checkpoint."""
    enabled = gc.isenabled()
    gc.disable()  # millions of small objects: the cyclic GC would rescan them over and over
    try:
        with open(info.path / "state.pickle", "rb") as f:
            state = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError) as exc:
        raise StorageError(f"checkpoint {info.path} has no usable state: {exc}") from None
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
    if not isinstance(state, GraphState) or state.head != info.version:
        raise StorageError(f"checkpoint {info.path} holds a state for another version")
    return state


def resume(
    root: Path,
    graph: str,
    applied: int,
    record_at: Callable[[int], bytes | None] | None,
) -> tuple[CheckpointInfo, GraphState] | None:
    """The newest usable checkpoint at or below ``applied`` and its state (None: replay all).

    Usable means: same graph, and the decision record at its version (``record_at``) has the
    digest the checkpoint recorded. A checkpoint that does not fit is skipped, not trusted.
    """
    for info in reversed(list_checkpoints(root)):
        if info.version > applied or info.graph != graph or info.state_format != state_format():
            continue
        if record_at is not None and _sha(record_at(info.version)) != info.record_sha256:
            continue
        return info, load_state(info)
    return None


def pick(root: Path, name: str | None = None) -> CheckpointInfo:
    """Checkpoint ``name`` (``v<version>`` or the version) under ``root``, default the newest."""
    found = list_checkpoints(root)
    if not found:
        raise NotFoundError(f"no checkpoints in {root} (create one: claimgraph checkpoint create)")
    if name is None:
        return found[-1]
    match = [c for c in found if c.name == name or str(c.version) == name.lstrip("v")]
    if not match:
        names = ", ".join(c.name for c in found)
        raise NotFoundError(f"no checkpoint {name!r} in {root} (have: {names})")
    return match[0]


def restore_checkpoint(info: CheckpointInfo, projection: Path) -> None:
    """Replace the projection directory with a copy of the checkpoint's projection.

    The caller must hold the graph closed (no process may have ``projection`` open).
    """
    staged = projection.with_name(projection.name + ".restoring")
    old = projection.with_name(projection.name + ".replaced")
    shutil.rmtree(staged, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    shutil.copytree(info.path / "projection", staged)  # a copy: the checkpoint stays intact
    if projection.exists():
        os.replace(projection, old)
    os.replace(staged, projection)
    shutil.rmtree(old, ignore_errors=True)


def checkpoint_graph(graph: Any) -> CheckpointInfo:
    """Checkpoint an embedded :class:`~claimgraph.service.graph.Graph` at its head."""
    with graph._lock:
        graph.process()
        state = graph.runtime.state
        rec = graph.logs.decisions.get(state.head)
        return create_checkpoint(
            graph.projection,
            state,
            graph.path / "checkpoints",
            runtime="embedded",
            record=rec.value if rec is not None else None,
        )


def restore_graph(path: Path, name: str | None = None) -> CheckpointInfo:
    """Restore an embedded graph's projection from a checkpoint (the graph must be closed).

    The graph's log database stays open (locked) meanwhile, so no other process can open the
    graph during the swap; the next open re-projects the log's tail after the checkpoint.
    """
    from claimgraph.logs.embedded import EmbeddedLogStore

    if not (path / "graph.json").exists():
        raise ConfigError(f"{path} is not a claimgraph data directory")
    logs = EmbeddedLogStore(path / "log")  # raises StorageError if the graph is open elsewhere
    try:
        info = pick(path / "checkpoints", name)
        rec = logs.decisions.get(info.version)
        if _sha(rec.value if rec is not None else None) != info.record_sha256:
            raise StorageError(
                f"checkpoint {info.name} does not match this graph's decisions log "
                f"(the decision at v{info.version} differs)"
            )
        restore_checkpoint(info, path / "projection")
        return info
    finally:
        logs.close()


def save_states(
    root: Path, name: str, states: dict[str, GraphState], offset: int, record: bytes, keep: int = 2
) -> Path:
    """Snapshot a Kafka governor's per-graph states after the decision at ``offset``.

    ``record`` is that decision's bytes (its digest ties the snapshot to the partition).
    Written atomically; the ``keep`` newest snapshots of ``name`` are kept.
    """
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{name}-{offset:020d}.pickle"
    tmp = root / f".{final.name}.tmp-{os.getpid()}"
    doc = {
        "format": FORMAT,
        "state_format": state_format(),
        "offset": offset,
        "record_sha256": _sha(record),
        "states": states,
    }
    _dump(doc, tmp)
    os.replace(tmp, final)
    for old in sorted(root.glob(f"{name}-*.pickle"))[:-keep]:
        old.unlink(missing_ok=True)
    return final


def load_states(
    root: Path, name: str, record_at: Callable[[int], bytes | None]
) -> tuple[int, dict[str, GraphState]] | None:
    """The newest snapshot of ``name`` whose decision digest matches the log: (offset, states)."""
    for path in sorted(root.glob(f"{name}-*.pickle"), reverse=True):
        enabled = gc.isenabled()
        gc.disable()
        try:
            with open(path, "rb") as f:
                doc = pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
            continue
        finally:
            if enabled:
                gc.enable()
        gc.freeze()
        offset = int(doc["offset"])
        if doc.get("state_format") != state_format():
            continue  # folded by other code: replay instead
        if _sha(record_at(offset)) != doc["record_sha256"]:
            continue
        states: dict[str, GraphState] = doc["states"]
        return offset, states
    return None
