"""The writer's door: while one process writes a data directory, others send it their writes.

RocksDB allows one writer per database. The process that holds a data directory's logs and
projection — ``claimgraph serve``, a long ``claimgraph submit``, any CLI command that found the
directory free — is its *writer*. While it runs, other processes read through RocksDB
secondaries (:mod:`claimgraph.service.attached`) and send their writes to it over a unix
socket, which the writer announces in the data directory::

    DIR/writer.sock   the socket, mode 0600 (only its owner may connect; the peer's uid is
                      checked as well)
    DIR/writer.json   {"pid", "socket", "started", "graph", "protocol", "host"}; removed on
                      exit

Protocol, one request per connection: every message is a frame, a u32 big-endian length and
that many bytes of JSON. The writer speaks first (a greeting: protocol, graph, pid); only then
does the client send its request ``{"op": ..., ...}``; the writer answers ``{"ok": true, ...}``
or ``{"ok": false, "error": {"type", "message", "attrs"}}`` (the error the command raised, so
the client fails exactly as it would have locally) and closes. A client that got no greeting
sent nothing (the writer was stopping) and may try again; one whose request got no answer
cannot know whether it took effect, and says so.

Operations: ``submit`` (command records) → receipts; ``runs`` (runs-log records);
``gc`` (horizon, keep, keep_age_ms) → report; ``checkpoint`` → checkpoint info.

Bounds, for a peer that misbehaves: a request is at most :data:`MAX_REQUEST` bytes and
:data:`MAX_RECORDS` records (a client splits a long submit into several), it must arrive
within :data:`REQUEST_TIMEOUT` seconds of the greeting, and at most :data:`MAX_CLIENTS`
requests are served at once (others wait to be accepted). A malformed request is answered
with an InputError (a LimitError past a bound) naming what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimgraph import errors
from claimgraph.core.wire import decode_decision, encode_decision
from claimgraph.errors import ClaimgraphError, ConfigError, InputError, LimitError, StorageError
from claimgraph.service.api import Receipt
from claimgraph.service.graph import Graph
from claimgraph.service.traces import decode_events
from claimgraph.streams.jsonlog import log_event

__all__ = [
    "ANNOUNCEMENT",
    "MAX_CLIENTS",
    "MAX_RECORDS",
    "MAX_REQUEST",
    "PROTOCOL",
    "REQUEST_TIMEOUT",
    "SOCKET",
    "Announcement",
    "WriterClient",
    "WriterListener",
    "listen",
    "listening",
    "read_announcement",
]

PROTOCOL = 1
SOCKET = "writer.sock"
ANNOUNCEMENT = "writer.json"
MAX_REQUEST = 64 << 20  # bytes of one request frame
MAX_RECORDS = 10_000  # records in one request
MAX_RESPONSE = 1 << 30  # bytes of one answer (receipts of one request), for the client
MAX_GREETING = 4096
REQUEST_TIMEOUT = 30.0  # seconds a greeted client has to send its whole request
MAX_CLIENTS = 8  # requests served at once
OPS = ("submit", "runs", "gc", "checkpoint")
_LEN = struct.Struct(">I")
_SUN_PATH = 100  # sockaddr_un holds 108 bytes; longer paths go through /proc/self/fd


# -- frames ---------------------------------------------------------------------------------


def _send(conn: socket.socket, obj: Any) -> None:
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    conn.sendall(_LEN.pack(len(data)) + data)


def _recv_exact(conn: socket.socket, n: int, deadline: float | None = None) -> bytes:
    """``n`` bytes; with a ``deadline`` (monotonic), all of them before it or TimeoutError."""
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{len(buf)} of {n} bytes arrived in time")
            conn.settimeout(left)
        chunk = conn.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError(f"the connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def _recv(conn: socket.socket, limit: int, deadline: float | None = None) -> Any:
    """One frame's JSON; LimitError past ``limit`` bytes (unread), InputError if not JSON."""
    (n,) = _LEN.unpack(_recv_exact(conn, _LEN.size, deadline))
    if n > limit:
        raise LimitError("too_large", "max_request", f"a request of {n} bytes; at most {limit}")
    data = _recv_exact(conn, n, deadline)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"the request is not JSON: {str(exc)[:200]}") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise InputError(f"{what} must be a base64 string, not {type(text).__name__}")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{what} is not valid base64") from None


def _records(req: dict[str, Any]) -> list[bytes]:
    recs = req.get("records")
    if not isinstance(recs, list):
        raise InputError("'records' must be a list of base64 strings")
    if len(recs) > MAX_RECORDS:
        raise LimitError(
            "too_large", "max_records", f"{len(recs)} records; at most {MAX_RECORDS} a request"
        )
    return [_unb64(r, f"records[{i}]") for i, r in enumerate(recs)]


def _opt_int(req: dict[str, Any], key: str) -> int | None:
    v = req.get(key)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or not -(2**63) <= v < 2**63:
        raise InputError(f"{key!r} must be a 64-bit integer or null")
    return v


# -- the socket's place ---------------------------------------------------------------------


def _address(directory: Path, name: str, dirfd: int) -> str:
    """``directory/name`` as a socket address; a path too long for one goes by the dir's fd."""
    full = str(directory / name)
    if len(full.encode()) <= _SUN_PATH:
        return full
    if not Path("/proc/self/fd").is_dir():
        raise ConfigError(f"{directory} is too long a path for a unix socket (at most ~100 bytes)")
    return f"/proc/self/fd/{dirfd}/{name}"


@contextlib.contextmanager
def _dirfd(directory: Path) -> Iterator[int]:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


def _bind(directory: Path) -> tuple[socket.socket, os.stat_result]:
    """A listening socket at ``directory/writer.sock``, mode 0600 from the first moment.

    It is bound inside a fresh private directory (0700), made 0600, then renamed into place:
    no one else can connect in between. Any socket file left there by a writer that died is
    replaced (only a process holding the directory's locks binds one).
    """
    tmp = Path(tempfile.mkdtemp(prefix=".writer-", dir=directory))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _dirfd(tmp) as fd:
            sock.bind(_address(tmp, "s", fd))
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


# -- the announcement -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Announcement:
    """What ``DIR/writer.json`` says: who writes the directory and where it listens."""

    pid: int
    socket: str
    started: int
    graph: str
    protocol: int
    host: str = ""  # the writer's host name: its pid means nothing in another pid namespace

    def alive(self) -> bool:
        """Whether the announced process still exists (a dead one left a stale file); True
        when that cannot be told from here (a writer in another container or host)."""
        if self.host and self.host != socket.gethostname():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # someone else's process has that pid now
            return True
        return True


def read_announcement(directory: Path) -> Announcement | None:
    """``DIR/writer.json`` (None if absent or not one: a writer writes it atomically)."""
    try:
        doc = json.loads((directory / ANNOUNCEMENT).read_text(encoding="utf-8"))
        return Announcement(
            int(doc["pid"]),
            str(doc["socket"]),
            int(doc["started"]),
            str(doc["graph"]),
            int(doc["protocol"]),
            str(doc.get("host", "")),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


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
        max_request: int = MAX_REQUEST,
        max_clients: int = MAX_CLIENTS,
        timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.graph = graph
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
                log_event("writer.refused", path=str(self.directory), why="another user")
                return
            _send(conn, {"claimgraph": PROTOCOL, "graph": self.graph.name, "pid": os.getpid()})
            try:  # the whole request within the timeout, however slowly it trickles in
                req = _recv(conn, self.max_request, time.monotonic() + self.timeout)
            except ClaimgraphError as exc:
                _send(conn, _error(exc))
                return
            except (EOFError, OSError):  # it went away or stalled: nothing to answer
                return
            conn.settimeout(self.timeout)  # for the answer: the client reads it as it comes
            try:
                resp = self.dispatch(req)
            except Exception as exc:  # a bug of ours: the client says so, then it is raised
                msg = f"{type(exc).__name__}: {exc}"
                with contextlib.suppress(OSError):
                    _send(conn, {"ok": False, "error": {"type": "internal", "message": msg}})
                raise
            _send(conn, resp)
        except OSError:
            pass  # the client went away before its answer: the work stands, as over HTTP
        finally:
            conn.close()
            with self._mu:
                self._handlers.discard(threading.current_thread())
            self._slots.release()

    def dispatch(self, req: Any) -> dict[str, Any]:
        """Carry out one request; its answer, or the error it raised as an answer."""
        try:
            return {"ok": True, **self._do(req)}
        except ClaimgraphError as exc:
            return _error(exc)

    def _do(self, req: Any) -> dict[str, Any]:
        if not isinstance(req, dict) or not isinstance(req.get("op"), str):
            raise InputError('a request is a JSON object with an "op" string')
        op = req["op"]
        g = self.graph
        if op == "submit":
            receipts = g.submit(_records(req))
            return {
                "receipts": [
                    [r.command_id, r.position, r.version, _b64(encode_decision(r.decision))]
                    for r in receipts
                ]
            }
        if op == "runs":
            g.append_run_events(decode_events(_records(req)))
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


def listen(graph: Graph) -> WriterListener | None:
    """A :class:`WriterListener` for ``graph``, or None (said on stderr) where the directory
    cannot hold one (a filesystem without unix sockets): the graph works on, and other
    processes' writes are refused with a clear error instead of reaching it."""
    try:
        return WriterListener(graph)
    except (StorageError, ConfigError) as exc:
        log_event("writer.no_socket", path=str(graph.path), error=str(exc))
        return None


@contextlib.contextmanager
def listening(graph: Any) -> Iterator[WriterListener | None]:
    """:func:`listen` for the length of a block, if ``graph`` is an embedded graph this process
    holds (anything else — a Kafka graph — has no socket: None)."""
    listener = listen(graph) if isinstance(graph, Graph) else None
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


def _raise(error: Any, writer: str) -> None:
    """Raise the error the writer's command raised, as the same class with the same message."""
    if not isinstance(error, dict):
        raise StorageError(f"{writer} answered a malformed error: {str(error)[:200]}")
    name, message = str(error.get("type")), str(error.get("message", ""))
    cls = getattr(errors, name, None) if name in errors.__all__ else None
    if not (isinstance(cls, type) and issubclass(cls, ClaimgraphError)):
        raise RuntimeError(f"{writer} failed: {message}")  # a bug there; main says so
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    attrs = error.get("attrs")
    if isinstance(attrs, dict):
        exc.__dict__.update({str(k): v for k, v in attrs.items()})
    raise exc


# -- the client's side ------------------------------------------------------------------------


class WriterClient:
    """Send requests to the writer that ``DIR/writer.json`` announces."""

    def __init__(self, directory: Path, announcement: Announcement, graph: str) -> None:
        self.directory = directory
        self.announcement = announcement
        self.graph = graph
        self.max_request = MAX_REQUEST

    @property
    def who(self) -> str:
        return f"the writer of {self.directory} (pid {self.announcement.pid})"

    def ping(self) -> bool:
        """Whether a writer greets on the socket now (it is asked nothing)."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with _dirfd(self.directory) as fd:
                conn.connect(_address(self.directory, SOCKET, fd))
            hello = _recv(conn, MAX_GREETING)
        except (OSError, EOFError, ClaimgraphError):
            return False
        finally:
            conn.close()
        return isinstance(hello, dict) and hello.get("graph") == self.graph

    def request(self, op: str, **args: Any) -> dict[str, Any] | None:
        """One request; its answer, or None if the writer was not there to greet (it is
        stopping, or gone): then nothing was sent, and the caller may look for it again."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                with _dirfd(self.directory) as fd:
                    conn.connect(_address(self.directory, SOCKET, fd))
                hello = _recv(conn, MAX_GREETING)
            except (OSError, EOFError, ClaimgraphError):
                return None
            if not isinstance(hello, dict) or hello.get("claimgraph") != PROTOCOL:
                raise StorageError(f"{self.who} speaks another protocol: {str(hello)[:200]}")
            if hello.get("graph") != self.graph:
                raise StorageError(
                    f"{self.who} serves graph {hello.get('graph')!r}, not {self.graph!r}"
                )
            try:
                _send(conn, {"op": op, **args})
                resp = _recv(conn, MAX_RESPONSE)
            except (OSError, EOFError) as exc:
                raise StorageError(
                    f"{self.who} went away before answering ({exc}): whether the {op} took "
                    "effect is unknown; look at the decisions log (claimgraph log)"
                ) from None
        finally:
            conn.close()
        if not isinstance(resp, dict) or not isinstance(resp.get("ok"), bool):
            raise StorageError(f"{self.who} answered something else: {str(resp)[:200]}")
        if not resp["ok"]:
            _raise(resp.get("error"), self.who)
        return resp

    def batches(self, records: Sequence[bytes]) -> Iterator[list[bytes]]:
        """``records`` in requests that fit :data:`MAX_REQUEST` (base64 and JSON included)."""
        batch: list[bytes] = []
        size = 64
        for r in records:
            n = 4 * (len(r) + 2) // 3 + 4
            if n + 64 > self.max_request:
                raise LimitError(
                    "too_large",
                    "max_request",
                    f"a record of {len(r)} bytes cannot be sent to {self.who}",
                )
            if batch and (size + n > self.max_request or len(batch) >= MAX_RECORDS):
                yield batch
                batch, size = [], 64
            batch.append(r)
            size += n
        if batch:
            yield batch

    def submit(self, records: Sequence[bytes]) -> list[Receipt] | None:
        """Records (one request: see :meth:`batches`) the writer decides; their receipts
        (None: the writer was not there, see :meth:`request`)."""
        resp = self.request("submit", records=[_b64(r) for r in records])
        if resp is None:
            return None
        rows = resp.get("receipts")
        if not isinstance(rows, list) or len(rows) != len(records):
            raise StorageError(f"{self.who} answered {str(rows)[:100]} for {len(records)}")
        return [
            Receipt(cid, pos, ver, decode_decision(_unb64(dec, "decision")))
            for cid, pos, ver, dec in rows
        ]

    def append_runs(self, records: Sequence[bytes]) -> bool:
        """Runs-log records (one request) the writer appends; False if it was not there."""
        return self.request("runs", records=[_b64(r) for r in records]) is not None
