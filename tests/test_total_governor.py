"""A total governor, tested from its declared input domain (STYLE 19).

Commands are drawn from the command catalogue's declaration (:mod:`claimgraph.core.commands`):
every command type, every field from its :class:`~claimgraph.core.commands.Domain`, weighted
to the edges (min, max, max+1, 0, negative, NaN and ±inf, the int64 extremes, the largest
time and one past it, empty, longest and longest+1, lone surrogates, control characters,
duplicate ids), on schemas drawn from the spec's own enums (every conflict policy,
cardinality, staleness rule, reader rule, domain, fallback mode and exit action). A new
field, bound, command type or policy widens the streams with no edit here.

The property: one decision per command, no exception, no ``internal_error`` (a rule that
failed), and a replay of the same bytes gives the same decisions. The short run is part of
``make test``; ``make soak`` (``SLOW=1 -m slow``) runs the soak, and CI does.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claimgraph.core.commands import COMMANDS, I64, LIMITS, Domain, Kind
from claimgraph.core.model import Cardinality, ConflictPolicy, DecisionKind, OnStale, OnUnknown
from claimgraph.core.schema.types import DOMAIN_FALLBACKS, EXIT_ACTIONS, FALLBACK_MODES
from claimgraph.core.state import GraphState
from claimgraph.core.wire import encode_command, encode_decision
from claimgraph.native.decide import decide, evolve

GRAPH = "g"
T0 = 1_700_000_000_000
ADMIN = "admin"
AGENTS = ("a1", "a2", ADMIN, "judge", "human:ann")
NODE_TYPES = ("n", "m")
EDGE_NAMES = ("e0", "e1", "e2")
NODE_IDS = ("x", "y", "z")
DOMAINS = (*DOMAIN_FALLBACKS, "general")


# -- schemas from the spec's enums --------------------------------------------------------------


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A valid schema whose edge types take every policy, cardinality and rule the format has."""
    edge_types = []
    for name in draw(st.lists(st.sampled_from(EDGE_NAMES), min_size=1, max_size=3, unique=True)):
        et: dict[str, Any] = {
            "name": name,
            "subject": draw(st.sampled_from(NODE_TYPES)),
            "object": draw(st.sampled_from(NODE_TYPES)),
            "writers": [{"agent": draw(st.sampled_from(("a*", "*", "a1")))}],
            "cardinality": draw(st.sampled_from(list(Cardinality))).value,
            "conflict_policy": draw(st.sampled_from(list(ConflictPolicy))).value,
            "on_stale": draw(st.sampled_from(list(OnStale))).value,
            "on_unknown": draw(st.sampled_from(list(OnUnknown))).value,
            "domain": draw(st.sampled_from(DOMAINS)),
        }
        mode = draw(st.sampled_from((None, *FALLBACK_MODES)))
        if mode is not None or et["domain"] in DOMAIN_FALLBACKS:
            et["fallback"] = {"value": draw(st.sampled_from(NODE_IDS))}
            if mode is not None:
                et["fallback"]["mode"] = mode
        if draw(st.booleans()):
            et["quarantine"] = {
                "on_exit": draw(st.sampled_from(EXIT_ACTIONS)),
                "deadline": draw(st.sampled_from((1, 5, 10**12))),
                "max_blocked_reads": draw(st.integers(1, 3)),
            }
        if draw(st.booleans()):
            et["decision"] = True
        edge_types.append(et)
    return {
        "principals": {"admins": [ADMIN], "resolvers": ["judge"], "humans": ["human:*"]},
        "node_types": list(NODE_TYPES),
        "edge_types": edge_types,
    }


# -- field values from the declared domains -------------------------------------------------


def _edge_texts(size: int, pool: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Text at and past the bounds, and odd characters, beside the pool's ordinary values."""
    return st.one_of(
        st.sampled_from(pool),
        st.sampled_from(
            (
                "",
                "x" * size,
                "x" * (size + 1),
                "é" * size,
                "\x00",
                "a\nb",
                "\u200b",
                "\ud800",  # a lone surrogate: not UTF-8 (the wire refuses it)
                "cf:" + "c1",
            )
        ),
        st.text(max_size=8),
    )


def values(dom: Domain, pool: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """Values for a field of domain ``dom``, weighted to its edges; ``pool`` for ids."""
    k = dom.kind
    if k in (Kind.ID, Kind.TEXT):
        assert dom.size is not None
        s: st.SearchStrategy[Any] = _edge_texts(dom.size, pool)
    elif k in (Kind.INT, Kind.TIME):
        assert dom.lo is not None and dom.hi is not None
        lo, hi = int(dom.lo), int(dom.hi)
        near = (lo, hi, lo - 1, hi + 1, 0, -1, 1, -(2**63), I64, LIMITS["time_max"])
        ordinary = (T0, T0 + 3) if k is Kind.TIME else (2, 3)
        s = st.one_of(
            st.sampled_from((*near, LIMITS["time_max"] + 1, *ordinary)),
            st.integers(min(lo, -(2**63)), max(hi, I64)),
        )
    elif k is Kind.FLOAT:
        s = st.sampled_from(
            (0.0, 1.0, -0.0, 0.5, 1.0000001, -1e-300, math.nan, math.inf, -math.inf, 0.99)
        )
    elif k is Kind.BYTES:
        assert dom.size is not None
        s = st.sampled_from(
            (b"", b"\x00" * dom.min_size, b"\x01" * max(0, dom.min_size - 1), b"x" * dom.size)
        ) | st.binary(max_size=40)
    elif k is Kind.LIST:
        assert dom.size is not None and dom.item is not None
        item = values(dom.item, pool)
        s = st.one_of(
            st.lists(item, max_size=3),
            st.sampled_from((dom.size, dom.size + 1)).map(lambda n: ["e"] * n),
        )
    elif k is Kind.MAP:
        assert dom.size is not None and dom.item is not None and dom.key is not None
        s = st.one_of(
            st.dictionaries(values(dom.key, pool), values(dom.item, pool), max_size=3),
            st.sampled_from((dom.size, dom.size + 1)).map(
                lambda n: {f"k{i}": "v" for i in range(n)}
            ),
        )
    else:
        s = st.sampled_from((*dom.values, "", "ASSERT"))
    return st.one_of(st.none(), s) if dom.nullable else s


def ordinary(dom: Domain, pool: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """Values well inside domain ``dom`` (so that commands reach the rules beyond the checks)."""
    k = dom.kind
    if k in (Kind.ID, Kind.TEXT):
        return st.sampled_from(pool)
    if k is Kind.TIME:
        return st.integers(T0, T0 + 6)
    if k is Kind.INT:
        assert dom.lo is not None and dom.hi is not None
        return st.integers(int(dom.lo), min(int(dom.hi), int(dom.lo) + 3))
    if k is Kind.FLOAT:
        return st.sampled_from((0.3, 0.6, 0.9, 1.0))
    if k is Kind.BYTES:
        return st.just(b"\x07" * dom.min_size)
    if k is Kind.LIST:
        assert dom.item is not None
        return st.lists(ordinary(dom.item, ("ev",)), max_size=2)
    if k is Kind.MAP:
        return st.just({})
    return st.sampled_from(dom.values)


# command types, weighted: claims most (the hot path), every other type too
KINDS = [*("claim",) * 12, *("retract", "resolve") * 3, *COMMANDS]


@st.composite
def commands(
    draw: st.DrawFn, ids: tuple[str, ...], edges: tuple[tuple[str, str, str], ...]
) -> dict[str, Any]:
    """A command of any type: mostly ordinary fields, often one at a domain's edge, now and
    then every field drawn from the edges."""
    spec = COMMANDS[draw(st.sampled_from(KINDS))]
    earlier = tuple(ids[-6:]) or ("c0",)
    new = f"c{len(ids)}"
    pools: dict[str, tuple[str, ...]] = {
        "command_id": (new,) * 6 + earlier[-1:],  # new, now and then a duplicate
        "graph": (GRAPH,) * 12 + ("other",),
        "agent": AGENTS,
        "task": ("", "t"),
        "edge_type": EDGE_NAMES,
        "subject_type": NODE_TYPES,
        "object_type": NODE_TYPES,
        "subject_id": NODE_IDS,
        "object_id": NODE_IDS,
        "claim_id": earlier,
        "winner": earlier,
        "conflict_id": tuple(f"cf:{x}" for x in earlier),
        "grant_id": earlier,
        "grantee_agent": AGENTS,
        "grantee_task": ("*", "t"),
        "resolver": ("human", "agent", "judge"),
        "key_id": ("k1",),
        "key_agent": AGENTS,
        "refused_type": ("claim",),
        "inputs": ("{}",),
    }
    mode = draw(st.integers(0, 9))  # 0-5: ordinary; 6-8: one field at an edge; 9: all of them
    edge_field = draw(st.sampled_from(list(spec.domains) or [""])) if mode >= 6 else ""
    out: dict[str, Any] = {"type": spec.type}
    for name, dom in spec.domains.items():
        pool = pools.get(name, ("v", "because"))
        if mode == 9 or name == edge_field:
            out[name] = draw(values(dom, pool))
        elif dom.nullable and draw(st.integers(0, 2)) == 0:
            out[name] = None
        else:
            out[name] = draw(ordinary(dom, pool))
    if spec.type in ("claim", "grant") and mode < 9 and draw(st.integers(0, 5)):
        # mostly an edge type of the schema, with its node types: claims reach the policies
        name, subject, obj = draw(st.sampled_from(edges))
        for k, v in (("edge_type", name), ("subject_type", subject), ("object_type", obj)):
            if k in out and k != edge_field:
                out[k] = v
    return out


def _record(command: dict[str, Any]) -> bytes:
    """The command's record, or — where the wire cannot carry a value — bytes it can't read
    (the governor meets those too: one decision each)."""
    try:
        return encode_command(command)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, KeyError, UnicodeEncodeError):
        return b"\xc3\x01" + json.dumps(command, default=repr).encode("utf-8", "replace")[:64]


@st.composite
def streams(draw: st.DrawFn, max_commands: int) -> tuple[dict[str, Any], list[bytes], list[int]]:
    schema = draw(schemas())
    publish = {
        "type": "publish_schema",
        "command_id": "s0",
        "graph": GRAPH,
        "agent": ADMIN,
        "task": "",
        "document": json.dumps(schema),
        "source": "test",
    }
    records, times, ids = [encode_command(publish)], [T0], ["s0"]  # type: ignore[arg-type]
    now = T0
    edges = tuple((et["name"], et["subject"], et["object"]) for et in schema["edge_types"])
    for _ in range(draw(st.integers(1, max_commands))):
        c = draw(commands(tuple(ids), edges))
        ids.append(str(c.get("command_id", "")))
        now += draw(st.sampled_from((0, 1, 1, 2, 10**6)))
        records.append(_record(c))
        times.append(now)
    return schema, records, times


def _run(records: list[bytes], times: list[int]) -> list[bytes]:
    state = GraphState(GRAPH)
    out = []
    for v, (rec, t) in enumerate(zip(records, times, strict=True)):
        d = decide(state, rec, v, t)
        assert d["kind"] in {k.value for k in DecisionKind}, d
        assert d["reason"] != "internal_error", d["detail"]  # a rule failed: a bug to fix
        raw = encode_decision(d)
        evolve(state, d, v, raw)
        out.append(raw)
    return out


SOAK = os.environ.get("SLOW") == "1"


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(streams(max_commands=30))
def test_every_command_drawn_from_the_declared_domain_gets_one_decision(
    stream: tuple[dict[str, Any], list[bytes], list[int]],
) -> None:
    """Commands of every type with fields at and past every declared bound, on schemas of
    every policy: one decision each, no exception, no internal error, identical on replay."""
    _, records, times = stream
    first = _run(records, times)
    assert len(first) == len(records)
    assert _run(records, times) == first


@pytest.mark.slow
@settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(streams(max_commands=80))
def test_the_declared_domain_soak(stream: tuple[dict[str, Any], list[bytes], list[int]]) -> None:
    """The same property over longer streams and many more examples (make bench / -m slow)."""
    _, records, times = stream
    assert len(_run(records, times)) == len(records)


def test_every_field_of_every_command_type_has_a_domain() -> None:
    """The declaration is complete: each command type declares every field it carries on the
    wire (its Avro record), envelope included, and nothing else."""
    from claimgraph.core.wire import registry

    reg = registry()
    for spec in COMMANDS.values():
        avro = reg.current(spec.type).schema
        wire = [f["name"] for f in avro["fields"]]
        assert list(spec.domains) == wire, spec.type
