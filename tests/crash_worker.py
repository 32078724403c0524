"""Child process for the crash test: append the stream in chunks and process it, forever."""

from __future__ import annotations

import sys

import claimgraph
from tests.conftest import SCHEMA
from tests.workload import record


def main(path: str, total: int, chunk: int) -> None:
    g = claimgraph.open(path, create=True, graph="test")
    if g.logs.commands.end() == 0:
        g.publish_schema(SCHEMA, agent="admin", command_id="schema-1")
    while True:
        start = g.logs.commands.end() - 1  # the schema command is offset 0
        if start >= total:
            break
        g.append([record(i) for i in range(start, min(start + chunk, total))])
        print(f"appended {g.logs.commands.end()}", flush=True)  # the test kills on these lines
        g.process(batch=256)
        print(f"processed {g.logs.commands.end()}", flush=True)
    g.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
