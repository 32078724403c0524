"""Kafka client configuration for every process, against brokers that ask SASL/PLAIN (and
TLS: SASL_SSL with a development CA).

The governor, the projector, the CLI and ``serve`` run as real processes on a listener that
refuses clients without credentials. Credentials come from a config file (``[kafka]``), from
``CLAIMGRAPH_KAFKA_*`` variables and from ``-X``; a wrong password is a clear configuration
error and an exit, never a client that retries forever.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

import claimgraph
from tests.conftest import ROOT
from tests.kafka_fixtures import SASL_PASSWORD, SASL_USER
from tests.kafka_helpers import free_port, wait_projected

if TYPE_CHECKING:
    from kafka_broker import KafkaBroker

GRAPH = "platform"
INVENTORY = "schemas/graphs/inventory.yaml"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMGRAPH_")}
    return dict(env, PYTHONPATH=str(ROOT), COLUMNS="200", **extra)


def _cli(
    args: list[str], env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claimgraph", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


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


def _setup(broker: KafkaBroker, tmp_path: Path) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A config file with the credentials, and an environment that carries them instead."""
    prefix = f"sasl{uuid.uuid4().hex[:8]}"
    config = tmp_path / "claimgraph.toml"
    config.write_text(
        f'bootstrap = "{broker.bootstrap}"\n'
        f'prefix = "{prefix}"\n'
        f'graph = "{GRAPH}"\n'
        "\n[kafka]\n"
        'security.protocol = "SASL_PLAINTEXT"\n'
        'sasl.mechanism = "PLAIN"\n'
        f'sasl.username = "{SASL_USER}"\n'
        f'sasl.password = "{SASL_PASSWORD}"\n'
    )
    from_file = _env(CLAIMGRAPH_CONFIG=str(config))
    from_env = _env(
        CLAIMGRAPH_BOOTSTRAP=broker.bootstrap,
        CLAIMGRAPH_PREFIX=prefix,
        CLAIMGRAPH_GRAPH=GRAPH,
        CLAIMGRAPH_KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT",
        CLAIMGRAPH_KAFKA_SASL_MECHANISM="PLAIN",
        CLAIMGRAPH_KAFKA_SASL_USERNAME=SASL_USER,
        CLAIMGRAPH_KAFKA_SASL_PASSWORD=SASL_PASSWORD,
    )
    return config, from_file, from_env


def _ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_every_process_authenticates_from_file_and_environment(
    kafka_sasl_broker: KafkaBroker, tmp_path: Path
) -> None:
    """init, place, governor, projector, writes, reads and serve all reach a SASL listener,
    some configured by the file, some by CLAIMGRAPH_KAFKA_* alone."""
    _, from_file, from_env = _setup(kafka_sasl_broker, tmp_path)
    # without credentials the listener does not serve this client: proof that the ones below
    # are what lets them in (a plaintext client gets no answer, so it is a StorageError)
    bare = _env(CLAIMGRAPH_BOOTSTRAP=kafka_sasl_broker.bootstrap)
    r = _cli(["kafka", "status"], bare)
    assert r.returncode == 8, r.stderr
    assert f"no Kafka broker answered at {kafka_sasl_broker.bootstrap}" in r.stderr

    _ok(_cli(["kafka", "init", "--partitions", "1"], from_env))
    _ok(_cli(["kafka", "place"], from_file))
    proj = tmp_path / "proj"
    with (
        _process(["governor"], from_file, tmp_path / "governor.log") as gov,
        _process(["--data", str(proj), "projector"], from_env, tmp_path / "projector.log") as pj,
    ):
        # a write through the CLI waits for its decision: the governor decided it
        out = _ok(_cli(["schema", "apply", INVENTORY, "--agent", "platform-admin"], from_file))
        assert "ACCEPTED" in out, out
        out = _ok(
            _cli(
                [
                    "assert",
                    "deployment_target",
                    "service:checkout",
                    "environment:prod",
                    "--agent",
                    "release-agent",
                    "--task",
                    "promote-release",
                    "--json",
                ],
                from_env,
            )
        )
        version = json.loads(out)["version"]
        wait_projected(proj, version, from_file)
        # the projector (credentials from the environment) projects it; the read waits for it
        got = _cli(
            ["--data", str(proj), "get", "deployment_target", "service:checkout",
             "environment:prod", "--at", str(version), "--wait", "60", "--json"],
            from_file,
        )  # fmt: skip
        assert json.loads(_ok(got))["state"] == "present"
        # serve --bootstrap, credentials from the file, reads and writes over HTTP
        port = free_port()
        with _process(
            ["--data", str(proj), "serve", "--port", str(port), "--tick", "3600"],
            from_file,
            tmp_path / "serve.log",
        ) as api:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 180
            while True:
                assert api.poll() is None, (tmp_path / "serve.log").read_text()
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
                time.sleep(0.1)
            doc = json.loads((proj / "tokens.json").read_text())  # plain JSON
            admin = next(e for e in doc["tokens"] if "admin" in e.get("roles", []))
            with claimgraph.connect(url, token=admin["token"]) as c:
                # serve made a token for the schema's admin: its grant is decided and recorded
                r = c.grant("release-bot", "deployment_target", agent=admin["agent"])
                assert (r.kind, r.reason) == ("accepted", "granted"), r
                assert r.version > version
                edge = c.edge(
                    "deployment_target", "service:checkout", "environment:prod", at=version
                )
                assert edge.state == "present"
        assert gov.poll() is None, (tmp_path / "governor.log").read_text()
        assert pj.poll() is None, (tmp_path / "projector.log").read_text()


def test_wrong_password_is_a_clear_error_for_every_process(
    kafka_sasl_broker: KafkaBroker, tmp_path: Path
) -> None:
    """A refused password exits 2 naming the cause, for one-shot commands and long-running
    processes alike; the environment overrides the file, and -X overrides both."""
    config, from_file, _ = _setup(kafka_sasl_broker, tmp_path)
    wrong = dict(from_file, CLAIMGRAPH_KAFKA_SASL_PASSWORD="not-the-password")
    for args in (
        ["kafka", "status"],
        ["governor"],
        ["--data", str(tmp_path / "p"), "projector"],
        ["--data", str(tmp_path / "p"), "serve", "--port", str(free_port())],
    ):
        r = _cli(args, wrong, timeout=90)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert "refused this client's credentials" in r.stderr, r.stderr
        assert "Authentication failed" in r.stderr
        assert "Traceback" not in r.stderr
    # -X beats the environment: the right password on the command line lets it in
    r = _cli(["-X", f"sasl.password={SASL_PASSWORD}", "kafka", "init", "--partitions", "1"], wrong)
    _ok(r)
    # config show names where each value came from, and never prints a password
    shown = _ok(_cli(["config", "show", "--json"], wrong))
    values = json.loads(shown)
    assert values["kafka.sasl.password"] == {
        "value": "****",
        "source": "env CLAIMGRAPH_KAFKA_SASL_PASSWORD",
    }
    assert values["kafka.sasl.username"] == {"value": SASL_USER, "source": f"file {config}"}
    assert values["bootstrap"]["source"] == f"file {config}"
    assert "not-the-password" not in shown and SASL_PASSWORD not in shown


def test_an_unknown_client_property_is_a_config_error(
    kafka_sasl_broker: KafkaBroker, tmp_path: Path
) -> None:
    """A misspelt librdkafka property is named at once (exit 2), before any work."""
    _, from_file, _ = _setup(kafka_sasl_broker, tmp_path)
    r = _cli(["kafka", "status"], dict(from_file, CLAIMGRAPH_KAFKA_SASL_PASWORD="x"))
    assert r.returncode == 2, r.stderr
    assert "sasl.pasword" in r.stderr and "Kafka client configuration" in r.stderr


def test_tls_and_sasl_from_the_config_file(kafka_tls_broker: KafkaBroker, tmp_path: Path) -> None:
    """SASL_SSL: the CA and the credentials in the file; the governor decides a CLI write.
    A CA that did not sign the broker's certificate exits 2 naming the failed verification."""
    prefix = f"tls{uuid.uuid4().hex[:8]}"
    config = tmp_path / "claimgraph.toml"
    config.write_text(
        f'bootstrap = "{kafka_tls_broker.bootstrap}"\nprefix = "{prefix}"\ngraph = "{GRAPH}"\n'
        "[kafka]\n"
        'security.protocol = "SASL_SSL"\n'
        f'ssl.ca.location = "{kafka_tls_broker.ca_path}"\n'
        'sasl.mechanism = "PLAIN"\n'
        f'sasl.username = "{SASL_USER}"\n'
        f'sasl.password = "{SASL_PASSWORD}"\n'
    )
    env = _env(CLAIMGRAPH_CONFIG=str(config))
    _ok(_cli(["kafka", "init", "--partitions", "1"], env))
    _ok(_cli(["kafka", "place"], env))
    with _process(["governor"], env, tmp_path / "governor.log") as gov:
        out = _ok(_cli(["schema", "apply", INVENTORY, "--agent", "platform-admin"], env))
        assert "ACCEPTED" in out, out
        assert gov.poll() is None, (tmp_path / "governor.log").read_text()
    # a CA of our own making that never signed the broker's certificate
    other = tmp_path / "other"
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from kafka_broker import KafkaBroker as Broker
    finally:
        sys.path.remove(str(ROOT / "tools"))
    Broker(other, tls=True).tls_files()
    wrong = dict(env, CLAIMGRAPH_KAFKA_SSL_CA_LOCATION=str(other / "tls" / "ca.pem"))
    r = _cli(["kafka", "status"], wrong, timeout=90)
    assert r.returncode == 2, r.stderr
    assert "certificate verify failed" in r.stderr and "Traceback" not in r.stderr
