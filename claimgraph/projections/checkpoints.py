"""Checkpoints: a RocksDB checkpoint of a projection plus the folded state at the same version.

A checkpoint lives in ``DIR/checkpoints/v<version>/``::

    projection/        a RocksDB checkpoint of the projection (hard links where possible)
    state.cgstate      the folded GraphState at ``version`` in its canonical, checksummed
                       encoding (:mod:`claimgraph.core.snapshot`; loading never runs code)
    checkpoint.json    version, graph, runtime, horizon, sizes, the SHA-256 of the state file
                       and of the decision record at ``version`` (ties the checkpoint to its log)

Restart: a projector (and the embedded governor, which shares its state) loads the newest
checkpoint whose version is at or below the projection's applied offset and whose decision
digest matches the log, then folds only the log's tail after it; without one it replays the
whole decisions log. ``restore`` replaces a lost or damaged projection with a checkpoint's
copy (checked block by block first); the tail is then re-projected on the next start. A
checkpoint is written to a temporary directory and renamed into place, so a crash leaves no
half checkpoint.

A checkpoint is an optimisation, never a dependency: one that is damaged (its
``checkpoint.json`` unreadable, its state's checksum wrong), of another state format (folded by
other code, ``claimgraph.core.state.STATE_FORMAT``), of another log, or written by an older
claimgraph (``state.pickle``, which is never loaded) is reported through ``on_skip`` and
skipped: the next older one is tried, and without one the whole log is folded.
"""

from __future__ import annotations

import errno
import gc
import hashlib
import json
import os
import shutil
import struct
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rocksdict import Checkpoint

from claimgraph.core.snapshot import decode_state, encode_state
from claimgraph.core.state import STATE_FORMAT, GraphState
from claimgraph.errors import (
    ConfigError,
    CorruptionError,
    DecodeError,
    DiskFullError,
    NotFoundError,
    StorageError,
)
from claimgraph.logs.rocks import Place, failure, named, open_rdict, valid
from claimgraph.projections.projector import ProjectionStore
from claimgraph.projections.retention import horizon_of

__all__ = [
    "STATE_FILE",
    "CheckpointInfo",
    "OnSkip",
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

FORMAT = 2  # 2: the state is state.cgstate (canonical encoding), no longer a pickle
STATE_FILE = "state.cgstate"
_SNAPSHOT_SUFFIX = ".cgstates"
_SNAPSHOT_MAGIC = b"CGSTATES"
_U64 = struct.Struct(">Q")

OnSkip = Callable[[Path, str], None]
"""Told of each checkpoint skipped as unusable: (its path, why) — for the operator's log."""


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
    state_sha256: str = ""

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


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
        with named(store.place, "creating a checkpoint"):
            store.db.flush()
            Checkpoint(store.db).create_checkpoint(str(tmp / "projection"))
        data = encode_state(state)
        _write_synced(tmp / STATE_FILE, data)
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
            "state_sha256": hashlib.sha256(data).hexdigest(),
        }
        meta["bytes"] = _du(tmp)
        _write_synced(tmp / "checkpoint.json", (json.dumps(meta, indent=1) + "\n").encode())
        os.replace(tmp, final)
    except OSError as exc:  # our own files: a full disk is said so, like RocksDB's
        shutil.rmtree(tmp, ignore_errors=True)
        why = failure(exc, store.place, f"writing checkpoint {final}")
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(
                f"no space left on the device of {root} (while writing checkpoint {name}); "
                "nothing was written",
                str(root),
            ) from None
        raise why from None
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
            state_sha256=str(m.get("state_sha256", "")),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StorageError(f"checkpoint {path} is unreadable: {exc}") from None


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def list_checkpoints(root: Path, on_skip: OnSkip | None = None) -> list[CheckpointInfo]:
    """Complete checkpoints under ``root``, oldest first; unreadable ones go to ``on_skip``."""
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir()):
        if not (p / "checkpoint.json").is_file():
            continue
        try:
            out.append(_read(p))
        except StorageError as exc:
            if on_skip is not None:
                on_skip(p, str(exc))
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
    """The folded state saved with a checkpoint (StorageError if it is missing or damaged)."""
    path = info.path / STATE_FILE
    if not path.is_file():
        old = " (written by an older claimgraph as a pickle, which is never loaded)"
        raise StorageError(
            f"checkpoint {info.path} has no {STATE_FILE}"
            + (old if (info.path / "state.pickle").exists() else "")
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StorageError(f"checkpoint {info.path} has no usable state: {exc}") from None
    if info.state_sha256 and hashlib.sha256(data).hexdigest() != info.state_sha256:
        raise StorageError(f"checkpoint {path} does not match the SHA-256 in checkpoint.json")
    enabled = gc.isenabled()
    gc.disable()  # millions of small objects: the cyclic GC would rescan them over and over
    try:
        state = decode_state(data)
    except DecodeError as exc:
        raise StorageError(f"checkpoint {path} has no usable state: {exc}") from None
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
    if state.head != info.version or state.graph != info.graph:
        raise StorageError(f"checkpoint {info.path} holds a state for another version or graph")
    return state


def resume(
    root: Path,
    graph: str,
    applied: int,
    record_at: Callable[[int], bytes | None] | None,
    on_skip: OnSkip | None = None,
) -> tuple[CheckpointInfo, GraphState] | None:
    """The newest usable checkpoint at or below ``applied`` and its state (None: replay all).

    Usable means: readable, same graph and state format, the decision record at its version
    (``record_at``) has the digest the checkpoint recorded, and its state file is intact. Any
    other is skipped (and reported to ``on_skip``), never trusted and never fatal.
    """
    for info in reversed(list_checkpoints(root, on_skip)):
        if info.version > applied:
            continue  # newer than the projection: usable later, or after a restore
        why = None
        if info.graph != graph:
            why = f"it is a checkpoint of graph {info.graph!r}"
        elif info.state_format != state_format():
            why = f"its state format is {info.state_format!r}, not {state_format()!r}"
        elif record_at is not None and _sha(record_at(info.version)) != info.record_sha256:
            why = f"the decision at v{info.version} in the log is not the one it was taken at"
        if why is None:
            try:
                return info, load_state(info)
            except StorageError as exc:
                why = str(exc)
        if on_skip is not None:
            on_skip(info.path, why)
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
    try:
        _check_copy(staged, info)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    if projection.exists():
        os.replace(projection, old)
    os.replace(staged, projection)
    shutil.rmtree(old, ignore_errors=True)


def _check_copy(path: Path, info: CheckpointInfo) -> None:
    """Read every block of a staged copy (checksums verified): never restore damaged data."""
    src = info.path / "projection"
    remedy = (
        f"Checkpoint {info.name} is damaged and was not restored (nothing changed): restore "
        "another one (claimgraph checkpoint list), or rebuild the projection from the "
        f"decisions log: `claimgraph --data {info.path.parent.parent} rebuild`."
    )
    try:
        db = open_rdict(path, create=False, remedy=remedy)
        try:
            it = db.iter()
            it.seek_to_first()
            place = Place(str(src), remedy)
            while valid(it, place, f"checking checkpoint {info.name} before restoring it"):
                it.next()
            del it
        finally:
            db.close()
    except CorruptionError as exc:  # name the checkpoint's file, not the staged copy's
        raise CorruptionError(str(exc).replace(str(path), str(src)), str(src)) from None


def checkpoint_graph(graph: Any) -> CheckpointInfo:
    """Checkpoint an embedded :class:`~claimgraph.service.graph.Graph` at its head."""
    with graph._lock:
        graph.process()
        state = graph.runtime.state
        if state.head < 0:  # no decision to name (and no offset -1 to look up)
            raise ConfigError("nothing to checkpoint: the graph has no decisions yet")
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

    ``record`` is that decision's bytes (its digest ties the snapshot to the partition). The
    file is ``CGSTATES`` ‖ u64 length ‖ a JSON header (format, offset, digest, graphs) followed
    by each graph's canonical state (:mod:`claimgraph.core.snapshot`, each with its own
    checksum) as u64 length ‖ bytes. Written atomically; the ``keep`` newest are kept.
    """
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{name}-{offset:020d}{_SNAPSHOT_SUFFIX}"
    tmp = root / f".{final.name}.tmp-{os.getpid()}"
    head = {
        "format": FORMAT,
        "state_format": state_format(),
        "offset": offset,
        "record_sha256": _sha(record),
        "graphs": list(states),
    }
    parts = [_SNAPSHOT_MAGIC, _frame(json.dumps(head, sort_keys=True).encode())]
    parts += [_frame(encode_state(st)) for st in states.values()]
    _write_synced(tmp, b"".join(parts))
    os.replace(tmp, final)
    for old in sorted(root.glob(f"{name}-*{_SNAPSHOT_SUFFIX}"))[:-keep]:
        old.unlink(missing_ok=True)
    return final


def _frame(data: bytes) -> bytes:
    return _U64.pack(len(data)) + data


def _read_snapshot(data: bytes) -> tuple[dict[str, Any], dict[str, GraphState]]:
    if data[:8] != _SNAPSHOT_MAGIC:
        raise DecodeError("state_magic", "not a claimgraph governor snapshot")
    pos = 8
    frames: list[bytes] = []
    while pos < len(data):
        if pos + 8 > len(data):
            raise DecodeError("state_truncated", "the snapshot ends inside a frame header")
        (n,) = _U64.unpack_from(data, pos)
        if pos + 8 + n > len(data):
            raise DecodeError("state_truncated", "the snapshot ends inside a frame")
        frames.append(data[pos + 8 : pos + 8 + n])
        pos += 8 + n
    if not frames:
        raise DecodeError("state_truncated", "the snapshot has no header")
    try:
        head = json.loads(frames[0])
        graphs = list(head["graphs"])
    except (ValueError, KeyError, TypeError) as exc:
        raise DecodeError("state_layout", f"bad snapshot header: {exc}") from None
    if len(graphs) != len(frames) - 1:
        raise DecodeError("state_truncated", "the snapshot does not hold every graph it names")
    states = {g: decode_state(f) for g, f in zip(graphs, frames[1:], strict=True)}
    if any(st.graph != g for g, st in states.items()):
        raise DecodeError("state_layout", "a state in the snapshot is of another graph")
    return head, states


def load_states(
    root: Path,
    name: str,
    record_at: Callable[[int], bytes | None],
    on_skip: OnSkip | None = None,
) -> tuple[int, dict[str, GraphState]] | None:
    """The newest intact snapshot of ``name`` whose decision digest matches the log.

    Returns (offset, states); damaged, foreign or outdated snapshots are reported to
    ``on_skip`` and skipped (older ``.pickle`` snapshots are never loaded).
    """
    for path in sorted(root.glob(f"{name}-*{_SNAPSHOT_SUFFIX}"), reverse=True):
        enabled = gc.isenabled()
        gc.disable()
        try:
            head, states = _read_snapshot(path.read_bytes())
        except (OSError, DecodeError) as exc:
            if on_skip is not None:
                on_skip(path, str(exc))
            continue
        finally:
            if enabled:
                gc.enable()
        gc.freeze()
        offset = int(head["offset"])
        if head.get("state_format") != state_format():
            why = "folded by other code (state format)"
        elif _sha(record_at(offset)) != head.get("record_sha256"):
            why = f"the decision at offset {offset} is not the one it was taken at"
        else:
            return offset, states
        if on_skip is not None:
            on_skip(path, why)
    return None
