"""The benchmark workload: an inventory-style graph schema and a deterministic command stream.

``generate(n, path, seed)`` writes ``n`` encoded commands (Avro single-object records, exactly
what an ingress would append) to ``path`` as ``u32_le(length) ‖ record`` frames and returns
what the read benchmarks need: every edge that was created (with the version it landed at)
and the "hub" nodes that end up with ~10 out-edges.

Command 0 publishes the schema; command ``j`` then lands at version ``j`` (one decision per
command, versions start at 0 on an empty graph), which is how the generator can aim stale
claims at versions before a slot changed.

Mix (weights in percent of commands; when a category has no target yet it falls back to a
new ``stocks`` edge, and the realised mix is reported):

* 90% new edges: ``stocks`` (many-to-many, bulk; bins get exactly 10 skus each),
  first ``located_in`` (many-to-one, last-write-wins), first ``custodian_of`` (one-to-many,
  quarantine), first ``reserved_for`` (many-to-one, last-write-wins, on_stale reject);
* 10% conflicting or stale: a newer move of a pallet (LWW supersedes), a late older move
  (LWW conflicted), a second custodian (quarantined slot conflict), a deny of another
  scanner's ``stocks`` edge (quarantined polarity conflict), a reservation based on a version
  before the slot changed (rejected stale claim), a custodian claim based on a version before
  the slot changed (on_stale quarantine).
"""

from __future__ import annotations

import random
import struct
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from claimgraph.core.wire import encode_command

__all__ = [
    "EXPECTED",
    "GRAPH",
    "HUB_DEGREE",
    "SCHEMA",
    "WEIGHTS",
    "Workload",
    "generate",
    "read_frames",
]

GRAPH = "bench"
ADMIN = "bench-admin"
HUB_DEGREE = 10

SCHEMA = """\
# claimgraph benchmark schema (inventory-style policy; see tools/workload.py)
graph: bench
description: Warehouse inventory shared by scanners, trackers, allocators and custody agents.
principals:
  admins: [bench-admin]
  resolvers: [bench-resolver]
node_types: [bin, sku, pallet, zone, order, team]
edge_types:
  - name: stocks
    description: A bin holds a sku (bulk edges).
    subject: bin
    object: sku
    writers:
      - {agent: "scanner-*", task: cycle-count}
    cardinality: many-to-many
    conflict_policy: quarantine
    on_stale: accept
  - name: located_in
    description: The zone a pallet is in; the newest sighting wins.
    subject: pallet
    object: zone
    writers:
      - {agent: "tracker-*", task: "*"}
    cardinality: many-to-one
    conflict_policy: last-write-wins-with-timestamp
    on_stale: accept
  - name: reserved_for
    description: The order a pallet is reserved for; claims on stale reads are rejected.
    subject: pallet
    object: order
    writers:
      - {agent: "allocator-*", task: allocate}
    cardinality: many-to-one
    conflict_policy: last-write-wins-with-timestamp
    on_stale: reject
  - name: custodian_of
    description: The team accountable for a pallet; disagreements wait for a resolver.
    subject: team
    object: pallet
    writers:
      - {agent: "custody-agent-*", task: "*"}
    cardinality: one-to-many
    conflict_policy: quarantine
    on_stale: quarantine
"""

# category -> percent of commands
WEIGHTS: dict[str, float] = {
    "stocks_new": 78.0,
    "located_new": 5.0,
    "custody_new": 4.0,
    "reserve_new": 3.0,
    "located_move": 3.0,
    "located_late": 2.0,
    "custody_conflict": 1.5,
    "stocks_deny": 1.5,
    "reserve_stale": 1.0,
    "custody_stale": 1.0,
}
NEW_EDGE_CATEGORIES = ("stocks_new", "located_new", "custody_new", "reserve_new")

# category -> the decisions it is meant to produce (kind/reason)
EXPECTED: dict[str, tuple[str, ...]] = {
    "publish_schema": ("accepted/schema_published",),
    "stocks_new": ("accepted/new",),
    "located_new": ("accepted/new",),
    "custody_new": ("accepted/new",),
    "reserve_new": ("accepted/new",),
    "located_move": ("accepted/supersedes",),
    "located_late": ("conflicted/older_than_current",),
    "custody_conflict": ("quarantined/slot_conflict",),
    "stocks_deny": ("quarantined/polarity_conflict", "quarantined/joins_conflict"),
    "reserve_stale": ("rejected/stale_claim",),
    "custody_stale": ("quarantined/stale_claim",),
}

_FRAME = struct.Struct("<I")
_T0 = 1_790_000_000_000  # event times (ms) start here and advance 10 ms per command
N_ZONES = 400
N_TEAMS = 60
SCANNERS = 4


@dataclass
class Workload:
    """What the generator produced, for the read benchmarks and the report."""

    commands: int = 0
    # (edge_type, subject_type, subject_id, object_type, object_id, version) per created edge
    edges: list[tuple[str, str, str, str, str, int]] = field(default_factory=list)
    # (bin id, version at which its HUB_DEGREE-th edge landed), in version order
    hubs: list[tuple[str, int]] = field(default_factory=list)
    mix: Counter[str] = field(default_factory=Counter)
    # the category of every command (an index into category_names), in version order
    categories: bytearray = field(default_factory=bytearray)
    category_names: list[str] = field(default_factory=lambda: ["publish_schema", *WEIGHTS])
    fallbacks: int = 0
    encoded_bytes: int = 0
    seconds: float = 0.0


def _claim(
    rng: random.Random,
    j: int,
    edge_type: str,
    s: tuple[str, str],
    o: tuple[str, str],
    *,
    agent: str,
    task: str,
    polarity: str = "assert",
    asserted_at: int | None = None,
    based_on_version: int | None = None,
    evidence: str,
    properties: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "type": "claim",
        "command_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "graph": GRAPH,
        "agent": agent,
        "task": task,
        "run_id": f"run-{j // 5000:05d}",
        "edge_type": edge_type,
        "subject_type": s[0],
        "subject_id": s[1],
        "object_type": o[0],
        "object_id": o[1],
        "polarity": polarity,
        "confidence": round(0.6 + rng.random() * 0.4, 3),
        "evidence": [evidence],
        "reasoning": f"{edge_type} observed by {agent}",
        "asserted_at": _T0 + 10 * j if asserted_at is None else asserted_at,
        "based_on_version": based_on_version,
        "properties": properties or {},
    }


def _take(rng: random.Random, pool: list[Any]) -> Any:
    """Remove and return a random element (swap-remove, O(1))."""
    i = rng.randrange(len(pool))
    pool[i], pool[-1] = pool[-1], pool[i]
    return pool.pop()


def _stderr(msg: str) -> None:
    print(f"[workload] {msg}", file=sys.stderr, flush=True)


def generate(
    n: int,
    path: Path,
    seed: int = 20261129,
    *,
    log: Callable[[str], None] = _stderr,
    progress_every: float = 5.0,
) -> Workload:
    """Write ``n`` encoded commands to ``path``; return the workload's metadata."""
    if n < 2:
        raise ValueError("need at least 2 commands (the schema and one claim)")
    rng = random.Random(seed)
    w = Workload(commands=n)
    cats = list(WEIGHTS)
    cum: list[float] = []
    acc = 0.0
    for c in cats:
        acc += WEIGHTS[c]
        cum.append(acc)
    n_skus = max(1000, n // 4)

    # state the generator tracks to aim its conflicts
    hub = 0  # the bin currently being filled
    hub_left = HUB_DEGREE
    hub_skus: list[int] = []
    stocks_edges: list[tuple[int, int]] = []  # (bin, sku) of created stocks edges
    placed: list[int] = []  # pallets with a location
    location: dict[int, tuple[int, int]] = {}  # pallet -> (zone, asserted_at of first claim)
    custody_free: list[tuple[int, int, int]] = []  # (pallet, team, version) never contested
    reserved: list[tuple[int, int, int]] = []  # (pallet, order, version)
    next_pallet = 0
    next_order = 0

    def pallet_id(p: int) -> tuple[str, str]:
        return ("pallet", f"plt-{p:08d}")

    started = time.perf_counter()
    last = started
    with open(path, "wb") as f:
        publish = {
            "type": "publish_schema",
            "command_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "graph": GRAPH,
            "agent": ADMIN,
            "task": "",
            "document": SCHEMA,
            "source": "tools/workload.py",
        }
        _write(f, encode_command(publish), w)  # type: ignore[arg-type]
        w.mix["publish_schema"] += 1
        w.categories.append(0)
        cat_index = {c: i for i, c in enumerate(w.category_names)}
        for j in range(1, n):
            cat = cats[_bisect(cum, rng.random() * acc)]
            if (
                (cat in ("located_move", "located_late") and not placed)
                or (cat in ("custody_conflict", "custody_stale") and not custody_free)
                or (cat == "stocks_deny" and not stocks_edges)
                or (cat == "reserve_stale" and not reserved)
            ):
                cat = "stocks_new"
                w.fallbacks += 1
            w.mix[cat] += 1
            w.categories.append(cat_index[cat])
            if cat == "stocks_new":
                if hub_left == HUB_DEGREE:
                    hub_skus = rng.sample(range(n_skus), HUB_DEGREE)
                sku = hub_skus[HUB_DEGREE - hub_left]
                s, o = ("bin", f"bin-{hub:07d}"), ("sku", f"sku-{sku:07d}")
                cmd = _claim(
                    rng,
                    j,
                    "stocks",
                    s,
                    o,
                    agent=f"scanner-{hub % SCANNERS + 1}",
                    task="cycle-count",
                    evidence=f"scan://dc-1/{s[1]}",
                    properties={"qty": str(1 + rng.randrange(200))},
                )
                w.edges.append(("stocks", *s, *o, j))
                stocks_edges.append((hub, sku))
                hub_left -= 1
                if hub_left == 0:
                    w.hubs.append((s[1], j))
                    hub += 1
                    hub_left = HUB_DEGREE
            elif cat == "located_new":
                p = next_pallet
                next_pallet += 1
                zone = rng.randrange(N_ZONES)
                s, o = pallet_id(p), ("zone", f"zone-{zone:04d}")
                cmd = _claim(
                    rng,
                    j,
                    "located_in",
                    s,
                    o,
                    agent="tracker-1",
                    task="rfid-sweep",
                    evidence=f"rfid://gate-{zone % 17}",
                )
                placed.append(p)
                location[p] = (zone, cmd["asserted_at"])
                w.edges.append(("located_in", *s, *o, j))
            elif cat == "located_move":
                p = placed[rng.randrange(len(placed))]
                zone, first_ts = location[p]
                zone = (zone + 1 + rng.randrange(N_ZONES - 1)) % N_ZONES
                location[p] = (zone, first_ts)
                cmd = _claim(
                    rng,
                    j,
                    "located_in",
                    pallet_id(p),
                    ("zone", f"zone-{zone:04d}"),
                    agent=f"tracker-{2 + rng.randrange(2)}",
                    task="forklift-scan",
                    evidence=f"forklift://{rng.randrange(40)}",
                )
            elif cat == "located_late":
                p = placed[rng.randrange(len(placed))]
                zone, first_ts = location[p]
                zone = (zone + 1 + rng.randrange(N_ZONES - 1)) % N_ZONES
                cmd = _claim(
                    rng,
                    j,
                    "located_in",
                    pallet_id(p),
                    ("zone", f"zone-{zone:04d}"),
                    agent="tracker-4",
                    task="batch-upload",
                    asserted_at=first_ts - 60_000,
                    evidence="upload://handheld-batch",
                )
            elif cat == "custody_new":
                p = next_pallet
                next_pallet += 1
                team = rng.randrange(N_TEAMS)
                s, o = ("team", f"team-{team:03d}"), pallet_id(p)
                cmd = _claim(
                    rng,
                    j,
                    "custodian_of",
                    s,
                    o,
                    agent="custody-agent-1",
                    task="handover",
                    evidence=f"wms://handover/{p}",
                )
                custody_free.append((p, team, j))
                w.edges.append(("custodian_of", *s, *o, j))
            elif cat in ("custody_conflict", "custody_stale"):
                p, team, v = _take(rng, custody_free)
                other = (team + 1 + rng.randrange(N_TEAMS - 1)) % N_TEAMS
                cmd = _claim(
                    rng,
                    j,
                    "custodian_of",
                    ("team", f"team-{other:03d}"),
                    pallet_id(p),
                    agent="custody-agent-2",
                    task="audit",
                    based_on_version=(v - 1) if cat == "custody_stale" else None,
                    evidence=f"audit://{p}",
                )
            elif cat == "reserve_new":
                p = next_pallet
                next_pallet += 1
                order = next_order
                next_order += 1
                s, o = pallet_id(p), ("order", f"ord-{order:08d}")
                cmd = _claim(
                    rng,
                    j,
                    "reserved_for",
                    s,
                    o,
                    agent="allocator-1",
                    task="allocate",
                    based_on_version=j - 1,
                    evidence=f"oms://order/{order}",
                )
                reserved.append((p, order, j))
                w.edges.append(("reserved_for", *s, *o, j))
            elif cat == "reserve_stale":
                p, _order, v = reserved[rng.randrange(len(reserved))]
                order = next_order
                next_order += 1
                cmd = _claim(
                    rng,
                    j,
                    "reserved_for",
                    pallet_id(p),
                    ("order", f"ord-{order:08d}"),
                    agent="allocator-2",
                    task="allocate",
                    based_on_version=v - 1,
                    evidence=f"oms://order/{order}",
                )
            elif cat == "stocks_deny":
                b, sku = stocks_edges[rng.randrange(len(stocks_edges))]
                cmd = _claim(
                    rng,
                    j,
                    "stocks",
                    ("bin", f"bin-{b:07d}"),
                    ("sku", f"sku-{sku:07d}"),
                    agent=f"scanner-{(b + 1) % SCANNERS + 1}",
                    task="cycle-count",
                    polarity="deny",
                    evidence="scan://dc-1/recount",
                )
            else:  # pragma: no cover - WEIGHTS and this chain must agree
                raise AssertionError(cat)
            _write(f, encode_command(cmd), w)  # type: ignore[arg-type]
            now = time.perf_counter()
            if now - last >= progress_every:
                last = now
                log(f"generating commands: {j + 1:,}/{n:,} ({(j + 1) / (now - started):,.0f}/s)")
    w.seconds = time.perf_counter() - started
    return w


def _bisect(cum: list[float], x: float) -> int:
    for i, c in enumerate(cum):
        if x < c:
            return i
    return len(cum) - 1


def _write(f: BinaryIO, record: bytes, w: Workload) -> None:
    f.write(_FRAME.pack(len(record)))
    f.write(record)
    w.encoded_bytes += len(record)


def read_frames(f: BinaryIO, limit: int) -> list[bytes]:
    """Read up to ``limit`` framed records from ``f`` (an empty list at the end)."""
    out: list[bytes] = []
    read = f.read
    unpack = _FRAME.unpack
    while len(out) < limit:
        head = read(4)
        if len(head) < 4:
            break
        (size,) = unpack(head)
        out.append(read(size))
    return out
