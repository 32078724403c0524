"""Child process for the replica test: read one version over and over while the primary writes.

Prints one JSON line: the answers at the fixed version (first round), whether every later
round gave the same answers, the heads seen, and how many rounds ran.
"""

from __future__ import annotations

import json
import sys
import time

from claimgraph.service.audit import digest_at
from claimgraph.service.reads import GraphReads
from claimgraph.service.replica import open_replica


def answers(r: GraphReads, at: int) -> list[object]:
    """What a few reads and the whole graph's digest say at version ``at``."""
    out: list[object] = [digest_at(r.reader, at)]
    for i in range(5):
        out.append(r.neighbors(f"service:s{i}", at=at, edge_type="depends_on").__repr__())
        out.append(r.edge("runs_in", f"service:s{i}", "environment:e1", at=at).as_dict())
    return out


def main(path: str, at: int, seconds: float) -> None:
    with open_replica(path) as r:
        r.wait_for(at, timeout=30)
        first = answers(r, at)
        same = True
        heads = [r.head()]
        rounds = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            heads.append(r.catch_up())
            same = same and answers(r, at) == first
            rounds += 1
        print(json.dumps({"first": first, "same": same, "heads": heads, "rounds": rounds}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
