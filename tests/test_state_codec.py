"""The folded state's canonical encoding, and checkpoints that can never block a write.

``claimgraph.core.snapshot`` encodes a GraphState as versioned, checksummed bytes that load
without running code. A loaded state must decide exactly as the state it was saved from (so a
restart from a checkpoint is a full replay, byte for byte), and one state has one encoding
(its digest identifies it). A damaged checkpoint (``tests/data/checkpoint_faults.json``) is
reported and skipped: the next older one is used, or the whole log is folded.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import claimgraph
from claimgraph.core.snapshot import MAGIC, decode_state, encode_state, state_digest
from claimgraph.core.state import GraphState
from claimgraph.core.wire import encode_decision
from claimgraph.errors import DecodeError
from claimgraph.native.decide import decide  # the core in use (make test: both)
from claimgraph.projections.checkpoints import STATE_FILE, checkpoint_graph, list_checkpoints
from claimgraph.service.graph import Graph
from claimgraph.streams.embedded import fold_decisions
from tests.conftest import ROOT, SCHEMA
from tests.strategies import GRAPH, Stream, streams
from tests.test_properties import examples
from tests.workload import T0, record

FAULTS = json.loads((Path(__file__).parent / "data" / "checkpoint_faults.json").read_text())


# -- the encoding ------------------------------------------------------------------------------


@examples(150)
@given(streams(max_commands=60), st.data())
def test_a_loaded_state_decides_exactly_like_the_folded_one(stream: Stream, data: Any) -> None:
    """Save the state after any prefix, load it, and go on deciding with both: identical
    decisions and identical encodings all the way (the encoding is canonical and complete)."""
    n = len(stream.records)
    cut = data.draw(st.integers(0, n), label="cut")
    state = GraphState(GRAPH)
    for i in range(cut):
        state.evolve(decide(state, stream.records[i], i, stream.times[i]), i)
    raw = encode_state(state)
    loaded = decode_state(raw)
    assert encode_state(loaded) == raw
    again = GraphState(
        GRAPH, native_tables=False
    )  # a second fold of the same prefix has the same bytes
    for i in range(cut):
        again.evolve(decide(again, stream.records[i], i, stream.times[i]), i)
    assert encode_state(again) == raw
    for i in range(cut, n):
        a = decide(state, stream.records[i], i, stream.times[i])
        b = decide(loaded, stream.records[i], i, stream.times[i])
        assert encode_decision(a) == encode_decision(b)
        state.evolve(a, i)
        loaded.evolve(b, i)
    assert state_digest(loaded) == state_digest(state)


def test_bad_bytes_never_load() -> None:
    """Wrong magic, codec, checksum, length or a pickle: DecodeError, and nothing runs."""
    state = GraphState("g")
    state.other_commands.add("c-1")
    raw = encode_state(state)
    assert raw.startswith(MAGIC) and decode_state(raw).other_commands == {"c-1"}
    bad = {
        "state_magic": b"X" + raw[1:],
        "state_version": raw[:8] + (99).to_bytes(4, "big") + raw[12:],
        "state_checksum": raw[:-2] + bytes([raw[-2] ^ 1]) + raw[-1:],
        "state_truncated": raw[:-1],
    }
    for reason, data in bad.items():
        with pytest.raises(DecodeError) as e:
            decode_state(data)
        assert e.value.reason == reason
    with pytest.raises(DecodeError):
        decode_state(raw + b" ")


class _Planted:
    """Unpickling this runs code: it creates the file named in it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (Path.touch, (self.path,))


def test_a_pickle_in_place_of_a_state_is_never_executed(tmp_path: Path) -> None:
    """A pickle that would run code, put where a checkpoint's state (or an old
    ``state.pickle``) goes: the checkpoint is skipped and the code never runs."""
    marker = tmp_path / "ran"
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    info = checkpoint_graph(g)
    g.close()
    payload = pickle.dumps(_Planted(marker))
    with pytest.raises(DecodeError):
        decode_state(payload)
    (info.path / STATE_FILE).write_bytes(payload)
    (info.path / "state.pickle").write_bytes(payload)
    meta = info.path / "checkpoint.json"
    meta.write_text(json.dumps(json.loads(meta.read_text()) | {"state_sha256": ""}))
    with claimgraph.open(tmp_path / "g") as g:
        r = g.assert_("depends_on", "service:a", "service:b", agent="inventory")
        assert r.kind == "accepted"
        assert g.runtime.resumed_from is None and g.runtime.skipped
    assert not marker.exists()


# -- checkpoints that are damaged --------------------------------------------------------------


def _clock() -> int:
    return T0


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A graph with checkpoints at the versions the data file names."""
    path = tmp_path_factory.mktemp("checkpoints") / "g"
    g = claimgraph.open(path, create=True, graph="test", clock=_clock)
    g.publish_schema(SCHEMA, agent="admin")
    done = 0
    for at in FAULTS["checkpoints_at"]:
        g.append([record(i) for i in range(done, at)])
        g.process()
        done = at
        assert checkpoint_graph(g).version == at
    g.append([record(i) for i in range(done, FAULTS["commands"])])
    g.process()
    g.close()
    return path


def _damage(path: Path, fault: dict[str, Any]) -> list[Path]:
    found = list_checkpoints(path / "checkpoints")
    chosen = {"newest": found[-1], "oldest": found[0]}
    hit = []
    for which in fault["damage"]:
        f = chosen[which].path / fault["file"]
        hit.append(chosen[which].path)
        if fault.get("delete"):
            f.unlink()
            continue
        data = bytearray(f.read_bytes())
        if "cut" in fault:
            data = data[: int(len(data) * fault["cut"])]
        else:
            bit = fault["bit"] % (len(data) * 8)
            data[bit // 8] ^= 1 << (bit % 8)
        f.write_bytes(bytes(data))
    return hit


@pytest.mark.parametrize("fault", FAULTS["faults"], ids=lambda f: f["id"])
def test_a_damaged_checkpoint_is_reported_and_skipped(
    fault: dict[str, Any], built: Path, tmp_path: Path
) -> None:
    """Writes go on: the damaged checkpoint is reported (path and why) and skipped; the state
    comes from the next older one or the whole log, and equals a full fold (by digest)."""
    path = tmp_path / "g"
    shutil.copytree(built, path)
    hit = _damage(path, fault)
    with claimgraph.open(path, clock=_clock) as g:
        r = g.assert_("depends_on", "service:x", "service:y", agent="inventory")
        assert r.kind == "accepted"
        rt = g.runtime
        assert rt.resumed_from == fault["resumes_from"]
        skipped = [p for p, _ in rt.skipped]
        assert all(str(h) in skipped for h in hit), rt.skipped
        full = GraphState("test")
        fold_decisions(g.logs, full, None)
        assert state_digest(rt.state) == state_digest(full)


def test_the_cli_writes_through_a_damaged_checkpoint(built: Path, tmp_path: Path) -> None:
    """One bit in the newest state: the CLI's write exits 0 (it exited 70) and says on stderr
    which checkpoint it skipped and why."""
    path = tmp_path / "g"
    shutil.copytree(built, path)
    (hit,) = _damage(path, FAULTS["faults"][0])
    r = subprocess.run(
        [sys.executable, "-m", "claimgraph", "--data", str(path), "assert", "depends_on",
         "service:x", "service:y", "--agent", "inventory"],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    skipped = [json.loads(line) for line in r.stderr.splitlines() if '"checkpoint.skipped"' in line]
    assert [e["path"] for e in skipped] == [str(hit)]
    assert "SHA-256" in skipped[0]["reason"]


def test_keys_grants_and_schema_survive_the_encoding(graph: Graph) -> None:
    """What the random streams do not cover: signing keys (and a revoked one), grants, the
    schema — a loaded state holds them and re-encodes to the same bytes."""
    from tests.test_signing import _signed_graph

    graph.grant("intern", "depends_on", agent="admin")
    admin, _ = _signed_graph(graph)
    graph.signer = admin
    assert graph.revoke_key("inv-1", agent="admin").kind == "accepted"
    state = graph.runtime.state
    loaded = decode_state(encode_state(state))
    assert encode_state(loaded) == encode_state(state)
    assert loaded.keys_active and set(loaded.keys) == {"admin-1", "inv-1"}
    assert loaded.keys["inv-1"].revoked and not loaded.keys["admin-1"].revoked
    assert loaded.keys["admin-1"].public.public_bytes_raw() == admin.public_bytes
    assert loaded.schema is not None and loaded.schema.digest == state.schema.digest  # type: ignore[union-attr]
    assert [g.record for g in loaded.grants.values()] == [g.record for g in state.grants.values()]


def test_restore_never_swaps_in_a_damaged_checkpoint(built: Path, tmp_path: Path) -> None:
    """A checkpoint whose projection copy is damaged: restore reads it all first, refuses
    (naming the checkpoint and the file) and leaves the live projection as it was."""
    from claimgraph.errors import CorruptionError
    from claimgraph.projections.checkpoints import restore_graph
    from claimgraph.service.audit import audit

    path = tmp_path / "g"
    shutil.copytree(built, path)  # a copy: the checkpoint's tables are no longer hard links
    newest = list_checkpoints(path / "checkpoints")[-1]
    sst = max((newest.path / "projection").glob("*.sst"), key=lambda p: p.stat().st_size)
    data = bytearray(sst.read_bytes())
    for i in range(64):
        data[len(data) // 2 + i] ^= 0xFF
    sst.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match=newest.name) as e:
        restore_graph(path)
    assert str(sst) in str(e.value)
    assert not (path / "projection.restoring").exists()
    with claimgraph.open(path) as g:
        assert g.head() == FAULTS["commands"]
        audit(g)
