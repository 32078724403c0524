"""One contract for the log port, run against the embedded RocksDB log and a real Kafka topic."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from claimgraph.logs.base import Log
from claimgraph.logs.embedded import EmbeddedLogStore


@pytest.fixture(params=["embedded", "kafka"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Log]:
    """A fresh, empty log of each implementation."""
    if request.param == "embedded":
        store = EmbeddedLogStore(tmp_path / "log", create=True)
        yield store.commands
        store.close()
        return
    broker: Any = request.getfixturevalue("kafka_broker")
    from claimgraph.logs.kafka import KafkaConfig, KafkaLog
    from claimgraph.logs.kafka_layout import init_topics

    cfg = KafkaConfig(broker.bootstrap, prefix=f"contract-{uuid.uuid4().hex[:8]}", partitions=1)
    init_topics(cfg)
    klog = KafkaLog(cfg, cfg.commands_topic, 0, key="g")
    yield klog
    klog.close()


def test_append_returns_increasing_offsets(log: Log) -> None:
    """Offsets of appended records strictly increase, within and across appends."""
    a = log.append([b"a", b"b", b"c"])
    b = log.append([b"d"])
    offsets = a + b
    assert offsets == sorted(offsets) and len(set(offsets)) == 4


def test_read_returns_what_was_appended_in_order(log: Log) -> None:
    """read(start) gives the records from start on, values intact, timestamps set."""
    values = [f"record-{i}".encode() for i in range(25)] + [b"", b"\x00\xff" * 100]
    offsets = log.append(values)
    got = log.read(offsets[0], 1000)
    assert [r.value for r in got] == values
    assert [r.offset for r in got] == offsets
    assert all(r.timestamp > 0 for r in got)
    assert [r.timestamp for r in got] == sorted(r.timestamp for r in got)


def test_read_from_the_middle_and_with_a_limit(log: Log) -> None:
    """read honours start and limit without assuming dense offsets."""
    offsets = log.append([bytes([i]) for i in range(10)])
    mid = log.read(offsets[4], 3)
    assert [r.offset for r in mid] == offsets[4:7]
    assert [r.value for r in mid] == [bytes([4]), bytes([5]), bytes([6])]


def test_end_is_past_the_last_record(log: Log) -> None:
    """end() is beyond every written offset; reading from it yields nothing."""
    assert log.end() == 0
    offsets = log.append([b"x", b"y"])
    assert log.end() > offsets[-1]
    assert log.read(log.end(), 10) == []
