"""Hostile HTTP requests: each gets one clear answer (a decision or a problem), within the limits.

The requests are described in ``tests/data/hostile/http.jsonl`` (see its README): the real app
answers each in process, through ``httpx.ASGITransport``, which hands a body to the app only
as the app reads it — so "the server read at most N bytes" is counted, not assumed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import claimgraph
from claimgraph.core.commands import CLIENT_COMMANDS
from claimgraph.http.app import create_app
from claimgraph.service.audit import audit, verify
from claimgraph.service.graph import Graph
from tests.conftest import ROOT, SCHEMA
from tests.http_fixtures import TOKENS, token_file

CASES = [
    json.loads(line)
    for line in (ROOT / "tests" / "data" / "hostile" / "http.jsonl").read_text().splitlines()
]


@dataclass
class Sent:
    """What a body generator handed to the server."""

    bytes: int = 0


def _body(case: dict[str, Any], sent: Sent) -> tuple[Any, dict[str, str]]:
    """The request body a case describes, and the headers it needs."""
    headers = dict(case.get("headers", {}))
    if "json" in case:
        raw = json.dumps(case["json"]).encode()
    elif "raw" in case:
        raw = case["raw"].encode("utf-8", "surrogatepass")
    elif "nest" in case:
        raw = b"[" * case["nest"] + b"]" * case["nest"]
    elif "events" in case:
        e = case["events"]
        if "payload_nest" in e:
            payload = "[" * e["payload_nest"] + "]" * e["payload_nest"]
        elif "payload_fill" in e:
            payload = json.dumps({"x": "y" * e["payload_fill"]})
        else:
            payload = "{}"
        events = [
            {"run_id": "run-hostile", "seq": i, "kind": e["kind"], "pinned_version": 0,
             "time": 1, "payload": payload}
            for i in range(e["count"])
        ]  # fmt: skip
        raw = json.dumps({"events": events}).encode()
    else:
        rep = case["repeat"]
        prefix, suffix = rep["prefix"].encode(), rep["suffix"].encode()
        total = len(prefix) + rep["bytes"] + len(suffix)
        if case.get("declare_length"):
            headers["content-length"] = str(total)

        async def stream() -> AsyncIterator[bytes]:
            # chained lazily: the 10 GB case makes each chunk only when the server asks for it
            for part in itertools.chain(
                (prefix,), _fill(rep["fill"].encode(), rep["bytes"]), (suffix,)
            ):
                sent.bytes += len(part)
                yield part

        return stream(), headers
    sent.bytes = len(raw)
    return raw, headers


def _fill(byte: bytes, n: int, chunk: int = 65536) -> Any:
    while n > 0:
        yield byte * min(chunk, n)
        n -= chunk


async def _call(app: Any, case: dict[str, Any], sent: Sent) -> httpx.Response:
    content, headers = _body(case, sent)
    if case.get("as"):
        headers["authorization"] = f"Bearer {TOKENS[case['as']]}"
    headers.setdefault("content-type", "application/json")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://claimgraph.test") as c:
        return await c.request(case.get("method", "POST"), case["path"], content=content,
                               headers=headers)  # fmt: skip


@pytest.fixture
def served(tmp_path: Path) -> Any:
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    yield g, create_app(g, token_file())
    g.close()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_each_hostile_request_gets_its_one_answer(served: tuple[Graph, Any], case: Any) -> None:
    """Each request of http.jsonl answers the status and reason it expects, reads no more of
    its body than allowed, adds to the commands log only when the answer is recorded, and
    leaves a graph that verify and audit pass."""
    g, app = served
    before = g.logs.commands.end()
    sent = Sent()
    resp = asyncio.run(_call(app, case, sent))
    want = case["expect"]
    assert resp.status_code == want["status"], resp.text[:300]
    if resp.status_code != 200:
        assert resp.headers["content-type"].startswith("application/problem+json")
        body = resp.json()
        assert body["reason"] == want["reason"] and body["status"] == resp.status_code
        assert want.get("detail", "") in body["detail"], body["detail"]
    if "read_at_most" in want:
        assert sent.bytes <= want["read_at_most"] + 64 * 1024, sent.bytes  # + one chunk in flight
        assert resp.headers.get("connection") == "close"
    added = g.logs.commands.end() - before
    assert added == (1 if want.get("recorded") else 0)
    verify(g)
    audit(g)


def test_the_gate_counts_what_it_refused(served: tuple[Graph, Any]) -> None:
    """A chunked body past the cap is refused having read at most max_body bytes of it, and
    the gate's counters say so."""
    _, app = served
    case = next(c for c in CASES if c["name"] == "200 MB body, no token, chunked")
    sent = Sent()
    assert asyncio.run(_call(app, case, sent)).status_code == 413
    stats = app.state.gate
    assert stats.too_large == 1
    assert 2 * 1024 * 1024 - 65536 < stats.most_read_of_refused <= 2 * 1024 * 1024


# -- generated bodies -------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.sampled_from(["service:a", "service:b", "depends_on", "inventory", "*"]),
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)
# a valid body per route, which a generated value then replaces one field of (or not)
_BASES: dict[str, dict[str, Any]] = {
    "claim": {"edge_type": "depends_on", "subject": "service:a", "object": "service:b"},
    "retract": {"claim_id": "c1"},
    "resolve": {"conflict_id": "cf:x", "winner": "c1"},
    "escalate": {"conflict_id": "cf:x"},
    "read_blocked": {"conflict_id": "cf:x"},
    "publish_schema": {"document": SCHEMA},
    "grant": {"grantee_agent": "intern", "edge_type": "depends_on"},
    "revoke": {"grant_id": "g1"},
    "register_key": {"key_id": "k1", "key_agent": "nobody", "public_key": "ab" * 32},
    "revoke_key": {"key_id": "k1"},
    "erase": {"claim_id": "c1", "reason": "asked"},
    "upgrade_rules": {"to": 2},
}
_EVENT = {"run_id": "r1", "seq": 0, "kind": "tool", "pinned_version": 0, "time": 1,
          "payload": '{"name": "t"}'}  # fmt: skip
_FIELDS = sorted({k for b in _BASES.values() for k in b} | {"confidence", "evidence",
                 "reasoning", "asserted_at", "based_on_version", "properties", "command_id",
                 "agent", "task", "expires_at", "count", "events", "payload"})  # fmt: skip


@st.composite
def _requests(draw: st.DrawFn) -> tuple[str, Any]:
    """(path, body): a route's valid body, perhaps with one field given a generated value."""
    route = draw(st.sampled_from([*sorted(_BASES), "runs/events"]))
    body: dict[str, Any]
    if route == "runs/events":
        body = {"events": [dict(_EVENT)]}
        path, target = "/v1/runs/events", body["events"][0]
    else:
        body = dict(_BASES[route])
        path, target = f"/v1/commands/{route}", body
    if draw(st.booleans()):
        target[draw(st.sampled_from(_FIELDS))] = draw(_json)
    if draw(st.integers(0, 9)) == 0:
        return path, draw(_json)  # not even an object, sometimes
    return path, body


def test_generated_bodies_never_fail_the_server(tmp_path: Path) -> None:
    """Hypothesis-generated bodies to every command route, as a principal or with no token:
    the answer is a receipt or a problem with a 4xx status (never 5xx), and verify and audit
    pass over the whole log afterwards."""
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin", source="conftest")
    app = create_app(g, token_file())
    assert set(_BASES) == {spec.type for spec in CLIENT_COMMANDS}
    client = claimgraph.connect("http://claimgraph.test", token=TOKENS["admin"], app=app)
    http = client._http
    statuses: set[int] = set()

    @settings(
        max_examples=200,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(_requests(), st.sampled_from([None, "inventory", "admin"]))
    def check(request: tuple[str, Any], who: str | None) -> None:
        path, body = request
        headers = {
            "authorization": f"Bearer {TOKENS[who]}" if who else "",
            "content-type": "application/json",
        }
        resp = http.post(path, content=json.dumps(body), headers=headers)
        assert resp.status_code < 500, (path, body, resp.text[:300])
        statuses.add(resp.status_code)
        if resp.status_code != 200:
            assert resp.headers["content-type"].startswith("application/problem+json")

    try:
        check()
    finally:
        client.close()
    assert {200, 401, 422} <= statuses
    verify(g)
    audit(g)
    g.close()


def test_a_principal_holding_all_its_slots_blocks_no_one_else(served: tuple[Graph, Any]) -> None:
    """Eight uploads without a token that never finish hold the unauthenticated pool: a ninth
    is refused at once (429, Retry-After, not recorded), while /healthz and another
    principal's write are answered; when the uploads end, each is answered too."""
    g, app = served
    release = asyncio.Event()

    async def trickle() -> AsyncIterator[bytes]:
        yield b'{"edge_type": "depends_on", '
        await release.wait()
        yield b'"subject": "service:a", "object": "service:b"}'

    async def scenario() -> tuple[list[int], int, int, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            held = [
                asyncio.create_task(c.post("/v1/commands/claim", content=trickle(), headers=JSON))
                for _ in range(8)
            ]
            while app.state.requests.held("") < 8:  # observed, not timed
                await asyncio.sleep(0)
            ninth = await c.post("/v1/commands/claim", json=CLAIM)
            assert ninth.headers["retry-after"] == "1"
            health = await c.get("/healthz")
            victim = await c.post(
                "/v1/commands/claim",
                json=CLAIM,
                headers={"authorization": f"Bearer {TOKENS['inventory']}"},
            )
            release.set()
            return (
                [r.status_code for r in await asyncio.gather(*held)],
                (ninth.status_code),
                health.status_code,
                victim.status_code,
            )

    before = g.logs.commands.end()
    held, ninth, health, victim = asyncio.run(scenario())
    assert (ninth, health, victim) == (429, 200, 200)
    assert held == [401] * 8  # answered once their bodies arrived: refused, not recorded
    assert g.logs.commands.end() == before + 1  # the victim's claim only


CLAIM = {"edge_type": "depends_on", "subject": "service:a", "object": "service:b"}
JSON = {"content-type": "application/json"}
