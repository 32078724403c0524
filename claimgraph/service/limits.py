"""What one request, and one principal at a time, may cost a served graph (README: Limits).

The limits belong to the service layer (:mod:`claimgraph.service.access`), which every
authenticated surface calls — the HTTP API, MCP over streamable HTTP and stdio, the writer
socket — so one principal meets the same bound at the same threshold whichever way it comes.
Plain Python (no FastAPI), so ``claimgraph serve`` and ``claimgraph mcp`` offer them as
options without importing the web stack. :class:`Slots` counts what each principal holds at
once (requests, waits); :class:`RunTally` counts each run's trace.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from claimgraph.errors import LimitError

__all__ = [
    "DEFAULT_LIMITS",
    "HTTP_LIMITS",
    "RUN_EVENT_PAYLOAD",
    "HttpLimits",
    "Limits",
    "RunTally",
    "Slots",
]

RUN_EVENT_PAYLOAD = 256 * 1024  # characters of one trace event's payload


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request, and one principal at a time, may cost the server (README: Limits).

    Each is enforced before the work it bounds: a body before it is read whole (and before
    the token is checked), a wait before a thread is given to it, a run's trace before it is
    appended, a pin before it is taken. ``max_body`` and ``max_depth`` bound the HTTP
    transport's bodies; every other limit is the service layer's, on every surface.
    """

    max_body: int = 2 * 1024 * 1024  # bytes of a request body
    max_depth: int = 32  # JSON nesting of a body, and of a trace event's payload
    max_requests: int = 8  # requests (or tool calls) in flight per principal
    max_waits: int = 4  # reads waiting for a version not yet applied, per principal
    max_waits_total: int = 64  # ... and over all principals
    max_wait: float = 30.0  # seconds one read may wait
    max_run_events: int = 1000  # trace events per request
    max_batch: int = 1000  # commands (or edges) in one request or tool call
    max_run_trace: int = 100_000  # trace events per run (counted by this server process)
    max_run_bytes: int = 64 * 1024 * 1024  # bytes of trace payloads per run (idem)
    max_pins: int = 1000  # live retention pins per principal


DEFAULT_LIMITS = Limits()
HttpLimits = Limits  # the name these had while only the HTTP API enforced them
HTTP_LIMITS = DEFAULT_LIMITS


class Slots:
    """How many of something each principal holds at once, refused past a per-key bound.

    Acquiring never blocks: past the bound the request is refused at once (429, not
    recorded), so one principal's flood queues nothing in front of another's request.
    """

    def __init__(self, per_key: int, total: int, what: str, flag: str) -> None:
        self.per_key = per_key
        self.total = total
        self.what = what
        self.flag = flag
        self._held: dict[str, int] = {}
        self._all = 0
        self._lock = threading.Lock()

    def held(self, key: str | None = None) -> int:
        """How many are held (by ``key``, or by everyone)."""
        with self._lock:
            return self._all if key is None else self._held.get(key, 0)

    def hold(self, key: str, who: str) -> _Held:
        """One slot of ``key``'s, held for a ``with`` block (``who`` names it if refused)."""
        return _Held(self, key, who)

    def _take(self, key: str, who: str) -> None:
        with self._lock:
            n = self._held.get(key, 0)
            if n >= self.per_key:
                raise LimitError(
                    "too_many",
                    self.flag,
                    f"{who} already has {n} {self.what} in progress; at most {self.per_key}",
                    429,
                )
            if self._all >= self.total:
                raise LimitError(
                    "too_many",
                    self.flag,
                    f"the server already has {self._all} {self.what} in progress",
                    429,
                )
            self._held[key] = n + 1
            self._all += 1

    def _give(self, key: str) -> None:
        with self._lock:
            self._all -= 1
            if self._held[key] == 1:
                del self._held[key]
            else:
                self._held[key] -= 1


class _Held:
    """A slot taken on entering a ``with`` block and given back on leaving it (a class, not a
    generator: it is on every request's path)."""

    __slots__ = ("key", "slots", "who")

    def __init__(self, slots: Slots, key: str, who: str) -> None:
        self.slots, self.key, self.who = slots, key, who

    def __enter__(self) -> None:
        self.slots._take(self.key, self.who)

    def __exit__(self, *exc: object) -> None:
        self.slots._give(self.key)


class RunTally:
    """Trace events and payload bytes each run appended through this server (bounded LRU).

    The per-run limits are counted here, per server process: a run's count starts again
    after a restart, or once ``capacity`` newer runs have pushed it out.
    """

    def __init__(self, limits: Limits, capacity: int = 100_000) -> None:
        self.limits = limits
        self.capacity = capacity
        self._runs: OrderedDict[tuple[str, str], tuple[int, int]] = OrderedDict()
        self._lock = threading.Lock()

    def charge(self, agent: str, events: list[dict[str, Any]]) -> None:
        """Count ``events`` against their runs, or raise LimitError and count nothing."""
        add: dict[tuple[str, str], tuple[int, int]] = {}
        for e in events:
            if len(e["payload"]) > RUN_EVENT_PAYLOAD:
                raise LimitError(
                    "too_large",
                    "RUN_EVENT_PAYLOAD",
                    f"a trace event of run {e['run_id'][:80]!r} carries {len(e['payload'])} "
                    f"characters of payload; at most {RUN_EVENT_PAYLOAD}",
                )
            n, b = add.get((agent, e["run_id"]), (0, 0))
            add[(agent, e["run_id"])] = (n + 1, b + len(e["payload"]))
        lim = self.limits
        with self._lock:
            for key, (n, b) in add.items():
                n0, b0 = self._runs.get(key, (0, 0))
                if n0 + n > lim.max_run_trace:
                    raise LimitError(
                        "too_large",
                        "--max-run-trace",
                        f"run {key[1][:80]!r} would have {n0 + n} trace events; "
                        f"at most {lim.max_run_trace}",
                    )
                if b0 + b > lim.max_run_bytes:
                    raise LimitError(
                        "too_large",
                        "--max-run-bytes",
                        f"run {key[1][:80]!r} would have {b0 + b} bytes of trace payloads; "
                        f"at most {lim.max_run_bytes}",
                    )
            for key, (n, b) in add.items():
                n0, b0 = self._runs.pop(key, (0, 0))
                self._runs[key] = (n0 + n, b0 + b)
            while len(self._runs) > self.capacity:
                self._runs.popitem(last=False)
