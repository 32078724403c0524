"""The writer's side of the local socket: serve other processes' writes to the graph held here.

The protocol, the announcement and the client are in :mod:`claimgraph.service.local`. The
socket authenticates its peer (mode 0600 and the peer's uid: the data directory's owner, the
trusted local owner of :mod:`claimgraph.service.access`) and maps errors to frames; what a
request may cost is the service layer's — the same :class:`~claimgraph.service.access.Access`
as ``serve``'s HTTP API when serve holds the directory: requests in flight, and each run's
trace events and bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from claimgraph.core.wire import encode_decision
from claimgraph.errors import ClaimgraphError, ConfigError, InputError, LimitError, StorageError
from claimgraph.logconf import events
from claimgraph.service.access import Access, Principal
from claimgraph.service.graph import Graph
from claimgraph.service.local import (
    ANNOUNCEMENT,
    MAX_CLIENTS,
    MAX_RECORDS,
    MAX_REQUEST,
    OPS,
    PROTOCOL,
    REQUEST_TIMEOUT,
    SOCKET,
    Announcement,
    address,
    b64,
    dirfd,
    read_announcement,
    recv_frame,
    send_frame,
    unb64,
)
from claimgraph.service.traces import decode_events

__all__ = ["WriterListener", "listen", "listening"]

_log = events("writer")
OWNER = Principal("local-owner", how="local-owner")  # the socket's peer: this uid


def _records(req: dict[str, Any]) -> list[bytes]:
    recs = req.get("records")
    if not isinstance(recs, list):
        raise InputError("'records' must be a list of base64 strings")
    if len(recs) > MAX_RECORDS:
        raise LimitError(
            "too_large", "max_records", f"{len(recs)} records; at most {MAX_RECORDS} a request"
        )
    return [unb64(r, f"records[{i}]") for i, r in enumerate(recs)]


def _opt_int(req: dict[str, Any], key: str) -> int | None:
    v = req.get(key)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or not -(2**63) <= v < 2**63:
        raise InputError(f"{key!r} must be a 64-bit integer or null")
    return v


def _bind(directory: Path) -> tuple[socket.socket, os.stat_result]:
    """A listening socket at ``directory/writer.sock``, mode 0600 from the first moment.

    It is bound inside a fresh private directory (0700), made 0600, then renamed into place:
    no one else can connect in between. Any socket file left there by a writer that died is
    replaced (only a process holding the directory's locks binds one).
    """
    tmp = Path(tempfile.mkdtemp(prefix=".writer-", dir=directory))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with dirfd(tmp) as fd:
            sock.bind(address(tmp, "s", fd))
        os.chmod(tmp / "s", 0o600)
        os.replace(tmp / "s", directory / SOCKET)
        sock.listen(64)
        return sock, os.stat(directory / SOCKET)
    except OSError as exc:
        sock.close()
        raise StorageError(f"cannot listen on {directory / SOCKET}: {exc}") from None
    except BaseException:
        sock.close()
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _announce(directory: Path, graph: str) -> Announcement:
    ann = Announcement(
        os.getpid(),
        str((directory / SOCKET).resolve()),
        time.time_ns() // 10**6,
        graph,
        PROTOCOL,
        socket.gethostname(),
    )
    doc = {k: getattr(ann, k) for k in Announcement.__slots__}
    tmp = directory / f".{ANNOUNCEMENT}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, directory / ANNOUNCEMENT)
    return ann


# -- the writer's side ------------------------------------------------------------------------


class WriterListener:
    """Serve other processes' writes to ``graph`` (which this process holds) over the socket.

    Started by the CLI for every graph it opens as the writer, and by ``serve``; ``close()``
    stops accepting, finishes the requests already accepted, and removes the socket and the
    announcement (before the graph is closed).
    """

    def __init__(
        self,
        graph: Graph,
        *,
        access: Access | None = None,
        max_request: int = MAX_REQUEST,
        max_clients: int = MAX_CLIENTS,
        timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.graph = graph
        self.access = access if access is not None else Access(graph)
        self.directory = graph.path
        self.max_request = max_request
        self.timeout = timeout
        self._slots = threading.BoundedSemaphore(max_clients)
        self._stop = threading.Event()
        self._handlers: set[threading.Thread] = set()
        self._mu = threading.Lock()
        self._sock, self._stat = _bind(self.directory)
        self._sock.settimeout(0.2)  # the accept loop looks at _stop this often
        try:
            self.announcement = _announce(self.directory, graph.name)
        except OSError as exc:
            self._sock.close()
            with contextlib.suppress(OSError):
                os.unlink(self.socket_path)
            raise StorageError(f"cannot write {self.directory / ANNOUNCEMENT}: {exc}") from None
        self._accepter = threading.Thread(
            target=self._accept_loop, name="claimgraph-writer", daemon=True
        )
        self._accepter.start()

    @property
    def socket_path(self) -> Path:
        return self.directory / SOCKET

    def close(self) -> None:
        """Stop accepting, let accepted requests finish, remove the socket and announcement."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._accepter.join()
        self._sock.close()
        self._remove_files()
        with self._mu:
            handlers = list(self._handlers)
        for t in handlers:
            t.join()

    def __enter__(self) -> WriterListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _remove_files(self) -> None:
        with contextlib.suppress(OSError):
            st = os.stat(self.socket_path)
            if (st.st_dev, st.st_ino) == (self._stat.st_dev, self._stat.st_ino):
                os.unlink(self.socket_path)
        ann = read_announcement(self.directory)
        if ann is not None and ann == self.announcement:
            with contextlib.suppress(OSError):
                os.unlink(self.directory / ANNOUNCEMENT)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            if not self._slots.acquire(timeout=0.2):
                continue
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                self._slots.release()
                continue
            t = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            with self._mu:
                self._handlers.add(t)
            t.start()

    def _peer_ok(self, conn: socket.socket) -> bool:
        if not hasattr(socket, "SO_PEERCRED"):
            return True  # the socket's mode 0600 is the only check there
        cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", cred)
        return bool(uid == os.getuid())

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(self.timeout)
            if not self._peer_ok(conn):
                _log.warning("writer.refused", path=str(self.directory), why="another user")
                return
            send_frame(conn, {"claimgraph": PROTOCOL, "graph": self.graph.name, "pid": os.getpid()})
            try:  # the whole request within the timeout, however slowly it trickles in
                req = recv_frame(conn, self.max_request, time.monotonic() + self.timeout)
            except ClaimgraphError as exc:
                send_frame(conn, _error(exc))
                return
            except (EOFError, OSError):  # it went away or stalled: nothing to answer
                return
            conn.settimeout(self.timeout)  # for the answer: the client reads it as it comes
            try:
                resp = self.dispatch(req)
            except Exception as exc:  # a bug of ours: the client says so, then it is raised
                msg = f"{type(exc).__name__}: {exc}"
                with contextlib.suppress(OSError):
                    send_frame(conn, {"ok": False, "error": {"type": "internal", "message": msg}})
                raise
            send_frame(conn, resp)
        except OSError:
            pass  # the client went away before its answer: the work stands, as over HTTP
        finally:
            conn.close()
            with self._mu:
                self._handlers.discard(threading.current_thread())
            self._slots.release()

    def dispatch(self, req: Any) -> dict[str, Any]:
        """Carry out one request (one of the local owner's in flight); its answer, or the
        error it raised as an answer."""
        try:
            with self.access.request(OWNER):
                return {"ok": True, **self._do(req)}
        except ClaimgraphError as exc:
            return _error(exc)

    def _do(self, req: Any) -> dict[str, Any]:
        if not isinstance(req, dict) or not isinstance(req.get("op"), str):
            raise InputError('a request is a JSON object with an "op" string')
        op = req["op"]
        g = self.graph
        owner = self.access.of(OWNER)
        if op == "submit":
            receipts = owner.record(_records(req))  # records: the governor judges them
            return {
                "receipts": [
                    [r.command_id, r.position, r.version, b64(encode_decision(r.decision))]
                    for r in receipts
                ]
            }
        if op == "runs":
            owner.append_run_events(decode_events(_records(req)))  # within the run limits
            return {}
        if op == "gc":
            from claimgraph.projections.retention import gc_graph

            rep = gc_graph(
                g,
                horizon=_opt_int(req, "horizon"),
                keep=_opt_int(req, "keep"),
                keep_age_ms=_opt_int(req, "keep_age_ms"),
            )
            return {"report": rep.as_dict()}
        if op == "checkpoint":
            from claimgraph.projections.checkpoints import checkpoint_graph

            return {"checkpoint": checkpoint_graph(g).as_dict()}
        raise InputError(f"unknown op {op[:40]!r}; expected one of {', '.join(OPS)}")


def listen(graph: Graph, access: Access | None = None) -> WriterListener | None:
    """A :class:`WriterListener` for ``graph`` (through ``access``, when other surfaces share
    it), or None (said on stderr) where the directory cannot hold one (a filesystem without
    unix sockets): the graph works on, and other processes' writes are refused with a clear
    error instead of reaching it."""
    try:
        return WriterListener(graph, access=access)
    except (StorageError, ConfigError) as exc:
        _log.warning("writer.no_socket", path=str(graph.path), error=str(exc))
        return None


@contextlib.contextmanager
def listening(graph: Any, access: Access | None = None) -> Iterator[WriterListener | None]:
    """:func:`listen` for the length of a block, if ``graph`` is an embedded graph this process
    holds (anything else — a Kafka graph — has no socket: None)."""
    listener = listen(graph, access) if isinstance(graph, Graph) else None
    try:
        yield listener
    finally:
        if listener is not None:
            listener.close()


def _jsonable(v: Any) -> bool:
    if isinstance(v, str | int | float | bool) or v is None:
        return True
    if isinstance(v, list | tuple):
        return all(_jsonable(x) for x in v)
    return False


def _error(exc: ClaimgraphError) -> dict[str, Any]:
    attrs = {k: v for k, v in vars(exc).items() if _jsonable(v)}
    return {"ok": False, "error": {"type": type(exc).__name__, "message": str(exc), "attrs": attrs}}
