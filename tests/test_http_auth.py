"""Identity at the HTTP ingress: every refusal is answered with problem+json AND recorded.

Wrong token, missing token, spoofed agent, a task or role the token does not carry, a revoked
grant: each is refused, a rejected decision with the same reason lands in the log, and the
readable graph (every projected row) is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import claimgraph
from claimgraph.http.app import create_app
from claimgraph.sdk.http import _SyncASGI
from claimgraph.service.graph import Graph
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, token_file


class Api:
    """Raw HTTP against the real app in process, and the embedded graph under it."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.http = httpx.Client(
            base_url="http://t", transport=_SyncASGI(create_app(g, token_file()))
        )

    def post(self, path: str, body: dict[str, Any], token: str | None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.http.post(path, json=body, headers=headers)

    def rows(self) -> list[tuple[bytes, bytes]]:
        return list(self.g.reader.rows_at(self.g.head()))


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    g = claimgraph.open(tmp_path / "g", create=True, graph="test")
    g.publish_schema(SCHEMA, agent="admin")
    a = Api(g)
    yield a
    a.http.close()
    g.close()


CLAIM = {"edge_type": "owns", "subject": "service:a", "object": "database:d"}


def _refused(api: Api, resp: httpx.Response, status: int, reason: str, agent: str) -> None:
    """A problem+json with ``reason``, recorded as a rejection at the version it names."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body = resp.json()
    assert body["reason"] == reason and body["status"] == status
    ((version, d),) = api.g.decisions(body["version"], 1)
    assert version == api.g.head()
    assert (d["kind"], d["reason"], d["agent"]) == ("rejected", reason, agent)
    for secret in TOKENS.values():  # tokens are never recorded
        assert secret not in d["detail"]


@pytest.mark.parametrize(
    ("token", "what"), [(None, "missing"), ("not-a-token", "wrong"), ("", "empty")]
)
def test_missing_or_wrong_token_is_refused_and_not_recorded(
    api: Api, token: str | None, what: str
) -> None:
    """No valid bearer token: 401 before any work, and nothing recorded (not a log amplifier)."""
    before, head = api.rows(), api.g.head()
    resp = api.post("/v1/commands/claim", {**CLAIM, "agent": "inventory"}, token)
    assert resp.status_code == 401, resp.text
    assert resp.json()["reason"] == "unauthenticated" and "version" not in resp.json()
    assert resp.headers["www-authenticate"] == "Bearer"
    assert api.rows() == before and api.g.head() == head


def test_an_anonymous_batch_is_one_401_and_records_nothing(api: Api) -> None:
    """One unauthenticated POST /v1/commands of 1,000 items: one 401, head unchanged (it
    recorded 1,000 refused commands before the checks moved beneath the transports)."""
    head = api.g.head()
    items = [{"type": "claim", **CLAIM, "command_id": f"c{i}"} for i in range(1000)]
    resp = api.post("/v1/commands", {"commands": items}, None)
    assert resp.status_code == 401 and resp.json()["reason"] == "unauthenticated"
    assert api.g.head() == head
    tick = api.post("/v1/commands/tick", {}, None)  # a system-only type: the same 401
    assert tick.status_code == 401 and api.g.head() == head


def test_spoofed_agent_is_refused_and_recorded(api: Api) -> None:
    """A token used to claim as another agent: 403 agent_mismatch, recorded as the token's."""
    before = api.rows()
    resp = api.post("/v1/commands/claim", {**CLAIM, "agent": "inventory"}, TOKENS["intern"])
    _refused(api, resp, 403, "agent_mismatch", "intern")
    d = api.g.decisions(api.g.head(), 1)[0][1]
    assert "inventory" in d["detail"]
    assert api.rows() == before
    assert api.g.edge("owns", "service:a", "database:d").state == "absent"


def test_without_a_declared_agent_the_token_decides_who_writes(api: Api) -> None:
    """Omitting ``agent`` writes as the token's principal."""
    resp = api.post("/v1/commands/claim", CLAIM, TOKENS["inventory"])
    assert resp.status_code == 200, resp.text
    assert resp.json()["decision"]["agent"] == "inventory"
    assert api.g.edge("owns", "service:a", "database:d").state == "present"


def test_task_outside_the_token_is_refused_and_recorded(api: Api) -> None:
    """dba's token allows tasks audit-*; acting in another task is refused."""
    before = api.rows()
    resp = api.post("/v1/commands/claim", {**CLAIM, "task": "migrate"}, TOKENS["dba"])
    _refused(api, resp, 403, "task_not_allowed", "dba")
    assert api.rows() == before
    ok = api.post("/v1/commands/claim", {**CLAIM, "task": "audit-q3"}, TOKENS["dba"])
    assert ok.status_code == 200 and ok.json()["decision"]["kind"] == "accepted"


@pytest.mark.parametrize(
    ("path", "body", "reason"),
    [
        ("/v1/commands/publish_schema", {"document": SCHEMA}, "not_admin"),
        ("/v1/commands/grant", {"grantee_agent": "intern", "edge_type": "owns"}, "not_admin"),
        ("/v1/commands/resolve", {"conflict_id": "cf:x", "winner": None}, "not_resolver"),
    ],
)
def test_roles_the_token_lacks_are_refused_and_recorded(
    api: Api, path: str, body: dict[str, Any], reason: str
) -> None:
    """Admin and resolver commands need the role on the token."""
    before = api.rows()
    _refused(api, api.post(path, body, TOKENS["inventory"]), 403, reason, "inventory")
    assert api.rows() == before


def test_revoked_grant_no_longer_admits_writes(api: Api) -> None:
    """A grant lets intern write; after its revocation the same write is refused (recorded)."""
    g = api.post(
        "/v1/commands/grant",
        {"grantee_agent": "intern", "edge_type": "depends_on"},
        TOKENS["admin"],
    )
    assert g.status_code == 200, g.text
    grant_id = g.json()["decision"]["target"]
    body = {"edge_type": "depends_on", "subject": "service:a", "object": "service:b"}
    assert api.post("/v1/commands/claim", body, TOKENS["intern"]).status_code == 200
    r = api.post("/v1/commands/revoke", {"grant_id": grant_id}, TOKENS["admin"])
    assert r.status_code == 200, r.text
    before = api.rows()
    body["object"] = "service:c"
    _refused(
        api, api.post("/v1/commands/claim", body, TOKENS["intern"]), 403, "unauthorized", "intern"
    )
    assert api.rows() == before


def test_reads_need_a_token_but_are_not_recorded(api: Api) -> None:
    """A read without a valid token is a 401 problem; reads never write to the log."""
    head = api.g.head()
    resp = api.http.get("/v1/edge", params=CLAIM | {"edge_type": "owns"})
    assert resp.status_code == 401 and resp.json()["reason"] == "unauthenticated"
    assert api.g.head() == head
    ok = api.http.get(
        "/v1/edge", params=CLAIM, headers={"Authorization": f"Bearer {TOKENS['tracer']}"}
    )
    assert ok.status_code == 200 and ok.json()["state"] == "absent"


def test_governor_rejections_map_to_problem_json_with_the_decision(api: Api) -> None:
    """A rejected command answers with its reason's status and carries the decision."""
    body = {**CLAIM, "edge_type": "no_such_edge"}
    resp = api.post("/v1/commands/claim", body, TOKENS["inventory"])
    assert resp.status_code == 422
    p = resp.json()
    assert p["reason"] == "unknown_edge_type" == p["decision"]["reason"]
    assert p["version"] == api.g.head()
    dup = {**CLAIM, "command_id": "c-1"}
    assert api.post("/v1/commands/claim", dup, TOKENS["inventory"]).status_code == 200
    again = api.post("/v1/commands/claim", dup, TOKENS["inventory"])
    assert again.status_code == 409 and again.json()["reason"] == "duplicate_command"


def test_escalations_carry_self_contained_evidence(api: Api) -> None:
    """A resolver escalates a conflict; its payload holds the claims' full evidence."""
    tok = {"Authorization": f"Bearer {TOKENS['reviewer']}"}
    api.post("/v1/commands/claim", {**CLAIM, "evidence": ["cmdb#1"]}, TOKENS["inventory"])
    body = {**CLAIM, "subject": "service:b", "task": "audit-1", "confidence": 0.4}
    r = api.post("/v1/commands/claim", body, TOKENS["dba"])
    assert r.json()["decision"]["kind"] == "quarantined"
    cid = r.json()["decision"]["conflict_id"]
    assert api.http.get("/v1/escalations", headers=tok).json()["escalations"] == []
    refused = api.post("/v1/commands/escalate", {"conflict_id": cid}, TOKENS["inventory"])
    _refused(api, refused, 403, "not_resolver", "inventory")
    ok = api.post(
        "/v1/commands/escalate", {"conflict_id": cid, "reason": "split"}, TOKENS["reviewer"]
    )
    assert ok.status_code == 200 and ok.json()["decision"]["reason"] == "escalated", ok.text
    (esc,) = api.http.get("/v1/escalations", headers=tok).json()["escalations"]
    assert (esc["conflict_id"], esc["status"], esc["schema_rev"]) == (cid, "escalated", 1)
    owners = {c["agent"]: c for c in esc["claims"]}
    assert owners["inventory"]["evidence"] == ["cmdb#1"]
    assert owners["dba"]["confidence"] == 0.4 and owners["dba"]["task"] == "audit-1"
    assert set(esc["versions_read"]) == {"inventory", "dba"}
    page = api.http.get(esc["review"])  # the payload links to the review page
    assert page.status_code == 200 and "quarantine" in page.text.lower()
