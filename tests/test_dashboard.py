"""The Grafana dashboard in compose/ queries only what the processes expose: every metric (and
every label it groups or filters by) of every PromQL expression is in the /metrics of a real
``serve``, governor and projector on a real broker. And ``/readyz`` of that serve follows its
projector: 503 while the projector is stopped (SIGSTOP) and decisions wait, 200 again after;
its request log is one JSON line per request."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

import claimgraph
from claimgraph.logs.kafka import KafkaConfig
from tests.conftest import ROOT, SCHEMA
from tests.kafka_helpers import cli_process, free_port, fresh_config

DASHBOARD = ROOT / "compose" / "grafana-dashboard.json"
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
ADDED_BY_PROMETHEUS = {"job", "instance"}  # target labels, not in any /metrics


def expressions() -> list[str]:
    """Every PromQL expression of the dashboard's panels."""
    doc = json.loads(DASHBOARD.read_text())
    panels = [p for p in doc["panels"] for p in [p, *p.get("panels", [])]]
    return [t["expr"] for p in panels for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (not functions, keywords or label names)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = re.findall(r"(?<![\w:.$])([a-zA-Z_:][\w:]*)(?![\w:]|\s*\()", e)
    return {n for n in names if n not in KEYWORDS}


def label_names(expr: str) -> set[str]:
    """The labels an expression groups by or matches on."""
    out: set[str] = set()
    for group in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        out |= {x.strip() for x in group.split(",") if x.strip()}
    for matchers in re.findall(r"\{([^}]*)\}", expr):
        out |= set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
    return out - ADDED_BY_PROMETHEUS


def test_the_parser_finds_names_and_labels() -> None:
    """The PromQL scan: functions, keywords, ranges and strings are not metric names."""
    expr = (
        'histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{status=~"5.."}[5m]))) '
        "/ ignoring (x) (time() - b_total) and on (instance) (c > 0)"
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c"}
    assert label_names(expr) == {"le", "route", "status", "x"}


def _scrape(url: str) -> dict[str, set[str]]:
    """Sample name → the label names it carries, from one /metrics."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def _until(check: Any, what: str, seconds: float = 120.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        try:
            got = check()
        except (OSError, httpx.HTTPError):
            got = None
        if got:
            return got
        assert time.monotonic() < deadline, f"never observed: {what}"
        time.sleep(0.05)


def _serve(
    cfg: KafkaConfig, data: Path, port: int, tokens: Path, log: Any
) -> subprocess.Popen[bytes]:
    """``serve --bootstrap`` on ``port``, its stderr (the request log) to the file ``log``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = ["--bootstrap", cfg.bootstrap, "--prefix", cfg.prefix, "--graph", "test"]
    return subprocess.Popen(
        [sys.executable, "-m", "claimgraph", *args, "--data", str(data), "serve",
         "--port", str(port), "--tokens", str(tokens), "--tick", "0", "--ready-lag", "0.5"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip


def test_every_dashboard_metric_is_exposed_and_readyz_follows_the_projector(
    kafka_broker: Any, tmp_path: Path
) -> None:
    """Each metric and label the dashboard queries is in a real serve's, governor's or
    projector's /metrics; serve's /readyz is 503 while its projector is stopped and behind."""
    cfg = fresh_config(kafka_broker.bootstrap, partitions=1)
    data = tmp_path / "proj"
    gport, pport, sport = free_port(), free_port(), free_port()
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps(
            {
                "tokens": [
                    {"agent": "admin", "roles": ["admin"], "token": "t-admin"},
                    {"agent": "inventory", "token": "t-inventory"},
                    {"agent": "dba", "token": "t-dba"},
                ]
            }
        )
    )
    procs = [
        cli_process(cfg, "test", "governor", "--partition", "0", "--metrics-port", str(gport)),
        cli_process(cfg, "test", "--data", str(data), "projector", "--metrics-port", str(pport)),
    ]
    try:
        _until(lambda: (data / "projection").exists(), "the projector's projection")
        with (tmp_path / "serve.log").open("wb") as log:
            procs.append(_serve(cfg, data, sport, tokens, log))
        url = f"http://127.0.0.1:{sport}"
        _until(lambda: httpx.get(f"{url}/healthz", timeout=2).status_code == 200, "serve up")
        with claimgraph.connect(url, token="t-admin") as admin:
            assert admin.publish_schema(SCHEMA, agent="admin").kind == "accepted"
        with claimgraph.connect(url, token="t-inventory") as inv:
            r = inv.assert_("owns", "service:a", "database:x", agent="inventory", task="t")
            assert r.kind == "accepted"
        with claimgraph.connect(url, token="t-dba") as dba:
            q = dba.assert_("owns", "service:b", "database:x", agent="dba", task="audit-1")
            assert q.kind == "quarantined"
        ready = lambda: httpx.get(f"{url}/readyz", timeout=10)  # noqa: E731
        _until(lambda: ready().status_code == 200, "serve ready once projected")

        # a stopped projector: decisions go on, the projection falls behind, serve is unready
        os.kill(procs[1].pid, signal.SIGSTOP)
        try:
            with claimgraph.connect(url, token="t-inventory") as inv:
                inv.assert_("owns", "service:c", "database:y", agent="inventory", task="t")
            behind = _until(lambda: (x := ready()).status_code == 503 and x, "serve unready")
            assert behind.json()["lag_seconds"] > 0.5 and behind.json()["ready"] is False
        finally:
            os.kill(procs[1].pid, signal.SIGCONT)
        _until(lambda: ready().status_code == 200, "serve ready again")
        exposed: dict[str, set[str]] = {}
        for port in (sport, gport, pport):
            for name, labels in _scrape(f"http://127.0.0.1:{port}/metrics").items():
                exposed.setdefault(name, set()).update(labels)
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    err = (tmp_path / "serve.log").read_text()
    logged = [json.loads(x) for x in err.splitlines() if x.startswith('{"ts"')]
    writes = [x for x in logged if x.get("route") == "/v1/commands/claim"]
    assert [(x["principal"], x["status"]) for x in writes] == [
        ("inventory", 200),
        ("dba", 200),
        ("inventory", 200),
    ], "serve logs one JSON line per request"
    assert "t-inventory" not in err and "t-admin" not in err  # never a token
    exprs = expressions()
    assert len(exprs) >= 20
    checked = set()
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        missing = names - exposed.keys()
        assert not missing, f"{expr!r} queries {sorted(missing)}, which nothing exposes"
        have = set().union(*(exposed[n] for n in names))
        assert label_names(expr) <= have, f"{expr!r}: labels {label_names(expr) - have} absent"
        checked |= names
    assert {
        "claimgraph_http_request_duration_seconds_bucket",
        "claimgraph_decisions_total",
        "claimgraph_projection_lag_seconds",
        "claimgraph_open_quarantines",
        "claimgraph_decision_latency_seconds_bucket",
        "claimgraph_consumer_lag",
        "claimgraph_last_progress_timestamp_seconds",
        "process_resident_memory_bytes",
    } <= checked
