"""Tested ACLs (issue 29): every process as its own SASL user, with exactly the grants of its
role in :mod:`claimgraph.logs.kafka_acls`, on a broker that authorizes (the standard
authorizer, no ACL means no access).

The operator inits and places, a governor decides, a projector projects, the CLI writer writes
and reads, ``kafka status`` describes it all. An agent user that may write only the commands
topic gets a recorded ``not_operator`` rejection for its ``place`` and is refused the registry
topic by the broker itself. The how-to's ACL table is the one applied here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

import claimgraph
from claimgraph.core.wire import encode_command
from claimgraph.logs.kafka import KafkaConfig
from claimgraph.logs.kafka_acls import (
    ROLES,
    bindings,
    grants,
    kafka_acls_commands,
    markdown_table,
)
from tests.conftest import ROOT
from tests.kafka_fixtures import ACL_USERS
from tests.kafka_helpers import Decisions, free_port, wait_projected

if TYPE_CHECKING:
    from kafka_broker import KafkaBroker

GRAPH = "platform"
INVENTORY = "schemas/graphs/inventory.yaml"
HOWTO = ROOT / "docs" / "how-to" / "kafka.md"


def _env(broker: KafkaBroker, prefix: str, role: str) -> dict[str, str]:
    user, password = ACL_USERS[role]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMGRAPH_")}
    return dict(
        env,
        PYTHONPATH=str(ROOT),
        COLUMNS="200",
        CLAIMGRAPH_BOOTSTRAP=broker.bootstrap,
        CLAIMGRAPH_PREFIX=prefix,
        CLAIMGRAPH_GRAPH=GRAPH,
        CLAIMGRAPH_KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT",
        CLAIMGRAPH_KAFKA_SASL_MECHANISM="PLAIN",
        CLAIMGRAPH_KAFKA_SASL_USERNAME=user,
        CLAIMGRAPH_KAFKA_SASL_PASSWORD=password,
    )


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claimgraph", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


@contextmanager
def _process(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "claimgraph", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _key(b: Any) -> tuple[Any, ...]:
    return (
        b.restype.name,
        b.name,
        b.resource_pattern_type.name,
        b.principal,
        b.host,
        b.operation.name,
        b.permission_type.name,
    )


def _apply_acls(broker: KafkaBroker, prefix: str) -> AdminClient:
    """Create every role's bindings (as the super user) and wait until the broker's
    authorizer lists them all: observed, not waited for."""
    admin = AdminClient(broker.client_config())
    wanted = [b for role in ROLES for b in bindings(f"User:{ACL_USERS[role][0]}", role, prefix)]
    for fut in admin.create_acls(wanted, request_timeout=30).values():
        fut.result(timeout=60)
    want = {_key(b) for b in wanted}
    match_all = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    deadline = time.monotonic() + 60
    while True:
        have = {_key(b) for b in admin.describe_acls(match_all, request_timeout=30).result(60)}
        if want <= have:
            return admin
        assert time.monotonic() < deadline, f"ACLs never listed: {sorted(want - have)[:3]}"
        time.sleep(0.1)


def _client(broker: KafkaBroker, role: str, prefix: str) -> KafkaConfig:
    user, password = ACL_USERS[role]
    extra = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }
    return KafkaConfig(broker.bootstrap, prefix=prefix, partitions=1, extra=extra)


def _produce(cfg: KafkaConfig, topic: str, key: bytes, value: bytes) -> KafkaError | int:
    """A raw record (as kcat would write it): its offset, or the broker's error."""
    got: list[Any] = []
    p = Producer(cfg.client(acks="all", **{"message.timeout.ms": 30000}))
    p.produce(topic, key=key, value=value, partition=0, on_delivery=lambda e, m: got.append(e or m))
    p.flush(60)
    assert len(got) == 1, got
    return got[0] if isinstance(got[0], KafkaError) else int(got[0].offset())


def test_each_process_works_with_exactly_its_role_s_acls(
    kafka_sasl_broker: KafkaBroker, tmp_path: Path
) -> None:
    """init and place as the operator, the governor, projector and CLI writer each as their
    own user, a read; the agent's place is a recorded not_operator rejection, and the
    registry topic refuses it (and the writer) outright."""
    broker = kafka_sasl_broker
    prefix = f"acl{uuid.uuid4().hex[:8]}"
    env = {role: _env(broker, prefix, role) for role in ROLES}
    # before any ACL, the operator may not even create the topics: the grants below are
    # what lets each process work
    r = _cli(["kafka", "init", "--partitions", "1"], env["operator"])
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    _apply_acls(broker, prefix)

    _ok(_cli(["kafka", "init", "--partitions", "1"], env["operator"]))
    _ok(_cli(["kafka", "place"], env["operator"]))
    proj = tmp_path / "proj"
    with (
        _process(["governor"], env["governor"], tmp_path / "governor.log") as gov,
        _process(
            ["--data", str(proj), "projector"], env["projector"], tmp_path / "projector.log"
        ) as pj,
    ):
        w = env["writer"]
        assert "ACCEPTED" in _ok(
            _cli(["schema", "apply", INVENTORY, "--agent", "platform-admin"], w)
        )
        out = _ok(
            _cli(
                ["assert", "deployment_target", "service:checkout", "environment:prod",
                 "--agent", "release-agent", "--task", "promote-release", "--json"],
                w,
            )
        )  # fmt: skip
        version = json.loads(out)["version"]
        wait_projected(proj, version, w)
        got = _cli(
            ["--data", str(proj), "get", "deployment_target", "service:checkout",
             "environment:prod", "--at", str(version), "--json"],
            w,
        )  # fmt: skip
        assert json.loads(_ok(got))["state"] == "present"
        # serve, as the writer: its lease group, its writes and reads over HTTP
        port = free_port()
        log = tmp_path / "serve.log"
        with _process(
            ["--data", str(proj), "serve", "--port", str(port), "--tick", "3600"], w, log
        ) as api:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 180
            while True:
                assert api.poll() is None, log.read_text()
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)  # polling an HTTP server coming up, not a timing guess
            doc = json.loads((proj / "tokens.json").read_text())
            token = next(e for e in doc["tokens"] if "admin" in e.get("roles", []))
            with claimgraph.connect(url, token=token["token"]) as c:
                g = c.grant("release-bot", "deployment_target", agent=token["agent"])
                assert (g.kind, g.reason) == ("accepted", "granted"), g
                edge = c.edge(
                    "deployment_target", "service:checkout", "environment:prod", at=version
                )
                assert edge.state == "present"
            assert api.poll() is None, log.read_text()

        status = json.loads(_ok(_cli(["kafka", "status", "--json"], env["operator"])))
        assert status["graphs"][GRAPH]["status"] == "operator", status
        [row] = status["partitions"]
        assert row["governors_alive"], status

        # the agent: its place of the graph is decided, and rejected, in the graph's history
        agent = _client(broker, "agent", prefix)
        place = encode_command(
            {
                "type": "place",
                "command_id": f"agent-{uuid.uuid4().hex}",
                "graph": GRAPH,
                "agent": "rogue-agent",
                "task": "place",
                "partition": 0,
            }
        )
        at = _produce(agent, agent.commands_topic, GRAPH.encode(), place)
        assert isinstance(at, int), at
        decisions = Decisions(KafkaConfig(broker.bootstrap, prefix=prefix, extra=_admin(broker)), 0)
        decisions.until({at})
        [(_, d, _)] = decisions.by_input[at]
        decisions.close()
        assert (d["kind"], d["reason"]) == ("rejected", "not_operator"), d
        # ... and the registry is not its to write, nor the writer's: the broker refuses it
        forged = json.dumps({"partition": 0, "place_offset": at}).encode()
        for who in ("agent", "writer"):
            cfg = _client(broker, who, prefix)
            err = _produce(cfg, cfg.placements_topic, GRAPH.encode(), forged)
            assert isinstance(err, KafkaError), (who, err)
            assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (who, err)
        # nor may the agent write decisions, or read anything back
        err = _produce(agent, agent.decisions_topic, GRAPH.encode(), b"{}")
        assert isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert gov.poll() is None, (tmp_path / "governor.log").read_text()
        assert pj.poll() is None, (tmp_path / "projector.log").read_text()


def _admin(broker: KafkaBroker) -> dict[str, str]:
    conf = broker.client_config()
    conf.pop("bootstrap.servers")
    return conf


def test_the_howto_carries_the_table_the_test_applies() -> None:
    """docs/how-to/kafka.md's ACL table is markdown_table(), line for line."""
    text = HOWTO.read_text()
    table = markdown_table()
    assert table in text, (
        "regenerate the table: python -c 'from claimgraph.logs.kafka_acls "
        "import markdown_table; print(markdown_table())'"
    )
    # one table, not a stale copy beside it
    assert len(re.findall(r"^\| role \| resource \|", text, re.MULTILINE)) == 1


def test_every_role_has_grants_and_the_agent_only_writes_commands() -> None:
    """The agent's grants are one: Write on the commands topic; only the operator touches
    the registry for writing."""
    assert [(g.resource, g.name, g.operations) for g in grants("agent", "p")] == [
        ("topic", "p.commands", ("WRITE",))
    ]
    for role in ROLES:
        assert grants(role), role
        writes_registry = any(
            g.resource == "topic"
            and (g.name == "p.placements" or (g.pattern == "prefixed" and g.name == "p."))
            and {"WRITE", "ALL"} & set(g.operations)
            for g in grants(role, "p")
        )
        assert writes_registry == (role == "operator"), role
    with pytest.raises(ValueError, match="no role 'root'"):
        grants("root")


def test_kafka_acls_prints_kafka_acls_sh_commands(tmp_path: Path) -> None:
    """``claimgraph kafka acls --role writer --principal User:alice`` prints one kafka-acls.sh
    line per grant, for the deployment's prefix; no broker is asked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMGRAPH_")}
    env = dict(env, PYTHONPATH=str(ROOT), CLAIMGRAPH_BOOTSTRAP="127.0.0.1:1")
    r = _cli(
        ["--prefix", "acme", "kafka", "acls", "--role", "writer", "--principal", "User:alice"],
        env,
    )
    lines = _ok(r).splitlines()
    assert lines == kafka_acls_commands("User:alice", "writer", "acme", "127.0.0.1:1")
    assert "--topic acme.commands --resource-pattern-type literal" in lines[0]
    assert all("--allow-principal User:alice" in line for line in lines)
    r = _cli(["kafka", "acls", "--role", "root", "--principal", "User:x"], env)
    assert r.returncode == 2 and "no role 'root'" in r.stderr, r.stderr
