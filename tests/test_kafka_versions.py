"""Versions over time on the Kafka runtime, against a real broker: projector and governor restart
from checkpoints plus the partition's tail; a restored projection equals a re-projection; GC of
a Kafka projection keeps the audit passing."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from claimgraph.core.wire import encode_command
from claimgraph.logs.kafka import KafkaConfig
from claimgraph.projections.checkpoints import pick, restore_checkpoint
from claimgraph.projections.reader import ProjectionReader
from claimgraph.projections.retention import PinRegistry, gc_projection
from claimgraph.service.audit import compare_with_reprojection, digest_at
from claimgraph.service.kafka_graph import KafkaGraph
from claimgraph.streams.kafka import KafkaGovernor, verify_partition
from claimgraph.streams.kafka_projector import KafkaProjector
from tests.conftest import SCHEMA
from tests.kafka_helpers import decide_all, fresh_config, project_all

T0 = 1_800_000_000_000


def _claim(command_id: str, agent: str, task: str, edge: str, i: int) -> bytes:
    edge_type, s_type, s_id, o_type, o_id = edge.split()
    return encode_command(
        {
            "type": "claim",
            "command_id": command_id,
            "graph": "test",
            "agent": agent,
            "task": task,
            "run_id": None,
            "edge_type": edge_type,
            "subject_type": s_type,
            "subject_id": s_id,
            "object_type": o_type,
            "object_id": o_id,
            "polarity": "assert",
            "confidence": 0.9,
            "evidence": [f"e{i}"],
            "reasoning": "r",
            "asserted_at": T0 + i,
            "based_on_version": None,
            "properties": {"i": str(i)},
        }
    )


def _commands(start: int, n: int) -> list[bytes]:
    """Claims that supersede, conflict and corroborate, with fixed ids and event times."""
    out = []
    for i in range(start, start + n):
        edge = f"runs_in service s{i % 5} environment e{i % 3}"
        out.append(_claim(f"r{i}", "release", "promote", edge, i))
        out.append(_claim(f"o{i}", "inventory", "", f"owns service s{i % 4} database d{i % 6}", i))
    return out


def _schema() -> bytes:
    cmd: Any = {"type": "publish_schema", "command_id": "schema", "graph": "test"}
    return encode_command(cmd | {"agent": "admin", "task": "", "document": SCHEMA, "source": "t"})


def _decide_all(cfg: KafkaConfig, **kw: Any) -> KafkaGovernor:
    gov = KafkaGovernor(cfg, 0, batch_size=25, **kw)
    gov.start()
    decide_all(gov, cfg)
    return gov


def _digest(path: Path, at: int) -> str:
    from rocksdict import Options, Rdict

    db = Rdict(str(path / "projection"), Options(raw_mode=True))
    try:
        return digest_at(ProjectionReader(db), at)
    finally:
        db.close()


def test_projector_restarts_from_checkpoint_and_restore_matches(
    kafka_broker: Any, tmp_path: Path
) -> None:
    """Projector restart from checkpoint + tail, and restore of a lost projection, both give the
    digest of a full re-projection."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    g = KafkaGraph(cfg, "test")
    g.commands.append([_schema(), *_commands(0, 40)])
    _decide_all(cfg).close()
    path = tmp_path / "p"
    proj = KafkaProjector(cfg, "test", path)
    project_all(proj, cfg)
    info = proj.checkpoint()
    proj.close()
    g.commands.append(_commands(40, 30))
    _decide_all(cfg).close()

    proj = KafkaProjector(cfg, "test", path)
    assert proj.resumed_from == info.version  # not a replay from offset 0
    project_all(proj, cfg)
    head = proj.applied
    assert head > info.version and proj.decisions == 60  # folded only the tail
    proj.close()
    rows, compared = compare_with_reprojection(cfg, "test", path)
    assert compared == head and rows > 0

    full = KafkaProjector(cfg, "test", tmp_path / "full", use_checkpoints=False)
    project_all(full, cfg)
    full.close()
    want = _digest(tmp_path / "full", head)
    assert _digest(path, head) == want

    shutil.rmtree(path / "projection")  # the projection is lost; its checkpoints are not
    restore_checkpoint(pick(path / "checkpoints"), path / "projection")
    proj = KafkaProjector(cfg, "test", path)
    assert proj.applied == info.version and proj.resumed_from == info.version
    project_all(proj, cfg)
    proj.close()
    assert _digest(path, head) == want
    g.close()


def test_governor_restarts_from_its_snapshot(kafka_broker: Any, tmp_path: Path) -> None:
    """A governor with checkpoints folds only the tail after its snapshot on restart, and its
    decisions still equal a replay of the whole commands partition."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    g = KafkaGraph(cfg, "test")
    g.commands.append([_schema(), *_commands(0, 30)])
    gov = _decide_all(cfg, checkpoints=tmp_path / "gov", checkpoint_every=20)
    gov.close()
    assert list((tmp_path / "gov").glob("governor-p0-*.cgstates"))
    g.commands.append(_commands(30, 20))
    gov = KafkaGovernor(cfg, 0, checkpoints=tmp_path / "gov")
    gov.start()
    assert gov.resumed_from is not None
    assert gov.states["test"].decisions == 62  # snapshot + tail = place + every decision
    assert gov.run(max_commands=40) == 40
    gov.close()
    assert verify_partition(cfg, 0) == (102, 102)
    g.close()


def test_erase_on_kafka_scrubs_the_projection_and_the_log_reads(
    kafka_broker: Any, tmp_path: Path
) -> None:
    """The Kafka governor decides erase like the embedded one; the projector scrubs every row
    of the claim; log reads through the client are scrubbed; the audit still passes."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    g = KafkaGraph(cfg, "test")
    g.commands.append([_schema(), *_commands(0, 5)])
    erase: Any = {"type": "erase", "command_id": "e1", "graph": "test", "agent": "admin"}
    g.commands.append([encode_command(erase | {"task": "", "claim_id": "o2", "reason": "PR"})])
    _decide_all(cfg).close()
    proj = KafkaProjector(cfg, "test", tmp_path / "p")
    project_all(proj, cfg)
    proj.close()
    with KafkaGraph(cfg, "test", tmp_path / "p") as r:
        logged = r.decisions(0, 100)
        assert logged[-1][1]["reason"] == "erased"
        at = next(v for v, d in logged if d["command_id"] == "o2")  # before the erase
        row = r.claim_info("o2", at=at)
        assert row is not None and (row["evidence"], row["properties"]) == ([], {})
        assert [d["claim"]["evidence"] for _, d in logged if d["command_id"] == "o2"] == [[]]
        assert [d["claim"]["evidence"] for _, d in logged if d["command_id"] == "o1"] == [["e1"]]
    plain = KafkaGraph(cfg, "test")  # no projection: erasures are found in the log itself
    assert [d["claim"]["evidence"] for _, d in plain.decisions(0, 100) if d["claim"] and
            d["command_id"] == "o2"] == [[]]  # fmt: skip
    plain.close()
    rows, _ = compare_with_reprojection(cfg, "test", tmp_path / "p")
    assert rows > 0
    g.close()


def test_gc_of_a_kafka_projection_keeps_the_audit(kafka_broker: Any, tmp_path: Path) -> None:
    """A Kafka projection pruned to a horizon (held back by a pin until it is released) still
    equals a re-projection pruned the same."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    g = KafkaGraph(cfg, "test")
    g.commands.append([_schema(), *_commands(0, 30)])
    _decide_all(cfg).close()
    proj = KafkaProjector(cfg, "test", tmp_path / "p")
    project_all(proj, cfg)
    horizon = proj.applied // 2
    with KafkaGraph(cfg, "test", tmp_path / "p") as r:
        pin = r.pins.pin(horizon // 2, owner="run-1", lease=60)
    pins = PinRegistry(tmp_path / "p")
    rep = gc_projection(proj.store.db, pins, horizon)  # what `claimgraph gc` runs
    assert (rep.horizon, rep.held_by) == (horizon // 2, pin)
    assert pins.unpin(pin.pin_id)
    rep = gc_projection(proj.store.db, pins, horizon)
    assert rep.horizon == horizon and rep.deleted > 0 and rep.scanned > rep.deleted
    proj.close()
    rows, head = compare_with_reprojection(cfg, "test", tmp_path / "p")
    assert rows > 0 and head > horizon
    g.close()
