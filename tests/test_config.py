"""One configuration story: flag > environment > file > default, for every key, and
``claimgraph config show`` says which one won (secrets masked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from claimgraph.cli.config import is_secret, kafka_from_env, kafka_from_flags
from claimgraph.cli.main import app
from claimgraph.errors import ConfigError
from tests.conftest import ROOT

CLEAN = {k: None for k in os.environ if k.startswith("CLAIMGRAPH_")}


def show(args: list[str], env: dict[str, str] | None = None) -> dict[str, dict[str, object]]:
    r = CliRunner().invoke(app, [*args, "config", "show", "--json"], env={**CLEAN, **(env or {})})
    assert r.exit_code == 0, (r.output, r.exception)
    out: dict[str, dict[str, object]] = json.loads(r.output)
    return out


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "claimgraph.toml"
    path.write_text(
        'graph = "from-file"\n'
        'data = "./file-data"\n'
        "[kafka]\n"
        'sasl.username = "file-user"\n'
        'sasl.password = "file-password"\n'
        "socket.keepalive.enable = true\n"
        "[serve]\n"
        "max-body = 4096\n"
        "[log]\n"
        "from = 1\n"
        "limit = 1\n"
        "[kafka.init]\n"
        "partitions = 3\n"
    )
    return path


@pytest.mark.parametrize(
    ("flag", "env", "want", "source"),
    [
        (False, False, "from-file", "file"),
        (False, True, "from-env", "env CLAIMGRAPH_GRAPH"),
        (True, True, "from-flag", "flag --graph"),
        (True, False, "from-flag", "flag --graph"),
    ],
)
def test_flag_beats_environment_beats_file(
    config: Path, flag: bool, env: bool, want: str, source: str
) -> None:
    args = ["--config", str(config), *(["--graph", "from-flag"] if flag else [])]
    got = show(args, {"CLAIMGRAPH_GRAPH": "from-env"} if env else {})
    expected = f"file {config}" if source == "file" else source
    assert got["graph"] == {"value": want, "source": expected}


def test_defaults_and_the_file_named_by_the_environment(config: Path) -> None:
    got = show([])
    assert got["graph"] == {"value": "default", "source": "default"}
    assert got["config"] == {"value": None, "source": "none"}
    got = show([], {"CLAIMGRAPH_CONFIG": str(config)})
    assert got["config"] == {"value": str(config), "source": "env CLAIMGRAPH_CONFIG"}
    assert got["data"] == {"value": "file-data", "source": f"file {config}"}


def test_kafka_properties_from_file_env_and_flags_with_secrets_masked(config: Path) -> None:
    got = show(
        ["-c", str(config), "-X", "sasl.username=flag-user", "-X", "client.id=cg"],
        {"CLAIMGRAPH_KAFKA_SASL_PASSWORD": "env-password"},
    )
    assert got["kafka.sasl.username"] == {"value": "flag-user", "source": "flag -X"}
    assert got["kafka.sasl.password"] == {
        "value": "****",
        "source": "env CLAIMGRAPH_KAFKA_SASL_PASSWORD",
    }
    assert got["kafka.socket.keepalive.enable"]["value"] == "true"  # librdkafka's spelling
    assert got["kafka.client.id"] == {"value": "cg", "source": "flag -X"}
    assert got["serve.max_body"] == {"value": 4096, "source": f"file {config}"}
    assert got["kafka.init.partitions"] == {"value": 3, "source": f"file {config}"}
    shown = json.dumps({k: v["value"] for k, v in got.items()})
    assert "file-password" not in shown and "env-password" not in shown, shown


def test_the_environment_names_map_to_librdkafka_properties() -> None:
    got = kafka_from_env(
        {
            "CLAIMGRAPH_KAFKA_SASL_PASSWORD": "p",
            "CLAIMGRAPH_KAFKA_SSL_CA_LOCATION": "/ca.pem",
            "CLAIMGRAPH_KAFKA_A__B_C": "x",
            "CLAIMGRAPH_KAFKA_": "ignored",
            "CLAIMGRAPH_GRAPH": "not a property",
        }
    )
    assert {k: s.value for k, s in got.items()} == {
        "sasl.password": "p",
        "ssl.ca.location": "/ca.pem",
        "a_b.c": "x",
    }
    for secret in ("sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret"):
        assert is_secret(secret)
    for plain in ("sasl.username", "ssl.ca.location", "bootstrap"):
        assert not is_secret(plain)
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        kafka_from_flags(["no-equals-sign"])


def test_a_command_takes_its_options_from_the_file_unless_a_flag_says(
    config: Path, tmp_path: Path
) -> None:
    """`[log] from = 1, limit = 1` reaches `log`; `--limit 3` on the command line wins."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    data = tmp_path / "g"

    def cg(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "claimgraph", "-c", str(config), "--data", str(data), *args],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    assert cg("init").returncode == 0
    for i in range(4):
        assert cg("grant", f"agent-{i}", "e", "--agent", "nobody").returncode == 1  # rejected
    lines = cg("log", "--json").stdout.splitlines()
    assert [json.loads(x)["version"] for x in lines] == [1]
    lines = cg("log", "--json", "--limit", "3").stdout.splitlines()
    assert [json.loads(x)["version"] for x in lines] == [1, 2, 3]


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("nope = 1\n", "unknown key 'nope'"),
        ("graph = [3]\n", "graph must be a string, number or boolean"),
        (
            "[serve]\nmax-bodyy = 1\n",
            "[serve] has no option 'max-bodyy' (it has: arbiter, host, max-batch, max-body",
        ),
        ("[kafka.init]\npartition = 1\n", "[kafka.init] has no option 'partition'"),
        ("[kafka]\n'sasl.mechanism' = ['PLAIN']\n", "must be a string, number or boolean"),
        ("graph = \n", "is not valid TOML"),
    ],
)
def test_a_bad_file_is_a_clear_error(tmp_path: Path, text: str, phrase: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    r = subprocess.run(
        [sys.executable, "-m", "claimgraph", "--config", str(path), "config", "show"],
        env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert phrase in r.stderr and str(path) in r.stderr
    assert "Traceback" not in r.stderr


def test_no_broker_is_one_clear_line_not_a_hang(tmp_path: Path) -> None:
    """Nothing listens at the bootstrap address: exit 8 naming it, one line on stderr (no
    client log flood, no internal error)."""
    from tests.kafka_helpers import free_port

    bootstrap = f"127.0.0.1:{free_port()}"
    r = subprocess.run(
        [sys.executable, "-m", "claimgraph", "--bootstrap", bootstrap, "kafka", "status"],
        env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 8, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert f"no Kafka broker answered at {bootstrap}" in line
