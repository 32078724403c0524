"""The compose deployment: it parses (``docker-compose config``, no engine needed), keeps its
data, pins what it runs, checks every service's health, and runs only commands that work.

No Docker engine runs here, so the deployment is replayed outside containers: every
claimgraph service's command and environment from the parsed file runs as a real process
against a real broker (paths and ports mapped), its healthcheck command is run too, and the
README's ``docker compose run --rm cli ...`` commands run against it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from typer.testing import CliRunner

from claimgraph.cli.main import app
from tests.conftest import ROOT
from tests.kafka_helpers import free_port, wait_projected

if TYPE_CHECKING:
    from kafka_broker import KafkaBroker

COMPOSE = ROOT / "compose" / "docker-compose.yml"
DOCKERFILE = ROOT / "compose" / "Dockerfile"
CONSTRAINTS = ROOT / "compose" / "constraints.txt"
IMAGE = "claimgraph:local"
LONG_RUNNING = ("governor", "projector", "api")


def compose_config(path: Path = COMPOSE) -> dict[str, Any]:
    """``docker-compose config`` of a file: what the engine would run, anchors resolved."""
    tool = shutil.which("docker-compose")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("docker-compose (Debian package) is needed to validate compose/")
        pytest.skip("docker-compose is not installed (apt-get install docker-compose)")
    out = subprocess.run(
        [tool, "-f", str(path), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=path.parent,
    )
    assert out.returncode == 0, out.stderr
    parsed: dict[str, Any] = yaml.safe_load(out.stdout)
    return parsed


def _check_cli_args(args: list[str]) -> None:
    """The CLI accepts the command and its options (``--help`` stops before running it)."""
    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, f"claimgraph {' '.join(args)}: {result.output}"


def _ours(cfg: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in cfg["services"].items() if s.get("image") == IMAGE}


def test_compose_file_is_valid_and_runs_real_commands() -> None:
    """docker-compose config accepts the file; every claimgraph command in it parses."""
    cfg = compose_config()
    services = cfg["services"]
    assert {"kafka", "topics", "place", "governor", "projector", "api", "cli"} <= set(services)
    ours = _ours(cfg)
    for name, svc in ours.items():
        _check_cli_args(list(svc["command"]))
        assert svc["environment"]["CLAIMGRAPH_BOOTSTRAP"] == "kafka:9092", name
        assert svc["build"]["dockerfile"] == "compose/Dockerfile", name
    assert len(ours) >= 6


def test_compose_keeps_its_data_and_pins_its_images() -> None:
    """The broker's log.dirs is its mounted volume; images are pinned; every service has a
    healthcheck; the Python services read the projection volume."""
    cfg = compose_config()
    services = cfg["services"]
    kafka = services["kafka"]
    log_dirs = kafka["environment"]["KAFKA_LOG_DIRS"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in kafka["volumes"]}
    assert mounts.get(log_dirs) == "kafka-data", (log_dirs, kafka["volumes"])
    assert "kafka-data" in cfg["volumes"] and "projection" in cfg["volumes"]
    assert re.fullmatch(r"apache/kafka:\d+\.\d+\.\d+(@sha256:[0-9a-f]{64})?", kafka["image"])
    assert kafka["environment"]["CLUSTER_ID"]  # the formatted volume is reused on restart
    for name, svc in services.items():
        assert "latest" not in svc["image"], name
        check = svc.get("healthcheck")
        assert check and check.get("test") and not check.get("disable"), f"{name}: no healthcheck"
    for name, svc in _ours(cfg).items():
        if name in ("projector", "api", "cli"):
            assert "projection:/data:rw" in svc["volumes"], name
        assert svc["environment"]["CLAIMGRAPH_DATA"] == "/data", name
    assert services["api"]["depends_on"]["projector"]["condition"] == "service_healthy"


# The newest patch release of the image's Python line when the image was last pinned
# (docker-library/python's versions.json: 3.11.15, June 2026); the image may not fall behind it.
CURRENT_PYTHON = (3, 11, 15)


def _stages(text: str) -> list[tuple[str, str | None, str]]:
    """The Dockerfile's stages: (base image, stage name, the stage's lines)."""
    parts = re.split(r"^FROM ", text, flags=re.M)[1:]
    stages = []
    for part in parts:
        head, _, body = part.partition("\n")
        words = head.split()
        name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
        assert len(words) in (1, 3), head
        stages.append((words[0], name, body))
    return stages


def test_the_image_is_pinned_and_runs_as_a_user() -> None:
    """compose/Dockerfile: a builder stage compiles the wheel with its native core (required,
    pinned build backend, no isolated env), and the image, on the same versioned base image of
    a current Python patch release, installs that wheel alone — every dependency from the
    constraints file, no compiler — checks the native core loads, and runs as a non-root
    user with its own /data."""
    text = DOCKERFILE.read_text()
    (base, builder, build), (image, final_name, final) = _stages(text)
    assert base == image, (base, image)
    m = re.fullmatch(r"python:(3)\.(\d+)\.(\d+)-slim-\w+(@sha256:[0-9a-f]{64})?", base)
    assert m, base
    assert tuple(map(int, m.groups()[:3])) >= CURRENT_PYTHON, (base, CURRENT_PYTHON)
    assert builder and final_name is None
    assert (
        "CLAIMGRAPH_BUILD_NATIVE=required" in build
        and "install -y --no-install-recommends cargo" in build
    )
    assert "pip wheel --no-deps --no-build-isolation --wheel-dir /wheels ." in build
    assert "PIP_CONSTRAINT=/src/compose/constraints.txt" in build
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, flags=re.M):
        missing = [p for p in src.split() if not (ROOT / p).exists()]
        assert not missing, f"compose/Dockerfile copies what the repository lacks: {missing}"
    assert f"COPY --from={builder} /wheels /wheels" in final
    assert "cargo" not in final and "native/" not in final  # the image: the wheel, no sources
    assert "sys.exit(not native.ACTIVE)" in final  # the build fails unless the native core loads
    assert "PIP_CONSTRAINT=/app/constraints.txt" in final
    users = re.findall(r"^USER (\S+)", final, flags=re.M)
    assert users and users[-1] not in ("root", "0"), users
    assert f"chown {users[-1]}:{users[-1]} /data" in final
    pins = dict(
        line.split("==", 1)
        for line in CONSTRAINTS.read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", v) for v in pins.values()), pins
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from constraints import BUILD, EXTRAS, closure
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert f'pip install "${{wheel}}[{",".join(EXTRAS)}]"' in final
    missing = sorted((set(closure()) | set(BUILD)) - set(pins))
    assert not missing, f"not pinned in {CONSTRAINTS} (python tools/constraints.py): {missing}"


def test_bad_commands_are_caught() -> None:
    """The command check itself fails on a command or option the CLI does not have."""
    with pytest.raises(AssertionError):
        _check_cli_args(["governor", "--no-such-option"])
    with pytest.raises(AssertionError):
        _check_cli_args(["teleport"])


# -- the deployment, replayed as processes against a real broker ----------------------------


class HostMap:
    """Container paths, hosts and ports → this machine's."""

    def __init__(self, broker: KafkaBroker, tmp: Path) -> None:
        host, port = broker.bootstrap.rsplit(":", 1)
        self.ports = {p: free_port() for p in (9108, 9109, 8080)}
        self.pairs = [
            ("kafka:9092", broker.bootstrap),
            ("('kafka', 9092)", f"({host!r}, {port})"),
            ("/app/", f"{ROOT}/"),
            ("/data", str(tmp / "projection")),
            ("0.0.0.0", "127.0.0.1"),
            *((f":{c}/", f":{h}/") for c, h in self.ports.items()),
        ]
        self.prefix = f"compose{uuid.uuid4().hex[:8]}"

    def text(self, value: str) -> str:
        if value in {str(c) for c in self.ports}:
            return str(self.ports[int(value)])
        for a, b in self.pairs:
            value = value.replace(a, b)
        return value

    def env(self, svc: dict[str, Any]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMGRAPH_")}
        env.update({k: self.text(str(v)) for k, v in svc["environment"].items()})
        env["CLAIMGRAPH_PREFIX"] = self.prefix  # a fresh set of topics on the shared broker
        return dict(env, PYTHONPATH=str(ROOT), COLUMNS="200")


def _claimgraph(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claimgraph", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _healthy(svc: dict[str, Any], m: HostMap, env: dict[str, str], timeout: float) -> None:
    """Run the service's healthcheck command until it passes (as the engine would)."""
    test = [m.text(str(x)) for x in svc["healthcheck"]["test"]]
    assert test[0] == "CMD" and test[1] == "python", test
    deadline = time.monotonic() + timeout
    while True:
        r = subprocess.run([sys.executable, *test[2:]], env=env, capture_output=True, timeout=30)
        if r.returncode == 0:
            return
        assert time.monotonic() < deadline, f"healthcheck never passed: {test}: {r.stderr!r}"
        time.sleep(0.2)


@contextmanager
def _service(name: str, svc: dict[str, Any], m: HostMap, tmp: Path) -> Iterator[None]:
    env = m.env(svc)
    log = tmp / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "claimgraph", *(m.text(str(a)) for a in svc["command"])],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _healthy(svc, m, env, 180)
        assert proc.poll() is None, log.read_text()
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def readme_compose_cli_commands() -> list[list[str]]:
    """The docs' ``docker compose ... run --rm cli ARGS`` commands, as ARGS."""
    from tests.docs_text import blocks

    out = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line.split("  #")[0])
            if words[:2] == ["docker", "compose"] and "run" in words:
                i = words.index("cli")
                out.append(words[i + 1 :])
    return out


def test_compose_commands_run_against_a_real_broker(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """topics and place complete, governor, projector and api pass their healthchecks, and
    the README's `run --rm cli` commands (and the cli's default one) succeed."""
    cfg = compose_config()
    ours = _ours(cfg)
    m = HostMap(kafka_broker, tmp_path)
    for one_shot in ("topics", "place"):
        svc = ours[one_shot]
        _healthy(svc, m, m.env(svc), 30)  # the broker is reachable for it
        r = _claimgraph([m.text(str(a)) for a in svc["command"]], m.env(svc))
        assert r.returncode == 0, (one_shot, r.stdout, r.stderr)
    commands = readme_compose_cli_commands()
    assert commands and commands[0][:2] == ["schema", "apply"], commands
    with ExitStack() as stack:
        for name in LONG_RUNNING:
            stack.enter_context(_service(name, ours[name], m, tmp_path))
        cli = ours["cli"]
        outputs = []
        for args in [*commands, [str(a) for a in cli["command"]]]:
            r = _claimgraph([m.text(a) for a in args], m.env(cli))
            assert r.returncode == 0, (args, r.stdout, r.stderr)
            outputs.append(r.stdout)
            if args[:2] == ["schema", "apply"]:  # reads follow once the projector has it
                wait_projected(tmp_path / "projection", int(r.stdout.split()[0][1:]), m.env(cli))
    assert "ACCEPTED" in outputs[0], outputs  # the schema was published and decided
    assert outputs[-1].startswith("platform: head v"), outputs  # the cli's default: head
