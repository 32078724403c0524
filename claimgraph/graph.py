"""The embedded graph: the composition root that wires logs, governor, projector and reads.

``claimgraph.open(path)`` returns a :class:`Graph`. Writes append commands to the commands
log and run the governor and projector until every pending command is decided, so each call
returns the decisions with the versions they landed at (read-your-writes). Reads take ``at``
(default: head).

A data directory holds one graph::

    DIR/graph.json     the graph's name and the layout version
    DIR/log/           commands, decisions and runs logs (RocksDB)
    DIR/projection/    the versioned projection (RocksDB), rebuildable from DIR/log
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError, InputError, VersionNotYetAvailable
from .inputs import now_millis, to_millis
from .logs.embedded import EmbeddedLogStore
from .model import Command, Decision
from .projections.projector import ProjectionStore
from .projections.reader import EdgeView, NeighborView, ProjectionReader, SlotView
from .streams.embedded import EmbeddedRuntime
from .wire import decode_decision, encode_command

__all__ = ["DEFAULT_GRAPH", "Graph", "NodeLike", "Receipt", "open_graph"]

DEFAULT_GRAPH = "default"
LAYOUT = 1
NodeLike = tuple[str, str] | str
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Receipt:
    """A command's acknowledgement: where it sits, its decision, and the version it made."""

    command_id: str
    position: int
    version: int
    decision: Decision

    @property
    def kind(self) -> str:
        return self.decision["kind"]

    @property
    def reason(self) -> str:
        return self.decision["reason"]

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.decision)
        d["version"] = self.version
        return d


def _node(n: NodeLike) -> tuple[str, str]:
    if isinstance(n, tuple):
        return n
    t, sep, i = n.partition(":")
    if not sep or not t or not i:
        raise InputError(f"{n!r} is not a node: expected 'type:id', e.g. service:checkout")
    return t, i  # sizes and characters are the governor's to judge (a recorded rejection)


def _read_config(path: Path) -> dict[str, Any]:
    cfg_path = path / "graph.json"
    try:
        cfg: dict[str, Any] = json.loads(cfg_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{path} is not a claimgraph data directory (run: claimgraph --data {path} init)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {cfg_path}: {exc}") from None
    if cfg.get("layout") != LAYOUT:
        raise ConfigError(
            f"{path} has layout {cfg.get('layout')!r}; this claimgraph reads layout {LAYOUT}"
        )
    return cfg


def open_graph(
    path: str | Path,
    *,
    create: bool = False,
    graph: str | None = None,
    progress: Progress | None = None,
) -> Graph:
    """Open (or with ``create=True`` initialise) the embedded graph in ``path``."""
    p = Path(path)
    if create:
        p.mkdir(parents=True, exist_ok=True)
        cfg_path = p / "graph.json"
        if cfg_path.exists():
            cfg = _read_config(p)
            if graph is not None and cfg["graph"] != graph:
                raise ConfigError(f"{p} already holds graph {cfg['graph']!r}, not {graph!r}")
        else:
            cfg = {"graph": graph or DEFAULT_GRAPH, "layout": LAYOUT, "created_at": now_millis()}
            tmp = cfg_path.with_suffix(".tmp")  # atomic: a crash leaves no half-written file
            tmp.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
            os.replace(tmp, cfg_path)
    else:
        cfg = _read_config(p)
        if graph is not None and cfg["graph"] != graph:
            raise ConfigError(f"{p} holds graph {cfg['graph']!r}, not {graph!r}")
    return Graph(p, cfg["graph"], progress=progress)


class Graph:
    """One embedded graph: write commands, read at any version, verify and audit."""

    def __init__(self, path: Path, name: str, *, progress: Progress | None = None) -> None:
        self.path = path
        self.name = name
        self._lock = threading.RLock()
        self._advanced = threading.Condition(self._lock)
        self.logs = EmbeddedLogStore(path / "log", create=True)
        try:
            self.projection = ProjectionStore(path / "projection", create=True)
        except Exception:
            self.logs.close()
            raise
        self.runtime = EmbeddedRuntime(self.logs, self.projection, name, progress=progress)
        self.projector = self.runtime.projector
        self.projector.set_graph(name)
        self.reader = ProjectionReader(self.projection.db)
        self._closed = False
        if self.runtime.pending():
            self.process()

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self.projection.close()
                self.logs.close()

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes ---------------------------------------------------------------------------------

    def append(self, commands: Iterable[Command | bytes]) -> list[int]:
        """Append commands (or raw records) to the commands log without deciding them."""
        values = [c if isinstance(c, bytes | bytearray) else encode_command(c) for c in commands]
        with self._lock:
            return self.logs.commands.append(values)

    def process(self, batch: int = 2048, progress: Progress | None = None) -> int:
        """Decide and project every pending command; return how many were decided."""
        with self._lock:
            n = self.runtime.run_until_idle(batch, progress)
            if n:
                self._advanced.notify_all()
            return n

    def submit(self, commands: Sequence[Command | bytes]) -> list[Receipt]:
        """Append commands, decide them, and return one receipt per command, in order."""
        if not commands:
            return []
        with self._lock:
            first_version = self.logs.decisions.end()
            positions = self.append(commands)
            self.process()
            receipts = []
            records = self.logs.decisions.read(first_version, len(positions) + 1)
            by_input = {}
            for rec in records:
                d = decode_decision(rec.value)
                by_input[d["input_offset"]] = (rec.offset, d)
            for pos in positions:
                version, d = by_input[pos]
                receipts.append(Receipt(d["command_id"], pos, version, d))
            return receipts

    def _one(self, command: Command) -> Receipt:
        return self.submit([command])[0]

    def claim(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        agent: str,
        task: str = "",
        polarity: str = "assert",
        confidence: float = 1.0,
        evidence: Sequence[str] = (),
        reasoning: str = "",
        asserted_at: int | str | None = None,
        based_on_version: int | None = None,
        properties: dict[str, str] | None = None,
        run_id: str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Assert (or with ``polarity='deny'`` deny) an edge."""
        s, o = _node(subject), _node(obj)
        return self._one(
            {
                "type": "claim",
                "command_id": command_id or str(uuid.uuid4()),
                "graph": self.name,
                "agent": agent,
                "task": task,
                "run_id": run_id,
                "edge_type": edge_type,
                "subject_type": s[0],
                "subject_id": s[1],
                "object_type": o[0],
                "object_id": o[1],
                "polarity": polarity,
                "confidence": float(confidence),
                "evidence": list(evidence),
                "reasoning": reasoning,
                "asserted_at": now_millis() if asserted_at is None else to_millis(asserted_at),
                "based_on_version": based_on_version,
                "properties": dict(properties or {}),
            }
        )

    def assert_(self, edge_type: str, subject: NodeLike, obj: NodeLike, **kw: Any) -> Receipt:
        """Assert that an edge holds (see :meth:`claim`)."""
        return self.claim(edge_type, subject, obj, polarity="assert", **kw)

    def deny(self, edge_type: str, subject: NodeLike, obj: NodeLike, **kw: Any) -> Receipt:
        """Deny that an edge holds (see :meth:`claim`)."""
        return self.claim(edge_type, subject, obj, polarity="deny", **kw)

    def retract(
        self,
        claim_id: str,
        *,
        agent: str,
        task: str = "",
        reason: str = "",
        command_id: str | None = None,
    ) -> Receipt:
        """Withdraw one's own claim (retirement: gone from head, readable before)."""
        return self._one(
            {
                "type": "retract",
                "command_id": command_id or str(uuid.uuid4()),
                "graph": self.name,
                "agent": agent,
                "task": task,
                "run_id": None,
                "claim_id": claim_id,
                "reason": reason,
            }
        )

    def resolve(
        self,
        conflict_id: str,
        *,
        agent: str,
        winner: str | None,
        resolver: str = "human",
        rationale: str = "",
        task: str = "",
        command_id: str | None = None,
    ) -> Receipt:
        """A resolver's verdict: ``winner`` (a claim id) or ``None`` to reject every claim."""
        return self._one(
            {
                "type": "resolve",
                "command_id": command_id or str(uuid.uuid4()),
                "graph": self.name,
                "agent": agent,
                "task": task,
                "conflict_id": conflict_id,
                "winner": winner,
                "resolver": resolver,
                "rationale": rationale,
            }
        )

    def publish_schema(
        self,
        document: str,
        *,
        agent: str,
        source: str = "<inline>",
        task: str = "",
        command_id: str | None = None,
    ) -> Receipt:
        """Publish a graph schema document (YAML) as ``agent`` (an admin)."""
        return self._one(
            {
                "type": "publish_schema",
                "command_id": command_id or str(uuid.uuid4()),
                "graph": self.name,
                "agent": agent,
                "task": task,
                "document": document,
                "source": source,
            }
        )

    def grant(
        self,
        grantee_agent: str,
        edge_type: str,
        *,
        agent: str,
        grantee_task: str = "*",
        expires_at: int | str | None = None,
        command_id: str | None = None,
    ) -> Receipt:
        """Grant extra write scope (admin only), optionally until ``expires_at`` (log time)."""
        return self._one(
            {
                "type": "grant",
                "command_id": command_id or str(uuid.uuid4()),
                "graph": self.name,
                "agent": agent,
                "task": "",
                "grantee_agent": grantee_agent,
                "grantee_task": grantee_task,
                "edge_type": edge_type,
                "expires_at": None if expires_at is None else to_millis(expires_at),
            }
        )

    def revoke(self, grant_id: str, *, agent: str, command_id: str | None = None) -> Receipt:
        """Revoke a grant (admin only)."""
        return self._one(
            {
                "type": "revoke",
                "command_id": command_id or str(uuid.uuid4()),
                "graph": self.name,
                "agent": agent,
                "task": "",
                "grant_id": grant_id,
            }
        )

    def tick(self, *, agent: str = "ticker") -> Receipt:
        """Write a tick: time advances for the governor only through the log."""
        return self._one(
            {
                "type": "tick",
                "command_id": str(uuid.uuid4()),
                "graph": self.name,
                "agent": agent,
                "task": "",
            }
        )

    # -- versions -------------------------------------------------------------------------------

    def head(self) -> int:
        """The newest applied version (-1 for an empty graph)."""
        return self.projection.applied()

    def wait_for(self, version: int, timeout: float = 0.0) -> int:
        """Block until ``version`` is applied (or raise VersionNotYetAvailable); return head."""
        deadline = time.monotonic() + timeout
        with self._advanced:
            while True:
                head = self.head()
                if version <= head:
                    return head
                left = deadline - time.monotonic()
                if left <= 0:
                    raise VersionNotYetAvailable(version, head, timeout)
                self._advanced.wait(min(left, 0.05))

    def _at(self, at: int | None, timeout: float) -> int:
        if at is None:
            return self.head()
        if at < -1:
            raise InputError(
                f"version {at} does not exist: versions start at 0 (-1 is the empty graph)"
            )
        self.wait_for(at, timeout)
        return at

    # -- reads ----------------------------------------------------------------------------------

    def edge(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> EdgeView:
        """One edge as of ``at``: present, absent or unknown (with the conflict id)."""
        return self.reader.edge(edge_type, _node(subject), _node(obj), self._at(at, timeout))

    def slot(
        self,
        edge_type: str,
        node: NodeLike,
        *,
        direction: str = "out",
        at: int | None = None,
        timeout: float = 0.0,
    ) -> SlotView:
        """What an exclusive slot holds as of ``at``."""
        return self.reader.slot(edge_type, _node(node), self._at(at, timeout), direction)

    def neighbors(
        self,
        node: NodeLike,
        *,
        edge_type: str | None = None,
        direction: str = "out",
        at: int | None = None,
        timeout: float = 0.0,
        include_absent: bool = False,
    ) -> list[NeighborView]:
        """The node's neighbours as of ``at`` (present and unknown edges)."""
        return self.reader.neighbors(
            _node(node),
            self._at(at, timeout),
            edge_type=edge_type,
            direction=direction,
            include_absent=include_absent,
        )

    def history(
        self,
        edge_type: str,
        subject: NodeLike,
        obj: NodeLike,
        *,
        at: int | None = None,
        timeout: float = 0.0,
    ) -> list[dict[str, Any]]:
        """Every decision that touched the edge, up to ``at``."""
        return self.reader.history(edge_type, _node(subject), _node(obj), self._at(at, timeout))

    def quarantine(
        self, *, at: int | None = None, timeout: float = 0.0, include_closed: bool = False
    ) -> list[dict[str, Any]]:
        """Open conflicts as of ``at`` (and closed ones with ``include_closed``)."""
        return self.reader.quarantine(self._at(at, timeout), include_closed=include_closed)

    def claim_info(self, claim_id: str, *, at: int | None = None) -> dict[str, Any] | None:
        """A claim's record and status as of ``at``."""
        return self.reader.claim(claim_id, self._at(at, 0.0))

    def conflict(self, conflict_id: str, *, at: int | None = None) -> dict[str, Any] | None:
        """A conflict's record as of ``at``."""
        return self.reader.conflict(conflict_id, self._at(at, 0.0))

    def schema_info(self, *, at: int | None = None) -> dict[str, Any] | None:
        """The schema in force at ``at``: revision, digest, source and document."""
        return self.reader.schema_row(self._at(at, 0.0))

    def decisions(self, start: int = 0, limit: int = 100) -> list[tuple[int, Decision]]:
        """Decisions from the decisions log: (version, decision)."""
        return [
            (r.offset, decode_decision(r.value)) for r in self.logs.decisions.read(start, limit)
        ]
