"""The native core runs under the Python specification: its constants, its declaration, its build.

The native module keeps no copy of a limit, a name or a code (``claimgraph.native.spec`` hands
them over at load), declares what it implements (``claimgraph.native._rust.implements()``) and is
handed nothing outside that declaration: a change made to the Python core alone — a bound, a
rules revision, a policy, a cardinality, an ``on_stale`` value, a fallback mode — either moves
the native core with it or is decided in Python, and both cores still give the same bytes. A
build behind the specification, or made from other sources than the checkout's, is reported
stale (and fails ``make test`` under ``CI=true``). Under ``CI=true`` these tests fail if the
native module is not loaded.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest
from rocksdict import WriteBatch

import claimgraph
from claimgraph import native as cores
from claimgraph.core import governor
from claimgraph.core.governor import authority, revisions
from claimgraph.core.governor import decide as python_decide
from claimgraph.core.model import LIMITS
from claimgraph.core.schema import Fallback
from claimgraph.core.snapshot import state_digest
from claimgraph.core.state import GraphState
from claimgraph.core.wire import encode_command, encode_decision
from claimgraph.logs.base import LogRecord
from claimgraph.native import batch as nb
from claimgraph.native import decide as native
from claimgraph.native import spec, staleness
from claimgraph.projections.projector import ProjectionStore, Projector
from claimgraph.projections.rows import LAYOUT, LAYOUT_KEY, pack_version
from claimgraph.service.audit import audit, verify
from tests.conftest import ROOT, SCHEMA
from tests.native_support import require_native, typed
from tests.strategies import GRAPH, T0, publish
from tests.test_native_core import _hot_schema


@pytest.fixture
def _native() -> None:
    require_native()


@pytest.fixture
def respec(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """Hand the native core the specification as it is now (after a test patched it), as a
    process starting with that specification would: a new ``Spec`` and new native objects."""

    def clear() -> None:
        native._hot.cache_clear()
        native._fold.cache_clear()
        nb._batch.cache_clear()

    def apply() -> None:
        assert cores.module is not None
        monkeypatch.setattr(native, "SPEC", cores.module.Spec(spec.table()))
        clear()

    yield apply
    clear()  # the next use builds them from the specification restored


def _claim(cid: str, agent: str = "w1", at: int = 0, **kw: Any) -> dict[str, Any]:
    c = {
        "type": "claim",
        "command_id": cid,
        "graph": GRAPH,
        "agent": agent,
        "task": "t1",
        "run_id": None,
        "edge_type": "runs_in",
        "subject_type": "svc",
        "subject_id": "s",
        "object_type": "env",
        "object_id": "prod",
        "polarity": "assert",
        "confidence": 1.0,
        "evidence": [],
        "reasoning": "",
        "asserted_at": T0 + at,
        "based_on_version": None,
        "properties": {},
    }
    return {**c, **kw}


def decide_both(
    commands: list[dict[str, Any]],
    schema: dict[str, Any],
    edit: Callable[[GraphState], None] | None = None,
) -> list[dict[str, Any]]:
    """Publish ``schema``, let ``edit`` change both folded states (as a specification that
    differs would have parsed it), then decide ``commands`` with the Python core and with the
    native path side by side: the same decisions, changes and states. Returns the decisions."""
    py, nat = GraphState(GRAPH, native_tables=False), GraphState(GRAPH)
    records = [encode_command(c) for c in [publish("s0", schema), *commands]]  # type: ignore[arg-type]
    out = []
    for i, record in enumerate(records):
        expected = python_decide(py, record, i, T0 + i)
        got = native.decide(nat, record, i, T0 + i)
        assert typed(got) == typed(expected), f"decision {i}: {got} != {expected}"
        raw = encode_decision(expected)
        assert native.evolve(nat, got, i, raw) == py.evolve(expected, i, raw), i
        if i == 0 and edit is not None:
            edit(py)
            edit(nat)
        out.append(expected)
    assert state_digest(nat) == state_digest(py)
    return out


# -- constants: the specification's, read at load -----------------------------------------


@pytest.mark.usefixtures("_native")
def test_the_id_limit_is_the_specification_s(
    monkeypatch: pytest.MonkeyPatch, respec: Callable[[], None]
) -> None:
    """LIMITS['id'] lowered in Python alone (256 → 128): an agent id one past it is rejected
    by both cores (the native one hands it to Python), one at it is accepted natively."""
    monkeypatch.setitem(LIMITS, "id", 128)
    respec()
    at, past = "w" + "x" * 127, "w" + "é" * 128
    native.reset_counts()
    ds = decide_both(
        [_claim("a", agent=past), _claim("b", agent=at), _claim("c", subject_id="s" * 129)],
        _hot_schema("many-to-many", "last-write-wins-with-timestamp"),
    )
    assert [d["reason"] for d in ds[1:]] == ["field_too_large", "new", "field_too_large"]
    assert "at most 128 allowed" in ds[1]["detail"]
    assert native.DECIDED == {"claim": 1}
    assert native.DECLINED == {"no_schema": 1, "field": 2}


@pytest.mark.usefixtures("_native")
def test_the_detail_limit_and_time_bound_are_the_specification_s(
    monkeypatch: pytest.MonkeyPatch, respec: Callable[[], None]
) -> None:
    """LIMITS['detail'] cuts a rejection's detail made natively exactly where Python cuts it;
    an asserted_at past LIMITS['time_max'] is Python's to decide, one at it the native core's."""
    monkeypatch.setitem(LIMITS, "detail", 21)
    monkeypatch.setitem(LIMITS, "time_max", T0 + 5)
    respec()
    native.reset_counts()
    ds = decide_both(
        [_claim("a", at=5), _claim("a", at=1), _claim("b", at=6)],
        _hot_schema("many-to-many", "last-write-wins-with-timestamp"),
    )
    assert [d["reason"] for d in ds[1:]] == ["new", "duplicate_command", "supersedes"]
    assert ds[2]["detail"] == "command 'a' was alrea"
    assert native.DECIDED == {"claim": 2}
    assert native.DECLINED == {"no_schema": 1, "field": 1}


@pytest.mark.usefixtures("_native")
def test_a_specification_without_a_name_the_native_core_writes_is_refused() -> None:
    """A reason, kind, status or limit the native core needs and the table lacks makes the
    specification unusable there (the module is then not used), naming what is missing."""
    assert cores.module is not None
    table = spec.table()
    for section, key in (("reasons", "NEW"), ("kinds", "RETIRED"), ("limits", "time_max")):
        broken = {**table, section: {k: v for k, v in table[section].items() if k != key}}
        with pytest.raises(ValueError, match=key):
            cores.module.Spec(broken)
    with pytest.raises(ValueError, match="retract"):
        cores.module.Spec({**table, "commands": ["claim"]})


# -- decline by inclusion ------------------------------------------------------------------


class _Unknown(StrEnum):
    """Values the specification could gain that the native declaration does not list."""

    KEEP_FIRST = "keep-first"
    ONE_TO_TWO = "one-to-two"
    RETRY = "retry"


def _set(name: str, **changes: Any) -> Callable[[GraphState], None]:
    def edit(state: GraphState) -> None:
        schema = state.schema  # a parsed schema is shared (cached): edited in a copy
        assert schema is not None
        et = dataclasses.replace(schema.edge_types[name], **changes)
        state.schema = dataclasses.replace(schema, edge_types={**schema.edge_types, name: et})
        state._sides = {}

    return edit


@pytest.mark.usefixtures("_native")
@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"conflict_policy": _Unknown.KEEP_FIRST}, "policy"),
        ({"cardinality": _Unknown.ONE_TO_TWO}, "cardinality"),
        ({"on_stale": _Unknown.RETRY}, "on_stale"),
        ({"fallback": Fallback("fail_open", "x")}, "fallback"),
    ],
    ids=["policy", "cardinality", "on_stale", "fallback"],
)
def test_what_the_native_declaration_does_not_list_is_decided_in_python(
    changes: dict[str, Any], why: str
) -> None:
    """An edge type with a policy, cardinality, on_stale value or fallback mode the native
    module does not implement (a 'keep-first' policy, say): its claims are decided and folded
    in Python, each counted by what was not implemented; the other edge type's stay native."""
    commands = [
        _claim("a"),
        _claim("b", at=1, object_id="dev"),
        _claim("c", at=2, based_on_version=0),
        _claim("p", edge_type="peer", object_type="svc", object_id="s2"),
    ]
    native.reset_counts()
    decide_both(commands, _hot_schema("many-to-one", "quarantine"), _set("runs_in", **changes))
    assert dict(native.DECLINED) == {"no_schema": 1, why: 3}
    assert native.DECIDED == {"claim": 1}


@pytest.mark.usefixtures("_native")
def test_the_fold_declines_a_policy_it_does_not_implement() -> None:
    """A claim decided under a policy the native fold does not list is folded in Python."""
    schema = _hot_schema("many-to-one", "last-write-wins-with-timestamp")
    state = GraphState(GRAPH)
    d0 = python_decide(state, encode_command(publish("s0", schema)), 0, T0)  # type: ignore[arg-type]
    native.evolve(state, d0, 0, encode_decision(d0))
    _set("runs_in", conflict_policy=_Unknown.KEEP_FIRST)(state)
    d1 = python_decide(state, encode_command(_claim("a")), 1, T0 + 1)  # type: ignore[arg-type]
    native.reset_counts()
    native.evolve(state, d1, 1, encode_decision(d1))
    assert native.FOLD_DECLINED == {"policy": 1}


def _bump(monkeypatch: pytest.MonkeyPatch) -> int:
    """Raise CURRENT past every revision the native module implements, in Python alone."""
    bumped = max(cores.IMPLEMENTS["rules"]) + 1
    for mod in (revisions, governor, authority):
        monkeypatch.setattr(mod, "CURRENT", bumped)
    return bumped


@pytest.mark.usefixtures("_native")
def test_a_revision_bump_in_python_alone_is_decided_in_python(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """CURRENT raised in Python alone (as the next rules revision will be): a new graph of a
    native process decides under it, every command in Python (counted as rules), and a graph
    an admin upgrades to it from a revision the native core implements goes to Python from the
    upgrade on; verify and audit pass."""
    bumped = _bump(monkeypatch)
    before = max(cores.IMPLEMENTS["rules"])
    native.reset_counts()
    new = claimgraph.open(tmp_path / "new", create=True, graph="test")
    old = claimgraph.open(tmp_path / "old", create=True, graph="test")
    try:
        for g in (new, old):
            if g is old:
                monkeypatch.setattr(revisions, "CURRENT", before)
                monkeypatch.setattr(governor, "CURRENT", before)
            assert g.publish_schema(SCHEMA, agent="admin").kind == "accepted"
            g.assert_("runs_in", "service:a", "environment:prod", agent="release", task="promote")
            monkeypatch.setattr(revisions, "CURRENT", bumped)
            monkeypatch.setattr(governor, "CURRENT", bumped)
        assert native.DECIDED == {"claim": 1}  # the old graph's claim, under `before`
        assert native.DECLINED["rules"] == 2  # the new graph's publish and claim
        assert old.upgrade_rules(bumped, agent="admin").kind == "accepted"
        native.reset_counts()
        for g in (new, old):
            r = g.assert_("runs_in", "service:b", "environment:dev", agent="release", task="x")
            assert r.reason == "unauthorized"
            r = g.assert_("runs_in", "service:a", "environment:qa", agent="release", task="promote")
            assert (r.kind, r.reason, r.decision["rules"]) == ("accepted", "supersedes", bumped)
        assert native.DECIDED == {}
        assert native.DECLINED == {"rules": 4}
        for g in (new, old):
            verify(g)
            audit(g)
        assert {d["rules"] for _, d in new.decisions(0, 100)} == {bumped}
    finally:
        new.close()
        old.close()


@pytest.mark.usefixtures("_native")
def test_the_fold_of_a_revision_it_does_not_list_is_python_s() -> None:
    """A decision made under a revision the native fold does not list is folded in Python."""
    bumped = max(cores.IMPLEMENTS["fold_rules"]) + 1
    schema = _hot_schema("many-to-one", "last-write-wins-with-timestamp")
    state = GraphState(GRAPH)
    native.reset_counts()
    for i, c in enumerate([publish("s0", schema), _claim("a"), _claim("a")]):
        d = python_decide(state, encode_command(c), i, T0 + i, rules=bumped)  # type: ignore[arg-type]
        native.evolve(state, d, i, encode_decision(d))
    assert native.FOLD_DECLINED == {"rules": 3}


@pytest.mark.usefixtures("_native")
def test_a_projection_of_another_row_layout_is_staged_in_python(tmp_path: Path) -> None:
    """The native rows write the layouts they list (this code's); a store of another layout
    gets Python's rows (counted as layout)."""
    assert LAYOUT in cores.IMPLEMENTS["layouts"]
    store = ProjectionStore(tmp_path / "p", create=True)
    wb = WriteBatch(raw_mode=True)
    wb.put(LAYOUT_KEY, pack_version(max(cores.IMPLEMENTS["layouts"]) + 1))
    store.write(wb)
    state = GraphState(GRAPH)
    schema = _hot_schema("many-to-one", "last-write-wins-with-timestamp")
    records = [encode_command(c) for c in (publish("s0", schema), _claim("a"))]  # type: ignore[arg-type]
    recs = [LogRecord(i, T0 + i, r) for i, r in enumerate(records)]
    native.reset_counts()
    nb.ROWS_DECLINED.clear()
    ds, _ = nb.decide_batch(state, recs, 0, Projector(store, state))
    assert [d["reason"] for d in ds] == ["schema_published", "new"]
    assert nb.ROWS_DECLINED == {"layout": 2}
    assert native.DECIDED == {}
    store.close()


# -- the declaration and the build ---------------------------------------------------------


@pytest.mark.usefixtures("_native")
def test_the_declaration_names_what_the_specification_has() -> None:
    """Every policy, cardinality, on_stale value, polarity, fallback mode and command kind the
    native module says it implements is one the specification has (by its member name)."""
    declared = {k: v for k, v in cores.IMPLEMENTS.items() if k != "rules"}
    assert spec.mismatches({**declared, "rules": [revisions.CURRENT]}) == []
    assert set(cores.IMPLEMENTS["decides"]) <= set(cores.IMPLEMENTS["folds"])


@pytest.mark.usefixtures("_native")
def test_the_native_build_is_current() -> None:
    """The build loaded implements CURRENT and was built from the checkout's native/ sources
    (``make install`` rebuilds it when they change). A stale build is reported; under
    ``CI=true`` it fails."""
    s = cores.status()
    assert s.core == "native"
    if s.stale:
        message = "the native build is stale:\n  " + "\n  ".join(s.stale)
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        warnings.warn(message, stacklevel=1)
        pytest.skip(message)


@pytest.mark.usefixtures("_native")
def test_a_build_behind_current_is_reported_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CURRENT the build does not implement makes it stale, in status and --version."""
    bumped = _bump(monkeypatch)
    s = cores.status()
    assert any(f"CURRENT is {bumped}" in why for why in s.stale), s.stale
    assert "\nnative build stale: it implements rules revision(s) " in str(s)


def _copy_sources(to: Path) -> Path:
    root = staleness.checkout()
    assert root is not None, "no native/ beside the package"
    (to / "src").mkdir(parents=True)
    for name in staleness._FIXED:
        shutil.copy(root / name, to / name)
    for rs in (root / "src").glob("*.rs"):
        shutil.copy(rs, to / "src" / rs.name)
    return to


@pytest.mark.usefixtures("_native")
def test_a_build_from_other_sources_is_reported_stale(tmp_path: Path) -> None:
    """The build's SOURCES is the digest of the checkout's native/ (build.rs computes what
    status computes); one changed file, or one more, makes the build stale."""
    assert cores.module is not None
    src = _copy_sources(tmp_path / "native")
    same = staleness.evaluate(cores.module, True, "loaded", cores.ABI, src)
    built_here = staleness.sources_digest(src) == cores.module.SOURCES  # unless not rebuilt
    assert any("other sources" in why for why in same.stale) == (not built_here)
    with (src / "src" / "spec.rs").open("a") as f:
        f.write("// changed\n")
    changed = staleness.evaluate(cores.module, True, "loaded", cores.ABI, src)
    assert any("other sources" in why for why in changed.stale), changed.stale
    root = staleness.checkout()
    assert root is not None
    (src / "src" / "spec.rs").write_bytes((root / "src" / "spec.rs").read_bytes())
    (src / "src" / "extra.rs").write_text("")
    added = staleness.evaluate(cores.module, True, "loaded", cores.ABI, src)
    assert any("other sources" in why for why in added.stale), added.stale


def test_a_pure_process_says_so() -> None:
    """CLAIMGRAPH_PURE=1: the Python core, and why (claimgraph --version prints this)."""
    env = {**os.environ, "CLAIMGRAPH_PURE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", "from claimgraph import native; print(native.status())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert out.strip() == "core: python: CLAIMGRAPH_PURE=1"
