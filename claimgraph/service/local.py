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

This module holds the protocol, the announcement and the client; the writer's side is
:mod:`claimgraph.service.local_writer`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import socket
import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimgraph import errors
from claimgraph.core.wire import decode_decision
from claimgraph.errors import ClaimgraphError, ConfigError, InputError, LimitError, StorageError
from claimgraph.procs import pid_alive
from claimgraph.service.api import Receipt

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
    "address",
    "b64",
    "batches",
    "dirfd",
    "read_announcement",
    "recv_frame",
    "send_frame",
    "unb64",
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


def send_frame(conn: socket.socket, obj: Any) -> None:
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    conn.sendall(_LEN.pack(len(data)) + data)


def recv_exact(conn: socket.socket, n: int, deadline: float | None = None) -> bytes:
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


def recv_frame(conn: socket.socket, limit: int, deadline: float | None = None) -> Any:
    """One frame's JSON; LimitError past ``limit`` bytes (unread), InputError if not JSON."""
    (n,) = _LEN.unpack(recv_exact(conn, _LEN.size, deadline))
    if n > limit:
        raise LimitError("too_large", "max_request", f"a request of {n} bytes; at most {limit}")
    data = recv_exact(conn, n, deadline)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"the request is not JSON: {str(exc)[:200]}") from None


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise InputError(f"{what} must be a base64 string, not {type(text).__name__}")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{what} is not valid base64") from None


# -- the socket's place ---------------------------------------------------------------------


def address(directory: Path, name: str, dirfd: int) -> str:
    """``directory/name`` as a socket address; a path too long for one goes by the dir's fd."""
    full = str(directory / name)
    if len(full.encode()) <= _SUN_PATH:
        return full
    if not Path("/proc/self/fd").is_dir():
        raise ConfigError(f"{directory} is too long a path for a unix socket (at most ~100 bytes)")
    return f"/proc/self/fd/{dirfd}/{name}"


@contextlib.contextmanager
def dirfd(directory: Path) -> Iterator[int]:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


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
        return pid_alive(self.pid)


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


def batches(records: Sequence[bytes], max_request: int = MAX_REQUEST) -> Iterator[list[bytes]]:
    """``records`` in requests of at most ``max_request`` bytes (base64 and JSON included)
    and :data:`MAX_RECORDS` records; LimitError for a record no request can carry."""
    batch: list[bytes] = []
    size = 64
    for r in records:
        n = 4 * (len(r) + 2) // 3 + 4
        if n + 64 > max_request:
            raise LimitError(
                "too_large", "max_request", f"a record of {len(r)} bytes; at most {max_request}"
            )
        if batch and (size + n > max_request or len(batch) >= MAX_RECORDS):
            yield batch
            batch, size = [], 64
        batch.append(r)
        size += n
    if batch:
        yield batch


# -- the client's side ------------------------------------------------------------------------


class WriterClient:
    """Send requests to the writer that ``DIR/writer.json`` announces."""

    def __init__(self, directory: Path, announcement: Announcement, graph: str) -> None:
        self.directory = directory
        self.announcement = announcement
        self.graph = graph

    @property
    def who(self) -> str:
        return f"the writer of {self.directory} (pid {self.announcement.pid})"

    def ping(self) -> bool:
        """Whether a writer greets on the socket now (it is asked nothing)."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with dirfd(self.directory) as fd:
                conn.connect(address(self.directory, SOCKET, fd))
            hello = recv_frame(conn, MAX_GREETING)
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
                with dirfd(self.directory) as fd:
                    conn.connect(address(self.directory, SOCKET, fd))
                hello = recv_frame(conn, MAX_GREETING)
            except (OSError, EOFError, ClaimgraphError):
                return None
            if not isinstance(hello, dict) or hello.get("claimgraph") != PROTOCOL:
                raise StorageError(f"{self.who} speaks another protocol: {str(hello)[:200]}")
            if hello.get("graph") != self.graph:
                raise StorageError(
                    f"{self.who} serves graph {hello.get('graph')!r}, not {self.graph!r}"
                )
            try:
                send_frame(conn, {"op": op, **args})
                resp = recv_frame(conn, MAX_RESPONSE)
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

    def submit(self, records: Sequence[bytes]) -> list[Receipt] | None:
        """Records (one request: see :func:`batches`) the writer decides; their receipts
        (None: the writer was not there, see :meth:`request`)."""
        resp = self.request("submit", records=[b64(r) for r in records])
        if resp is None:
            return None
        rows = resp.get("receipts")
        if not isinstance(rows, list) or len(rows) != len(records):
            raise StorageError(f"{self.who} answered {str(rows)[:100]} for {len(records)}")
        return [
            Receipt(cid, pos, ver, decode_decision(unb64(dec, "decision")))
            for cid, pos, ver, dec in rows
        ]

    def append_runs(self, records: Sequence[bytes]) -> bool:
        """Runs-log records (one request) the writer appends; False if it was not there."""
        return self.request("runs", records=[b64(r) for r in records]) is not None
