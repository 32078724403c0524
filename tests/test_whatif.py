"""The what-if of a proposed schema (issue #35): what it reports, and what it never touches.

The property is the issue's "done when": on generated logs, the what-if of a schema with one
writer removed lists exactly the decisions that really publishing that schema at V, and
deciding the same commands after it, decides differently — matched by command (the real
publish takes a version, so every later version is one higher), in a second real graph. The
slots and edges it says would read otherwise at the end are those the two graphs' projections
read otherwise. And a what-if, through the CLI or a dry-run publish over HTTP, leaves every
file of the data directory as it was, with or without a writer holding it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st

import claimgraph
from claimgraph.core.model import Decision
from claimgraph.core.wire import encode_command
from claimgraph.errors import ConfigError
from claimgraph.http.app import create_app
from claimgraph.projections.checkpoints import checkpoint_graph
from claimgraph.sdk.http import _SyncASGI
from claimgraph.service.graph import Graph, open_graph
from claimgraph.service.whatif import Bounds, what_if
from claimgraph.service.whatif_run import read_only_logs, run_what_if
from tests.conftest import ROOT, SCHEMA
from tests.http_fixtures import TOKENS, token_file
from tests.reference import EXCLUSIVE_OBJECT, EXCLUSIVE_SUBJECT
from tests.strategies import (
    GRAPH,
    T0,
    Stream,
    claim,
    document,
    publish,
    resolve,
    stream_of,
    streams,
)
from tests.test_properties import examples, logged_decisions, scratch, write_commands

ALL = 100_000  # list every entry (the property compares whole lists)
# the fields of a decision that name a version or a schema revision (a real publish shifts
# them), its free text, and the figures beside its outcome: the rest must agree
SHIFTED = {
    "input_offset",
    "schema_rev",
    "detail",
    "command_sha256",
    "prev_hash",
    "schema",
    "merge",
    "signals",
}


def _decided(d: Decision) -> dict[str, Any]:
    out = {k: v for k, v in d.items() if k not in SHIFTED}
    out["exits"] = [{k: v for k, v in x.items() if k != "detail"} for x in d["exits"]]
    if d["claim"] is not None:  # the version its sender read: shifted with the command
        out["claim"] = {k: v for k, v in d["claim"].items() if k != "based_on_version"}
    return out


def _without_writer(schema: dict[str, Any], et: int, w: int) -> dict[str, Any]:
    """``schema`` with writer ``w`` of edge type ``et`` removed (a schema needs one writer
    per edge type: a sole writer gives way to one no command names)."""
    s = copy.deepcopy(schema)
    e = s["edge_types"][et % len(s["edge_types"])]
    del e["writers"][w % len(e["writers"])]
    e["writers"] = e["writers"] or [{"agent": "nobody"}]
    return s


def _shifted(stream: Stream, i: int, v: int) -> bytes:
    """Command ``i`` as it would be sent after a real publish at ``v``: a version it names
    (the one its sender read) that is at or after ``v`` is one higher."""
    c = stream.commands[i]
    if c is None:
        return stream.records[i]
    c = dict(c)
    for key in ("based_on_version", "pinned_version"):
        if c.get(key) is not None and c[key] >= v:
            c[key] += 1
    return encode_command(c)  # type: ignore[arg-type]


def _decide(path: Path, records: Sequence[bytes], times: Sequence[int]) -> Graph:
    g = open_graph(path, create=True, graph=GRAPH)
    write_commands(g, records, times)
    g.process()
    return g


def _edge_value(g: Graph, e: tuple[str, str, str, str, str]) -> str:
    r = g.reader.edge(e[0], (e[1], e[2]), (e[3], e[4]), g.head(), halt=False)
    return f"unknown ({r.conflict_id})" if r.conflict_id else r.state


def _slot_value(g: Graph, et: str, node: tuple[str, str], side: str) -> str:
    r = g.reader.slot(et, node, g.head(), side, halt=False)
    if r.state == "unknown":
        return f"unknown ({r.conflict_id})"
    return ":".join(r.nodes[0]) if r.nodes else "empty"


def _held(decisions: Sequence[Decision]) -> set[tuple[str, str, str, str, str]]:
    """The edges the graph holds a claim on (accepted, conflicted or withheld)."""
    return {
        (c["edge_type"], c["subject_type"], c["subject_id"], c["object_type"], c["object_id"])
        for d in decisions
        if (c := d["claim"]) is not None and d["kind"] != "rejected"
    }


def _opened(decisions: Sequence[Decision], since: int) -> set[str]:
    """Conflicts the decisions from ``since`` on open (withhold a claim in, first)."""
    before = {d["conflict_id"] for d in decisions[:since] if d["conflict_id"]}
    return {
        d["conflict_id"]
        for d in decisions[since:]
        if d["conflict_id"] and (d["kind"] == "quarantined" or d["withheld"])
    } - before


def _before_the_first_schema() -> Stream:
    """A non-admin's broken publish before the first schema: the log refuses it as an invalid
    schema, a real publish of the proposal first would refuse it as not an admin's."""
    from tests.strategies import _stream

    schema = {
        "principals": {"admins": ["admin"], "resolvers": ["judge"]},
        "node_types": ["svc"],
        "edge_types": [
            {
                "name": "uses",
                "subject": "svc",
                "object": "svc",
                "writers": [{"agent": "a1"}, {"agent": "a2"}],
                "cardinality": "many-to-many",
                "conflict_policy": "quarantine",
            }
        ],
    }
    broken = {**publish("c7", schema, agent="a1"), "document": "edge_types: 3"}
    commands = [broken, publish("s0", schema), claim("c1", "uses svc:n0 svc:n1", "a2")]
    records = [encode_command(c) for c in commands]  # type: ignore[arg-type]
    return _stream(schema, commands, records, [T0, T0 + 1, T0 + 2])


@examples(int(os.environ.get("WHATIF_EXAMPLES", "60")))
@given(
    streams(revisions=(0, 0)),
    st.integers(0, 3),
    st.integers(0, 1),
    st.integers(0, 60),
)
@example(  # a resolve of a conflict the removed writer opened: no longer needed
    stream=stream_of(
        {
            "principals": {"admins": ["admin"], "resolvers": ["judge"]},
            "node_types": ["svc", "db"],
            "edge_types": [
                {
                    "name": "owns",
                    "subject": "svc",
                    "object": "db",
                    "writers": [{"agent": "a1"}, {"agent": "a2"}],
                    "cardinality": "one-to-many",
                    "conflict_policy": "quarantine",
                }
            ],
        },
        [
            claim("c1", "owns svc:n0 db:n1", "a1"),
            claim("c2", "owns svc:n1 db:n1", "a2"),
            resolve("c3", "cf:c2", "c1"),
            claim("c4", "owns svc:n2 db:n2", "a2"),
        ],
    ),
    et=0,
    w=1,
    at=1,
)
@example(stream=_before_the_first_schema(), et=0, w=1, at=0)
def test_what_if_lists_what_a_real_publish_at_v_decides_differently(
    stream: Stream, et: int, w: int, at: int
) -> None:
    """What-if of a schema without one writer = a real publish of it at V, then the same
    commands: the same changed decisions (by command), conflicts, slots and edges."""
    n = len(stream.records)
    v = at % (n + 1)
    proposal = _without_writer(stream.schema, et, w)
    note(f"{stream!r}\nproposal from v{v}: {document(proposal)}")
    records = [
        *stream.records[:v],
        encode_command(publish("what-if-reference", proposal)),  # type: ignore[arg-type]
        *(_shifted(stream, i, v) for i in range(v, n)),
    ]
    times = [*stream.times[:v], stream.times[max(0, v - 1)], *stream.times[v:]]
    with scratch() as tmp:
        live = _decide(Path(tmp) / "live", stream.records, stream.times)
        real = _decide(Path(tmp) / "real", records, times)
        try:
            logged, published = logged_decisions(live), logged_decisions(real)
            assert published[v]["kind"] == "accepted", published[v]  # the real publish
            want = {
                i: published[i + 1]
                for i in range(v, n)
                if _decided(published[i + 1]) != _decided(logged[i])
            }
            # a later publish applies as logged: where the real publish decides it otherwise
            # (only a refusal's reason can differ here: who is an admin is the same in both)
            # the report notes it beside, and it is no changed decision
            pubs = {
                i: want.pop(i) for i in list(want) if logged[i]["command_type"] == "publish_schema"
            }
            assert all(d["kind"] == logged[i]["kind"] == "rejected" for i, d in pubs.items())
            held = _held(logged) | _held(published)  # edges some claim is on, in either
            edges = sorted(
                (f"{e[0]}({e[1]}:{e[2]} -> {e[3]}:{e[4]})", _edge_value(live, e), b)
                for e in stream.edges
                if e in held and _edge_value(live, e) != (b := _edge_value(real, e))
            )
            slots = []
            for t in stream.schema["edge_types"]:
                for side, kinds in (("out", EXCLUSIVE_SUBJECT), ("in", EXCLUSIVE_OBJECT)):
                    if t["cardinality"] not in kinds:
                        continue
                    for node in stream.nodes:
                        a, b = (_slot_value(g, t["name"], node, side) for g in (live, real))
                        name = f"{node[0]}:{node[1]}"
                        name = f"{t['name']}({name} -> ?)" if side == "out" else (
                            f"{t['name']}(? -> {name})"
                        )  # fmt: skip
                        if a != b:
                            slots.append((name, a, b))
            appear = _opened(published, v + 1) - _opened(logged, v)
            vanish = _opened(logged, v) - _opened(published, v + 1)
        finally:
            live.close()
            real.close()
        report = run_what_if(
            Path(tmp) / "live", document(proposal), bounds=Bounds(start=v, first=ALL)
        )
    got = {
        e["version"]: e["what_if"]
        for listing in report["decisions"].values()
        for e in listing["first"]
    }
    assert sorted(got) == sorted(want)
    for i, d in want.items():
        assert got[i]["kind"] == d["kind"] and got[i]["reason"] == d["reason"], i
        assert got[i]["conflict_id"] == d["conflict_id"], i
    assert report["changed"] == len(want) and report["complete"]
    assert report["commands"] == n - v
    notes = {p["version"]: p["what_if"] for p in report["publishes"]}
    assert {i for i, w in notes.items() if w is not None} == set(pubs)
    assert all(notes[i]["reason"] == d["reason"] for i, d in pubs.items())
    listed = {"slots": slots, "edges": edges}
    for key, rows in listed.items():
        name = key[:-1]
        got_rows = sorted((r[name], r["logged"], r["what_if"]) for r in report[key]["first"])
        assert got_rows == sorted(rows), key
    assert {c["conflict_id"] for c in report["conflicts"]["appear"]["first"]} == appear
    assert {c["conflict_id"] for c in report["conflicts"]["vanish"]["first"]} == vanish


# -- a scenario, through the CLI -------------------------------------------------------------

NO_DBA = SCHEMA.replace(', {agent: dba, task: "audit-*"}', "")


def _cli(
    *args: str, data: Path, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "claimgraph", "--data", str(data), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={**os.environ, "CLAIMGRAPH_LOG_FORMAT": "json"},
    )


@pytest.fixture
def disputed(tmp_path: Path) -> Iterator[Graph]:
    """A graph where dba's claim opened a conflict a reviewer resolved, and dba owns d2."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")  # v0
    g.assert_("owns", "service:a", "database:d1", agent="inventory", command_id="c1")
    g.assert_("owns", "service:b", "database:d1", agent="dba", task="audit-x", command_id="c2")
    g.assert_("owns", "service:c", "database:d2", agent="dba", task="audit-x", command_id="c3")
    g.resolve("cf:c2", winner="c1", agent="reviewer", command_id="r1")  # v4
    yield g
    g.close()


def test_cli_what_if_text_and_json(disputed: Graph, tmp_path: Path) -> None:
    """Without dba as a writer: two claims rejected, the resolve no longer needed, the
    conflict gone, d2's owner and edge different; the JSON says the same."""
    disputed.close()
    data = disputed.path
    (tmp_path / "no-dba.yaml").write_text(NO_DBA)
    text = _cli("schema", "what-if", str(tmp_path / "no-dba.yaml"), data=data)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == (
        "what-if of no-dba.yaml over graph 'test' (head v4), in force from v1 without "
        "taking a version"
    )
    assert "  decided again: v1..v4, 4 commands; 3 decisions differ" in lines
    assert "newly rejected: 3" in lines
    assert any(
        line.startswith("  v2 claim c2 by dba/audit-x owns(service:b -> database:d1): "
                        "quarantined slot_conflict cf:c2 -> rejected unauthorized")
        for line in lines
    )  # fmt: skip
    assert "resolves and escalations no longer needed: 1" in lines
    assert "  v4 resolve r1 by reviewer: no conflict 'cf:c2'" in lines
    assert "  cf:c2 (owns, opened v2, closed): claims c2, c1" in lines
    assert "  owns(? -> database:d2): service:c -> empty" in lines
    assert "  owns(service:c -> database:d2): present -> absent" in lines
    out = _cli("schema", "what-if", "-", "--json", "--first", "1", data=data, stdin=NO_DBA)
    r = json.loads(out.stdout)
    assert (r["from"], r["to"], r["changed"], r["complete"]) == (1, 4, 3, True)
    assert r["decisions"]["rejected"]["count"] == 3
    assert [e["command_id"] for e in r["decisions"]["rejected"]["first"]] == ["c2"]
    assert r["no_longer_needed"]["first"][0]["command_id"] == "r1"
    assert r["conflicts"]["vanish"]["count"] == 1 and r["conflicts"]["appear"]["count"] == 0
    relative = _cli("schema", "what-if", "-", "--json", data=Path(data.name), stdin=NO_DBA,
                    cwd=data.parent)  # fmt: skip
    assert json.loads(relative.stdout)["changed"] == 3, relative.stderr
    same = _cli("schema", "what-if", "-", "--json", "--from", "3", data=data, stdin=NO_DBA)
    r = json.loads(same.stdout)
    assert (r["from"], r["changed"]) == (3, 1)  # c3 alone: c2 and its conflict are as logged
    assert "  publishing it now (after v4): accepted" in lines
    refused = _cli("schema", "what-if", "-", "--agent", "inventory", data=data, stdin=NO_DBA)
    assert refused.returncode == 1
    assert "publishing it at v1 as inventory: refused (not_admin" in refused.stdout


def test_a_proposal_the_governor_would_refuse(disputed: Graph) -> None:
    """Tightening owns to one-to-one: from v1 (nothing owned yet) dba's claim of a second
    database for a is a slot conflict; published now it would put two present edges in one
    slot, so it is refused (``now``). From v6, where that clash is, nothing is replayed."""
    disputed.assert_("owns", "service:a", "database:d3", agent="dba", task="audit-x")  # v5
    tight = SCHEMA.replace("cardinality: one-to-many", "cardinality: one-to-one", 1)
    with read_only_logs(disputed.path) as (logs, name):
        r = what_if(logs, name, tight).as_dict()
        late = what_if(logs, name, tight, bounds=Bounds(start=6)).as_dict()
    assert (r["proposal"]["kind"], r["now"]["kind"], r["now"]["reason"]) == (
        "accepted", "rejected", "invalid_schema",
    )  # fmt: skip
    assert "exclusive slot" in r["now"]["detail"] and r["now"]["at"] == 6
    quarantined = [e["command_id"] for e in r["decisions"]["quarantined"]["first"]]
    assert quarantined[-1:] == [disputed.decisions(5, 1)[0][1]["command_id"]]
    assert late["stopped"] == "refused" and late["commands"] == 0 and late["now"] is None
    assert (late["proposal"]["kind"], late["proposal"]["reason"]) == ("rejected", "invalid_schema")


def test_a_later_publish_applies_as_logged_and_is_reported(tmp_path: Path) -> None:
    """A schema published inside the range ends the proposal's reign there, as logged, even
    when the proposal (no admin 'boss') would have refused it; the report says both."""
    two = SCHEMA.replace("admins: [admin]", "admins: [admin, boss]")
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    try:
        g.publish_schema(two, agent="admin")  # v0
        g.assert_("owns", "service:b", "database:d1", agent="dba", task="audit-x")  # v1
        assert g.publish_schema(two, agent="boss").kind == "accepted"  # v2: dba writes again
        g.assert_("owns", "service:c", "database:d2", agent="dba", task="audit-x")  # v3
        with read_only_logs(g.path) as (logs, name):
            r = what_if(logs, name, NO_DBA, bounds=Bounds(start=1)).as_dict()
    finally:
        g.close()
    assert r["changed"] == 1
    assert [e["version"] for e in r["decisions"]["rejected"]["first"]] == [1]
    (note,) = r["publishes"]
    assert (note["version"], note["kind"], note["revision"], note["applied"]) == (
        2, "accepted", 2, "as logged",
    )  # fmt: skip
    assert (note["what_if"]["kind"], note["what_if"]["reason"]) == ("rejected", "not_admin")


def test_bounds_a_limit_and_a_time(disputed: Graph) -> None:
    """--limit stops after N commands and --seconds between batches (a clock passed in);
    the report says where; a range past head is a ConfigError."""
    with read_only_logs(disputed.path) as (logs, name):
        r = what_if(logs, name, NO_DBA, bounds=Bounds(limit=2)).as_dict()
        assert (r["stopped"], r["from"], r["to"], r["commands"], r["changed"]) == (
            "limit", 1, 2, 2, 1,
        )  # fmt: skip
        ticks = iter(range(100))
        r = what_if(
            logs, name, NO_DBA, bounds=Bounds(seconds=0.5), clock=lambda: float(next(ticks))
        ).as_dict()
        assert (r["stopped"], r["commands"]) == ("time", 0)
        with pytest.raises(ConfigError, match="above head"):
            what_if(logs, name, NO_DBA, bounds=Bounds(end=9))
        with pytest.raises(ConfigError, match="empty"):
            what_if(logs, name, NO_DBA, bounds=Bounds(start=3, end=1))


def test_a_checkpoint_below_the_range_gives_the_same_report(disputed: Graph) -> None:
    """Resuming the two states from a checkpoint reports what folding from v0 reports."""
    info = checkpoint_graph(disputed)  # at v4
    disputed.assert_("owns", "service:d", "database:d4", agent="dba", task="audit-x")
    bounds = Bounds(start=5)
    with read_only_logs(disputed.path) as (logs, name):
        fresh = what_if(logs, name, NO_DBA, bounds=bounds).as_dict()
        resumed = what_if(logs, name, NO_DBA, bounds=bounds, checkpoints=info.path.parent).as_dict()
    assert fresh["changed"] == 1
    fresh.pop("seconds"), resumed.pop("seconds")
    assert resumed == fresh


# -- nothing under the data directory changes ------------------------------------------------


def _files(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every file and directory under ``root``: content hash, size and mtime."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.stat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        out[str(p.relative_to(root))] = (digest, st.st_size, st.st_mtime_ns)
    out["."] = ("dir", 0, root.stat().st_mtime_ns)
    return out


def _quiet(g: Graph) -> None:
    """Wait until the writer's RocksDB has no flush or compaction running or pending (its
    own background work would change its files whatever a reader does)."""
    busy = (
        "rocksdb.num-running-flushes",
        "rocksdb.num-running-compactions",
        "rocksdb.mem-table-flush-pending",
        "rocksdb.compaction-pending",
    )
    for _ in range(100_000):
        if not any(db.property_int_value(p) for db in (g.logs.db, g.projection.db) for p in busy):
            return
    raise AssertionError("the writer's RocksDB never went quiet")


def test_the_data_directory_is_untouched_by_a_what_if(disputed: Graph, tmp_path: Path) -> None:
    """Every file (and directory mtime) is byte-identical after a what-if: through the CLI
    beside a writer, through a dry-run publish over HTTP, and through the CLI with no writer
    (checkpoints are read too)."""
    checkpoint_graph(disputed)
    disputed.close()
    data = disputed.path
    (tmp_path / "no-dba.yaml").write_text(NO_DBA)
    writer = open_graph(data)  # holds the directory, as serve would
    try:
        _quiet(writer)
        before = _files(data)
        live = _cli("schema", "what-if", str(tmp_path / "no-dba.yaml"), "--json", data=data)
        assert json.loads(live.stdout)["changed"] == 3, live.stderr
        assert _files(data) == before
        app = create_app(writer, token_file())
        headers = {"Authorization": f"Bearer {TOKENS['admin']}"}
        with httpx.Client(base_url="http://t", transport=_SyncASGI(app), headers=headers) as c:
            resp = c.post("/v1/commands/publish_schema", json={"document": NO_DBA, "dry_run": True})
        assert resp.status_code == 200 and resp.json()["what_if"]["changed"] == 3, resp.text
        assert _files(data) == before
    finally:
        writer.close()
    before = _files(data)
    alone = _cli("schema", "what-if", str(tmp_path / "no-dba.yaml"), "--json", data=data)
    assert json.loads(alone.stdout)["changed"] == 3, alone.stderr
    assert _files(data) == before


# -- over HTTP: a dry-run publish ------------------------------------------------------------


def test_dry_run_publish_records_nothing(disputed: Graph) -> None:
    """A dry run answers the report; refusals are the real publish's, but not recorded; a
    dry run in a batch, or what_if options without dry_run, are refused; head never moves."""
    app = create_app(disputed, token_file())
    head = disputed.head()

    def post(who: str | None, path: str, body: dict[str, Any]) -> httpx.Response:
        h = {"Authorization": f"Bearer {TOKENS[who]}"} if who else {}
        with httpx.Client(base_url="http://t", transport=_SyncASGI(app), headers=h) as c:
            return c.post(path, json=body)

    url = "/v1/commands/publish_schema"
    ok = post("admin", url, {"document": NO_DBA, "dry_run": True, "what_if": {"first": 1}})
    r = ok.json()["what_if"]
    assert ok.status_code == 200 and (r["changed"], r["from"], r["to"]) == (3, 1, 4)
    assert len(r["decisions"]["rejected"]["first"]) == 1
    ranged = post("admin", url, {"document": NO_DBA, "dry_run": True, "what_if": {"limit": 1}})
    assert ranged.json()["what_if"]["stopped"] == "limit"
    anonymous = post(None, url, {"document": NO_DBA, "dry_run": True})  # 401 before the body
    assert (anonymous.status_code, anonymous.json()["reason"]) == (401, "unauthenticated")
    assert "version" not in anonymous.json()
    resp = post("inventory", url, {"document": NO_DBA, "dry_run": True})
    assert (resp.status_code, resp.json()["reason"]) == (403, "not_admin")
    assert resp.json()["dry_run"] is True and "version" not in resp.json()
    bad = post("admin", url, {"document": "edge_types: 3", "dry_run": True})
    assert (bad.status_code, bad.json()["reason"]) == (422, "invalid_schema")
    assert bad.json()["what_if"]["stopped"] == "refused"
    past = post("admin", url, {"document": NO_DBA, "dry_run": True, "what_if": {"to_version": 99}})
    assert past.status_code == 422 and "above head" in past.json()["detail"]
    loose = post("admin", url, {"document": NO_DBA, "what_if": {"first": 1}})
    assert loose.status_code == 422
    batch = post(
        "admin", "/v1/commands",
        {"commands": [{"type": "publish_schema", "document": NO_DBA, "dry_run": True}]},
    )  # fmt: skip
    assert batch.status_code == 422
    assert disputed.head() == head


def test_the_package_runs_the_child_as_a_module() -> None:
    """The child process of a server's what-if is importable as ``python -m``."""
    assert (ROOT / "claimgraph" / "service" / "whatif_run.py").is_file()
    done = subprocess.run(
        [sys.executable, "-m", "claimgraph.service.whatif_run"],
        input=json.dumps(
            {"path": "/nonexistent", "document": "", "source": "", "agent": "a", "bounds": {}}
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    err = json.loads(done.stdout)["error"]
    assert err["type"] == "ConfigError" and done.returncode == ConfigError.exit_code
