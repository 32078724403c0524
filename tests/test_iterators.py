"""The graph's reader reuses RocksDB iterators: never a stale answer, never a pinned payload."""

from __future__ import annotations

import threading
from pathlib import Path

import claimgraph
from tests.conftest import SCHEMA

SECRET = "sk-live-5ecret-payload-0042"


def _graph(path: Path) -> claimgraph.Graph:
    g = claimgraph.open(path, create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    return g


def test_a_cached_iterator_never_hides_a_later_write(tmp_path: Path) -> None:
    """Reads at head before and after each of 50 writes, in one thread (one cached
    iterator): every write is seen by the next read, and older versions keep their answer."""
    g = _graph(tmp_path / "g")
    try:
        for i in range(50):
            assert g.edge("depends_on", f"service:s{i}", "service:db").state == "absent"
            r = g.assert_("depends_on", f"service:s{i}", "service:db", agent="inventory")
            assert g.edge("depends_on", f"service:s{i}", "service:db").state == "present"
            assert g.edge("depends_on", f"service:s{i}", "service:db", at=r.version - 1).state == (
                "absent"
            )
            assert len(g.neighbors("service:db", direction="in")) == i + 1
    finally:
        g.close()


def test_an_idle_threads_iterator_is_dropped_and_pins_no_erased_payload(tmp_path: Path) -> None:
    """A thread reads (caching its iterators) and then idles; the main thread erases a claim
    whose evidence held a secret: the idle thread's iterators are dropped, and the secret is
    gone from every file of the projection, as with no cached iterator."""
    g = _graph(tmp_path / "g")
    try:
        c = g.assert_("depends_on", "service:a", "service:b", agent="inventory", evidence=[SECRET])
        read, done = threading.Event(), threading.Event()
        idents: list[int] = []

        def reader() -> None:
            g.edge("depends_on", "service:a", "service:b")
            g.neighbors("service:a")
            idents.append(threading.get_ident())
            read.set()
            done.wait(60)

        t = threading.Thread(target=reader)
        t.start()
        assert read.wait(60)
        assert any(k[0] == idents[0] for k in g.reader._iters or {})
        r = g.erase(c.command_id, agent="admin", reason="privacy request")
        assert r.reason == "erased"
        assert not any(k[0] == idents[0] for k in g.reader._iters or {})
        done.set()
        t.join(60)
        for f in (tmp_path / "g" / "projection").iterdir():
            assert SECRET.encode() not in f.read_bytes(), f"{f} still holds the payload"
    finally:
        g.close()
