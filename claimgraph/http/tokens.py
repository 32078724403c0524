"""Token files over time: followed while a server runs, added to, and matched to a schema.

* :class:`WatchedTokenFile` is the token file a server uses: every lookup first compares the
  file's (mtime, size, inode) with what it loaded — one ``stat`` — and re-reads it when they
  differ; :meth:`WatchedTokenFile.reload` does it at once (``claimgraph serve`` calls it on
  SIGHUP). A file that no longer parses is reported and the last good one stays in force, so a
  typo never locks every caller out; a file in the old ``#``-commented format is rewritten as
  plain JSON.
* :func:`add_token` adds a principal with a fresh token (stored as its SHA-256 only, so the
  file holds no secret) and returns the token, which is shown once; writes are atomic.
* :func:`schema_principals` lists the concrete principals a graph schema names (admins,
  resolvers, humans) — the identities that may publish, resolve and decide — and the patterns
  (``human:*``) that need a token per person; :func:`role_mismatches` says which tokens hold
  a role the schema in force does not grant their agent (their commands would be rejected).
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from claimgraph.core.model import LIMITS
from claimgraph.core.schema import GraphSchema
from claimgraph.errors import ConfigError
from claimgraph.http.auth import (
    ROLES,
    Principal,
    TokenFile,
    new_token,
    token_digest,
    token_id,
    write_token_file,
)

__all__ = [
    "WatchedTokenFile",
    "add_token",
    "is_pattern",
    "read_last_used",
    "readable_by_others",
    "revoke_tokens",
    "role_mismatches",
    "schema_principals",
]

Stamp = tuple[int, int, int]


def _stamp(path: Path) -> Stamp | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def readable_by_others(path: Path) -> str | None:
    """A warning when the token file may be read by other users (its tokens are secrets)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if mode & (stat.S_IRWXG | stat.S_IRWXO) == 0:
        return None
    return (
        f"warning: {path} (mode {stat.S_IMODE(mode):04o}) may be read by other users of this "
        f"machine, and every token in it is a credential: chmod 600 {path}"
    )


class WatchedTokenFile(TokenFile):
    """A token file that follows its file (see the module docstring); ``report`` gets one
    line for every reload, migration or refused file, and ``on_reload`` is called after
    every reload that took effect."""

    def __init__(
        self,
        path: str | Path,
        *,
        report: Callable[[str], None] | None = None,
        on_reload: Callable[[WatchedTokenFile], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self._report = report or (lambda line: None)
        self._on_reload = on_reload or (lambda tokens: None)
        self._lock = threading.Lock()
        self._flushed = time.monotonic()
        stamp = _stamp(self.path)
        first = TokenFile.load(self.path)  # a bad file at start is an error, not a warning
        super().__init__(first._by_digest, str(self.path), entries=first.entries, meta=first._meta)
        self._stamp = stamp
        if first.legacy:
            self._migrate()
        loose = readable_by_others(self.path)
        if loose:
            self._report(loose)

    def _migrate(self) -> None:
        try:
            with _locked(self.path):
                write_token_file(self.path, self.entries)
                self._stamp = _stamp(self.path)
        except OSError as exc:  # e.g. a read-only mount: go on reading it as it is
            self._report(
                f"{self.path} begins with '#' comments (not JSON); could not rewrite it: "
                f"{exc.strerror}"
            )
            return
        self._report(f"rewrote {self.path} as plain JSON (it began with '#' comments)")

    def principal(self, token: str | None) -> Principal | None:
        if _stamp(self.path) != self._stamp:
            self.reload()
        found = super().principal(token)
        if found is not None and time.monotonic() - self._flushed >= USE_FLUSH_SECONDS:
            self.flush_used()
        return found

    def flush_used(self) -> None:
        """Write each token's last use beside the file (``token list`` shows it): at most
        every ``USE_FLUSH_SECONDS`` while serving, and when the server stops."""
        self._flushed = time.monotonic()
        if not self.last_used:
            return
        try:
            write_last_used(self.path, self.last_used)
        except OSError as exc:  # a read-only mount: last use is advice, not authority
            self._report(f"could not record the tokens' last use: {exc.strerror}")

    def reload(self) -> bool:
        """Re-read the file now; False (and the last good tokens stay) if it is refused."""
        with self._lock:
            stamp = _stamp(self.path)
            try:
                fresh = TokenFile.load(self.path)
            except ConfigError as exc:
                if stamp != self._stamp:  # say it once per change, not on every request
                    self._report(
                        f"token file refused, keeping the {len(self._by_digest)} tokens "
                        f"loaded before: {exc}"
                    )
                self._stamp = stamp
                return False
            self._by_digest, self.entries, self._stamp = fresh._by_digest, fresh.entries, stamp
            self._meta = fresh._meta
        self._report(f"reloaded {self.path}: {len(self._by_digest)} tokens")
        if fresh.legacy:
            self._migrate()
        self._on_reload(self)
        return True


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock beside the token file, so two writers never lose each other's add."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


USE_FLUSH_SECONDS = 30.0  # how stale a token's recorded last use may be while serving


def used_path(path: Path) -> Path:
    """Where a token file's last uses are kept: ``.NAME.used`` beside it (ids → ms)."""
    return path.with_name(f".{path.name}.used")


def read_last_used(path: Path) -> dict[str, int]:
    """The recorded last use of each token id (empty when none was recorded)."""
    try:
        doc = json.loads(used_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in doc.items()} if isinstance(doc, dict) else {}


def write_last_used(path: Path, used: dict[str, int]) -> None:
    """Merge ``used`` into the recorded last uses (the newest of each id wins), atomically."""
    target = used_path(path)
    with _locked(path):
        merged = read_last_used(path)
        for k, v in used.items():
            merged[k] = max(v, merged.get(k, 0))
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(merged, f)
        os.replace(tmp, target)


def revoke_tokens(path: Path, ids: Iterable[str] = (), agent: str | None = None) -> list[str]:
    """Remove the tokens ``ids`` names (or every token of ``agent``) from the token file; the
    ids removed. A running server refuses them at its next request. An id that is not in the
    file is an error naming it, and nothing is removed."""
    want = list(ids)
    with _locked(path):
        entries = TokenFile.load(path).entries
        have = {token_id(e) for e in entries}
        missing = [i for i in want if i not in have]
        if missing:
            raise ConfigError(f"no token {missing[0]!r} in {path} (claimgraph token list)")
        gone = [
            e for e in entries if token_id(e) in want or (agent is not None and e["agent"] == agent)
        ]
        if not gone:
            raise ConfigError(f"{path} holds no token of {agent!r}")
        write_token_file(path, [e for e in entries if e not in gone])
    return [token_id(e) for e in gone]


def is_pattern(name: str) -> bool:
    """Whether a principal name is a pattern (``human:*``) rather than one identity."""
    return any(c in name for c in "*?[")


def add_token(
    path: Path,
    agent: str,
    *,
    tasks: Iterable[str] = ("*",),
    roles: Iterable[str] = (),
    replace: bool = False,
    another: bool = False,
    expires_at: int | None = None,
) -> str:
    """Add a principal with a fresh token to the token file at ``path`` (created if missing);
    return the token. The file keeps only its SHA-256. ``replace`` swaps out the agent's
    existing tokens, ``another`` adds one beside them (another task scope, or a rotation);
    with neither, an agent that has one is refused. ``expires_at`` (ms): refused from then."""
    tasks, roles = list(tasks) or ["*"], sorted(set(roles))
    if not agent or len(agent) > LIMITS["id"] or agent != agent.strip():
        raise ConfigError(f"an agent name is 1 to {LIMITS['id']} characters, no outer spaces")
    if is_pattern(agent):
        raise ConfigError(
            f"{agent!r} is a pattern; a token speaks for one agent (e.g. human:alice for "
            "a schema's 'human:*')"
        )
    if not set(roles) <= set(ROLES):
        raise ConfigError(f"roles are {', '.join(ROLES)}; not {', '.join(sorted(roles))}")
    if any(not t or len(t) > LIMITS["id"] for t in tasks):
        raise ConfigError(f"a task pattern is 1 to {LIMITS['id']} characters")
    with _locked(path):
        entries = TokenFile.load(path).entries if path.exists() else []
        if any(e.get("agent") == agent for e in entries) and not another:
            if not replace:
                raise ConfigError(
                    f"{path} already has a token for {agent!r} (--replace issues a new one "
                    "and revokes the old; --another adds one beside it)"
                )
            entries = [e for e in entries if e.get("agent") != agent]
        token = new_token()
        entry: dict[str, Any] = {
            "agent": agent, "tasks": tasks, "roles": roles, "sha256": token_digest(token)
        }  # fmt: skip
        if expires_at is not None:
            entry["expires_at"] = expires_at
        write_token_file(path, [*entries, entry])
    return token


def schema_principals(schema: GraphSchema) -> tuple[list[dict[str, Any]], list[str]]:
    """The concrete principals ``schema`` names, with the token roles they need (admins:
    admin; resolvers and humans: resolver), and the lines naming its patterns."""
    roles: dict[str, set[str]] = {}
    patterns: list[str] = []
    for kind, names, role in (
        ("admins", schema.admins, "admin"),
        ("resolvers", schema.resolvers, "resolver"),
        ("humans", schema.humans, "resolver"),
    ):
        for p in names:
            if is_pattern(p.text):
                patterns.append(f"principals.{kind} {p.text!r}")
            else:
                roles.setdefault(p.text, set()).add(role)
    return [{"agent": a, "roles": sorted(r)} for a, r in roles.items()], patterns


def role_mismatches(schema: GraphSchema, principals: Iterable[Principal]) -> list[str]:
    """One line per token whose role the schema does not grant its agent."""
    out = []
    for p in principals:
        if "admin" in p.roles and not schema.is_admin(p.agent):
            out.append(
                f"token for {p.agent!r} has the admin role, but the schema names it no admin: "
                "its admin commands are rejected (not_admin)"
            )
        elif "resolver" in p.roles and not schema.is_resolver(p.agent):
            out.append(
                f"token for {p.agent!r} has the resolver role, but the schema names it no "
                "resolver, human or admin: its verdicts are rejected (not_resolver)"
            )
    return out
