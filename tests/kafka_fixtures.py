"""Pytest fixtures that run a real Apache Kafka (KRaft) broker from ``tools/kafka_broker.py``.

Register them once, in ``tests/conftest.py``::

    pytest_plugins = ["tests.kafka_fixtures"]

* ``kafka_broker`` (session): one broker+controller node, replication factor 1, started once in
  a temporary directory (its ``server.log`` is there) and stopped at the end of the session.
* ``kafka_sasl_broker`` (session): the same, with its client listener asking SASL_PLAINTEXT /
  PLAIN credentials (``SASL_USER``, ``SASL_PASSWORD``) and authorizing them: the standard
  authorizer, no ACL means no access, ``SASL_USER`` (and ``User:ANONYMOUS``, the plaintext
  internal and controller listeners) super users. ``ACL_USERS`` has one more user per role of
  :mod:`claimgraph.logs.kafka_acls`, with no ACL until a test creates them.
  ``kafka_tls_broker``: SASL_SSL, TLS with a development CA (``.ca_path``), no authorizer.
* ``kafka_cluster`` (per test, over one session-wide cluster): three nodes, each broker and
  controller voter, replication factor 3 and ``min.insync.replicas=2``. A test may stop, kill
  or restart nodes; before the next test every node is running again and every partition is
  fully in sync.

When the broker cannot be started (no Java, no Maven to fetch the jars, no confluent-kafka, or
it does not come up), tests that use these fixtures are skipped with the reason, except when
the environment variable ``CI`` is set (``CI=true``): then they fail, so CI never passes with
the Kafka suite silently skipped. Tests that use them are marked ``kafka`` automatically, so
``pytest -m "not kafka"`` leaves them out.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from kafka_broker import KafkaBroker, KafkaCluster

__all__ = [
    "ACL_USERS",
    "AUTHORIZER",
    "KAFKA_FIXTURES",
    "KAFKA_GROUPS",
    "in_ci",
    "kafka_broker",
    "kafka_cluster",
    "kafka_cluster_session",
    "kafka_sasl_broker",
    "kafka_tls_broker",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
]

TOOLS = Path(__file__).resolve().parent.parent / "tools"
KAFKA_FIXTURES = frozenset(
    {
        "kafka_broker",
        "kafka_cluster",
        "kafka_cluster_session",
        "kafka_sasl_broker",
        "kafka_tls_broker",
    }
)
SASL_USER, SASL_PASSWORD = "claimgraph", "claimgraph-secret"
# role → (user, password): SASL users of the authorizing broker with no ACL of their own
ACL_USERS = {
    role: (f"cg-{role}", f"{role}-secret")
    for role in ("operator", "governor", "projector", "writer", "agent")
}
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "false",
    # the admin user; ANONYMOUS is whoever uses the plaintext INTERNAL and CONTROLLER
    # listeners: the broker itself and the tool's readiness checks
    "super.users": f"User:{SASL_USER};User:ANONYMOUS",
}


def _tool() -> ModuleType:
    """tools/kafka_broker.py (not a package), imported once under the name ``kafka_broker``."""
    mod = sys.modules.get("kafka_broker")
    if mod is not None:
        return mod
    spec = importlib.util.spec_from_file_location("kafka_broker", TOOLS / "kafka_broker.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kafka_broker"] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules["kafka_broker"]
        raise
    return mod


def in_ci() -> bool:
    """True when ``CI`` is set to anything but an explicit no (``""``, ``0``, ``false``, ``no``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _unavailable(what: str, exc: BaseException) -> NoReturn:
    reason = f"{what} could not be started: {exc}"
    if in_ci():
        pytest.fail(f"{reason}\n(CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason.splitlines()[0])


# xdist_group of a test by the brokers it uses: each set of brokers is started once, on the
# one worker that runs its group (the first fixture of this order that a test uses names it)
KAFKA_GROUPS = (
    ("kafka_cluster", "kafka-cluster"),
    ("kafka_cluster_session", "kafka-cluster"),
    ("kafka_sasl_broker", "kafka-secure"),
    ("kafka_tls_broker", "kafka-secure"),
    ("kafka_broker", "kafka"),
)


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a Kafka fixture with ``kafka`` and an ``xdist_group``.

    Under pytest-xdist (``make test`` runs ``-n TEST_WORKERS --dist loadgroup``) a group runs
    on one worker, so each set of brokers (the single node, the SASL and TLS nodes, the
    three-node cluster) is started once in the session, not once per worker: on two cores each
    worker's JVMs would cost more than the parallel run saves, and a test that restarts, kills
    or stops a broker never pulls it from under another worker's test. The three groups run
    beside each other and beside the rest; xdist hands out the largest groups first, so no
    long group starts last and becomes the run's tail.
    """
    for item in items:
        used = KAFKA_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if used:
            item.add_marker(pytest.mark.kafka)
            group = next(name for fixture, name in KAFKA_GROUPS if fixture in used)
            item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``--dist loadgroup``, fail the run if xdist did not take the groups.

    xdist sends a group to one worker by a ``@group`` suffix it writes into each node id; a
    pytest that ignores the write (pytest-xdist#1386) spreads the Kafka tests over every
    worker with no error, each starting its own brokers: slower, and a broker-restarting test
    would no longer be the only test on its brokers.
    """
    if not getattr(session.config.option, "loadgroup", False):  # set on xdist workers only
        return
    for item in session.items:
        if item.get_closest_marker("xdist_group") is not None and "@" not in item.nodeid:
            raise pytest.UsageError(
                f"pytest-xdist did not group {item.nodeid} (--dist loadgroup): this pytest "
                f"({pytest.__version__}) ignores xdist's group suffix (pytest-xdist#1386); "
                "install the versions pyproject.toml pins (make install)"
            )


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One running single-node Kafka broker for the whole session (``.bootstrap``)."""
    kb = _tool()
    try:
        broker: KafkaBroker = kb.KafkaBroker(tmp_path_factory.mktemp("kafka-broker"))
        broker.start()
    except kb.BrokerError as exc:
        _unavailable("the Kafka broker", exc)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A single-node broker whose client listener asks SASL_PLAINTEXT / PLAIN credentials
    (``SASL_USER`` / ``SASL_PASSWORD``, a super user; ``.client_config(user)`` gives a
    client's properties) and authorizes them with ACLs (``ACL_USERS``, ``AUTHORIZER``)."""
    kb = _tool()
    try:
        broker: KafkaBroker = kb.KafkaBroker(
            tmp_path_factory.mktemp("kafka-sasl"),
            sasl_users={SASL_USER: SASL_PASSWORD, **dict(ACL_USERS.values())},
            properties=AUTHORIZER,
        )
        broker.start()
    except kb.BrokerError as exc:
        _unavailable("the SASL Kafka broker", exc)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A single-node broker whose client listener is SASL_SSL: TLS with a development CA
    (``.ca_path``) and SASL/PLAIN (``SASL_USER`` / ``SASL_PASSWORD``)."""
    kb = _tool()
    try:
        broker: KafkaBroker = kb.KafkaBroker(
            tmp_path_factory.mktemp("kafka-tls"),
            sasl_users={SASL_USER: SASL_PASSWORD},
            tls=True,
        )
        broker.start()
    except kb.BrokerError as exc:
        _unavailable("the TLS Kafka broker", exc)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_cluster_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A three-node Kafka cluster for the whole session; use ``kafka_cluster`` in tests."""
    kb = _tool()
    try:
        cluster: KafkaCluster = kb.KafkaCluster(tmp_path_factory.mktemp("kafka-cluster"))
        cluster.start()
    except kb.BrokerError as exc:
        _unavailable("the three-node Kafka cluster", exc)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kafka_cluster(kafka_cluster_session: KafkaCluster) -> KafkaCluster:
    """The session's three-node cluster, every node running and every partition in sync."""
    kafka_cluster_session.start()  # restarts the nodes a previous test stopped or killed
    kafka_cluster_session.wait_fully_replicated()
    return kafka_cluster_session
