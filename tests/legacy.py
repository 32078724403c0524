"""Logs written by an older claimgraph, kept as data (tests/data), restored as data dirs.

``tests/data/main-1920400-logs.json`` holds the raw records (offset, append time, bytes) of
three embedded graphs written by main at 1920400, before governor rules revisions and the
hash chain: the two demos and a "kitchen" graph exercising runs, signing, erasure, grants,
merge and garbage. New code must read, verify and audit them unchanged.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from rocksdict import WriteBatch

from claimgraph.logs.embedded import EmbeddedLogStore
from claimgraph.streams.embedded import GOVERNOR_POSITION

DATA = Path(__file__).parent / "data" / "main-1920400-logs.json"


def legacy_graphs() -> dict[str, Any]:
    """name → {graph, head, commands, decisions, runs} as written by main at 1920400."""
    return dict(json.loads(DATA.read_text())["graphs"])


def restore(path: Path, name: str) -> Path:
    """Write the named legacy graph's logs into a new embedded data directory ``path``."""
    doc = legacy_graphs()[name]
    path.mkdir(parents=True)
    (path / "graph.json").write_text(
        json.dumps({"graph": doc["graph"], "layout": 1, "created_at": 0}), encoding="utf-8"
    )
    store = EmbeddedLogStore(path / "log", create=True)
    try:
        wb = WriteBatch(raw_mode=True)
        for log, key in ((store.commands, "commands"), (store.decisions, "decisions"),
                         (store.runs, "runs")):  # fmt: skip
            recs = doc[key]
            assert [r[0] for r in recs] == list(range(len(recs)))
            log.stage(wb, [base64.b64decode(r[2]) for r in recs], timestamps=[r[1] for r in recs])
        store.stage_position(wb, GOVERNOR_POSITION, len(doc["commands"]))
        store.write(wb)
    finally:
        store.close()
    return path
