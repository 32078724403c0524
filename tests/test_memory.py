"""RocksDB's own memory is bounded as documented, also after a reopen (README: Memory)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import claimgraph
from claimgraph.logs.rocks import BLOCK_CACHE, MEMTABLES, WRITE_BUFFER, shared_block_cache
from tests.conftest import ROOT, SCHEMA


def _latest_options(db_dir: Path) -> str:
    latest = max(db_dir.glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))
    return latest.read_text(encoding="utf-8")


def test_memory_bounds_hold_after_reopen(tmp_path: Path) -> None:
    """A graph reopened (rocksdict would reload the stored OPTIONS file) still runs with the
    documented write buffers, and its log and projection share the process's one block cache
    of BLOCK_CACHE bytes: both report its capacity and its usage."""
    with claimgraph.open(tmp_path / "g", create=True, graph="test") as g:
        g.publish_schema(SCHEMA, agent="admin", source="conftest")
    with claimgraph.open(tmp_path / "g") as g:
        for i in range(200):
            g.assert_("depends_on", f"service:s{i}", "service:db", agent="inventory")
        g.projection.db.flush()
        g.edge("depends_on", "service:s1", "service:db")
        cache = shared_block_cache()
        for db in (g.logs.db, g.projection.db):
            assert db.property_int_value("rocksdb.block-cache-capacity") == BLOCK_CACHE
            assert db.property_int_value("rocksdb.block-cache-usage") == cache.get_usage()
        assert cache.get_usage() > 0
    for name in ("log", "projection"):
        text = _latest_options(tmp_path / "g" / name)
        assert re.search(rf"\n\s*write_buffer_size={WRITE_BUFFER}\n", text), name
        assert re.search(rf"\n\s*max_write_buffer_number={MEMTABLES}\n", text), name


_CACHE_PROBE = """
import json, sys
from pathlib import Path
import claimgraph
from claimgraph.logs.rocks import shared_block_cache
from tests.conftest import ROOT, SCHEMA

with claimgraph.open(Path(sys.argv[1]), create=True, graph="test") as g:
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    for i in range(200):
        g.assert_("depends_on", f"service:s{i}", "service:db", agent="inventory")
    g.logs.db.flush()
    g.projection.db.flush()
    cache = shared_block_cache()
    usage = [cache.get_usage()]
    assert len(g.logs.decisions.read(0, 1000)) == 201
    assert len(g.logs.commands.read(0, 1000)) == 201
    usage.append(cache.get_usage())
    g.edge("depends_on", "service:s1", "service:db")
    usage.append(cache.get_usage())
print(json.dumps(usage))
"""


def test_the_writer_s_reads_leave_the_block_cache_to_readers(tmp_path: Path) -> None:
    """Reading the log (as a fold, the governor and an audit do) adds nothing to the shared
    block cache; a projection read does. In a process of its own: the cache is the process's,
    and in a test session other tests' databases fill it and free it as they come and go."""
    r = subprocess.run(
        [sys.executable, "-c", _CACHE_PROBE, str(tmp_path / "g")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    before, after_log, after_read = json.loads(r.stdout)
    assert after_log == before  # the log reads cached no block
    assert after_read > before  # the projection read did
