"""Every fenced block of the docs — README.md, CHANGELOG.md and docs/ — is executed (or
checked) by a named test.

``INVENTORY`` maps each block — by its language and a line only it has, among all the docs —
to the test that runs it. ``test_every_readme_block_has_a_test`` fails when a block has no
entry (a new block comes with its test), when an entry matches no block or several, or when
its test does not exist. The blocks run here run against real processes: ``claimgraph serve``
on a free port, the SDK over HTTP, MCP over stdio, a real Kafka broker, and one asking
SASL/PLAIN. The generated reference pages have no blocks (``tests/test_reference_docs.py``).

To add a block: write it, add ``(lang, a line only it has, "tests/FILE.py::TEST")`` below and
make that test run it (``Shell.run`` runs a bash block line by line). ``tests/docs_text.py``
reads the docs in reading order (the README, then mkdocs.yml's nav).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import yaml

from tests.conftest import ROOT
from tests.docs_text import block, doc_blocks, doc_files
from tests.kafka_fixtures import SASL_PASSWORD, SASL_USER
from tests.kafka_helpers import free_port, wait_projected

if TYPE_CHECKING:
    from kafka_broker import KafkaBroker

README = ROOT / "README.md"

# (language, a line that only this block has, "tests module::the test that executes it")
INVENTORY: list[tuple[str, str, str]] = [
    ("bash", "make demo     # the main job", "test_readme::test_make_targets"),
    ("bash", "claimgraph --data ./tour init", "test_readme::test_readme_tour"),
    ("bash", "pip install -e '.[http,kafka]'", "test_cli::test_readme_cli_synopsis_runs"),
    ("bash", "cat > cmds.jsonl <<'EOF'", "test_cli::test_readme_cli_synopsis_runs"),
    ("python", 'with claimgraph.open("./g2"', "test_cli::test_readme_python_synopsis_runs"),
    ("python", 'g.read("neighbors"', "test_query_catalogue::test_the_read_by_name_block_runs"),
    ("bash", "cat > tokens.yaml <<'EOF'", "test_readme::test_serve_sdk_and_runs_blocks"),
    ("bash", "token add human:alice --role resolver", "test_readme::test_token_block"),
    ("py", "snap = g.snapshot()", "test_readme::test_serve_sdk_and_runs_blocks"),
    ("bash", "runs replay RUN_ID", "test_readme::test_serve_sdk_and_runs_blocks"),
    ('json', '"mcpServers": {', "test_readme::test_mcp_host_config_block"),
    ("json", '{"state": "unknown", "version": 2', "test_readme::test_explain_block"),
    ("bash", "paths service:checkout service:billing", "test_cli::test_readme_cli_synopsis_runs"),
    ("yaml", "principals: {admins: [platform-admin]", "test_readme::test_schema_blocks"),
    ("bash", "rules upgrade --to 2", "test_readme::test_rules_and_digest_blocks"),
    ("bash", "digest --at 1200 --json", "test_readme::test_rules_and_digest_blocks"),
    ("bash", "schema what-if proposed.yaml --agent ADMIN", "test_readme::test_what_if_block"),
    ("yaml", "principals: {admins: [payments-admin]", "test_readme::test_schema_blocks"),
    ("bash", "claimgraph governor --metrics-port 9108 &", "test_readme::test_kafka_block"),
    ("bash", "--operator ops kafka place --partition 2", "test_readme::test_operator_block"),
    ("bash", "up -d --build", "test_compose::test_compose_commands_run_against_a_real_broker"),
    ("toml", "# claimgraph.toml", "test_readme::test_configuration_blocks"),
    ("bash", "claimgraph config show", "test_readme::test_configuration_blocks"),
    ("python", "mcp.executor import Executor", "test_executor::test_the_executor_block_runs"),
    ("bash", "checkpoint create", "test_cli::test_readme_cli_synopsis_runs"),
    ("bash", "rebuild && claimgraph --data ./g audit", "test_cli::test_readme_cli_synopsis_runs"),
    ("toml", 'log-level = "info,kafka=warning', "test_logging::test_logging_page_config_block"),
    ("json", '"event": "http.request", "method"', "test_logging::test_logging_page_lines"),
    ("json", '"event": "log.repeated"', "test_logging::test_logging_page_lines"),
    ("text", "⇒ verdict on who owns orders-db", "test_demo_output::test_tutorial_excerpt"),
    ("", "claimgraph/", "test_readme::test_layout_block"),
    ("", "[commands log]", "test_readme::test_shape_block"),
]  # fmt: skip


def test_every_readme_block_has_a_test() -> None:
    """Each block of the docs matches exactly one inventory entry, each entry one block, and
    each named test exists."""
    blocks = doc_blocks()
    assert len(blocks) >= 20
    unmatched = []
    for b in blocks:
        hits = [e for e in INVENTORY if e[0] == b.lang and e[1] in b.text]
        if len(hits) != 1:
            unmatched.append(f"{b.where} ```{b.lang} matches {len(hits)} entries")
    assert not unmatched, "add each block to INVENTORY with its test:\n" + "\n".join(unmatched)
    for lang, marker, test in INVENTORY:
        n = sum(1 for b in blocks if b.lang == lang and marker in b.text)
        assert n == 1, f"INVENTORY entry {marker!r} matches {n} blocks"
        path, name = test.split("::")
        module = importlib.import_module(f"tests.{path}")
        assert callable(getattr(module, name, None)), f"{test} does not exist"


# -- running a bash block, line by line ------------------------------------------------------

CLI = [sys.executable, "-m", "claimgraph"]


@dataclass
class Shell:
    """Runs the docs' bash lines: ``claimgraph`` commands (as this checkout's), ``export``,
    heredocs, ``A && B``, a trailing ``&`` (a background process), ``kill %N``. Every
    command must exit 0, or the code its comment opens with (``# exit 2: why``). ``hook``
    takes lines the caller stands in for (``make kafka``: the fixture's broker): True."""

    cwd: Path
    env: dict[str, str]
    subst: dict[str, str] = field(default_factory=dict)
    hook: Callable[[str], bool] = lambda line: False
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)
    ran: list[tuple[list[str], subprocess.CompletedProcess[str]]] = field(default_factory=list)

    def sub(self, line: str) -> str:
        for a, b in self.subst.items():
            line = line.replace(a, b)
        return line

    def run(self, script: str) -> None:
        lines = iter(script.replace("\\\n", " ").splitlines())
        for raw in map(self.sub, lines):
            heredoc = re.match(r"cat > (\S+) <<'EOF'$", raw.strip())
            if heredoc:
                body = []
                for nxt in lines:
                    if nxt == "EOF":
                        break
                    body.append(self.sub(nxt))
                (self.cwd / heredoc.group(1)).write_text("\n".join(body) + "\n")
                continue
            code, _, comment = raw.partition("  #")
            code = code.strip()
            if not code or self.hook(code):
                continue
            code = self.sub(code)  # a hook may have added a substitution
            expect = re.match(r"\s*exit (\d+):", comment)
            if code.startswith("export "):
                for item in shlex.split(code)[1:]:
                    k, _, v = item.partition("=")
                    self.env[k] = v
                continue
            if re.fullmatch(r"kill %\d+", code):
                stop(self.background[int(code[6:]) - 1])
                continue
            if code.endswith("&") and not code.endswith("&&"):
                self.background.append(self.spawn(shlex.split(code[:-1])))
                continue
            for part in code.split("&&"):
                self.check(shlex.split(part), int(expect.group(1)) if expect else 0)

    def argv(self, words: list[str]) -> list[str]:
        assert words[0] == "claimgraph", f"a docs line runs {words[0]!r}: give the test a hook"
        return [*CLI, *words[1:]]

    def check(self, words: list[str], code: int = 0) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            self.argv(words), cwd=self.cwd, env=self.env, capture_output=True, text=True,
            timeout=180,
        )  # fmt: skip
        assert r.returncode == code, (
            f"{shlex.join(words)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        )
        self.ran.append((words, r))
        return r

    def spawn(self, words: list[str]) -> subprocess.Popen[bytes]:
        log = (self.cwd / f"bg-{len(self.background)}.log").open("wb")
        return subprocess.Popen(
            self.argv(words), cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )

    def close(self) -> None:
        for p in self.background:
            stop(p)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextmanager
def shell(cwd: Path, **kw: Any) -> Iterator[Shell]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMGRAPH_")}
    sh = Shell(cwd, dict(env, PYTHONPATH=str(ROOT), COLUMNS="200"), **kw)
    try:
        yield sh
    finally:
        sh.close()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory with the repository's schemas/ beside it, as the README assumes."""
    shutil.copytree(ROOT / "schemas", tmp_path / "schemas")
    return tmp_path


def wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


# -- the blocks ------------------------------------------------------------------------------


def test_make_targets(tmp_path: Path) -> None:
    """The make targets the docs name exist, and `make help` lists every target of the
    Makefile; `make demo` runs the demo, which works."""
    docs = "\n".join(p.read_text(encoding="utf-8") for p in doc_files())
    targets = set(re.findall(r"^make (\w[\w-]*)", docs, flags=re.M))
    targets |= set(re.findall(r"`make (\w[\w-]*)`", docs))
    assert {"demo", "test", "kafka", "docs", "install", "clean"} <= targets
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    rules = set(re.findall(r"^([a-z][\w-]*):(?!=)", makefile, flags=re.M))
    (phony,) = re.findall(r"^\.PHONY: (.*)$", makefile, flags=re.M)
    assert rules == set(phony.split())
    helped = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True)
    listed = set(re.findall(r"^make (\S+)", helped.stdout, flags=re.M))
    assert listed == rules - {"help"}, helped.stdout
    for t in sorted(targets):
        r = subprocess.run(["make", "-n", t], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, (t, r.stderr)
        if t == "demo":
            assert "/claimgraph demo" in r.stdout
        if t == "kafka":  # listens where the README says: 127.0.0.1:9092
            assert "tools/kafka_broker.py start" in r.stdout
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import kafka_broker
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert "127.0.0.1:9092" in block("bash", "make kafka")
    usage = subprocess.run(
        [sys.executable, kafka_broker.__file__, "start", "--help"], capture_output=True, text=True
    )
    assert "default 9092" in usage.stdout
    demo = subprocess.run(
        [*CLI, "demo"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr
    assert "[QUARANTINED]" in demo.stdout


def test_a_missing_extra_is_named(tmp_path: Path) -> None:
    """`serve` without the http extra exits 2 naming the pip install (not 70, a bug)."""
    code = (
        "import sys; sys.modules['uvicorn'] = None; sys.argv = ['claimgraph', '--data', "
        f"{str(tmp_path / 'g')!r}, 'serve']\nfrom claimgraph.cli import main; main()"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "pip install 'claimgraph[http]'" in r.stderr
    assert "Traceback" not in r.stderr


def test_serve_sdk_and_runs_blocks(workdir: Path) -> None:
    """Serve with the README's token file, run its SDK block over real HTTP, stop serve, then
    list, show and replay the run its block recorded."""
    port = free_port()
    with shell(workdir, subst={"8080": str(port)}) as sh:
        sh.run(block("bash", "cat > tokens.yaml <<'EOF'"))
        (server,) = sh.background
        wait_http(f"http://127.0.0.1:{port}/healthz", server, workdir / "bg-0.log", 180)
        code = block("py", "snap = g.snapshot()").replace("8080", str(port))
        printed: list[str] = []
        env = {"print": lambda *a: printed.append(" ".join(map(str, a)))}
        exec(compile(code, "README.md", "exec"), env)
        version, identical = printed[0].split()
        assert int(version) >= 1 and identical == "True", printed
        assert printed[1:] == ["['present', 'absent']"], printed  # read_edges at that version
        runs: list[str] = []

        def run_ids(line: str) -> bool:
            if "runs list" in line and not runs:  # RUN_ID: the first column of list
                r = sh.check(shlex.split(line))
                runs.extend(row.split()[0] for row in r.stdout.splitlines())
                sh.subst["RUN_ID"] = runs[0]
                return True
            return False

        sh.hook = run_ids
        sh.run(block("bash", "runs replay RUN_ID"))
    # the block's lines ran with the one run the SDK block recorded
    assert len(runs) == 1
    shown = [r for words, r in sh.ran if words[3:5] == ["runs", "show"]]
    assert shown and shown[0].returncode == 0


def test_mcp_host_config_block(workdir: Path) -> None:
    """The MCP host config's command, run as a host would (stdio), against a served graph."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    host = json.loads(block("json", '"mcpServers": {'))["mcpServers"]["claimgraph"]
    port = free_port()
    with shell(workdir, subst={"8080": str(port)}) as sh:
        sh.run(block("bash", "cat > tokens.yaml <<'EOF'"))
        wait_http(f"http://127.0.0.1:{port}/healthz", sh.background[0], workdir / "bg-0.log")
        args = [
            a.replace("8080", str(port)).replace("YOUR_TOKEN", "release-token-change-me")
            for a in host["args"]
        ]
        assert host["command"] == "claimgraph"

        async def session() -> tuple[set[str], dict[str, Any]]:
            params = StdioServerParameters(
                command=sys.executable, args=["-m", "claimgraph", *args], env=sh.env
            )
            async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                tools = {t.name for t in (await s.list_tools()).tools}
                res = await s.call_tool("run_info", {})
                return tools, json.loads(res.content[0].text)  # type: ignore[union-attr]

        tools, info = asyncio.run(session())
    assert {"read_edge", "assert_edge", "run_info"} <= tools
    assert info["agent"] == "release-agent", info  # the token is the identity


def test_explain_block(tmp_path: Path) -> None:
    """The README's unknown-read result is what read_edge answers over MCP in that case."""
    from tests.mcp_fixtures import result, served
    from tests.test_mcp import _http

    shown = json.loads(block("json", '{"state": "unknown", "version": 2'))
    with served(tmp_path / "g") as (url, _g, _sessions):
        open_ = _http(url)

        async def scenario() -> dict[str, Any]:
            async with open_("inventory") as inv, open_("dba") as dba, open_("tracer") as tr:
                await inv.call_tool(
                    "assert_edge",
                    {"edge_type": "owns", "subject": "service:a", "object": "database:d"},
                )
                await dba.call_tool("start_run", {"task": "audit-owners"})
                await dba.call_tool(
                    "assert_edge",
                    {"edge_type": "owns", "subject": "service:b", "object": "database:d"},
                )
                return result(
                    await tr.call_tool(
                        "read_edge",
                        {"edge_type": "owns", "subject": "service:a", "object": "database:d"},
                    )
                )

        got = asyncio.run(scenario())
    cid = got["conflict_id"]
    assert set(got) == set(shown)
    assert got == {**shown, "conflict_id": cid, "explain": shown["explain"].replace(
        shown["conflict_id"], cid)}  # fmt: skip


def test_schema_blocks() -> None:
    """The schema block is a valid schema; the refunds excerpt is valid completed from
    schemas/graphs/refunds.yaml (its elided subject, object and writers)."""
    from claimgraph.core.schema import parse_schema

    parse_schema(block("yaml", "principals: {admins: [platform-admin]"))
    excerpt = yaml.safe_load(block("yaml", "principals: {admins: [payments-admin]"))
    full = yaml.safe_load((ROOT / "schemas/graphs/refunds.yaml").read_text())
    (et,) = excerpt["edge_types"]
    (real,) = [e for e in full["edge_types"] if e["name"] == et["name"]]
    for key in ("subject", "object", "writers", "cardinality"):
        assert key not in et
        et[key] = real[key]
    excerpt["node_types"] = full["node_types"]
    parse_schema(yaml.safe_dump(excerpt))


def test_token_block(workdir: Path) -> None:
    """token add prints a token once and stores only its digest; token list names principals."""
    with shell(workdir) as sh:
        sh.check(["claimgraph", "--data", "./g", "init", "--graph", "platform"])
        sh.run(block("bash", "token add human:alice --role resolver"))
    adds = [r for w, r in sh.ran if w[3:5] == ["token", "add"]]
    assert len(adds) == 2
    printed = [r.stdout.strip().splitlines()[-1].split()[-1] for r in adds]
    stored = (workdir / "g" / "tokens.json").read_text()
    assert all(len(t) >= 20 and t not in stored for t in printed), (printed, stored)
    (listed,) = [r.stdout for w, r in sh.ran if w[3:5] == ["token", "list"]]
    assert "human:alice" in listed and "ci-bot" in listed and printed[0] not in listed


def test_rules_and_digest_blocks(workdir: Path) -> None:
    """rules show / upgrade on a graph still on revision 1, then digest and verify --digest
    (at the head this graph has, for the README's 1200)."""
    from tests.legacy import legacy_graphs, restore

    assert "inventory" in legacy_graphs()
    restore(workdir / "platform", "inventory")
    with shell(workdir) as sh:
        admin = yaml.safe_load(
            json.loads(sh.check(["claimgraph", "--data", "./platform", "schema", "show",
                                 "--json"]).stdout)["document"]
        )["principals"]["admins"][0]  # fmt: skip
        sh.run(block("bash", "rules upgrade --to 2").replace("ADMIN", admin))
        head = json.loads(sh.check(["claimgraph", "--data", "./platform", "head", "--json"]).stdout)
        v = str(head["head"])
        out = sh.check(["claimgraph", "--data", "./platform", "digest", "--at", v, "--json"])
        digest = json.loads(out.stdout)["digest"]
        script = block("bash", "digest --at 1200 --json").replace("1200", v)
        sh.run(script.replace("DIGEST", digest))
    assert any(w[3:5] == ["verify", "--digest"] for w, _ in sh.ran)


def test_what_if_block(workdir: Path) -> None:
    """schema what-if on a copy of a graph, of its schema in force with one writer removed: the
    report lists decisions that differ, the JSON form says the same, the graph is unchanged."""
    from tests.legacy import legacy_graphs, restore

    assert "inventory" in legacy_graphs()
    restore(workdir / "platform", "inventory")
    with shell(workdir) as sh:
        shown = sh.check(["claimgraph", "--data", "./platform", "schema", "show", "--json"])
        doc = yaml.safe_load(json.loads(shown.stdout)["document"])
        admin = doc["principals"]["admins"][0]
        edge = next(e for e in doc["edge_types"] if e["name"] == "service_owns_database")
        edge["writers"] = [w for w in edge["writers"] if w["agent"] != "dba-agent"]
        (workdir / "proposed.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
        start = "1"  # v9: dba-agent's claim, quarantined as logged, would be rejected
        files = sorted(p for p in (workdir / "platform").rglob("*") if p.is_file())
        before = {p: p.read_bytes() for p in files}  # after schema show opened the graph
        sh.run(block("bash", "schema what-if proposed.yaml --agent ADMIN")
               .replace("ADMIN", admin).replace("--from 40", f"--from {start}"))  # fmt: skip
    (text, as_json) = [r.stdout for w, r in sh.ran if "what-if" in w]
    report = json.loads(as_json)
    assert report["from"] == int(start) and report["complete"] is True
    assert report["decisions"]["rejected"]["count"] == 2, report  # v9 and its resolve, v10
    assert report["no_longer_needed"]["count"] == 1 and report["conflicts"]["vanish"]["count"] == 1
    assert "decisions differ" in text and "what-if of proposed.yaml" in text
    after = {p: p.read_bytes() for p in sorted((workdir / "platform").rglob("*")) if p.is_file()}
    assert after == before


def test_kafka_block(kafka_broker: KafkaBroker, workdir: Path) -> None:
    """The Kafka walk-through on a real broker (the fixture's, for `make kafka`), then a read
    without --data: a clear error naming the projection directory it needs."""
    env_prefix = f"readme{uuid.uuid4().hex[:8]}"

    def make_kafka(line: str) -> bool:
        if "--data ./proj get" in line:  # a person reads once the projector caught up
            (applied,) = [r.stdout for w, r in sh.ran if w[1:3] == ["schema", "apply"]]
            wait_projected(workdir / "proj", int(applied.split()[0][1:]), sh.env)
        return line.startswith("make kafka")

    subst = {"127.0.0.1:9092": kafka_broker.bootstrap, "9108": str(free_port())}
    with shell(workdir, subst=subst, hook=make_kafka) as sh:
        sh.env["CLAIMGRAPH_PREFIX"] = env_prefix  # fresh topics on the session's broker
        sh.run(block("bash", "claimgraph governor --metrics-port 9108 &"))
        assert len(sh.background) == 2
        got = [r for w, r in sh.ran if w[1:4] == ["--data", "./proj", "get"]]
        assert got
        r = subprocess.run(
            [*CLI, "get", "deployment_target", "service:checkout"],
            cwd=workdir, env=sh.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert (
            "reads need a projection: pass --data DIR" in r.stderr and "Traceback" not in r.stderr
        )


def test_operator_block(kafka_broker: KafkaBroker, workdir: Path) -> None:
    """The operator's place and status, with the partition's governor configured with the
    same operator: status says the graph is placed by it (once its place is decided)."""
    from claimgraph.logs.kafka import KafkaConfig
    from tests.kafka_helpers import wait_all_decided

    prefix = f"readme{uuid.uuid4().hex[:8]}"
    cfg = KafkaConfig(kafka_broker.bootstrap, prefix=prefix)

    def decided_first(line: str) -> bool:
        if "kafka status" in line:  # a person looks once the governor decided the place
            wait_all_decided(cfg, 2)
        return False

    with shell(workdir, hook=decided_first) as sh:
        sh.env |= {
            "CLAIMGRAPH_BOOTSTRAP": kafka_broker.bootstrap,
            "CLAIMGRAPH_PREFIX": prefix,
            "CLAIMGRAPH_GRAPH": "platform",
        }
        sh.check(["claimgraph", "kafka", "init", "--partitions", "4"])
        sh.background.append(
            sh.spawn(["claimgraph", "--operator", "ops", "governor", "--partition", "2"])
        )
        sh.run(block("bash", "--operator ops kafka place --partition 2"))
        assert sh.background[0].poll() is None, (workdir / "bg-0.log").read_text()
    (status,) = [json.loads(r.stdout) for w, r in sh.ran if w[-2:] == ["status", "--json"]]
    row = status["graphs"]["platform"]
    assert (row["partition"], row["status"]) == (2, "operator"), row
    assert "'ops'" in row["detail"], row


def test_configuration_blocks(kafka_sasl_broker: KafkaBroker, workdir: Path) -> None:
    """The TOML file and the SASL walk-through, on a broker asking SASL/PLAIN."""
    toml = block("toml", "# claimgraph.toml")
    script = block("bash", "claimgraph config show")
    assert f"--sasl-user {SASL_USER}:{SASL_PASSWORD}" in script  # the fixture's broker
    (workdir / "claimgraph.toml").write_text(
        toml.replace("127.0.0.1:9094", kafka_sasl_broker.bootstrap)
    )

    def broker(line: str) -> bool:
        return line.startswith("python tools/kafka_broker.py start --port 9094")

    with shell(workdir, hook=broker) as sh:
        sh.env["CLAIMGRAPH_PREFIX"] = f"readme{uuid.uuid4().hex[:8]}"
        sh.run(script)
    (show,) = [r.stdout for w, r in sh.ran if w[1:3] == ["config", "show"]]
    assert re.search(
        r"kafka\.sasl\.password\s+\*\*\*\*\s+\(env CLAIMGRAPH_KAFKA_SASL_PASSWORD\)", show
    )
    assert re.search(r"serve\.max_body\s+4194304\s+\(file claimgraph\.toml\)", show), show
    assert SASL_PASSWORD not in show
    (status,) = [r for w, r in sh.ran if w[-2:] == ["kafka", "status"]]
    assert "refused this client's credentials" in status.stderr


def test_layout_block() -> None:
    """The layout names every package folder of claimgraph/, and only those."""
    text = block("", "claimgraph/")
    named = set(re.findall(r"^  ((?:\w+/ *)+)", text, flags=re.M))
    folders = {w.strip("/") for line in named for w in line.split()}
    real = {p.name for p in (ROOT / "claimgraph").iterdir() if (p / "__init__.py").exists()}
    assert folders == real, (folders, real)


def test_shape_block() -> None:
    """The architecture diagram names the two logs and the folders of claimgraph/ that hold
    each stage, and those folders exist."""
    text = block("", "[commands log]")
    assert "[decisions log]" in text and "governor" in text and "projector" in text
    folders = re.findall(r"\b([a-z]+(?:/[a-z]+)*)/(?=[ ,]|$)", text, flags=re.M)
    assert {"logs", "core/governor", "streams", "projections"} <= set(folders), folders
    for folder in folders:
        assert (ROOT / "claimgraph" / folder / "__init__.py").exists(), folder


def test_readme_tour(workdir: Path) -> None:
    """The README's five-minute tour runs as written: the rejected write exits 1, the second
    owner quarantines the edge, the resolver's verdict releases the winner, verify and audit
    pass."""
    with shell(workdir) as sh:
        sh.run(block("bash", "claimgraph --data ./tour init"))
    out = {" ".join(w[3:5]): r.stdout for w, r in sh.ran}
    gets = [r.stdout for w, r in sh.ran if w[3] == "get"]
    assert "environment:prod [present]" in gets[0] and "environment:staging" in gets[1]
    assert "UNKNOWN (conflict cf:own-2)" in gets[2], gets[2]
    assert "cf:own-2" in out["quarantine"]
    assert "RESOLVED winner" in out["resolve cf:own-2"]
    assert [r.returncode for w, r in sh.ran if "intern-bot" in w] == [1]


# Figures with a unit: what BENCHMARKS.md measures, and the README must not repeat.
_FIGURE = re.compile(
    r"\d[\d,.]*\s*(?:%|×|x\b|µs|ms\b|s\b|/s\b|k/s|MiB|GiB|KiB|MB\b|GB\b|B per|bytes per)"
)


def test_readme_is_short_and_states_no_measured_figure() -> None:
    """README.md is at most ~10 KB, quotes no measured figure (BENCHMARKS.md has them) and
    links to BENCHMARKS.md and CHANGELOG.md."""
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 10 * 1024
    assert _FIGURE.findall(text) == []
    assert "(BENCHMARKS.md)" in text and "(CHANGELOG.md)" in text


def test_readme_names_both_source_articles() -> None:
    """The README names the two articles claimgraph restates, by their titles."""
    text = README.read_text(encoding="utf-8")
    assert "السياق المشترك مشكلة اتساق، لا مشكلة تخزين" in text
    assert "Agent间冲突检测与协商机制：当多个Agent意见不一致时怎么办" in text


def test_readme_links_point_at_files_that_exist() -> None:
    """Every relative link of README.md names a file of the repository (the docs' own links
    are checked by `make docs`, which builds with --strict)."""
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        if "://" not in link:
            assert (ROOT / link).exists(), link
