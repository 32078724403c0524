"""Corruption: damage any file a graph keeps; it answers as before or names the damage, never wrong.

One fixed graph is built (logs and projection with both table files and live write-ahead
logs, plus a checkpoint), then copied, like a machine that crashed. Each case of
``tests/data/corruption_cases.json`` damages one file of a fresh copy — XOR some bytes at a
position, or cut the file short — and runs a fixed list of operations on it: reads at several
versions, a write (which folds the governor's state, from the checkpoint if it is usable),
verify and audit. Every case must give exactly the answers of the undamaged copy, or stop at
an integrity or storage error that names the damaged directory — never a different answer,
never a silently shorter scan.

A case is data (seed, file kind, which file by size rank, relative position, XOR bytes or the
cut), so it can be rerun against any revision; ``python -m tests.test_corruption`` regenerates
the file.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import claimgraph
from claimgraph.errors import ClaimgraphError, IntegrityError, StorageError
from claimgraph.projections.checkpoints import checkpoint_graph
from claimgraph.service.audit import audit, digest_at, verify
from tests.conftest import ROOT, SCHEMA
from tests.workload import T0, record

CASES = Path(__file__).parent / "data" / "corruption_cases.json"
KINDS = (
    "log_sst",
    "log_wal",
    "log_manifest",
    "projection_sst",
    "projection_wal",
    "projection_manifest",
    "checkpoint_state",
    "checkpoint_meta",
)
_GLOBS = {
    "log_sst": "log/*.sst",
    "log_wal": "log/*.log",
    "log_manifest": "log/MANIFEST-*",
    "projection_sst": "projection/*.sst",
    "projection_wal": "projection/*.log",
    "projection_manifest": "projection/MANIFEST-*",
    "checkpoint_state": "checkpoints/*/state.cgstate",
    "checkpoint_meta": "checkpoints/*/checkpoint.json",
}
SEEDS = (11, 23, 37)
VERSIONS = (40, 300, 650)  # before, at about and after the checkpoint (v600); head is added


def _clock() -> int:
    return T0  # append times are part of the records: fixed, so every copy decides alike


def build(path: Path) -> Path:
    """The graph every case damages a copy of; returns the copy taken while it was open."""
    g = claimgraph.open(path, create=True, graph="test", clock=_clock)
    g.publish_schema(SCHEMA, agent="admin", command_id="schema-1")
    g.append([record(i) for i in range(600)])
    g.process()
    g.close()  # the first 600 go to table files
    g = claimgraph.open(path, clock=_clock)
    checkpoint_graph(g)  # at v600, flushing the projection
    g.append([record(i) for i in range(600, 900)])
    g.process()  # these stay in the write-ahead logs
    crashed = path.with_name("crashed")
    shutil.copytree(path, crashed)  # a copy of the running graph, as a crash leaves it
    g.close()
    for kind in KINDS:
        assert list(crashed.glob(_GLOBS[kind])), f"the fixture has no {kind} file"
        assert any(p.stat().st_size for p in crashed.glob(_GLOBS[kind])), f"empty {kind}"
    return crashed


def operations(g: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    """The fixed list of operations, each a (name, call) whose result must match."""
    yield "head", g.head
    versions = (*VERSIONS, 900)
    for at in versions:
        yield f"edges@{at}", lambda at=at: [e.as_dict() for e in g.edges(at=at, limit=100_000)]
        yield f"quarantine@{at}", lambda at=at: g.quarantine(at=at, include_closed=True)
        yield (
            f"claims@{at}",
            lambda at=at: [g.claim_info(f"w-{i}", at=at) for i in range(0, 900, 3)],
        )
        for s in ("s1", "s7", "s42"):
            yield (
                f"neighbors({s})@{at}",
                lambda at=at, s=s: [
                    n.as_dict() for n in g.neighbors(f"service:{s}", at=at, include_absent=True)
                ],
            )
            yield f"slot({s})@{at}", lambda at=at, s=s: g.slot("runs_in", f"service:{s}", at=at)
        yield (
            f"history@{at}",
            lambda at=at: [
                g.history("depends_on", f"service:s{i}", f"service:s{j}", at=at)
                for i, j in ((1, 2), (7, 42), (3, 3))
            ],
        )
        yield f"digest@{at}", lambda at=at: digest_at(g.reader, at)
    yield "decisions", lambda: g.decisions(0, 1000)
    # a write: w-5 and w-600 were decided already (duplicates), w-900.. are new
    yield "write", lambda: [r.as_dict() for r in g.submit([record(i) for i in (5, 600, 900, 901)])]
    yield "verify", lambda: verify(g).as_dict()
    yield "audit", lambda: audit(g, samples=3).as_dict()


def run(path: Path) -> tuple[list[tuple[str, str]], BaseException | None]:
    """Run the operations on the graph in ``path`` until one raises: (results, the error)."""
    done: list[tuple[str, str]] = []
    try:
        g = claimgraph.open(path, clock=_clock)
    except Exception as exc:
        return done, exc
    try:
        for name, call in operations(g):
            try:
                value = call()
            except Exception as exc:
                return done, exc
            done.append((name, json.dumps(value, sort_keys=True, default=repr)))
        return done, None
    finally:
        g.close()


def damage(path: Path, case: dict[str, Any]) -> Path:
    """Apply one case to the data directory ``path``; return the damaged file."""
    # by size, largest first (file 0 is the one with most data), then by name
    files = sorted(
        (p for p in path.glob(_GLOBS[case["kind"]]) if p.stat().st_size),
        key=lambda p: (-p.stat().st_size, p.name),
    )
    target = files[case.get("file", 0) % len(files)]
    size = target.stat().st_size
    if case["action"] == "keep_records":  # cut a WAL right after its first N logical records
        ends = [0, *_wal_record_ends(target.read_bytes())]
        os.truncate(target, ends[min(case["records"], len(ends) - 1)])
        return target
    offset = min(int(case["at"] * size), size - 1)
    if case["action"] == "truncate":
        os.truncate(target, offset)
    else:
        data = bytearray(target.read_bytes())
        for i, b in enumerate(bytes.fromhex(case["xor"])):
            if offset + i < size:
                data[offset + i] ^= b
        target.write_bytes(bytes(data))
    return target


def _wal_record_ends(data: bytes) -> list[int]:
    """Where each logical record of a RocksDB write-ahead log ends (its documented format:
    32 KiB blocks of fragments, each ``crc32c(4) ‖ length(2, LE) ‖ type(1)`` then the data;
    a record ends with a FULL or LAST fragment)."""
    pos, ends = 0, []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:  # a block's trailer is padding
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        if kind == 0 and length == 0:
            break  # preallocated, never written
        pos += (7 if kind < 5 else 11) + length  # 5..8: the recyclable format's longer header
        if kind in (1, 4, 5, 8):
            ends.append(pos)
    return ends


def make_cases() -> list[dict[str, Any]]:
    """The cases: for each seed, each kind of file, a flip and a cut at seeded positions."""
    out = []
    for seed in SEEDS:
        rnd = random.Random(seed)
        for kind in KINDS:
            for action in ("flip", "truncate"):
                case: dict[str, Any] = {
                    "id": f"{kind}-{action}-{seed}",
                    "seed": seed,
                    "kind": kind,
                    "file": rnd.choice((0, 0, 0, 1)),  # the largest file, mostly
                    "action": action,
                    "at": round(rnd.random(), 6),
                }
                if action == "flip":
                    n = rnd.choice((1, 8, 64))
                    case["xor"] = bytes(rnd.randrange(1, 256) for _ in range(n)).hex()
                out.append(case)
    return out


def load_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(CASES.read_text())["cases"]
    return cases


def scenario(name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(CASES.read_text())["scenarios"][name]
    return found


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("corruption") / "g")


@pytest.fixture(scope="module")
def expected(crashed: Path, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    copy = tmp_path_factory.mktemp("undamaged") / "g"
    shutil.copytree(crashed, copy)
    results, error = run(copy)
    assert error is None, error
    return results


def test_the_cases_on_file_are_the_generated_ones() -> None:
    """The data file holds exactly what make_cases() generates (edit both together)."""
    assert load_cases() == make_cases()


@pytest.mark.parametrize("case", load_cases(), ids=lambda c: c["id"])
def test_damage_is_named_or_harmless(
    case: dict[str, Any], crashed: Path, expected: list[tuple[str, str]], tmp_path: Path
) -> None:
    """Answers identical to the undamaged copy, up to an error naming the damaged store."""
    path = tmp_path / "g"
    shutil.copytree(crashed, path)
    target = damage(path, case)
    results, error = run(path)
    assert results == expected[: len(results)], f"{case['id']}: a different answer"
    if error is not None:
        assert isinstance(error, IntegrityError | StorageError), repr(error)
        assert str(path) in str(error), f"{case['id']}: the error names no file: {error}"
        if isinstance(error, ClaimgraphError) and hasattr(error, "path"):
            assert str(target).startswith(error.path), (target, error)


def _cli(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "claimgraph", "--data", str(path), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_cli_exits_7_naming_the_damaged_file_and_rebuild_repairs_it(
    crashed: Path, tmp_path: Path
) -> None:
    """A damaged projection table: exit 7 naming the file and the remedy; ``rebuild``
    re-projects from the log and the graph answers as the undamaged copy."""
    path = tmp_path / "g"
    shutil.copytree(crashed, path)
    sst = damage(path, scenario("damaged_projection_table"))
    r = _cli(path, "audit")
    assert r.returncode == 7, r.stderr
    assert str(sst) in r.stderr and f"claimgraph --data {path} rebuild" in r.stderr
    r = _cli(path, "rebuild")
    assert r.returncode == 0, r.stderr
    assert "rebuilt the projection from the decisions log: v0..v900" in r.stdout
    r = _cli(path, "audit")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", ["lost_log_tail", "lost_log_decisions"])
def test_a_projection_that_leads_its_log_is_refused_then_rebuilt(
    name: str, crashed: Path, expected: list[tuple[str, str]], tmp_path: Path
) -> None:
    """The log lost its tail but the projection kept it: open refuses (exit 7, naming both and
    the versions lost) instead of reusing versions; after ``rebuild`` no phantom is served."""
    path = tmp_path / "g"
    shutil.copytree(crashed, path)
    damage(path, scenario(name))
    with pytest.raises(IntegrityError, match=r"the log lost versions (601|\d+)\.\.900") as e:
        claimgraph.open(path, clock=_clock)
    assert str(path / "projection") in str(e.value) and str(path / "log") in str(e.value)
    r = _cli(path, "head")
    assert r.returncode == 7 and "rebuild" in r.stderr, r.stderr
    r = _cli(path, "rebuild")
    assert r.returncode == 0, r.stderr
    assert "are not in the decisions log: gone" in r.stdout
    if name == "lost_log_decisions":
        assert "300 commands in the log have no decision" in r.stdout
    g = claimgraph.open(path, clock=_clock)
    try:
        if name == "lost_log_tail":  # commands and decisions after v600 are gone
            assert g.head() == 600 and g.claim_info("w-700") is None  # no phantom
            (receipt,) = g.submit([record(700)])
            assert receipt.version == 601 and g.claim_info("w-700")["since"] == 601
        else:  # the commands survived: the open decided them again, as before
            assert g.head() == 900 and g.pending() == 0
        verify(g)
        audit(g)
    finally:
        g.close()
    if name == "lost_log_decisions":
        assert run(path)[0] == expected  # the same graph as before the loss


def test_a_damaged_log_is_refused_and_salvaged_only_when_asked(
    crashed: Path, tmp_path: Path
) -> None:
    """A damaged log WAL: exit 7 naming the log and offering --salvage-log; rebuild without it
    refuses too; with it the log keeps its records before the damage and the graph opens."""
    path = tmp_path / "g"
    shutil.copytree(crashed, path)
    damage(path, scenario("damaged_log_wal"))
    r = _cli(path, "head")
    assert r.returncode == 7 and str(path / "log") in r.stderr and "--salvage-log" in r.stderr
    r = _cli(path, "rebuild")
    assert r.returncode == 7, r.stderr
    r = _cli(path, "rebuild", "--salvage-log")
    assert r.returncode == 0, r.stderr
    with claimgraph.open(path, clock=_clock) as g:  # and the log opens strictly again
        assert 600 <= g.head() <= 900
        verify(g)
        audit(g)


def test_a_log_cut_mid_record_is_refused(crashed: Path, tmp_path: Path) -> None:
    """The log's WAL cut short in the middle of a record (a lost tail RocksDB can see):
    refused on open, naming the log, never opened as a shorter log."""
    path = tmp_path / "g"
    shutil.copytree(crashed, path)
    damage(path, scenario("damaged_log_wal_mid"))
    r = _cli(path, "head")
    assert r.returncode == 7, r.stderr
    assert str(path / "log") in r.stderr and "--salvage-log" in r.stderr


if __name__ == "__main__":  # regenerate the cases (the scenarios are kept as they are)
    doc = json.loads(CASES.read_text())
    doc["cases"] = make_cases()
    CASES.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {len(doc['cases'])} cases to {CASES}")
