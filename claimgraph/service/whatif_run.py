"""A what-if over a data directory, read-only, in a process of its own.

:func:`read_only_logs` opens ``DIR/log`` as a RocksDB *secondary* instance, through a shadow
directory of symbolic links in the system's temporary directory (never ``DIR/.readers``): it
takes no lock, so it runs beside ``claimgraph serve`` or any other writer, and it writes
nothing under ``DIR`` — not even the sidecar file rocksdict rewrites on every open — so it
also works on a directory this user may only read. Checkpoints (``DIR/checkpoints``) are only
read. :func:`run_what_if` is what ``claimgraph schema what-if`` calls in its own process.

:func:`what_if_in_process` is for a server: it runs the same in a child process
(``python -m claimgraph.service.whatif_run``: a JSON request on stdin, the report or the error
as JSON on stdout), so a long replay and its folded state never share the serving process's
memory, GIL or lock, and the child is killed if it outlives its time bound by
:data:`GRACE` seconds. One child at a time per server (:data:`WORKERS`); more at once are
refused as ``too_many``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from claimgraph import errors
from claimgraph.core.model import Progress
from claimgraph.errors import ClaimgraphError, ConfigError, LimitError, StorageError
from claimgraph.logconf import events
from claimgraph.logs.embedded import EmbeddedLogStore
from claimgraph.logs.rocks import Place
from claimgraph.service.graph import read_config
from claimgraph.service.whatif import Bounds, what_if

__all__ = [
    "GRACE",
    "WORKERS",
    "read_only_logs",
    "run_what_if",
    "what_if_in_process",
]

_log = events("serve")  # a server runs what-ifs (a dry-run publish); the CLI logs none

GRACE = 30.0  # seconds a child may run past its time bound (the end comparison) before a kill
WORKERS = 1  # what-if children a server runs at once
_SLOTS = threading.BoundedSemaphore(WORKERS)
_ROCKSDICT_CONFIG = "rocksdict-config.json"


@contextlib.contextmanager
def read_only_logs(path: Path) -> Iterator[tuple[EmbeddedLogStore, str]]:
    """The logs of the embedded graph in ``path`` as they are now (a secondary instance,
    opened once), and the graph's name. Nothing is written under ``path`` (see
    :func:`_shadow`); the scratch directory goes when the block ends."""
    cfg = read_config(path)
    log = path / "log"
    if not log.is_dir():
        raise ConfigError(f"{path} has no log directory: it is not an embedded graph's data")
    scratch = Path(tempfile.mkdtemp(prefix="claimgraph-whatif-"))
    try:
        logs = _open_shadowed(log, scratch)
        try:
            yield logs, str(cfg["graph"])
        finally:
            logs.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


SHADOW_TRIES = 5  # opens of a fresh shadow while the writer renames files under it


def _open_shadowed(log: Path, scratch: Path) -> EmbeddedLogStore:
    """``log`` opened as a secondary through a shadow of it in ``scratch``, retried while the
    writer replaces a file the shadow links to (a flush, a compaction) as it is opened."""
    for attempt in range(SHADOW_TRIES):
        shadow, secondary = scratch / f"shadow-{attempt}", scratch / f"secondary-{attempt}"
        _shadow(log, shadow)
        try:
            logs = EmbeddedLogStore(shadow, secondary=secondary)
        except StorageError as exc:  # CorruptionError too: RocksDB's missing file reads so
            if "No such file" not in str(exc) or attempt == SHADOW_TRIES - 1:
                raise
            continue
        logs.place = Place(str(log), logs.place.remedy)  # errors name the real directory
        return logs
    raise AssertionError("unreachable")


def _shadow(src: Path, dst: Path) -> None:
    """A directory that RocksDB reads as ``src``: a symbolic link to each of its files, but a
    copy of ``rocksdict-config.json`` (rocksdict rewrites it on every open, even of a
    secondary) and none of ``LOCK`` and the info logs (``LOG*``: a secondary writes its own
    in its secondary directory). So opening it writes nothing under ``src``, and works where
    ``src`` is not writable by this user."""
    dst.mkdir()
    for entry in os.scandir(src.resolve()):  # absolute: the links are read from dst
        name = entry.name
        if name == "LOCK" or name.startswith("LOG") or not entry.is_file():
            continue
        if name == _ROCKSDICT_CONFIG:
            shutil.copyfile(entry.path, dst / name)
        else:
            (dst / name).symlink_to(entry.path)


def run_what_if(
    path: Path,
    document: str,
    *,
    source: str = "<what-if>",
    agent: str = "admin",
    bounds: Bounds | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The what-if report (as JSON) of ``document`` over the graph in ``path``, read-only."""
    with read_only_logs(path) as (logs, name):
        report = what_if(
            logs,
            name,
            document,
            source=source,
            agent=agent,
            bounds=bounds,
            checkpoints=path / "checkpoints",
            progress=progress,
        )
    return report.as_dict()


def what_if_in_process(
    path: Path,
    document: str,
    *,
    source: str = "<what-if>",
    agent: str = "admin",
    bounds: Bounds,
) -> dict[str, Any]:
    """:func:`run_what_if` in a child process; its error, if any, raised here as it was there.

    ``bounds.seconds`` must be set: it is the child's time bound, and the child is killed
    :data:`GRACE` seconds after it.
    """
    if bounds.seconds is None:
        raise ConfigError("a what-if in a child process needs a time bound")
    if not _SLOTS.acquire(blocking=False):
        raise LimitError(
            "too_many",
            "what-if processes",
            f"{WORKERS} what-if already running on this server; try again when it is done",
            status=429,
        )
    try:
        request = {
            "path": str(path),
            "document": document,
            "source": source,
            "agent": agent,
            "bounds": asdict(bounds),
        }
        try:
            done = subprocess.run(
                [sys.executable, "-m", "claimgraph.service.whatif_run"],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                timeout=bounds.seconds + GRACE,
                check=False,
            )
        except subprocess.TimeoutExpired:
            _log.warning("whatif.killed", path=str(path), seconds=bounds.seconds + GRACE)
            raise StorageError(
                f"the what-if process ran past its time bound ({bounds.seconds:g}s) by "
                f"{GRACE:g}s and was stopped"
            ) from None
    finally:
        _SLOTS.release()
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = done.stderr.strip().splitlines()[-3:]
        raise StorageError(
            f"the what-if process exited with {done.returncode} and no answer"
            + (f": {' | '.join(tail)}" if tail else "")
        ) from None
    if "error" in answer:
        raise _error(answer["error"])
    report: dict[str, Any] = answer["report"]
    _log.info(
        "whatif.finished",
        graph=report["graph"],
        commands=report["commands"],
        changed=report["changed"],
        stopped=report["stopped"],
        seconds=report["seconds"],
    )
    return report


def _error(e: dict[str, Any]) -> ClaimgraphError:
    """The child's error as the class it was, where its message alone rebuilds it."""
    cls = getattr(errors, str(e.get("type")), None)
    message = str(e.get("message", ""))
    simple = (
        errors.ConfigError,
        errors.InputError,
        errors.StorageError,
        errors.NotFoundError,
        errors.IntegrityError,
    )
    if isinstance(cls, type) and cls in simple:
        made: ClaimgraphError = cls(message)
        return made
    return StorageError(f"the what-if process failed: {e.get('type')}: {message}")


def _main() -> int:
    """The child: one request on stdin, one JSON line on stdout (the report or the error)."""
    try:
        req = json.loads(sys.stdin.read())
        report = run_what_if(
            Path(req["path"]),
            req["document"],
            source=req["source"],
            agent=req["agent"],
            bounds=Bounds(**req["bounds"]),
        )
    except ClaimgraphError as exc:
        sys.stdout.write(json.dumps({"error": {"type": type(exc).__name__, "message": str(exc)}}))
        sys.stdout.write("\n")
        return exc.exit_code
    sys.stdout.write(json.dumps({"report": report}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
