"""Shared fixtures: a graph schema covering every cardinality and policy, and fresh graphs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import claimgraph
from claimgraph.service.graph import Graph

ROOT = Path(__file__).resolve().parent.parent

# a real Kafka broker (KRaft) for the Kafka suite; the HTTP app and the SDK's two transports
pytest_plugins = ["tests.kafka_fixtures", "tests.http_fixtures"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (long soaks) run only with ``SLOW=1`` (``make soak``, which CI runs
    after ``make test``)."""
    if os.environ.get("SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="a long soak: make soak runs it (CI does)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


SCHEMA = """
principals:
  admins: [admin]
  resolvers: [reviewer]
node_types: [service, database, environment, team]
edge_types:
  - name: owns            # a database has one owning service
    subject: service
    object: database
    writers: [{agent: inventory, task: "*"}, {agent: dba, task: "audit-*"}]
    cardinality: one-to-many
    conflict_policy: quarantine
    on_stale: quarantine
  - name: runs_in         # a service runs in one environment
    subject: service
    object: environment
    writers: [{agent: "release*", task: promote}]
    cardinality: many-to-one
    conflict_policy: last-write-wins-with-timestamp
    on_stale: reject
  - name: lead_of         # one team leads one service, and vice versa
    subject: team
    object: service
    writers: [{agent: "*", task: org}]
    cardinality: one-to-one
    conflict_policy: quarantine
    on_stale: accept
  - name: depends_on
    subject: service
    object: service
    writers: [{agent: inventory}, {agent: tracer}]
    cardinality: many-to-many
    conflict_policy: quarantine
  - name: calls
    subject: service
    object: service
    writers: [{agent: inventory}, {agent: tracer}]
    cardinality: many-to-many
    conflict_policy: last-write-wins-with-timestamp
  - name: scored
    subject: service
    object: team
    writers: [{agent: "*"}]
    cardinality: many-to-one
    conflict_policy: confidence-weighted-merge
    merge: {margin: 0.2}
"""


@pytest.fixture
def graph(tmp_path: Path) -> Iterator[Graph]:
    """A fresh embedded graph with SCHEMA published by the admin (version 0)."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    r = g.publish_schema(SCHEMA, agent="admin", source="conftest")
    assert r.kind == "accepted", r.decision
    yield g
    g.close()


@pytest.fixture
def empty_graph(tmp_path: Path) -> Iterator[Graph]:
    """A fresh embedded graph with no schema."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    yield g
    g.close()
