"""Hypothesis strategies: valid graph schemas and command streams in which conflicts happen.

Pools are small on purpose (a few agents, tasks and node ids, event times within a few ms) so
that random streams collide: slot and polarity conflicts, stale claims, retracts by owners and
by others, resolves by resolvers and by others, grants that expire or are revoked, duplicate
command ids, and a few records that are not commands at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, TypeVar

from hypothesis import strategies as st

from claimgraph.core.governor import decide
from claimgraph.core.model import Cardinality, ConflictPolicy, OnStale, OnUnknown
from claimgraph.core.schema.types import DOMAIN_FALLBACKS, EXIT_ACTIONS, FALLBACK_MODES
from claimgraph.core.state import VISIBLE, WITHHELD, GraphState
from claimgraph.core.wire import MARKER, encode_command, fingerprints

__all__ = [
    "AGENTS",
    "GRAPH",
    "T0",
    "Stream",
    "build",
    "claim",
    "command_specs",
    "publish",
    "resolve",
    "retract",
    "schema_documents",
    "schema_revisions",
    "stream_of",
    "streams",
]

T = TypeVar("T")
GRAPH = "g"
T0 = 1_700_000_000_000  # log and event times are T0 + a few ms
NODE_TYPES = ("svc", "db", "env")
EDGE_NAMES = ("owns", "runs", "uses", "peer")
NODE_IDS = ("n0", "n1", "n0", "n1", "n2")  # n2 is rarer
ADMIN = "admin"
AGENTS = ("a1", "a2", "a3", "rogue", ADMIN, "judge")
TASKS = ("t1", "t2", "")
AGENT_PATTERNS = ("a*", "a1", "a[12]", "a2", "a3", "*")
TASK_PATTERNS = ("t1", "t2", "t*", "*")
# Drawn from the specification's own declarations, so a value it gains is drawn unasked (the
# first option of on_stale and on_unknown is the default, left out of the documents).
CARDINALITIES = tuple(c.value for c in Cardinality)
POLICIES = tuple(p.value for p in ConflictPolicy)
ON_STALE = tuple(o.value for o in OnStale)
ON_UNKNOWN = (OnUnknown.UNKNOWN.value, *(o.value for o in OnUnknown))  # unknown twice as often
DOMAINS = ("general", *DOMAIN_FALLBACKS)  # general: the fallback's mode is drawn too
# Command kinds, repeated to weight them; shrinking goes towards the first.
KINDS = (
    *("claim",) * 12,
    *("retract",) * 3,
    *("resolve",) * 5,
    "escalate",
    *("grant",) * 2,
    "revoke",
    *("tick",) * 2,
    "publish",
    *("read_blocked",) * 2,
    "garbage",
)


@st.composite
def schema_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A valid graph schema (as a mapping): 2-3 node types, 1-4 edge types, admins, resolvers."""
    nodes = draw(st.lists(st.sampled_from(NODE_TYPES), min_size=2, max_size=3, unique=True))
    names = draw(st.lists(st.sampled_from(EDGE_NAMES), min_size=1, max_size=4, unique=True))
    edge_types = []
    for name in names:
        writers = []
        for _ in range(draw(st.integers(1, 2))):
            w = {"agent": draw(st.sampled_from(AGENT_PATTERNS))}
            if draw(st.booleans()):
                w["task"] = draw(st.sampled_from(TASK_PATTERNS))  # default: any task
            writers.append(w)
        et = {
            "name": name,
            "subject": draw(st.sampled_from(nodes)),
            "object": draw(st.sampled_from(nodes)),
            "writers": writers,
            "cardinality": draw(st.sampled_from(CARDINALITIES)),
            "conflict_policy": draw(st.sampled_from(POLICIES)),
        }
        for key, options in (("on_stale", ON_STALE), ("on_unknown", ON_UNKNOWN)):
            value = draw(st.sampled_from(options))
            if value != options[0]:  # the first option is the default: leave it out
                et[key] = value
        if draw(st.booleans()):  # exit conditions, in log ms (ticks advance time a little)
            exits: dict[str, Any] = {"on_exit": draw(st.sampled_from(EXIT_ACTIONS))}
            if draw(st.booleans()):
                exits["deadline"] = draw(st.integers(1, 12))
            if draw(st.booleans()):
                exits["max_blocked_reads"] = draw(st.integers(1, 3))
            if draw(st.booleans()):
                exits["escalate_after_runs"] = draw(st.integers(1, 2))
            et["quarantine"] = exits
            et["domain"] = draw(st.sampled_from(DOMAINS))
            et["fallback"] = {"value": draw(st.sampled_from(NODE_IDS))}
            if et["domain"] == "general":
                et["fallback"]["mode"] = draw(st.sampled_from(FALLBACK_MODES))
        if et["conflict_policy"] == "confidence-weighted-merge" and draw(st.booleans()):
            et["merge"] = {"margin": draw(st.sampled_from((0.0, 0.1, 0.5)))}
        edge_types.append(et)
    admins = draw(st.sampled_from(([ADMIN], [ADMIN, "judge"], ["adm*"])))
    resolvers = ["judge", *draw(st.lists(st.sampled_from(("a1", "j*")), max_size=2, unique=True))]
    return {
        "principals": {"admins": admins, "resolvers": resolvers},
        "node_types": nodes,
        "edge_types": edge_types,
    }


@st.composite
def schema_revisions(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """A later revision of ``base``: the same node and edge types, some policies redrawn."""
    edge_types = []
    for et in base["edge_types"]:
        et = dict(et)
        for key, options in (
            ("cardinality", CARDINALITIES),
            ("conflict_policy", POLICIES),
            ("on_stale", ON_STALE),
            ("on_unknown", ON_UNKNOWN),
        ):
            if draw(st.booleans()):
                et[key] = draw(st.sampled_from(options))
        edge_types.append(et)
    return {**base, "edge_types": edge_types}


def document(schema: dict[str, Any]) -> str:
    """A schema mapping as a YAML document (JSON is YAML)."""
    return json.dumps(schema)


def _writes(schema: dict[str, Any], edge_type: str, agent: str, task: str) -> bool:
    for et in schema["edge_types"]:
        if et["name"] == edge_type:
            return any(
                fnmatchcase(agent, w["agent"]) and fnmatchcase(task, w.get("task", "*"))
                for w in et["writers"]
            )
    return False


@dataclass(frozen=True)
class Stream:
    """A command stream: the records to append, their log times, and what they mention."""

    schema: dict[str, Any]  # the schema published first
    records: tuple[bytes, ...]
    times: tuple[int, ...]  # log append time of each record (the governor's now)
    commands: tuple[dict[str, Any] | None, ...]  # the command of each record (None: garbage)
    edges: tuple[tuple[str, str, str, str, str], ...]  # every edge a claim names
    nodes: tuple[tuple[str, str], ...]  # every node a claim names
    edge_types: tuple[str, ...]  # every edge type a claim or a schema names

    def __repr__(self) -> str:
        lines = [f"Stream(schema={document(self.schema)}, commands=["]
        for i, (c, t) in enumerate(zip(self.commands, self.times, strict=True)):
            lines.append(f"  {i:>3} @T0+{t - T0:<4} {describe(c, self.records[i])}")
        return "\n".join([*lines, "])"])

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def describe(c: dict[str, Any] | None, record: bytes) -> str:
    """One line per command, for readable falsifying examples."""
    if c is None:
        return f"garbage {record!r}"
    who = f"by {c['agent']}/{c['task']}"
    kind = c["type"]
    if kind == "claim":
        based = c["based_on_version"]
        return (
            f"{c['command_id']} {c['polarity']} {c['edge_type']}({c['subject_type']}:"
            f"{c['subject_id']} -> {c['object_type']}:{c['object_id']}) {who} "
            f"asserted_at=T0+{c['asserted_at'] - T0}"
            + ("" if based is None else f" based_on={based}")
        )
    if kind == "retract":
        return f"{c['command_id']} retract {c['claim_id']} {who}"
    if kind == "resolve":
        return f"{c['command_id']} resolve {c['conflict_id']} winner={c['winner']} {who}"
    if kind == "grant":
        exp = "never" if c["expires_at"] is None else f"T0+{c['expires_at'] - T0}"
        return (
            f"{c['command_id']} grant {c['edge_type']} to {c['grantee_agent']}/"
            f"{c['grantee_task']} expires={exp} {who}"
        )
    if kind == "revoke":
        return f"{c['command_id']} revoke {c['grant_id']} {who}"
    if kind == "publish_schema":
        return f"{c['command_id']} publish {c['document']} {who}"
    if kind == "read_blocked":
        return f"{c['command_id']} read_blocked {c['conflict_id']} x{c['count']} run={c['run_id']}"
    if kind == "escalate":
        return f"{c['command_id']} escalate {c['conflict_id']} {who}"
    return f"{c['command_id']} {kind} {who}"


class _Picks:
    """Turns one integer into choices (its digits in a mixed radix); 0 picks the simplest.

    One integer per command keeps the choice sequence short, which keeps shrinking fast.
    """

    def __init__(self, value: int) -> None:
        self.value = value

    def below(self, n: int) -> int:
        """A number in ``range(n)``."""
        self.value, v = divmod(self.value, n)
        return v

    def of(self, options: Sequence[T]) -> T:
        return options[self.below(len(options))]

    def near(self, ids: Sequence[str]) -> str:
        """An id (``c<n>`` or ``cf:c<n>``): the first with n >= a pick, else the last one.

        Choosing by number rather than by position keeps the choice when the shrinker deletes
        other commands.
        """
        ordered = sorted(ids, key=_number)
        v = self.below(256)
        return next((x for x in ordered if _number(x) >= v), ordered[-1])

    def one_in(self, n: int) -> bool:
        """True with probability 1/n (False when shrunk)."""
        return self.below(n) == n - 1


def _number(command_id: str) -> int:
    return int(command_id.rsplit("c", 1)[1])


Spec = tuple[str, int, int]  # (command kind, command number, choices)


def command_specs(max_commands: int) -> st.SearchStrategy[list[Spec]]:
    """Fixed-shape command specs, so that the shrinker can delete and simplify commands.

    Drawn as a list of short runs: a flat list would average only a handful of commands,
    too few for conflicts, while each run and each command in it stays deletable.
    """
    # eight random bytes, not st.integers: those are mostly small, i.e. mostly simplest choices
    choices = st.binary(min_size=8, max_size=8).map(lambda b: int.from_bytes(b, "little"))
    spec = st.tuples(st.sampled_from(KINDS), st.integers(0, 255), choices)
    runs = st.lists(st.lists(spec, min_size=1, max_size=10), min_size=1, max_size=max_commands // 5)
    return runs.map(lambda rs: [s for r in rs for s in r][:max_commands])


@st.composite
def streams(draw: st.DrawFn, max_commands: int = 40, revisions: tuple[int, int] = (0, 2)) -> Stream:
    """A schema and a stream of commands over small pools (see :func:`build`).

    ``revisions`` bounds how many other schemas (revisions of the first, or new ones) later
    publishes may bring into force; ``(0, 0)`` keeps one schema throughout.
    """
    schema = draw(schema_documents())
    low, high = revisions
    others = draw(
        st.lists(schema_revisions(schema) | schema_documents(), min_size=low, max_size=high)
    )
    publish_at = draw(st.sampled_from((0, 0, 0, 0, 1, 2)))
    return build(schema, others, publish_at, draw(command_specs(max_commands)))


def build(
    schema: dict[str, Any], others: list[dict[str, Any]], publish_at: int, specs: list[Spec]
) -> Stream:
    """Turn command specs into a stream.

    The admin publishes ``schema`` at ``publish_at``; a later publish may bring one of
    ``others`` into force. Half the claims go to a hot spot (the first edge type) so that
    conflicts happen, next to each other. The pure governor runs alongside only to
    *aim* resolves and retracts at conflicts and claims that are live (conflict ids are
    ``cf:`` + the id of the command that opened them); some still name closed or unknown
    conflicts and dead claims.
    """
    names = [et["name"] for et in schema["edge_types"]]
    state = GraphState(GRAPH)
    now = T0
    commands: list[dict[str, Any] | None] = []
    records: list[bytes] = []
    times: list[int] = []
    claims: list[tuple[str, str]] = []  # (claim id, agent) of every claim command
    grants: list[str] = []
    grantees: list[tuple[str, str]] = []  # an (agent, task) each grant would admit
    for i, (spec_kind, number, choices) in enumerate(specs):
        p = _Picks(choices)
        kind = "publish" if i == publish_at else spec_kind
        now += p.below(4)
        cid = "s0" if i == publish_at else f"c{number}"  # numbers may repeat: duplicate ids
        env = {"command_id": cid, "graph": GRAPH, "agent": p.of(AGENTS), "task": p.of(TASKS)}
        claim_ids = [c for c, _ in claims] or ["c999"]
        cmd: dict[str, Any] | None = None
        if kind == "claim":
            hot = p.below(2) == 0
            et_name = names[0] if hot else p.of([*names * 4, "other"])
            et = next((e for e in schema["edge_types"] if e["name"] == et_name), None)
            s_type = et["subject"] if et else p.of(NODE_TYPES)
            o_type = et["object"] if et else p.of(NODE_TYPES)
            if p.one_in(16):
                s_type = p.of(NODE_TYPES)  # maybe a type mismatch
            allowed = [(a, t) for a in AGENTS for t in TASKS if _writes(schema, et_name, a, t)]
            who = p.below(8)  # mostly a writer of the first schema, sometimes a grantee
            if allowed and who < 5:
                env["agent"], env["task"] = p.of(allowed)
            elif grantees and who < 7:
                env["agent"], env["task"] = p.of(grantees)
            cmd = {
                "type": "claim",
                **env,
                "run_id": None,
                "edge_type": et_name,
                "subject_type": s_type,
                "subject_id": p.of(NODE_IDS),
                "object_type": o_type,
                "object_id": p.of(NODE_IDS),
                "polarity": p.of(("assert", "assert", "deny")),
                "confidence": p.of((1.0, 0.9, 0.5, 0.1)),
                "evidence": [],
                "reasoning": "",
                "asserted_at": T0 + p.below(13),
                "based_on_version": max(-1, i - p.below(8)) if p.one_in(4) else None,
                "properties": {},
            }
            claims.append((cid, env["agent"]))
        elif kind == "retract":
            held = [k for k, c in state.claims.items() if c.status == WITHHELD]
            live = [k for k, c in state.claims.items() if c.status == VISIBLE] + held
            aim = p.below(3)  # a withheld claim (the interesting case), a live one, or any
            target = p.near(held if held and aim == 0 else live if live and aim < 2 else claim_ids)
            if not p.one_in(4):  # usually the owner
                env["agent"] = next((a for c, a in claims if c == target), "a1")
            cmd = {"type": "retract", **env, "run_id": None, "claim_id": target, "reason": ""}
        elif kind == "resolve":
            open_ = [c for c in state.conflicts.values() if c.open]
            if open_ and not p.one_in(4):
                conflict = state.conflicts[p.near([c.conflict_id for c in open_])]
                conflict_id, candidates = conflict.conflict_id, list(conflict.claims)
            else:
                conflict_id, candidates = f"cf:{p.near(claim_ids)}", claim_ids
            winner = (p.near(candidates), None, p.near(claim_ids))[p.below(3)]
            if not p.one_in(3):
                env["agent"] = p.of(("judge", ADMIN, "a1"))
            cmd = {
                "type": "resolve",
                **env,
                "conflict_id": conflict_id,
                "winner": winner,
                "resolver": "human",
                "rationale": "",
            }
        elif kind == "grant":
            if not p.one_in(4):
                env["agent"] = ADMIN
            cmd = {
                "type": "grant",
                **env,
                "grantee_agent": p.of(("rogue", "a1", "a3", "r*", "*")),
                "grantee_task": p.of(("*", "t1", "t*")),
                "edge_type": p.of([*names, "*", "other"]),
                "expires_at": now + p.below(32) - 1 if p.below(2) else None,  # <= now: rejected
            }
            grants.append(cid)
            agent, task = cmd["grantee_agent"], cmd["grantee_task"]  # patterns
            grantees.append(({"r*": "rogue", "*": "a2"}.get(agent, agent), task.replace("*", "2")))
        elif kind == "revoke":
            if not p.one_in(4):
                env["agent"] = ADMIN
            cmd = {"type": "revoke", **env, "grant_id": p.near(grants or ["c999"])}
        elif kind == "tick":
            now += p.below(21)
            cmd = {"type": "tick", **env, "agent": "ticker", "task": ""}
        elif kind == "publish":
            doc = schema
            if i == publish_at or not p.one_in(4):
                env["agent"] = ADMIN
            if i != publish_at and others and p.below(3) > 0:
                doc = p.of(others)
            text = "edge_types: 3" if i != publish_at and p.one_in(5) else document(doc)
            cmd = {"type": "publish_schema", **env, "document": text, "source": "s.yaml"}
        elif kind == "read_blocked":
            open_ids = [c.conflict_id for c in state.conflicts.values() if c.open]
            cmd = {
                "type": "read_blocked",
                **env,
                "run_id": p.of([None, "r1", "r2"]),
                "conflict_id": p.near(open_ids)
                if open_ids and not p.one_in(4)
                else f"cf:{p.near(claim_ids)}",
                "count": 1 + p.below(3),
            }
        elif kind == "escalate":
            if not p.one_in(4):
                env["agent"] = "judge"
            open_ids = [c.conflict_id for c in state.conflicts.values() if c.open]
            cmd = {
                "type": "escalate",
                **env,
                "conflict_id": p.near(open_ids) if open_ids else f"cf:{p.near(claim_ids)}",
                "reason": "unsure",
                "resolver": "rules:x",
            }
        if cmd is None:  # garbage: random bytes, or a known fingerprint with a broken body
            size = p.below(16)
            junk = p.below(256**size).to_bytes(size, "little")
            fp = p.of(["", *sorted(v for k, v in fingerprints().items() if k != "decision")])
            record = (MARKER + bytes.fromhex(fp) if fp else b"") + junk
        else:
            record = encode_command(cmd)  # type: ignore[arg-type]
        state.evolve(decide(state, record, i, now), i)
        commands.append(cmd)
        records.append(record)
        times.append(now)
    return _stream(schema, commands, records, times)


def _stream(
    schema: dict[str, Any],
    commands: Sequence[dict[str, Any] | None],
    records: Sequence[bytes],
    times: Sequence[int],
) -> Stream:
    claims = [c for c in commands if c is not None and c["type"] == "claim"]
    edges = sorted(
        {
            (c["edge_type"], c["subject_type"], c["subject_id"], c["object_type"], c["object_id"])
            for c in claims
        }
    )
    types = {et["name"] for et in schema["edge_types"]} | {c["edge_type"] for c in claims}
    for c in commands:
        if c is not None and c["type"] == "publish_schema" and c["document"].startswith("{"):
            types.update(et["name"] for et in json.loads(c["document"])["edge_types"])
    return Stream(
        schema=schema,
        records=tuple(records),
        times=tuple(times),
        commands=tuple(commands),
        edges=tuple(edges),
        nodes=tuple(sorted({(e[1], e[2]) for e in edges} | {(e[3], e[4]) for e in edges})),
        edge_types=tuple(sorted(types)),
    )


# -- explicit streams, for the examples pinned on the properties ------------------------------


def stream_of(schema: dict[str, Any], commands: Sequence[dict[str, Any]]) -> Stream:
    """A stream of the given commands, one ms apart, after the admin publishes ``schema``."""
    commands = [publish("s0", schema), *commands]
    records = [encode_command(c) for c in commands]  # type: ignore[arg-type]
    return _stream(schema, commands, records, [T0 + i for i in range(len(commands))])


def _envelope(cid: str, agent: str, task: str) -> dict[str, Any]:
    return {"command_id": cid, "graph": GRAPH, "agent": agent, "task": task}


def claim(
    cid: str, edge: str, agent: str, polarity: str = "assert", at: int = 0, task: str = "t1"
) -> dict[str, Any]:
    """``edge`` is ``"type s_type:s_id o_type:o_id"``; ``at`` is the event time after T0."""
    edge_type, subject, obj = edge.split()
    (s_type, s_id), (o_type, o_id) = subject.split(":"), obj.split(":")
    return {
        "type": "claim",
        **_envelope(cid, agent, task),
        "run_id": None,
        "edge_type": edge_type,
        "subject_type": s_type,
        "subject_id": s_id,
        "object_type": o_type,
        "object_id": o_id,
        "polarity": polarity,
        "confidence": 1.0,
        "evidence": [],
        "reasoning": "",
        "asserted_at": T0 + at,
        "based_on_version": None,
        "properties": {},
    }


def retract(cid: str, claim_id: str, agent: str, task: str = "t1") -> dict[str, Any]:
    return {
        "type": "retract",
        **_envelope(cid, agent, task),
        "run_id": None,
        "claim_id": claim_id,
        "reason": "",
    }


def resolve(cid: str, conflict_id: str, winner: str | None, agent: str = "judge") -> dict[str, Any]:
    return {
        "type": "resolve",
        **_envelope(cid, agent, ""),
        "conflict_id": conflict_id,
        "winner": winner,
        "resolver": "human",
        "rationale": "",
    }


def publish(cid: str, schema: dict[str, Any], agent: str = ADMIN) -> dict[str, Any]:
    return {
        "type": "publish_schema",
        **_envelope(cid, agent, ""),
        "document": document(schema),
        "source": "s.yaml",
    }
