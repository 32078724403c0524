"""Every catalogued read answers on Kafka as it does embedded (issue #26's contract suite).

The same commands (their ids and event times given) are sent to an embedded graph and to a
Kafka graph with a governor and a projector running. Versions differ between the two (Kafka's
are offsets in a decisions partition other graphs and transaction markers share), so each
write's two receipts map one version onto the other; every read of the catalogue is then
asked on both at every version of the world, and the answers compared with versions mapped and
log times (each log's own clock) left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.core.queries import QUERIES
from claimgraph.service.api import Receipt
from claimgraph.service.traces import jsonable
from tests.conftest import SCHEMA
from tests.test_graph_port import _kafka
from tests.test_query_catalogue import EXAMPLES

T0 = 1_790_000_000_000  # event times are given: the two worlds must hold the same claims

# What names a version in an answer, and what is each log's own (its clock, its offsets).
VERSION_KEYS = {"version", "since", "until", "cut_below", "pinned_version", "at", "opened_at",
                "closed_at", "based_on_version", "head", "decided_at", "escalated_at"}  # fmt: skip
OWN_KEYS = {"log_time", "input_offset", "prev_hash", "offset", "applied", "scanned",
            "next_cursor", "decided_log_time"}  # fmt: skip


def _world(g: Any) -> list[Receipt]:
    """Write the world; the receipts, in order."""
    inv = {"agent": "inventory", "task": "t"}
    out = [g.publish_schema(SCHEMA, agent="admin", command_id="schema")]

    def claim(*edge: str, cid: str, i: int, **kw: Any) -> None:
        kw = {**inv, **kw}
        out.append(g.assert_(*edge, asserted_at=T0 + i, command_id=cid, **kw))

    claim("depends_on", "service:a", "service:b", cid="c-ab", i=1, confidence=0.7,
          evidence=["cmdb#1"], reasoning="seen")  # fmt: skip
    claim("depends_on", "service:b", "service:c", cid="c-bc", i=2)
    claim("runs_in", "service:api", "environment:prod", cid="c-prod", i=3, agent="release",
          task="promote")  # fmt: skip
    claim("runs_in", "service:api", "environment:dev", cid="c-dev", i=4, agent="release",
          task="promote")  # fmt: skip
    out.append(g.deny("depends_on", "service:b", "service:c", agent="tracer",
                      asserted_at=T0 + 5, command_id="d-bc"))  # fmt: skip
    conflict = out[-1].decision["conflict_id"]
    assert conflict, out[-1].decision
    out.append(g.escalate(conflict, agent="reviewer", reason="a person", command_id="esc"))
    claim("owns", "service:a", "database:d", cid="c-own", i=6)
    out.append(g.retract("c-own", agent="inventory", command_id="r-own"))
    out.append(g.resolve(conflict, agent="reviewer", winner="c-bc", resolver="reviewer",
                         rationale="traced", command_id="res"))  # fmt: skip
    return out


def _examples(conflict: str) -> dict[str, dict[str, Any]]:
    ex = {k: dict(v) for k, v in EXAMPLES.items()}
    for name in ("conflict", "escalation"):
        ex[name]["conflict_id"] = conflict
    ex["decisions"] = {"start": 0, "limit": 50}
    return ex


def _own(key: str) -> bool:
    return key in OWN_KEYS or key.endswith("_time")  # a log's clock: opened_time, ...


def _plain(x: Any, vmap: dict[int, int]) -> Any:
    """The answer with versions mapped to the embedded world's and each log's own fields out."""
    x = x.as_dict() if hasattr(x, "as_dict") else jsonable(x)

    def walk(v: Any, key: str = "") -> Any:
        if isinstance(v, dict):
            return {k: walk(w, k) for k, w in v.items() if not _own(k)}
        if isinstance(v, list):
            return [walk(w, key) for w in v]
        if key in VERSION_KEYS and isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            assert v in vmap, f"{key}={v}: not a version of the world"
            return vmap[v]
        return v

    return walk(x)


@pytest.fixture
def kafka_port(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    gen = _kafka(request, tmp_path)
    as_agent = next(gen)
    try:
        yield as_agent("admin")
    finally:
        next(gen, None)


def test_every_catalogued_read_answers_on_kafka_as_embedded(
    kafka_port: Any, tmp_path: Path
) -> None:
    emb = claimgraph.open(tmp_path / "e", create=True, graph="test")
    try:
        here, there = _world(emb), _world(kafka_port)
        assert [r.kind for r in here] == [r.kind for r in there], [r.kind for r in there]
        last = kafka_port.wait(there[-1], timeout=60)
        vmap = {k.version: e.version for e, k in zip(here, there, strict=True)}
        # every version Kafka's world has: the place record's, then a receipt's each
        kversions = sorted(vmap)
        assert kversions[-1] == last.version
        (deny,) = [r for r in there if r.command_id == "d-bc"]
        conflict = deny.decision["conflict_id"]
        examples = _examples(conflict)
        assert set(examples) == set(QUERIES)  # a new read needs an example
        compared = 0
        for kv in kversions:
            ev = vmap[kv]
            for name, params in examples.items():
                spec = QUERIES[name]
                at = {"at": kv} if spec.versioned else {}
                at_e = {"at": ev} if spec.versioned else {}
                if name == "decisions":
                    got = [(vmap.get(v), d["command_id"], d["kind"], d["reason"])
                           for v, d in kafka_port.read(name, **params) if v in vmap]  # fmt: skip
                    want = [(v, d["command_id"], d["kind"], d["reason"])
                            for v, d in emb.read(name, **params)]  # fmt: skip
                    assert got == want
                    continue
                if not spec.versioned and kv != kversions[-1]:
                    continue  # read at head: once, at the end
                got = _plain(kafka_port.read(name, **params, **at), vmap)
                want = _plain(emb.read(name, **params, **at_e), {v: v for v in vmap.values()})
                assert got == want, (name, kv, ev)
                compared += 1
        assert compared > len(examples) * len(kversions) // 2
    finally:
        emb.close()
