"""Forgeries from outside, on a real broker (issue 29): raw records produced with
confluent-kafka straight to the topics, never through claimgraph's writers.

Only the operator places a graph (rules revision 6: anyone else's ``place`` is a recorded
``not_operator`` rejection); a registry record is trusted only when the decision of its place
record is the operator's accepted place of that graph on that partition, so writers, projectors
and ``verify`` stop on a forged one with a named error; a projector never resumes on another
partition; records of no graph leave no per-key state in the governor; ``kafka status`` and
``kafka init`` handle a half-grown layout and a malformed layout record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from claimgraph.core.governor.placement import UNPLACED
from claimgraph.core.wire import encode_command
from claimgraph.errors import ConfigError, IntegrityError
from claimgraph.logs.kafka import KafkaConfig
from claimgraph.logs.kafka_layout import LAYOUT_KEY, init_topics, read_registry
from claimgraph.service.kafka_graph import KafkaGraph
from claimgraph.streams.kafka import KafkaGovernor, verify_partition
from claimgraph.streams.kafka_projector import KafkaProjector
from tests.conftest import ROOT, SCHEMA
from tests.kafka_helpers import (
    Decisions,
    decide_all,
    fresh_config,
    governor_thread,
    project_all,
)

ROGUE = "rogue-agent"


def _raw(cfg: KafkaConfig) -> Producer:
    """A producer that is not claimgraph's (as kcat would be)."""
    return Producer(cfg.client(acks="all"))


def _produce(p: Producer, topic: str, partition: int, key: bytes, value: bytes) -> int:
    got: list[Any] = []
    p.produce(
        topic,
        key=key,
        value=value,
        partition=partition,
        on_delivery=lambda e, m: got.append(e or m.offset()),
    )
    p.flush(30)
    assert len(got) == 1 and isinstance(got[0], int), got
    return int(got[0])


def _place(graph: str, partition: int, agent: str) -> bytes:
    return encode_command(
        {
            "type": "place",
            "command_id": f"forged-{uuid.uuid4().hex}",
            "graph": graph,
            "agent": agent,
            "task": "place",
            "partition": partition,
        }
    )


def _schema(graph: str, agent: str = "admin") -> bytes:
    doc = SCHEMA.replace("admins: [admin]", f"admins: [{agent}]")
    return encode_command(
        {
            "type": "publish_schema",
            "command_id": f"schema-{uuid.uuid4().hex}",
            "graph": graph,
            "agent": agent,
            "task": "",
            "document": doc,
            "source": "forged.yaml",
        }
    )


def _forge_registry(cfg: KafkaConfig, graph: str, doc: Any) -> None:
    _produce(_raw(cfg), cfg.placements_topic, 0, graph.encode(), json.dumps(doc).encode())


def _cli(cfg: KafkaConfig, graph: str, *args: str) -> subprocess.CompletedProcess[str]:
    base = ["--bootstrap", cfg.bootstrap, "--prefix", cfg.prefix, "--graph", graph]
    return subprocess.run(
        [sys.executable, "-m", "claimgraph", *base, *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_producer_s_place_is_a_recorded_rejection(kafka_broker: Any) -> None:
    """kcat's forgery: ``place refunds → 3`` as rogue-agent, then rogue-agent's schema for
    refunds there: both rejected (not_operator, misrouted), in the one bucket; refunds gets no
    state on partition 3."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=4, graphs=())
    raw = _raw(cfg)
    placed = _produce(raw, cfg.commands_topic, 3, b"refunds", _place("refunds", 3, ROGUE))
    schema = _produce(raw, cfg.commands_topic, 3, b"refunds", _schema("refunds", ROGUE))
    decisions = Decisions(cfg, 3)
    with governor_thread(cfg, 3) as gov:
        decisions.until({placed, schema})
        [(key, d, _)] = decisions.by_input[placed]
        assert (key, d["kind"], d["reason"], d["rules"]) == (
            UNPLACED.encode(),
            "rejected",
            "not_operator",
            6,
        )
        assert ROGUE in d["detail"] and cfg.operator in d["detail"]
        [(key, d, _)] = decisions.by_input[schema]
        assert (key, d["reason"]) == (UNPLACED.encode(), "misrouted")
        assert "refunds" not in gov.states
    decisions.close()
    assert verify_partition(cfg, 3) == (2, 2)


def test_a_forged_registry_record_stops_writers_projectors_and_verify(
    kafka_broker: Any, tmp_path: Path
) -> None:
    """refunds is placed on 0 by the operator; one forged registry record (refunds → 3, at
    rogue-agent's rejected place, or with no place_offset) does not move the writer: it stops
    with a named error, as do a new projector and ``verify``; nothing reached partition 3."""
    cfg = KafkaConfig(kafka_broker.bootstrap, prefix=f"t{uuid.uuid4().hex[:10]}", partitions=4)
    init_topics(cfg)
    r = _cli(cfg, "refunds", "kafka", "place", "--partition", "0")
    assert r.returncode == 0, r.stderr
    rogue = _produce(_raw(cfg), cfg.commands_topic, 3, b"refunds", _place("refunds", 3, ROGUE))
    with governor_thread(cfg, 0), governor_thread(cfg, 3):
        with KafkaGraph(cfg, "refunds") as g:  # the genuine placement verifies and writes
            assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
        Decisions(cfg, 3).until({rogue})
        for forged in ({"partition": 3, "place_offset": rogue}, {"partition": 3}):
            _forge_registry(cfg, "refunds", forged)
            assert read_registry(cfg).placements["refunds"] == 3
            with KafkaGraph(cfg, "refunds") as g, pytest.raises(IntegrityError, match="refused"):
                g.publish_schema(SCHEMA, agent="admin")
            proj = KafkaProjector(cfg, "refunds", tmp_path / f"p{len(forged)}")
            try:
                with pytest.raises(IntegrityError, match="refused"):
                    proj.step(timeout=5)
                assert proj.applied == -1  # nothing projected from the forged placement
            finally:
                proj.close()
            v = _cli(cfg, "refunds", "verify")
            assert v.returncode == 7 and "refused" in v.stderr, v.stdout + v.stderr
    status = _cli(cfg, "refunds", "kafka", "status", "--json")
    assert json.loads(status.stdout)["graphs"]["refunds"]["status"] == "refused", status.stderr
    # the operator puts it right: kafka place on the partition the log holds it on
    r = _cli(cfg, "refunds", "kafka", "place", "--partition", "0")
    assert r.returncode == 0, r.stderr
    with governor_thread(cfg, 0), KafkaGraph(cfg, "refunds") as g:
        assert g.partition == 0
        assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
    assert verify_partition(cfg, 0, graph="refunds")[0] >= 3
    with pytest.raises(IntegrityError, match="no accepted placement"):
        verify_partition(cfg, 3, graph="refunds")


def test_a_projector_never_resumes_on_another_partition(kafka_broker: Any, tmp_path: Path) -> None:
    """Even a placement the log confirms (forged with both the operator's name on a commands
    partition and a registry record, which only the operator's ACLs allow) does not move a
    projection: restarted, the projector refuses the other partition."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=2, graphs=())
    r = _cli(cfg, "refunds", "kafka", "place", "--partition", "0")
    assert r.returncode == 0, r.stderr
    data = tmp_path / "refunds"
    with governor_thread(cfg, 0), governor_thread(cfg, 1):
        with KafkaGraph(cfg, "refunds") as g:
            g.publish_schema(SCHEMA, agent="admin")
        proj = KafkaProjector(cfg, "refunds", data)
        try:
            assert project_all(proj, cfg) >= 0
        finally:
            proj.close()
        assert json.loads((data / "graph.json").read_text())["partition"] == 0
        other = _produce(
            _raw(cfg), cfg.commands_topic, 1, b"refunds", _place("refunds", 1, cfg.operator)
        )
        Decisions(cfg, 1).until({other})
        _forge_registry(cfg, "refunds", {"partition": 1, "place_offset": other})
        with pytest.raises(IntegrityError, match="never resumes on another partition"):
            KafkaProjector(cfg, "refunds", data)


def _footprint(state: Any) -> int:
    """How many entries a graph state holds: the lengths of all its containers."""
    return sum(len(v) for v in vars(state).values() if isinstance(v, (dict, list, set, tuple)))


def test_distinct_junk_keys_leave_no_per_key_state(kafka_broker: Any) -> None:
    """100,000 records with distinct keys (as kcat sent them): every one is rejected in the
    one bucket, the governor keeps two states (the graph and the bucket) whose size does not
    grow with the keys, before and after a restart. (Before revision 6 each key became a graph
    state: ~260 MB for the same records. The size is counted in the state's own containers,
    not as the test process's RSS, which every earlier test of the session moves; the memory
    figure itself is a benchmark's.)"""
    n = 100_000
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1, graphs=("test",))
    raw = Producer(cfg.client(**{"linger.ms": 20, "batch.num.messages": 10000}))
    value = encode_command(
        {
            "type": "retract",
            "command_id": "junk",
            "graph": "junk",
            "agent": "a",
            "task": "",
            "claim_id": "x",
            "reason": "",
        }
    )
    gov = KafkaGovernor(cfg, 0, batch_size=5000)
    gov.start()
    rounds, sizes = 4, []
    try:
        decide_all(gov, cfg)  # the place record
        for r in range(rounds):  # the first round warms the clients' buffers
            for i in range(r * n // rounds, (r + 1) * n // rounds):
                while True:
                    try:
                        raw.produce(
                            cfg.commands_topic, key=b"junk-%d" % i, value=value, partition=0
                        )
                        break
                    except BufferError:
                        raw.poll(0.1)
            assert raw.flush(60) == 0
            assert decide_all(gov, cfg) == n // rounds
            sizes.append({g: _footprint(st) for g, st in gov.states.items()})
        assert set(gov.states) == {"test", UNPLACED}
        bucket = gov.states[UNPLACED]
        assert bucket.decisions == n and bucket.other_commands == set()
        assert bucket.offsets is None and not bucket.claims
        assert sizes[0] == sizes[-1], f"the states grew with the keys: {sizes}"
    finally:
        gov.close()
    again = KafkaGovernor(cfg, 0)
    again.start()
    try:
        assert set(again.states) == {"test", UNPLACED}
        assert again.states[UNPLACED].other_commands == set()
    finally:
        again.close()


def test_status_and_init_handle_a_half_grown_layout(kafka_broker: Any) -> None:
    """Only the commands topic grown (by hand): ``kafka status`` exits 0 and names the
    problem (text and --json), ``kafka init`` finishes the grow; a malformed layout record is
    a named ConfigError for writers and governors, and init writes it again."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=2, graphs=("g",))
    admin = AdminClient(cfg.client())
    for fut in admin.create_partitions([NewPartitions(cfg.commands_topic, 3)]).values():
        fut.result(30)
    s = _cli(cfg, "g", "kafka", "status", "--json")
    assert s.returncode == 0, s.stderr
    doc = json.loads(s.stdout)
    assert [r["decisions_end"] for r in doc["partitions"]][2] is None
    assert "half grown" in doc["problems"][0]
    assert doc["graphs"]["g"]["status"] in ("pending", "operator")
    t = _cli(cfg, "g", "kafka", "status")
    assert t.returncode == 0 and "half grown" in t.stdout, t.stdout + t.stderr
    i = _cli(cfg, "g", "kafka", "init", "--partitions", "2")
    assert i.returncode == 0, i.stderr
    assert "finishing a half-grown layout" in i.stdout + i.stderr
    s = _cli(cfg, "g", "kafka", "status", "--json")
    assert s.returncode == 0 and json.loads(s.stdout)["problems"] == [], s.stdout + s.stderr
    _produce(_raw(cfg), cfg.placements_topic, 0, LAYOUT_KEY, b'{"written_by": "kcat"}')
    with pytest.raises(ConfigError, match=r"layout record .* is malformed"):
        KafkaGraph(cfg, "g")
    with pytest.raises(ConfigError, match="malformed"):
        KafkaGovernor(cfg, 0).start()
    s = _cli(cfg, "g", "kafka", "status")
    assert s.returncode == 2 and "malformed" in s.stderr, s.stderr
    assert _cli(cfg, "g", "kafka", "init", "--partitions", "2").returncode == 0
    with governor_thread(cfg, 0), KafkaGraph(cfg, "g") as g:
        assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
