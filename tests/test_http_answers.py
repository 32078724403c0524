"""Every JSON route's 200 answer is what OpenAPI says it is (issue #26: typed responses).

The real app serves a real graph under uvicorn on a loopback socket; a small story (a schema,
claims, a conflict, an escalation, a merge, a run, a resolve, grants, keys, an erase) calls
every JSON route of the OpenAPI document, and each answer is held to the model the document
names for its 200 answer: every key it carries is a declared field (for closed models), every
required field is there, and it validates strictly (``model_validate_json(strict=True)``).
The model is looked up from the document, never from a table here: a route whose declared
model drifts from its answer fails, and so does a route added without one.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from typing import Annotated, Any, Union, get_args, get_origin

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from pydantic import BaseModel, RootModel, WithJsonSchema

from claimgraph.http import answers, bodies, queries
from claimgraph.http.app import openapi_document
from tests.http_fixtures import TOKENS
from tests.mcp_fixtures import served

DOC = openapi_document()
MODELS: dict[str, type[BaseModel]] = {
    m.__name__: m
    for module in (answers, bodies, queries)
    for m in vars(module).values()
    if isinstance(m, type) and issubclass(m, BaseModel)
}
# routes whose 200 the story cannot reach, and why
UNREACHED = {
    # a new graph runs the newest rules already: every upgrade is rejected (4xx); its 200 is
    # the receipt every other command route answers (ReceiptAnswer, the same handler)
    "upgrade_rules",
}


def _json_operations() -> dict[str, tuple[str, str, dict[str, Any]]]:
    """operation id → (method, path, its 200 response) of every route answering JSON."""
    out = {}
    for path, methods in DOC["paths"].items():
        for method, op in methods.items():
            ok = op["responses"].get("200", {})
            if "application/json" in ok.get("content", {}):
                out[op["operationId"]] = (method, path, ok)
    return out


def _model_of(op_id: str) -> type[BaseModel]:
    """The model the document names for ``op_id``'s 200 answer."""
    schema = _json_operations()[op_id][2]["content"]["application/json"]["schema"]
    return MODELS[schema["$ref"].rsplit("/", 1)[1]]


# -- the check: an answer against a model, recursively --------------------------------------


def _referenced(metadata: list[Any]) -> type[BaseModel] | None:
    """The model a field is documented as (``WithJsonSchema`` naming it by ``$ref``)."""
    for m in metadata:
        if isinstance(m, WithJsonSchema) and m.json_schema:
            schema: Any = m.json_schema
            ref = schema.get("$ref") or schema.get("allOf", [{}])[0].get("$ref")
            if ref:
                return MODELS[str(ref).rsplit("/", 1)[1]]
    return None


def mismatches(tp: Any, value: Any, where: str = "$") -> list[str]:
    """Where ``value`` strays from ``tp``: keys no field declares (unless the model allows
    extra), required fields missing; through nested models, lists, maps and unions."""
    origin = get_origin(tp)
    if origin is Annotated:
        inner, *meta = get_args(tp)
        ref = _referenced(meta)
        return mismatches(ref if ref is not None else inner, value, where)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in get_args(tp):
            return []
        branches = [mismatches(a, value, where) for a in get_args(tp) if a is not type(None)]
        return min(branches, key=len)  # the branch the answer fits best
    if isinstance(tp, type) and issubclass(tp, RootModel):
        return mismatches(tp.model_fields["root"].annotation, value, where)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a {tp.__name__} object"]
        fields = {(f.alias or n): f for n, f in tp.model_fields.items()}
        out = []
        if tp.model_config.get("extra") != "allow":
            out += [f"{where}.{k}: not a field of {tp.__name__}" for k in value if k not in fields]
        for k, f in fields.items():
            if k not in value:
                if f.is_required():
                    out.append(f"{where}.{k}: required by {tp.__name__}, missing")
                continue
            ref = _referenced(f.metadata)
            out += mismatches(ref if ref is not None else f.annotation, value[k], f"{where}.{k}")
        return out
    if origin is list and isinstance(value, list):
        (item,) = get_args(tp)
        return [m for i, v in enumerate(value) for m in mismatches(item, v, f"{where}[{i}]")]
    if origin is dict and isinstance(value, dict):
        _, item = get_args(tp)
        return [m for k, v in value.items() for m in mismatches(item, v, f"{where}.{k}")]
    return []


def _nested_refs(tp: Any, value: Any) -> Iterator[tuple[type[BaseModel], Any]]:
    """(model, value) for every field documented by reference (validated on their own)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(value, dict):
        for n, f in tp.model_fields.items():
            ref = _referenced(f.metadata)
            if ref is not None and (f.alias or n) in value:
                yield ref, value[f.alias or n]
            elif (f.alias or n) in value:
                yield from _nested_refs(f.annotation, value[f.alias or n])
    elif get_origin(tp) is list and isinstance(value, list):
        for v in value:
            yield from _nested_refs(get_args(tp)[0], v)


def check(model: type[BaseModel], raw: bytes) -> None:
    """``raw`` (an answer's body) is an answer ``model`` describes (see the module)."""
    value = json.loads(raw)
    problems = mismatches(model, value)
    assert not problems, problems
    model.model_validate_json(raw, strict=True)
    for ref, v in _nested_refs(model, value):
        assert not mismatches(ref, v), mismatches(ref, v)
        ref.model_validate_json(json.dumps(v), strict=True)


# -- the story --------------------------------------------------------------------------------


class Story:
    """Requests over real HTTP as the test principals; every 200 JSON answer kept by route."""

    def __init__(self, url: str) -> None:
        self.clients = {
            a: httpx.Client(base_url=url, headers={"Authorization": f"Bearer {t}"}, timeout=60)
            for a, t in TOKENS.items()
        }
        self.answers: dict[str, list[bytes]] = {}

    def __call__(
        self, op_id: str, agent: str = "inventory", *, json_body: Any = None, **params: Any
    ) -> Any:
        method, path, _ = _json_operations()[op_id]
        for name in list(params):
            if "{" + name + "}" in path:
                path = path.replace("{" + name + "}", str(params.pop(name)))
        r = self.clients[agent].request(method, path, params=params, json=json_body)
        assert r.status_code == 200, (op_id, r.status_code, r.text)
        assert r.headers["content-type"] == "application/json", (op_id, r.headers)
        self.answers.setdefault(op_id, []).append(r.content)
        return r.json()

    def claim(self, agent: str, edge_type: str, s: str, o: str, **more: Any) -> Any:
        body = {"edge_type": edge_type, "subject": s, "object": o, **more}
        return self("claim", agent, json_body=body)["decision"]

    def close(self) -> None:
        for c in self.clients.values():
            c.close()


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    with served(tmp_path_factory.mktemp("answers") / "g") as (url, g, _):
        s = Story(url)
        try:
            _tell(s, g.schema_info()["document"])
            yield s
        finally:
            s.close()


def _tell(s: Story, schema: str) -> None:
    a = s.claim("inventory", "depends_on", "service:a", "service:b", evidence=["e1"])
    a_id = a["claim"]["claim_id"]
    cid = s.claim("tracer", "depends_on", "service:a", "service:b", polarity="deny")["conflict_id"]
    s.claim("inventory", "calls", "service:a", "service:c", properties={"k": "v"})
    s.claim("inventory", "scored", "service:a", "team:t", confidence=0.9)
    merged = s.claim("tracer", "scored", "service:a", "team:u", confidence=0.6)
    assert merged["merge"] is not None  # a decision with its merge record
    s.claim("inventory", "owns", "service:a", "database:d")
    slot_conflict = s.claim("dba", "owns", "service:z", "database:d", task="audit-1")
    assert slot_conflict["kind"] == "quarantined", slot_conflict
    batch = {"commands": [{"type": "claim", "edge_type": "calls", "subject": "service:c",
                           "object": "service:d"}]}  # fmt: skip
    s("commands", json_body=batch)
    s("escalate", "admin", json_body={"conflict_id": cid})
    blocked = {"conflict_id": cid, "count": 1, "run_id": "client-0", "pinned_version": 2}
    s("read_blocked", json_body=blocked)

    run = s("start_run", json_body={})
    edge = {"edge_type": "depends_on", "subject": "service:a", "object": "service:b"}
    assert s("edge", **edge, run=run["run_id"])["state"] == "unknown"
    s("end_run", run_id=run["run_id"], json_body={})
    s("runs")
    s("run_trace", run_id=run["run_id"])
    s("replay_run", run_id=run["run_id"])
    # a client's own run whose one read replays differently: a replay's first difference
    query = {"op": "edge", "args": {"edge_type": "depends_on", "subject": ["service", "a"],
                                    "object": ["service", "b"]}}  # fmt: skip
    events = [
        {"run_id": "client-1", "seq": i, "kind": kind, "pinned_version": 1, "time": 1 + i,
         "payload": json.dumps(payload)}
        for i, (kind, payload) in enumerate(
            [("start", {}), ("read", {"query": query, "digest": "not-its-digest"})]
        )
    ]  # fmt: skip
    s("append_run_events", json_body={"events": events})
    replayed = s("replay_run", run_id="client-1")
    assert replayed["first_difference"] is not None, replayed

    s("quarantine")
    s("quarantine", limit=5)
    s("conflict", conflict_id=cid)
    s("escalation", conflict_id=cid)
    s("escalations")
    s("escalations", include_open=True)
    slot = s("slot", edge_type="owns", node="database:d", direction="in")
    assert slot["state"] == "unknown", slot
    s("edge", **edge)  # unknown: the route answers it

    s("resolve", "reviewer", json_body={"conflict_id": cid, "winner": a_id})
    s("edge", **edge)  # present: the thin path answers it
    s("edge", **edge, timeout=0)  # ... and the route
    s("edge", edge_type="calls", subject="service:x", object="service:y")  # absent
    s("slot", edge_type="runs_in", node="service:a")  # an empty slot
    s("history", **edge)
    s("claim_info", claim_id=a_id)
    s("calibration", edge_type="depends_on")
    s("neighbors", node="service:a")
    s("paths", src="service:a", dst="service:d")
    s("reach", node="service:a")
    s("edges")
    s("edges", limit=1)
    s("read_edges", json_body={"edges": [edge]})
    s("schema_info")
    s("head")
    s("wait_version", version=1)
    s("whoami")
    s("whoami", "admin")
    s("healthz")
    s("readyz")

    grant = s("grant", "admin", json_body={"grantee_agent": "intern", "edge_type": "calls"})
    s("revoke", "admin", json_body={"grant_id": grant["decision"]["grant"]["grant_id"]})
    public = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    key = {"key_id": "k1", "key_agent": "release-bot", "public_key": public.hex()}
    assert s("register_key", "admin", json_body=key)["decision"]["key"] is not None
    s("revoke_key", "admin", json_body={"key_id": "k1"})
    calls = s.claim("tracer", "calls", "service:b", "service:c")["claim"]["claim_id"]
    s("retract", "tracer", json_body={"claim_id": calls, "reason": "wrong"})
    s("erase", "admin", json_body={"claim_id": calls, "reason": "asked to"})
    assert "erased" in s("claim_info", claim_id=calls)
    s("publish_schema", "admin", json_body={"document": schema, "dry_run": True})
    s("publish_schema", "admin", json_body={"document": schema})
    s("decisions")
    s("decisions", limit=2)


def test_the_story_calls_every_json_route(story: Story) -> None:
    missing = set(_json_operations()) - set(story.answers) - UNREACHED
    assert not missing, sorted(missing)


@pytest.mark.parametrize("op_id", sorted(set(_json_operations()) - UNREACHED))
def test_every_answer_is_its_declared_model(story: Story, op_id: str) -> None:
    model = _model_of(op_id)
    for raw in story.answers[op_id]:
        check(model, raw)


def test_the_check_fails_on_a_model_that_drifts(story: Story) -> None:
    """The check can fail: a model without a field the answer carries, or with a required
    field it lacks, or with a type it does not have, is refused."""
    raw = story.answers["head"][0]

    class Fewer(BaseModel):
        graph: str

    class More(answers.HeadAnswer):
        tasks: list[str]

    class Wrong(BaseModel):
        graph: int
        head: int

    assert mismatches(Fewer, json.loads(raw)) == ["$.head: not a field of Fewer"]
    assert mismatches(More, json.loads(raw)) == ["$.tasks: required by More, missing"]
    with pytest.raises(AssertionError):
        check(Fewer, raw)
    with pytest.raises(ValueError):
        check(Wrong, raw)
    nested = story.answers["conflict"][0]  # deep inside: a claim's field
    fields = {n: (f.annotation, f) for n, f in answers.ClaimAnswer.model_fields.items()}
    del fields["since"]
    from pydantic import create_model

    narrow = create_model("NarrowClaim", **fields)  # type: ignore[call-overload]
    drifted = create_model(
        "DriftedConflict", __base__=answers.ConflictAnswer, claim_details=(list[narrow], ...)
    )
    assert any("claim_details[0].since" in m for m in mismatches(drifted, json.loads(nested)))


def test_every_json_route_declares_its_200_answer() -> None:
    """A route added without a model fails here: each JSON route's 200 names a schema with
    fields (a reference into components, or properties), and every reference resolves."""
    ops = _json_operations()
    assert len(ops) >= 40, sorted(ops)
    for op_id, (method, path, ok) in ops.items():
        schema = ok["content"]["application/json"].get("schema", {})
        assert "$ref" in schema or "properties" in schema, (method, path, op_id, schema)
        if "$ref" in schema:
            assert schema["$ref"].rsplit("/", 1)[1] in MODELS, (op_id, schema)
    components = DOC["components"]["schemas"]
    refs = {m for m in _refs(DOC)}
    assert refs <= {f"#/components/schemas/{n}" for n in components}, refs - set(components)


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_non_json_routes_keep_their_content_types() -> None:
    types_of = {
        op["operationId"]: set(op["responses"]["200"].get("content", {}))
        for methods in DOC["paths"].values()
        for op in methods.values()
    }
    assert types_of["neighborhood_svg"] == {"image/svg+xml"}
    assert {t.split(";")[0] for t in types_of["metrics"]} == {"text/plain"}


def test_answers_models_live_in_one_module() -> None:
    """The described answers are answers' (paths, reach and batches answer through theirs)."""
    own = {"PathsOut", "ReachOut", "BatchOut"}
    for op_id in set(_json_operations()):
        model = _model_of(op_id)
        assert model.__module__ == answers.__name__ or model.__name__ in own, (op_id, model)


def test_every_generic_catalogue_read_has_an_answer_model() -> None:
    """The catalogue's table names exactly the reads routed generically without a typed
    result: a new catalogued read gets its model there (else its route is undescribed and
    the test above fails), and no entry outlives its read."""
    from claimgraph.core.queries import QUERIES
    from claimgraph.http.catalogue import RESPONSE_MODELS, derived

    generic = {s.name for s in QUERIES.values() if derived(s) and s.result not in RESPONSE_MODELS}
    assert set(answers.QUERY_ANSWERS) == generic
