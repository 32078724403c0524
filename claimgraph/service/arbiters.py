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

A server runs only arbiters on its own allow-list (:class:`ArbiterAllowList`: ``serve
--arbiter NAME=CMD|URL`` and ``DATA/arbiters.json``), by name: what runs for a name is the
operator's definition, never the command or URL a published schema gives — publishing a
schema (an admin's token) must not be a way to run a process on the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from select import select as _poll_fds
from typing import Any, Protocol

from claimgraph.errors import ArbiterError, ConfigError, InputError
from claimgraph.service.bounded import InputLimits, loads

__all__ = [
    "MAX_DEPTH",
    "MAX_OUTPUT",
    "AllowedArbiter",
    "Arbiter",
    "ArbiterAllowList",
    "CommandArbiter",
    "HttpArbiter",
]

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


# -- the server's allow-list ----------------------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
ALLOW_FILE = "arbiters.json"  # beside the data: DATA/arbiters.json
_NO_SOURCE = "empty: no --arbiter and no arbiters.json"


@dataclass(frozen=True, slots=True)
class AllowedArbiter:
    """One arbiter the operator allows a server to run: a command (argv) or an http(s) URL."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    timeout: float | None = None  # seconds; None: the schema's (capped by the resolver limits)

    def build(
        self, timeout: float, *, max_output: int = MAX_OUTPUT, max_depth: int = MAX_DEPTH
    ) -> Arbiter:
        """The arbiter, with ``timeout`` (the schema's, capped) unless this entry sets one."""
        t = min(timeout, self.timeout) if self.timeout is not None else timeout
        bounds = {"max_output": max_output, "max_depth": max_depth, "name": self.name}
        if self.command:
            return CommandArbiter(self.command, timeout=t, **bounds)  # type: ignore[arg-type]
        assert self.url is not None
        return HttpArbiter(self.url, timeout=t, **bounds)  # type: ignore[arg-type]

    def describe(self) -> str:
        return self.url or shlex.join(self.command)


def _entry(name: str, what: str, timeout: float | None, where: str) -> AllowedArbiter:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}: arbiter name {str(name)[:80]!r} is not a name")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600
    ):
        raise ConfigError(f"{where}: arbiter {name!r}: timeout must be seconds in (0, 600]")
    if what.startswith(("http://", "https://")):
        return AllowedArbiter(name, url=what, timeout=timeout)
    try:
        argv = tuple(shlex.split(what))
    except ValueError as exc:
        raise ConfigError(f"{where}: arbiter {name!r}: {exc}") from None
    if not argv:
        raise ConfigError(f"{where}: arbiter {name!r} names no command or URL")
    return AllowedArbiter(name, command=argv, timeout=timeout)


@dataclass(frozen=True, slots=True)
class ArbiterAllowList:
    """The arbiters a server may run, by name (server configuration, never the schema)."""

    entries: Mapping[str, AllowedArbiter] = field(default_factory=dict)
    source: str = _NO_SOURCE

    def get(self, name: str) -> AllowedArbiter | None:
        return self.entries.get(name)

    def refusal(self, name: str) -> str:
        """Why the arbiter ``name`` is not run: said in the chain's trail and on stderr."""
        return (
            f"arbiter {name!r} is not on this server's allow-list ({self.source}); not run "
            f"(allow it: serve --arbiter {name}=COMMAND or URL, or {ALLOW_FILE})"
        )

    @classmethod
    def parse(cls, flags: Sequence[str], file: Path | None = None) -> ArbiterAllowList:
        """``--arbiter NAME=CMD|URL`` flags, over the entries of ``file`` when it exists.

        The file is JSON: ``{"arbiters": {"NAME": {"command": [...]} | {"url": "..."},
        ...}}`` (each may add ``"timeout": SECONDS``). A flag's command is split like a shell
        would split it (no shell runs it).
        """
        entries: dict[str, AllowedArbiter] = {}
        sources = []
        if file is not None and file.exists():
            entries.update(_load_file(file))
            sources.append(str(file))
        for flag in flags:
            name, eq, what = flag.partition("=")
            if not eq:
                raise ConfigError(f"--arbiter {flag[:80]!r}: expected NAME=COMMAND or NAME=URL")
            entries[name] = _entry(name, what, None, "--arbiter")
        if flags:
            sources.append("--arbiter")
        return cls(entries, " and ".join(sources) or _NO_SOURCE)


def _load_file(path: Path) -> dict[str, AllowedArbiter]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > 1024 * 1024:
        raise ConfigError(f"{path}: larger than 1 MiB")
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from None
    arbs = doc.get("arbiters") if isinstance(doc, dict) else None
    if not isinstance(arbs, dict) or set(doc) != {"arbiters"}:
        raise ConfigError(f'{path}: expected {{"arbiters": {{NAME: {{"command": [...]}}}}}}')
    out: dict[str, AllowedArbiter] = {}
    for name, spec in arbs.items():
        where = f"{path}: arbiters.{str(name)[:80]}"
        if not isinstance(spec, dict) or not set(spec) <= {"command", "url", "timeout"}:
            raise ConfigError(f"{where}: expected an object with command or url (and timeout)")
        cmd, url = spec.get("command"), spec.get("url")
        if (cmd is None) == (url is None):
            raise ConfigError(f"{where}: expected exactly one of command or url")
        if cmd is not None:
            if not isinstance(cmd, list) or not cmd or not all(isinstance(x, str) for x in cmd):
                raise ConfigError(f"{where}.command: expected a non-empty list of strings")
            what = shlex.join(cmd)
        else:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ConfigError(f"{where}.url: expected an http(s) URL")
            what = url
        out[name] = _entry(name, what, spec.get("timeout"), where)
    return out
