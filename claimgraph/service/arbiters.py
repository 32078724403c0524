"""Arbitration agents: an external command or an HTTP endpoint that answers a verdict.

The protocol: the escalation payload (see :mod:`claimgraph.service.escalations`) as JSON on
the command's stdin or as the POST body; the answer is one JSON object::

    {"winner": "<claim id>"}  |  {"reject_all": true}  |  {"escalate": "reason"}
    (+ optional "rationale": "...")

Limits (``max_output``, ``max_depth``, ``timeout``; a resolver pass sets them from
:class:`~claimgraph.service.resolvers.ResolverLimits`): an answer is read incrementally and
refused past ``max_output`` bytes, its JSON nesting is measured before it is parsed, and its
time is bounded — a command runs in a process group of its own, and the whole group is
killed at the timeout (and once the command has answered, so nothing it started outlives
it). Every failure is an :class:`~claimgraph.errors.ArbiterError`: the chain records why and
moves on.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from select import select as _poll_fds
from typing import Any, Protocol

from claimgraph.errors import ArbiterError, InputError
from claimgraph.service.bounded import InputLimits, loads

__all__ = ["MAX_DEPTH", "MAX_OUTPUT", "Arbiter", "CommandArbiter", "HttpArbiter"]

MAX_OUTPUT = 1024 * 1024  # bytes of an arbiter's answer (stdout or HTTP body), by default
MAX_DEPTH = 32  # JSON nesting of the answer, measured before parsing, by default
_STDERR_TAIL = 4096  # bytes of an arbiter's stderr kept for the error message


class Arbiter(Protocol):
    """An arbitration agent: reads an escalation payload, answers a verdict as a mapping."""

    name: str

    def arbitrate(self, payload: Mapping[str, Any]) -> Mapping[str, Any]: ...


class CommandArbiter:
    """Runs an external command: the payload as JSON on stdin, the verdict as JSON on stdout.

    The command runs in a new session (its own process group). Its output is read as it
    comes, at most ``max_output`` bytes; at ``timeout`` seconds, or once it has exited, the
    whole group is killed, so a child it left running dies with it.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        timeout: float = 30.0,
        name: str = "",
        max_output: int = MAX_OUTPUT,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self.command = list(command)
        self.timeout = timeout
        self.name = name or "arbiter"
        self.max_output = max_output
        self.max_depth = max_depth

    def arbitrate(self, payload: Mapping[str, Any]) -> Mapping[str, Any]:
        data = json.dumps(payload, default=str).encode()
        try:
            proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise ArbiterError(f"{self.command[0]}: {exc}") from None
        try:
            out, err = self._exchange(proc, data, time.monotonic() + self.timeout)
        finally:
            _kill_group(proc)
        if proc.returncode != 0:
            lines = err.decode(errors="replace").strip().splitlines()
            raise ArbiterError(
                f"{self.command[0]} exited with {proc.returncode}"
                + (f": {lines[-1][:200]}" if lines else "")
            )
        return _answer(out, self.max_depth)

    def _exchange(
        self, proc: subprocess.Popen[bytes], data: bytes, deadline: float
    ) -> tuple[bytes, bytes]:
        """Write ``data``, read stdout (capped) and stderr (its tail) until the command exits
        and its output ends, or the deadline passes; the caller kills the group."""
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        sel = selectors.DefaultSelector()
        out = bytearray()
        err = bytearray()
        try:
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                os.set_blocking(pipe.fileno(), False)
            if data:
                sel.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
            sel.register(proc.stdout, selectors.EVENT_READ)
            sel.register(proc.stderr, selectors.EVENT_READ)
            sent = 0
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ArbiterError(f"{self.command[0]}: no answer within {self.timeout:g}s")
                # a grandchild may hold the pipes open after the command exits: poll its exit
                events = sel.select(min(left, 0.1))
                if not events and proc.poll() is not None and not _readable(proc):
                    break
                for key, _ in events:
                    f: Any = key.fileobj
                    if f is proc.stdin:
                        try:
                            sent += os.write(proc.stdin.fileno(), data[sent : sent + 65536])
                        except BrokenPipeError:
                            sent = len(data)  # it stopped reading: its answer still counts
                        if sent >= len(data):
                            sel.unregister(proc.stdin)
                            proc.stdin.close()
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(f)
                    elif f is proc.stdout:
                        out += chunk
                        if len(out) > self.max_output:
                            raise ArbiterError(
                                f"{self.command[0]} answered more than {self.max_output} bytes"
                            )
                    else:
                        err = (err + chunk)[-_STDERR_TAIL:]
            left = max(deadline - time.monotonic(), 0.0)
            try:
                proc.wait(left)
            except subprocess.TimeoutExpired:
                raise ArbiterError(
                    f"{self.command[0]}: did not exit within {self.timeout:g}s"
                ) from None
        finally:
            sel.close()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                with contextlib.suppress(OSError):
                    pipe.close()
        return bytes(out), bytes(err)


def _readable(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the command's stdout has bytes waiting (checked once it has exited)."""
    assert proc.stdout is not None
    return bool(_poll_fds([proc.stdout], [], [], 0)[0])


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's process group (itself and whatever it started), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        proc.wait()


class HttpArbiter:
    """POSTs the payload as JSON to an endpoint; the response body is the verdict.

    The body is streamed and refused past ``max_output`` bytes (a declared Content-Length
    above it is refused before reading); the whole exchange is bounded by ``timeout``.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        name: str = "",
        max_output: int = MAX_OUTPUT,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.name = name or "arbiter"
        self.max_output = max_output
        self.max_depth = max_depth

    def arbitrate(self, payload: Mapping[str, Any]) -> Mapping[str, Any]:
        import httpx

        deadline = time.monotonic() + self.timeout
        body = bytearray()
        try:
            with httpx.stream(
                "POST", self.url, content=json.dumps(payload, default=str),
                timeout=self.timeout,
                # no compression: what is counted is what is parsed (no decompression bomb)
                headers={"content-type": "application/json", "accept-encoding": "identity"},
            ) as r:  # fmt: skip
                if r.status_code != 200:
                    raise ArbiterError(f"{self.url} answered HTTP {r.status_code}")
                declared = r.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_output:
                    raise ArbiterError(
                        f"{self.url} would answer {declared} bytes; at most {self.max_output}"
                    )
                for chunk in r.iter_raw(65536):
                    body += chunk
                    if len(body) > self.max_output:
                        raise ArbiterError(f"{self.url} answered more than {self.max_output} bytes")
                    if time.monotonic() > deadline:
                        raise ArbiterError(f"{self.url}: no answer within {self.timeout:g}s")
        except httpx.HTTPError as exc:
            raise ArbiterError(f"{self.url}: {exc}") from None
        return _answer(bytes(body), self.max_depth)


def _answer(raw: bytes, max_depth: int = MAX_DEPTH) -> Mapping[str, Any]:
    try:
        value = loads(raw, InputLimits(max_line=len(raw), max_depth=max_depth))
    except InputError as exc:
        raise ArbiterError(f"{exc}: {raw[:120]!r}") from None
    if not isinstance(value, dict):
        raise ArbiterError(f"expected a JSON object, got {type(value).__name__}")
    return value
