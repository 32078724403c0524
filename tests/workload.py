"""A deterministic mixed command stream over the test schema (for crash and CLI tests)."""

from __future__ import annotations

import random
from typing import Any

from claimgraph.core.wire import encode_command

T0 = 1_800_000_000_000


def command(i: int, graph: str = "test", seed: int = 7) -> dict[str, Any]:
    """The i-th command of the stream: mostly new edges, some conflicts, retracts, garbage."""
    rnd = random.Random(seed * 1_000_003 + i)
    base = {"command_id": f"w-{i}", "graph": graph, "run_id": None}
    roll = rnd.random()
    if roll < 0.6:
        return {
            **base,
            "type": "claim",
            "agent": rnd.choice(["inventory", "tracer"]),
            "task": "",
            "edge_type": "depends_on",
            "subject_type": "service",
            "subject_id": f"s{rnd.randrange(200)}",
            "object_type": "service",
            "object_id": f"s{rnd.randrange(200)}",
            "polarity": "deny" if rnd.random() < 0.1 else "assert",
            "confidence": 0.8,
            "evidence": [],
            "reasoning": "",
            "asserted_at": T0 + i,
            "based_on_version": None,
            "properties": {},
        }
    if roll < 0.8:
        return {
            **base,
            "type": "claim",
            "agent": rnd.choice(["release", "release-eu"]),
            "task": "promote",
            "edge_type": "runs_in",
            "subject_type": "service",
            "subject_id": f"s{rnd.randrange(50)}",
            "object_type": "environment",
            "object_id": rnd.choice(["dev", "staging", "prod"]),
            "polarity": "assert",
            "confidence": 1.0,
            "evidence": [],
            "reasoning": "",
            "asserted_at": T0 + i - rnd.randrange(0, 50),
            "based_on_version": None,
            "properties": {},
        }
    if roll < 0.93:
        return {
            **base,
            "type": "claim",
            "agent": rnd.choice(["inventory", "dba"]),
            "task": "audit-x",
            "edge_type": "owns",
            "subject_type": "service",
            "subject_id": f"s{rnd.randrange(30)}",
            "object_type": "database",
            "object_id": f"d{rnd.randrange(20)}",
            "polarity": "assert",
            "confidence": 0.7,
            "evidence": [],
            "reasoning": "",
            "asserted_at": T0 + i,
            "based_on_version": None,
            "properties": {},
        }
    if roll < 0.97:
        j = rnd.randrange(max(i, 1))
        return {
            **base,
            "type": "retract",
            "agent": "inventory",
            "task": "",
            "claim_id": f"w-{j}",
            "reason": "",
        }
    if roll < 0.985:
        return {
            **base,
            "type": "resolve",
            "agent": "reviewer",
            "task": "",
            "conflict_id": f"cf:w-{rnd.randrange(max(i, 1))}",
            "winner": None,
            "resolver": "human",
            "rationale": "",
        }
    return {
        **base,
        "type": "claim",
        "agent": "mallory",
        "task": "",
        "edge_type": "owns",
        "subject_type": "service",
        "subject_id": "s1",
        "object_type": "database",
        "object_id": "d1",
        "polarity": "assert",
        "confidence": 1.0,
        "evidence": [],
        "reasoning": "",
        "asserted_at": T0,
        "based_on_version": None,
        "properties": {},
    }


def record(i: int, graph: str = "test") -> bytes:
    """The i-th record: usually an encoded command, now and then raw garbage."""
    if i % 997 == 13:
        return b"\xc3\x01garbage" + i.to_bytes(4, "big")
    return encode_command(command(i, graph))  # type: ignore[arg-type]
