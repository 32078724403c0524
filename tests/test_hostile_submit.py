"""Hostile JSON Lines: every non-blank line gets exactly one decision, whatever it holds.

The inputs are data files under ``tests/data/hostile/`` (see its README), so any revision can
be run against them: ``claimgraph submit tests/data/hostile/submit.jsonl``.
"""

from __future__ import annotations

import io
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import claimgraph
from claimgraph.core.model import LIMITS
from claimgraph.core.wire import decode_command
from claimgraph.service.audit import audit, verify
from claimgraph.service.bounded import InputLimits, too_deep
from claimgraph.service.inputs import parse_command
from claimgraph.service.jsonlines import line_record, read_lines
from tests.conftest import ROOT, SCHEMA
from tests.test_cli import _run

DATA = ROOT / "tests" / "data" / "hostile"

# line number → what its decision's detail must say (every other non-blank line is valid)
EXPECTED = {
    3: "nested more than 32 deep",
    4: "asserted_at: Value error, 1e+308 s is not a finite time",
    5: "not JSON: 1e400 overflows a 64-bit float",
    6: "command_id: Input should be a valid string",
    7: "confidence: Input should be a valid number",
    8: "confidence: Input should be a valid number",
    9: "based_on_version: Input should be less than or equal to 9223372036854775807",
    10: "NaN is not a JSON number",
    11: "-Infinity is not a JSON number",
    12: "5000 digits",
    13: "not UTF-8 text",
    14: "tick is written by the ticker",
    15: "expected a JSON object, got list",
    16: "expected a JSON object, got int",
    19: f"String should have at most {LIMITS['id']} characters",
    20: "nested more than 32 deep",
    21: "evidence: Input should be a valid list",
    23: "not JSON: Expecting ',' delimiter",
    24: "task: Input should be a valid string",
    27: "confidence: Input should be less than or equal to 1",
    28: f"command_id: String should have at most {LIMITS['id']} characters",
    29: "based_on_version: Input should be a valid integer",
    30: "is not an ISO 8601 time",
}
BLANK = {2, 17}


def _graph_dir(workdir: Path) -> None:
    shutil.copytree(ROOT / "schemas", workdir / "schemas")
    assert _run(["--data", "g", "init", "--graph", "platform"], workdir).returncode == 0
    r = _run(
        ["--data", "g", "schema", "apply", "schemas/graphs/inventory.yaml", "--agent",
         "platform-admin"],
        workdir,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_submit_of_the_hostile_file_decides_every_line(tmp_path: Path) -> None:
    """submit of tests/data/hostile/submit.jsonl exits 0 with one decision per non-blank line,
    in order: each hostile line an invalid_input rejection naming its line and what is wrong,
    each valid line decided as usual; blank lines are counted on stderr; verify and audit
    pass afterwards."""
    _graph_dir(tmp_path)
    r = _run(["--data", "g", "submit", str(DATA / "submit.jsonl")], tmp_path)
    assert r.returncode == 0, r.stderr
    decisions = [json.loads(line) for line in r.stdout.splitlines()]
    n_lines = len((DATA / "submit.jsonl").read_bytes().split(b"\n")) - 1
    numbers = [n for n in range(1, n_lines + 1) if n not in BLANK]
    assert len(decisions) == len(numbers)
    offsets = [d["input_offset"] for d in decisions]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    for n, d in zip(numbers, decisions, strict=True):
        if n in EXPECTED:
            assert (d["command_type"], d["kind"], d["reason"]) == (
                "invalid_input",
                "rejected",
                "malformed",
            ), n
            assert d["detail"].startswith(f"line {n}: "), d["detail"]
            assert EXPECTED[n] in d["detail"], (n, d["detail"])
        else:
            assert d["command_type"] == "claim" and d["kind"] == "accepted", (n, d)
    assert f"{len(BLANK)} blank line(s) skipped" in r.stderr
    assert f"{len(EXPECTED)} command(s) rejected" in r.stderr
    for check in ("verify", "audit"):
        done = _run(["--data", "g", check], tmp_path)
        assert done.returncode == 0, done.stderr


def test_a_line_longer_than_max_line_is_decided_without_being_read_whole(tmp_path: Path) -> None:
    """With --max-line 1000, the 5,035-byte line of submit-long-line.jsonl is one rejection
    giving its full length; the lines around it are decided as usual."""
    _graph_dir(tmp_path)
    r = _run(
        ["--data", "g", "submit", "--max-line", "1000", str(DATA / "submit-long-line.jsonl")],
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    kinds = [(d["command_id"], d["kind"]) for d in map(json.loads, r.stdout.splitlines())]
    assert kinds == [("long-ok-1", "accepted"), ("", "rejected"), ("long-ok-2", "accepted")]
    detail = json.loads(r.stdout.splitlines()[1])["detail"]
    assert detail == "line 2: the line has 5035 bytes; at most 1000"


def test_read_lines_holds_at_most_max_line_bytes_of_a_line() -> None:
    """The reader hands over at most max_line + 1 bytes of a line, however long it is, and
    still counts its full length; the newline is not part of a line."""
    data = b"short\n" + b"y" * 50_000 + b"\n" + b"z" * 70_000 + b"\nlast"
    got = list(read_lines(io.BytesIO(data), 100))
    assert [(n, len(raw), size) for n, raw, size in got] == [
        (1, 5, 5),
        (2, 101, 50_000),
        (3, 101, 70_000),
        (4, 4, 4),
    ]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--based-on", "99999999999999999999"], "based_on_version"),
        (["--asserted-at", "9" * 5000], "out of the signed 64-bit range"),
        (["--asserted-at", "1e400"], "not an ISO 8601 time"),
        (["--confidence", "nan"], "confidence"),
    ],
)
def test_cli_flags_out_of_range_are_clear_input_errors(
    tmp_path: Path, args: list[str], named: str
) -> None:
    """assert with a version, time or confidence the wire cannot carry exits 4 with one line
    naming it (--based-on 99999999999999999999 exited 70, an internal error)."""
    _graph_dir(tmp_path)
    r = _run(
        ["--data", "g", "assert", "depends_on", "service:a", "service:b", "--agent",
         "inventory-agent", *args],
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 4, r.stderr
    assert named in r.stderr and "internal error" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_depth_check_ignores_brackets_in_strings_and_escapes() -> None:
    """The depth check counts structure only: brackets inside strings, after escaped quotes
    and in an unterminated string do not nest; 32 deep passes, 33 does not, anywhere in the
    text (also past its first 64 KiB)."""
    assert not too_deep(b'{"a": "' + b"[" * 50 + b'", "b": [1, [2]]}', 32)
    assert not too_deep(b'["\\"' + b"[" * 50 + b'", [[]]]', 32)
    assert too_deep(b'["\\\\"' + b"[" * 50 + b'"]', 32)  # an escaped backslash: a real quote
    assert not too_deep(b'"' + b"[" * 100, 32)
    assert not too_deep(b"[" * 32 + b"]" * 32, 32)
    assert too_deep(b"[" * 33 + b"]" * 33, 32)
    assert too_deep(b"[]" * 100_000 + b"{" * 33 + b"}" * 33, 32)
    assert not too_deep(b"[[[]]]" * 100_000, 32)


def test_strict_types_at_the_json_ingress() -> None:
    """A confidence given as text or as a boolean, a version given as a float, text given as
    a number: each refused by name; an integer confidence is a number."""
    base: dict[str, Any] = {
        "type": "assert",
        "edge_type": "e",
        "subject": "a:b",
        "object": "c:d",
        "agent": "x",
    }
    for field, value in [
        ("confidence", "0.5"),
        ("confidence", True),
        ("based_on_version", 1.0),
        ("based_on_version", False),
        ("reasoning", 5),
        ("evidence", ["ok", 3]),
        ("properties", {"k": 1}),
        ("agent", 7),
    ]:
        try:
            parse_command({**base, field: value}, "g")
        except claimgraph.InputError as exc:
            assert field in str(exc), (field, value, str(exc))
        else:
            raise AssertionError(f"{field}={value!r} was accepted")
    assert parse_command({**base, "confidence": 1}, "g")["confidence"] == 1.0  # type: ignore[typeddict-item]


# -- generated JSON Lines ---------------------------------------------------------------------

_FIELDS = ["type", "edge_type", "subject", "object", "agent", "task", "confidence", "evidence",
           "reasoning", "asserted_at", "based_on_version", "properties", "command_id",
           "run_id", "claim_id", "conflict_id", "winner", "reject_all", "expires_at",
           "grantee_agent", "document", "count", "to", "graph"]  # fmt: skip
_TYPES = ["assert", "deny", "retract", "resolve", "grant", "revoke", "escalate", "read_blocked",
          "publish_schema", "erase", "register_key", "revoke_key", "upgrade_rules", "tick",
          "refused", "invalid_input", "signed", "nope"]  # fmt: skip
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),  # includes lone surrogates
    st.sampled_from(["service:a", "service:b", "inventory", "depends_on", "2026-01-01T00:00:00Z"]),
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_commands = st.fixed_dictionaries(
    {"type": st.sampled_from(_TYPES)},
    optional={f: _json for f in _FIELDS if f != "type"},
)


def _encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


_lines = st.one_of(
    _commands.map(_encode),
    _json.map(_encode),
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b" ")),
    st.integers(min_value=30, max_value=3000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(min_value=30, max_value=3000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
    st.just(b""),
    st.just(b" \t\r"),
)


def test_generated_lines_each_get_one_decision(tmp_path: Path) -> None:
    """Hypothesis-generated JSON Lines (command-shaped objects with any values, any JSON, any
    bytes, deep nesting, blank lines): every non-blank line becomes exactly one record and one
    decision, nothing raises, and verify and audit pass over the whole log afterwards."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    limits = InputLimits(max_line=4096, max_depth=32)
    seen = [0]

    @settings(
        max_examples=150,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.lists(_lines, min_size=1, max_size=12))
    def check(lines: list[bytes]) -> None:
        stream = io.BytesIO(b"\n".join(lines) + b"\n")
        records = []
        for n, raw, size in read_lines(stream, limits.max_line):
            if size <= limits.max_line and not raw.strip():
                continue
            rec = line_record(raw, n, g.name, "inventory", limits, size=size)
            assert decode_command(rec)["type"] != "refused"
            records.append(rec)
        assert len(records) == sum(1 for x in lines if x.strip())
        receipts = g.submit(records)
        assert len(receipts) == len(records)
        seen[0] += len(receipts)

    check()
    assert seen[0] > 0 and g.head() >= seen[0]
    verify(g)
    audit(g)
    g.close()


# -- the fast path of plain claims against the spec (pydantic) --------------------------------

# the declared bounds (LIMITS) and just past them: a bound changed moves these edges with it
_ID, _EV, _EVS = LIMITS["id"], LIMITS["evidence_item"], LIMITS["evidence_items"]
_PV, _PROPS, _RS = LIMITS["property_value"], LIMITS["properties"], LIMITS["reasoning"]
_VALID_CLAIM: dict[str, Any] = {
    "type": st.sampled_from(["assert", "deny"]),
    "edge_type": st.sampled_from(["depends_on", "e" * _ID, "é"]),
    "subject": st.sampled_from(["service:a", "a:b:c", "t" * _ID + ":" + "i" * _ID]),
    "object": st.sampled_from(["service:b", "服务:账单"]),
    "agent": st.sampled_from(["inventory", "a" * _ID]),
    "task": st.sampled_from(["", "t" * _ID]),
    "command_id": st.sampled_from(["c-1", "c" * _ID]),
    "graph": st.sampled_from(["g", "other", None]),
    "run_id": st.sampled_from(["r-1", None]),
    "confidence": st.one_of(st.sampled_from([0, 1, 0.0, 1.0, -0.0]), st.floats(0, 1)),
    "evidence": st.lists(st.text(max_size=5), max_size=3),
    "reasoning": st.text(max_size=10),
    "asserted_at": st.sampled_from([0, 2**63 - 1, -(2**63)]),
    "based_on_version": st.sampled_from([-1, 0, 2**63 - 1, None]),
    "properties": st.dictionaries(st.text(min_size=1, max_size=4), st.text(max_size=4), max_size=3),
}
_EDGE_VALUES = ["", "x" * _ID, "x" * (_ID + 1), "a:", ":b", "a:b", "\ud800", "a:\ud800", 0,
                -1, -2, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 1.0000001, 1.5, 0.5,
                float("inf"), float("nan"), True, False, None, "2026-01-01Z", ["e" * _EV],
                ["e" * (_EV + 1)], ["e"] * _EVS, ["e"] * (_EVS + 1), [1], {"k": 1}, {"": "v"},
                {"k" * (_ID + 1): "v"}, {"k": "v" * (_PV + 1)},
                {f"k{i}": "v" for i in range(_PROPS + 1)}, "r" * _RS, "r" * (_RS + 1),
                {"type": "service", "id": "a"}, ["service", "a"], "assert", "deny", "retract",
                "claim"]  # fmt: skip
_WEIRD = st.one_of(
    _scalars,
    st.sampled_from(_EDGE_VALUES),
    st.sampled_from(["", "x" * (_ID + 1), "a:", ":b", "\ud800", "a:\ud800", 2**63,
                     -(2**63) - 1, -2, 1.0000001, 1.5, True, "2026-01-01Z", ["e" * (_EV + 1)],
                     ["e"] * (_EVS + 1), {"k": 1}, {"": "v"},
                     {f"k{i}": "v" for i in range(_PROPS + 1)}, "r" * (_RS + 1),
                     {"type": "service", "id": "a"}, ["service", "a"]]),
    st.lists(_scalars, max_size=2),
)  # fmt: skip
_claim_values = st.tuples(
    st.fixed_dictionaries(_VALID_CLAIM),
    st.lists(st.sampled_from([*_VALID_CLAIM, "extra", "type"]), max_size=3),  # to break
    st.lists(_WEIRD, min_size=3, max_size=3),
    st.lists(st.sampled_from(list(_VALID_CLAIM)), max_size=3),  # to drop
).map(
    lambda t: {
        k: v
        for k, v in {**t[0], **dict(zip(t[1], t[2], strict=False))}.items()
        if k not in t[3] or k in t[1]
    }
)


def _spec_record(value: Any) -> bytes | str:
    from claimgraph.core.wire import encode_command
    from claimgraph.service.inputs import parse_command_spec

    try:
        return encode_command(parse_command_spec(value, "g"))
    except claimgraph.InputError as exc:
        return str(exc)


def test_the_fast_claim_path_makes_the_records_of_the_spec() -> None:
    """On generated claims (valid ones with up to three fields replaced by values at, inside
    and past their bounds, of every JSON type, or dropped, or an extra field), fast_record
    either declines (None) or makes the very record the pydantic spec makes: it never
    accepts what the spec refuses. Ids and times are given (not filled at random) so the
    records compare byte for byte."""
    from claimgraph.service.inputs import fast_record

    seen: Counter[str] = Counter()

    @settings(max_examples=3000, deadline=None, derandomize=True)
    @given(_claim_values)
    def check(value: dict[str, Any]) -> None:
        for k, v in (("command_id", "c-0"), ("asserted_at", 7)):  # None: filled at random
            value[k] = v if value.get(k) is None else value[k]
        fast = fast_record(dict(value), "g")
        spec = _spec_record(dict(value))
        if fast is not None:
            assert fast == spec, (value, spec)
        seen["fast" if fast else "declined, spec ok" if isinstance(spec, bytes) else "bad"] += 1

    check()
    assert seen["fast"] > 500 and seen["bad"] > 500, seen
    base = {"type": "assert", "edge_type": "e", "subject": "a:b", "object": "c:d",
            "agent": "x", "command_id": "c-0", "asserted_at": 7}  # fmt: skip
    for field in [*_VALID_CLAIM, "extra"]:
        for v in _EDGE_VALUES:  # every field at, inside and past each bound, one at a time
            value = {**base, field: v}
            if field in ("command_id", "asserted_at") and v is None:
                continue
            fast = fast_record(dict(value), "g")
            if fast is not None:
                assert fast == _spec_record(dict(value)), value


def test_the_fast_path_takes_plain_claims() -> None:
    """The fast path is taken for the plain lines `submit` sees most (so the property test
    above compares real records, not only refusals), and fills ids and times as the spec
    does."""
    from claimgraph.service.inputs import fast_record

    plain = {"type": "assert", "edge_type": "e", "subject": "a:b", "object": "c:d",
             "agent": "x", "task": "t", "confidence": 0.5, "evidence": ["s"],
             "reasoning": "why", "asserted_at": 5, "command_id": "c-1",
             "properties": {"k": "v"}, "based_on_version": 3, "run_id": "r"}  # fmt: skip
    rec = fast_record(dict(plain), "g")
    assert rec is not None and rec == _spec_record(dict(plain))
    bare = decode_command(fast_record({"type": "deny", "edge_type": "e", "subject": "a:b",
                                       "object": "c:d", "agent": "x"}, "g") or b"")  # fmt: skip
    assert bare["command_id"] and bare["asserted_at"] > 1_700_000_000_000  # type: ignore[typeddict-item]


def test_submit_prints_each_decision_verbatim(tmp_path: Path) -> None:
    """submit's stdout is plain JSON Lines, one decision per line: text that a console
    would render (``:smile:`` emoji codes, ``[bold]`` markup, long lines) comes out as
    written, and the order is the input's."""
    _graph_dir(tmp_path)
    why = ":smile: [bold]not markup[/bold] ünïcödé \u2028 " + "w" * 300
    lines = [
        json.dumps(
            {
                "type": "assert",
                "edge_type": "depends_on",
                "subject": f"service:s{i}",
                "object": "service:db",
                "agent": "inventory-agent",
                "reasoning": why,
                "command_id": f"v-{i}",
            }
        )
        for i in range(3)
    ]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = _run(["--data", "g", "submit", "in.jsonl"], tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("\n")  # not splitlines(): U+2028 inside a line is not a line break
    assert out.pop() == ""
    assert [json.loads(x)["command_id"] for x in out] == ["v-0", "v-1", "v-2"]
    assert all(json.loads(x)["claim"]["reasoning"] == why for x in out)
    # compact JSON, UTF-8 as written: each line is exactly its value re-encoded without spaces
    assert all(
        x == json.dumps(json.loads(x), ensure_ascii=False, separators=(",", ":")) for x in out
    )
    assert r.stderr == ""  # no progress bar when stderr is not a terminal


def test_json_output_shows_bytes_as_hex(capsys: pytest.CaptureFixture[str]) -> None:
    """Both JSON outputs of the CLI (one value, and bulk JSON Lines) show bytes as hex, as the
    HTTP API does, and anything else JSON has no type for as its ``str``."""
    from claimgraph.cli.common import emit, emit_lines

    value = {"public_key": b"\x01\xff", "at": Path("/x")}
    emit(value)
    emit_lines([value, value])
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(x) for x in out] == [{"public_key": "01ff", "at": "/x"}] * 3
