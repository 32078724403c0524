"""Retention pins: versions held readable for live runs, and the horizon GC agreed to.

A run pins the version it reads at (:class:`PinRegistry`, a SQLite database beside
the projection, shared by every process through SQLite's own locking): GC never moves the
horizon past the oldest live pin, and a pin below the current horizon is refused. Pins carry a
lease and expire when it runs out (a crashed run cannot hold retention back forever); a
finished run unpins. The registry is the API the runs code calls: ``pin(version, owner,
lease)``, ``renew``, ``unpin``. Every operation is one transaction over indexed rows, so
taking or releasing a pin costs O(log n) in the live pins (the JSON file it replaces was
rewritten whole on every pin: quadratic over a burst of run starts), and a ``holder`` (the
principal) can be held to at most ``limit`` live pins.

The registry lives in ``DIR/pins.sqlite``; :func:`claimgraph.projections.retention.gc_projection`
asks it (:meth:`PinRegistry.advance`) how far the horizon may move.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from claimgraph.errors import ConfigError, LimitError, NotFoundError, StorageError, VersionPruned

__all__ = ["Pin", "PinRegistry"]


@dataclass(frozen=True, slots=True)
class Pin:
    """A version held readable for ``owner`` (a run) until ``expires_at`` (ms since epoch).

    ``holder`` is the principal that took it (empty for pins taken in process).
    """

    pin_id: str
    version: int
    owner: str
    created_at: int
    expires_at: int
    holder: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


_DDL = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS pins (pin_id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
    "owner TEXT NOT NULL, holder TEXT NOT NULL, created_at INTEGER NOT NULL, "
    "expires_at INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS pins_by_version ON pins (version)",
    "CREATE INDEX IF NOT EXISTS pins_by_expiry ON pins (expires_at)",
    "CREATE INDEX IF NOT EXISTS pins_by_owner ON pins (owner)",
    "CREATE INDEX IF NOT EXISTS pins_by_holder ON pins (holder, expires_at)",
)
_COLUMNS = "pin_id, version, owner, created_at, expires_at, holder"


class PinRegistry:
    """Pins of live runs and the horizon GC agreed to, in ``DIR/pins.sqlite`` (multi-process).

    Every operation is one ``BEGIN IMMEDIATE`` transaction (a GC and a run starting in other
    processes cannot race past each other) touching indexed rows only: O(log n) in the live
    pins. Expired pins are deleted at the start of each transaction, through the expiry index.
    A ``pins.json`` left by an older claimgraph is imported once, then renamed.
    """

    def __init__(self, directory: Path, *, clock: Callable[[], int] = _now_ms) -> None:
        self.dir = directory
        self.file = directory / "pins.sqlite"
        self._clock = clock
        self._ready = False
        # called with each connection before it is used: for instrumentation (e.g. counting
        # SQLite's VM steps with set_progress_handler), never needed to use the registry
        self.on_connect: Callable[[sqlite3.Connection], None] | None = None

    @contextmanager
    def _tx(self) -> Iterator[tuple[sqlite3.Connection, int]]:
        """A write transaction and the time it runs at; expired pins are already gone."""
        if not self._ready:
            self.dir.mkdir(parents=True, exist_ok=True)
        try:
            con = sqlite3.connect(self.file, timeout=60.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open {self.file}: {exc}") from None
        try:
            if self.on_connect is not None:
                self.on_connect(con)
            if not self._ready:
                con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("BEGIN IMMEDIATE")
            try:
                if not self._ready:
                    for ddl in _DDL:
                        con.execute(ddl)
                    self._import_json(con)
                now = self._clock()
                con.execute("DELETE FROM pins WHERE expires_at <= ?", (now,))
                yield con, now
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
            self._ready = True
        except sqlite3.Error as exc:
            raise StorageError(f"{self.file}: {exc}") from None
        finally:
            con.close()

    def _import_json(self, con: sqlite3.Connection) -> None:
        """Take over the pins and horizon of an older registry's ``pins.json`` (once)."""
        old = self.dir / "pins.json"
        if not old.exists():
            return
        try:
            doc = json.loads(old.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ConfigError(f"{old} is not valid JSON: {exc}") from None
        con.execute(
            "INSERT INTO meta VALUES ('horizon', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)",
            (int(doc.get("horizon", 0)),),
        )
        for raw in doc.get("pins", {}).values():
            p = Pin(**raw)
            con.execute(
                f"INSERT OR IGNORE INTO pins ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (p.pin_id, p.version, p.owner, p.created_at, p.expires_at, p.holder),
            )
        os.replace(old, old.with_name("pins.json.imported"))

    @staticmethod
    def _horizon(con: sqlite3.Connection) -> int:
        row = con.execute("SELECT value FROM meta WHERE key = 'horizon'").fetchone()
        return int(row[0]) if row else 0

    def pin(
        self,
        version: int,
        owner: str,
        lease: float = 3600.0,
        *,
        holder: str = "",
        limit: int | None = None,
    ) -> Pin:
        """Hold ``version`` readable for ``lease`` seconds; refused if it is already pruned,
        or (with ``limit``) if ``holder`` already holds ``limit`` live pins."""
        return self.batch([(version, owner)], lease=lease, holder=holder, limit=limit)[0]

    def batch(
        self,
        pins: Sequence[tuple[int, str]] = (),
        *,
        lease: float = 3600.0,
        holder: str = "",
        limit: int | None = None,
        release: Sequence[str] = (),
    ) -> list[Pin]:
        """In one transaction: release every pin of the owners in ``release``, then pin each
        ``(version, owner)`` of ``pins`` for ``holder``; all or nothing."""
        if lease <= 0:
            raise ConfigError("a pin's lease must be positive (seconds)")
        for version, _ in pins:
            if version < 0:
                raise ConfigError(f"cannot pin version {version}")
        with self._tx() as (con, now):
            for owner in release:
                con.execute("DELETE FROM pins WHERE owner = ?", (owner,))
            if not pins:
                return []
            horizon = self._horizon(con)
            if (low := min(v for v, _ in pins)) < horizon:
                raise VersionPruned(low, horizon)
            if limit is not None:
                (held,) = con.execute(
                    "SELECT count(*) FROM pins WHERE holder = ? AND expires_at > ?",
                    (holder, now),
                ).fetchone()
                if held + len(pins) > limit:
                    raise LimitError(
                        "too_many",
                        "--max-pins",
                        f"{holder!r} holds {held} live pins; {len(pins)} more would pass "
                        f"{limit} (end runs, or let their leases lapse)",
                        429,
                    )
            out = [
                Pin(uuid.uuid4().hex[:16], v, owner, now, now + int(lease * 1000), holder)
                for v, owner in pins
            ]
            con.executemany(
                f"INSERT INTO pins ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                [(p.pin_id, p.version, p.owner, p.created_at, p.expires_at, p.holder) for p in out],
            )
            return out

    def renew(self, pin_id: str, lease: float) -> Pin:
        """Extend a live pin's lease to ``lease`` seconds from now."""
        with self._tx() as (con, now):
            con.execute(
                "UPDATE pins SET expires_at = ? WHERE pin_id = ?", (now + int(lease * 1000), pin_id)
            )
            row = con.execute(f"SELECT {_COLUMNS} FROM pins WHERE pin_id = ?", (pin_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"no live pin {pin_id!r} (it expired or was removed)")
            return Pin(*row)

    def unpin(self, pin_id: str) -> bool:
        """Release a pin (a run ended); False if there was no such live pin."""
        with self._tx() as (con, _):
            return con.execute("DELETE FROM pins WHERE pin_id = ?", (pin_id,)).rowcount > 0

    def live(self) -> list[Pin]:
        """Pins whose lease has not run out, oldest version first."""
        with self._tx() as (con, _):
            rows = con.execute(f"SELECT {_COLUMNS} FROM pins ORDER BY version, pin_id").fetchall()
            return [Pin(*r) for r in rows]

    def horizon(self) -> int:
        with self._tx() as (con, _):
            return self._horizon(con)

    def advance(self, target: int) -> tuple[int, Pin | None]:
        """Move the agreed horizon towards ``target``, never past a live pin nor backwards.

        Returns the new horizon and the pin that held it back (if one did).
        """
        with self._tx() as (con, _):
            row = con.execute(
                f"SELECT {_COLUMNS} FROM pins ORDER BY version, pin_id LIMIT 1"
            ).fetchone()
            oldest = Pin(*row) if row is not None else None
            held = oldest if oldest is not None and oldest.version < target else None
            h = max(held.version if held is not None else target, self._horizon(con))
            con.execute(
                "INSERT INTO meta VALUES ('horizon', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (h,),
            )
            return h, held
