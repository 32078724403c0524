"""One log format: the JSON and console formatters, --log-level specs, repeats counted, the
Kafka client bridge and the MCP SDK's session-close record (claimgraph.logconf)."""

from __future__ import annotations

import json
import logging
import os
import pty
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import claimgraph
from claimgraph.errors import ConfigError
from claimgraph.logconf import (
    COMPONENTS,
    ConsoleFormatter,
    Event,
    JsonFormatter,
    KafkaClientLog,
    Repeats,
    events,
    parse_levels,
)
from claimgraph.mcp.transports import SessionCloseFilter
from tests.conftest import ROOT


def _record(
    msg: Any, level: int = logging.INFO, name: str = "claimgraph.governor", exc: Any = None
) -> logging.LogRecord:
    return logging.LogRecord(name, level, "", 0, msg, (), exc)


class _Kept(logging.Handler):
    """A handler that keeps what passes its filters."""

    def __init__(self, *filters: logging.Filter) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        for f in filters:
            self.addFilter(f)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _alone(
    name: str, handler: logging.Handler, level: int = logging.DEBUG
) -> Iterator[logging.Logger]:
    """Logger ``name`` writing only to ``handler`` for the block, then as it was."""
    logger = logging.getLogger(name)
    saved = (logger.handlers[:], logger.filters[:], logger.propagate, logger.level)
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(level)
    try:
        yield logger
    finally:
        logger.handlers[:], logger.filters[:], logger.propagate, _ = saved
        logger.setLevel(saved[3])


def test_an_event_is_one_json_object_on_one_line() -> None:
    """Reserved keys first (ts, level, logger, event), then the fields; ASCII only, so no
    newline or line separator in a value can split the line."""
    r = _record(Event("governor.retry", {"partition": 0, "error": "a\nb\u2028c", "n": None}))
    line = JsonFormatter().format(r)
    assert "\n" not in line and line.isascii()
    assert json.loads(line) == {
        "ts": round(r.created, 3),
        "level": "info",
        "logger": "claimgraph.governor",
        "event": "governor.retry",
        "partition": 0,
        "error": "a\nb\u2028c",
        "n": None,
    }
    assert list(json.loads(line))[:4] == ["ts", "level", "logger", "event"]
    assert str(r.msg) == 'governor.retry partition=0 error="a\\nb\\u2028c" n=null'


def test_a_foreign_record_and_an_exception_stay_on_one_line() -> None:
    """Another library's record is ``event: log`` with its text; an exception adds its type
    and the whole traceback as one string."""
    try:
        raise ValueError("boom")
    except ValueError:
        exc = sys.exc_info()
    r = _record("%s failed", logging.ERROR, "uvicorn.error", exc)
    r.args = ("startup",)
    line = JsonFormatter().format(r)
    assert "\n" not in line
    got = json.loads(line)
    assert (got["event"], got["level"], got["message"]) == ("log", "error", "startup failed")
    assert got["exc_type"] == "ValueError" and got["exc"].startswith("Traceback")
    assert got["exc"].endswith("ValueError: boom")
    text = ConsoleFormatter().format(r)
    assert " ERROR   uvicorn.error startup failed\nTraceback" in text


def test_console_lines_name_the_component_and_the_event() -> None:
    r = _record(Event("governor.started", {"partition": 3, "owner": "h:1"}))
    line = ConsoleFormatter().format(r)
    assert line.endswith(" INFO    governor governor.started partition=3 owner=h:1")


def test_level_specs_name_components_and_other_loggers() -> None:
    """A bare level is claimgraph's; a component is claimgraph.NAME; any other name is a
    logger as written. A bad level or name is a ConfigError that says which."""
    got = parse_levels("warning, kafka=error,uvicorn=INFO,mcp.server=debug")
    assert got == {
        "claimgraph": logging.WARNING,
        "claimgraph.kafka": logging.ERROR,
        "uvicorn": logging.INFO,
        "mcp": logging.WARNING,
        "mcp.server": logging.DEBUG,
    }
    assert parse_levels("")["claimgraph"] == logging.INFO
    with pytest.raises(ConfigError, match="'loud' is not a level"):
        parse_levels("kafka=loud")
    with pytest.raises(ConfigError, match="'no such' is not a logger name"):
        parse_levels("no such=info")
    with pytest.raises(ValueError, match="COMPONENTS"):
        events("nope")
    assert all(events(c).logger.name == f"claimgraph.{c}" for c in COMPONENTS)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_repeats_are_printed_once_then_counted_per_interval() -> None:
    """The first of a repeating warning passes; its repeats are counted and reported in one
    log.repeated line per logger; other fields, another logger, an INFO event and a
    line back after a quiet spell all pass."""
    clock = _Clock()
    repeats = Repeats(interval=3600.0, clock=clock)  # the timer never fires: report() below
    kept = _Kept(repeats)
    with _alone("claimgraph.metrics", kept):
        lag = events("metrics")
        for _ in range(50):
            lag.warning("lag.unmeasured", topic="t", error="down")
            clock.now += 1
        lag.warning("lag.unmeasured", topic="t", error="another error")
        for _ in range(3):
            lag.info("lag.measured", lag=0)  # INFO is never counted
        assert [r.msg.name for r in kept.records] == ["lag.unmeasured"] * 2 + ["lag.measured"] * 3
        repeats.report()
        (rep,) = kept.records[5:]
        assert (rep.name, rep.levelno) == ("claimgraph.metrics", logging.WARNING)
        assert rep.msg.name == "log.repeated" and rep.msg.fields["count"] == 49
        assert rep.msg.fields["repeats"] == [
            {"what": "lag.unmeasured topic=t error=down", "count": 49}
        ]
        repeats.report()
        assert len(kept.records) == 6  # nothing counted since: no line
        clock.now += repeats.quiet + 1  # quiet long enough: back again is a new state
        lag.warning("lag.unmeasured", topic="t", error="down")
        assert len(kept.records) == 7
        for error in (ValueError("a"), ValueError("a"), KeyError("b")):  # another error passes
            try:
                raise error
            except Exception:
                lag.error("lag.crashed", exc_info=True, topic="t")
        assert [r.msg.name for r in kept.records[7:]] == ["lag.crashed"] * 2
        repeats.interval = 0  # 0: every line passes
        lag.warning("lag.unmeasured", topic="t", error="down")
        assert len(kept.records) == 10


def test_kafka_client_lines_count_together_whatever_client_and_attempt() -> None:
    """librdkafka's line through the ``logger`` hook: the thread prefix goes, and the same
    failure from two clients and attempts is one line, then counted."""
    clock = _Clock()
    repeats = Repeats(interval=3600.0, clock=clock)
    kept = _Kept(repeats)
    fail = (
        "[thrd:127.0.0.1:9/bootstrap]: 127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 "
        "failed: Connection refused (after {}ms in state CONNECT{})"
    )
    with _alone("claimgraph.kafka", kept) as logger:
        bridge = KafkaClientLog(logger)
        for i in range(20):
            more = f", {i} identical error(s) suppressed" if i % 2 else ""
            bridge.log(
                logging.ERROR,
                "%s [%s] %s",
                "FAIL",
                f"rdkafka#consumer-{i % 3}",
                fail.format(i, more),
            )
            clock.now += 0.5
        bridge.log(
            logging.ERROR,
            "%s [%s] %s",
            "ERROR",
            "rdkafka#consumer-1",
            "[thrd:app]: 1/1 brokers are down",
        )
        for client in "cd":  # below WARNING too: a Kafka client's line is counted
            bridge.log(
                logging.INFO,
                "%s [%s] %s",
                "FAIL",
                client,
                "[thrd:x]: Disconnected (after 5ms in state UP)",
            )
        shown = [r.msg.fields for r in kept.records]
        assert [(f["facility"], f["client"]) for f in shown] == [
            ("FAIL", "rdkafka#consumer-0"), ("ERROR", "rdkafka#consumer-1"), ("FAIL", "c"),
        ]  # fmt: skip
        assert shown[0]["message"] == fail.format(0, "").split("]: ", 1)[1]
        repeats.report()
        (rep,) = kept.records[3:]  # one line for the logger, at the highest level counted
        assert rep.levelno == logging.ERROR and rep.msg.fields["count"] == 20
        assert [(r["what"][:16], r["count"]) for r in rep.msg.fields["repeats"]] == [
            ("FAIL 127.0.0.1:9", 19), ("FAIL Disconnecte", 1),
        ]  # fmt: skip


def test_the_sdk_session_close_record_alone_is_demoted() -> None:
    """mcp's "Error in standalone SSE writer" with a ClosedResourceError (a session that
    ended normally) becomes DEBUG without the traceback, and is dropped at INFO; the same
    message with another error, and any other error of the SDK, pass untouched."""
    kept = _Kept()
    with _alone("test.mcp.streamable_http", kept, logging.INFO) as logger:
        logger.addFilter(SessionCloseFilter())

        def raised(exc: BaseException) -> None:
            try:
                raise exc
            except BaseException:
                logger.exception("Error in standalone SSE writer")

        raised(anyio.ClosedResourceError())
        assert kept.records == []
        raised(RuntimeError("a real failure"))
        logger.error("Error in message router")
        assert [(r.levelno, r.getMessage()) for r in kept.records] == [
            (logging.ERROR, "Error in standalone SSE writer"),
            (logging.ERROR, "Error in message router"),
        ]
        assert kept.records[0].exc_info is not None
        logger.setLevel(logging.DEBUG)
        raised(anyio.ClosedResourceError())
        last = kept.records[-1]
        assert last.levelno == logging.DEBUG and last.exc_info is None
        assert "closed with the session" in last.getMessage()


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claimgraph", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_levels_and_format_from_flag_environment_and_file(tmp_path: Path) -> None:
    """The three keys have one name in each place (flag > environment > file) and config
    show says which won; a bad value is a clear error (exit 2, one line)."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('log-level = "warning,kafka=error"\nlog-format = "json"\nlog-interval = 2\n')
    r = _cli("--config", str(cfg), "config", "show", "--json", CLAIMGRAPH_LOG_INTERVAL="5")
    got = json.loads(r.stdout)
    assert got["log_level"] == {"value": "warning,kafka=error", "source": f"file {cfg}"}
    assert got["log_format"] == {"value": "json", "source": f"file {cfg}"}
    assert got["log_interval"] == {"value": "5.0", "source": "env CLAIMGRAPH_LOG_INTERVAL"}
    r = _cli("--log-level", "info,governor=loud", "config", "show")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "'loud' is not a level" in r.stderr
    r = _cli("--log-format", "xml", "config", "show", CLAIMGRAPH_LOG_FORMAT="json")
    assert r.returncode == 2 and "expected one of auto, json, console" in r.stderr


def test_a_warning_is_json_on_a_pipe_and_readable_on_a_terminal(tmp_path: Path) -> None:
    """--log-format auto: JSON when stderr is a pipe, the console format on a terminal; a
    level above the event's silences it."""
    from claimgraph.service.local import SOCKET

    data = tmp_path / "g"
    claimgraph.open(data, create=True).close()
    (data / SOCKET).mkdir()  # the writer cannot listen: it says so (writer.no_socket)
    head = ("--data", str(data), "head")
    (line,) = _cli(*head).stderr.splitlines()
    got = json.loads(line)
    assert (got["logger"], got["level"], got["event"]) == (
        "claimgraph.writer",
        "warning",
        "writer.no_socket",
    )
    assert _cli("--log-level", "writer=error", *head).stderr == ""
    leader, follower = pty.openpty()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "claimgraph", *head],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=120,
        )
        os.close(follower)
        follower = -1
        text = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            text += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert p.returncode == 0
    (line,) = text.decode().splitlines()
    assert " WARNING writer writer.no_socket path=" in line and not line.startswith("{")


def test_the_logging_page_names_every_logger_and_event() -> None:
    """docs/logging.md lists each component's logger and every event the package logs."""
    import re

    page = (ROOT / "docs" / "logging.md").read_text(encoding="utf-8")
    assert all(f"`claimgraph.{c}`" in page for c in COMPONENTS)
    said = set()
    for path in (ROOT / "claimgraph").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        said |= set(re.findall(r'_log\.(?:debug|info|warning|error)\(\s*"([a-z_.]+)"', text))
        said |= set(re.findall(r'_say_once\(\s*"([a-z_.]+)"', text))
    assert len(said) >= 30  # the regex finds them (a sanity floor)
    assert sorted(e for e in said if f"`{e}`" not in page) == []


def test_logging_page_config_block(tmp_path: Path) -> None:
    """docs/logging.md's config file sets the three keys, as config show reports them."""
    from tests.docs_text import block

    cfg = tmp_path / "claimgraph.toml"
    cfg.write_text(block("toml", 'log-level = "info,kafka=warning'))
    got = json.loads(_cli("--config", str(cfg), "config", "show", "--json").stdout)
    assert [got[k]["value"] for k in ("log_level", "log_format", "log_interval")] == [
        "info,kafka=warning,uvicorn=info", "json", "30.0",
    ]  # fmt: skip
    assert {got[k]["source"] for k in ("log_level", "log_format", "log_interval")} == {
        f"file {cfg}"
    }


def test_logging_page_lines() -> None:
    """docs/logging.md's two JSON lines are what the formatter writes for those events: the
    same keys in the same order (the request log's from its template)."""
    from claimgraph.http.observe import RequestEvents
    from tests.docs_text import block

    fmt = JsonFormatter()
    shown = json.loads(block("json", '"event": "http.request", "method"'))
    kept = _Kept()
    with _alone("claimgraph.http", kept, logging.INFO) as logger:
        RequestEvents(logger).request(
            shown["method"],
            shown["route"],
            shown["status"],
            shown["duration_ms"],
            shown["principal"],
        )
    (record,) = kept.records
    written = json.loads(fmt.format(record))
    assert list(written) == list(shown)
    assert {k: v for k, v in written.items() if k != "ts"} == {
        k: v for k, v in shown.items() if k != "ts"
    }
    shown = json.loads(block("json", '"event": "log.repeated"'))
    clock = _Clock()
    repeats = Repeats(interval=shown["interval_s"], clock=clock)
    kept = _Kept(repeats)
    with _alone("claimgraph.kafka", kept) as logger:
        bridge = KafkaClientLog(logger)
        for r in shown["repeats"]:
            facility, text = r["what"].split(" ", 1)
            for _ in range(r["count"] + 1):  # the first is printed, the rest counted
                bridge.log(logging.ERROR, "%s [%s] %s", facility, "rdkafka#consumer-1", text)
        repeats.report()
    written = json.loads(fmt.format(kept.records[-1]))
    assert list(written) == list(shown)
    assert {k: v for k, v in written.items() if k != "ts"} == {
        k: v for k, v in shown.items() if k != "ts"
    }
