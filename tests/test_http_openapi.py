"""Every HTTP route has an explicit, stable operation id (issue #26): the catalogued reads
their query's name, the commands their command type, the rest a fixed snake_case name."""

from __future__ import annotations

import re
from typing import Any

from claimgraph.core.commands import CLIENT_COMMANDS
from claimgraph.core.queries import QUERIES
from claimgraph.http.app import openapi_document


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    doc = openapi_document()
    return [(p, m, op) for p, ms in doc["paths"].items() for m, op in ms.items()]


def test_every_operation_id_is_explicit_and_unique() -> None:
    ops = _operations()
    ids = [op.get("operationId") for _, _, op in ops]
    assert all(isinstance(i, str) and re.fullmatch(r"[a-z][a-z0-9_]*", i) for i in ids), ids
    assert len(set(ids)) == len(ids), sorted(ids)
    for path, method, op in ops:
        # FastAPI's generated form is <function>_<path>_<method>: never used
        generated = re.sub(r"\W", "_", path).strip("_") + "_" + method
        assert not op["operationId"].endswith(generated), (path, method, op["operationId"])


def test_operation_ids_come_from_the_catalogues() -> None:
    by_route = {(p, m): op["operationId"] for p, m, op in _operations()}
    for spec in QUERIES.values():
        if spec.route is None or (spec.route, "get" if not spec.post else "post") not in by_route:
            continue
        assert by_route[(spec.route, "post" if spec.post else "get")] == spec.name
    reads = {s.name for s in QUERIES.values() if s.route}
    assert reads <= set(by_route.values()), reads - set(by_route.values())
    for c in CLIENT_COMMANDS:
        assert by_route[(f"/v1/commands/{c.type}", "post")] == c.type
