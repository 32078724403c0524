"""Bearer tokens → principals, read from a token file (identity is never self-declared).

A token file is JSON when its name ends in ``.json`` (what ``claimgraph serve`` and
``claimgraph token add`` write), YAML otherwise, and should be readable only by its owner
(annotated here; the file itself has no comments)::

    {"tokens": [
      {"agent": "inventory",          # the principal: every command it sends is this agent's
       "tasks": ["reconcile-*"],      # the tasks it may claim to act in (patterns; default "*")
       "roles": [],                   # admin and/or resolver: may publish, grant, resolve
       "token": "s3cr3t..."},         # the bearer token itself, or
      {"agent": "sre-oncall", "roles": ["resolver"],
       "sha256": "9f86d0...",         # its SHA-256 hex digest (then the file holds no secret)
       "expires_at": "2027-01-31T00:00:00Z"}  # optional: refused from then on (ISO or ms)
    ]}

An agent may hold several tokens (a task scope each, or an old and a new one while rotating).
Each token has an id, ``t-`` and the first 12 hex digits of its digest (or the entry's own
``id``): ``claimgraph token list`` shows it, with the expiry and the last use, never the token;
``claimgraph token revoke ID`` removes it. A token past its ``expires_at`` is refused at once,
on every surface (they all resolve callers here).

A token's :class:`~claimgraph.service.access.Principal` is the service layer's: every surface
resolves its caller to one and calls the graph through it.

A ``.json`` file that older versions wrote (JSON after ``#`` comment lines) is still read, and
marked :attr:`TokenFile.legacy` so that its owner rewrites it as plain JSON
(:mod:`claimgraph.http.tokens`).

Tokens are compared by their SHA-256 digests; neither tokens nor digests are ever logged, and
a principal's ``repr`` does not show them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import yaml

from claimgraph.errors import ConfigError
from claimgraph.service.access import ROLES, Principal

__all__ = [
    "ROLES",
    "Principal",
    "TokenFile",
    "generate_token_file",
    "new_token",
    "token_digest",
    "token_id",
    "write_token_file",
]


def token_digest(token: str) -> str:
    """The SHA-256 hex digest a token is looked up by."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_id(entry: dict[str, Any]) -> str:
    """A token entry's id: its own ``id``, else ``t-`` and 12 hex digits of its digest."""
    if entry.get("id"):
        return str(entry["id"])
    dg = token_digest(str(entry["token"])) if "token" in entry else str(entry["sha256"]).lower()
    return "t-" + dg[:12]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _expiry(value: Any, where: str) -> int | None:
    """An entry's ``expires_at`` as ms since the epoch (None: it does not expire)."""
    if value is None:
        return None
    from claimgraph.service.writes import to_millis

    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{where}: expires_at is a time: ISO 8601 text or ms since the epoch")
    try:
        return to_millis(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: expires_at: {exc}") from None


class TokenFile:
    """The principals of a token file, looked up by token digest."""

    def __init__(
        self,
        principals: dict[str, Principal],
        source: str = "<tokens>",
        *,
        entries: list[dict[str, Any]] | None = None,
        legacy: bool = False,
        meta: dict[str, tuple[str, int | None]] | None = None,
    ) -> None:
        self._by_digest = principals
        self._meta = meta or {}  # digest → (token id, expires_at ms or None)
        self.source = source
        self.entries = entries or []  # the file's entries as written (to add to them)
        self.legacy = legacy  # JSON after '#' comment lines, as earlier versions wrote it
        self.last_used: dict[str, int] = {}  # token id → ms of its last accepted use

    def __repr__(self) -> str:
        return f"TokenFile({self.source!r}, {len(self._by_digest)} principals)"

    def of_agent(self, agent: str) -> list[Principal]:
        """The principals of ``agent``'s tokens (an agent may hold several)."""
        return [p for p in self._by_digest.values() if p.agent == agent]

    @classmethod
    def load(cls, path: str | Path) -> TokenFile:
        p = Path(path)
        try:
            raw = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read token file {p}: {exc.strerror}") from None
        return cls.parse(raw, str(p))

    @classmethod
    def parse(cls, text: str, source: str = "<tokens>") -> TokenFile:
        """Parse a token file: JSON if ``source`` ends in ``.json``, YAML otherwise."""
        legacy = False
        if source.endswith(".json"):
            try:
                doc = json.loads(text)
            except ValueError as exc:
                body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
                bad = ConfigError(
                    f"{source}: not JSON ({exc}); a YAML token file needs a .yaml name"
                )
                if not text.startswith("#"):
                    raise bad from None
                try:
                    doc = json.loads(body)
                except ValueError:
                    raise bad from None
                legacy = True
        else:
            try:
                doc = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ConfigError(f"{source}: not YAML: {exc}") from None
        entries = doc.get("tokens") if isinstance(doc, dict) else None
        if not isinstance(entries, list):
            raise ConfigError(f"{source}: expected a mapping with a 'tokens' list")
        out: dict[str, Principal] = {}
        meta: dict[str, tuple[str, int | None]] = {}
        ids: set[str] = set()
        for i, e in enumerate(entries):
            where = f"{source}: tokens[{i}]"
            if not isinstance(e, dict) or not isinstance(e.get("agent"), str) or not e["agent"]:
                raise ConfigError(f"{where}: needs an 'agent' name")
            if ("token" in e) == ("sha256" in e):
                raise ConfigError(f"{where}: give exactly one of 'token' or 'sha256'")
            dg = token_digest(str(e["token"])) if "token" in e else str(e["sha256"]).lower()
            if len(dg) != 64 or any(c not in "0123456789abcdef" for c in dg):
                raise ConfigError(f"{where}: sha256 must be 64 hex digits")
            tasks = e.get("tasks", ["*"])
            roles = e.get("roles", [])
            if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
                raise ConfigError(f"{where}: tasks must be a list of patterns")
            if not isinstance(roles, list) or not set(roles) <= set(ROLES):
                raise ConfigError(f"{where}: roles must be a list of {', '.join(ROLES)}")
            if dg in out:
                raise ConfigError(f"{where}: the same token appears twice")
            tid = token_id(e)
            if tid in ids:
                raise ConfigError(f"{where}: token id {tid!r} appears twice")
            ids.add(tid)
            meta[dg] = (tid, _expiry(e.get("expires_at"), where))
            out[dg] = Principal(e["agent"], tuple(tasks), frozenset(roles))
        return cls(out, source, entries=[dict(e) for e in entries], legacy=legacy, meta=meta)

    def principal(self, token: str | None) -> Principal | None:
        """The principal of a bearer token, or None: unknown, or past its ``expires_at``
        (constant-time digest comparison)."""
        if not token:
            return None
        want = token_digest(token)
        found = key = None
        for dg, p in self._by_digest.items():
            if hmac.compare_digest(dg, want):
                found, key = p, dg
        if found is None or key is None:
            return None
        tid, expires = self._meta.get(key, ("", None))
        now = _now_ms()
        if expires is not None and now >= expires:
            return None
        self.last_used[tid] = now
        return found

    def tokens(self) -> list[dict[str, Any]]:
        """Each token as ``token list`` shows it: id, agent, tasks, roles, expires_at (ms or
        None) and whether it has expired — never the token or its digest."""
        now = _now_ms()
        out = []
        for dg, p in self._by_digest.items():
            tid, expires = self._meta.get(dg, ("t-" + dg[:12], None))
            out.append({
                "id": tid, "agent": p.agent, "tasks": list(p.tasks), "roles": sorted(p.roles),
                "expires_at": expires, "expired": expires is not None and now >= expires,
            })  # fmt: skip
        return out

    def principals(self) -> list[Principal]:
        return list(self._by_digest.values())


def new_token() -> str:
    """A fresh random bearer token (256 bits)."""
    return secrets.token_urlsafe(32)


def write_token_file(path: Path, entries: list[dict[str, Any]]) -> None:
    """Replace ``path`` atomically (mode 600) with these entries: plain JSON for a ``.json``
    name, YAML otherwise. The result is checked by parsing it before it replaces the file."""
    doc = {"tokens": entries}
    if path.name.endswith(".json"):
        text = json.dumps(doc, indent=2) + "\n"
    else:
        text = "# claimgraph bearer tokens: keep this file private.\n" + yaml.safe_dump(doc)
    TokenFile.parse(text, str(path))  # never write a file the server would refuse
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def generate_token_file(path: Path, principals: list[dict[str, Any]]) -> dict[str, str]:
    """Write a token file (mode 600) with a fresh random token per principal; agent → token."""
    tokens = {p["agent"]: new_token() for p in principals}
    write_token_file(path, [{**p, "token": tokens[p["agent"]]} for p in principals])
    return tokens
