"""Signed commands for direct log producers: verified by the governor, deterministically.

Keys are registered through admin commands in the log; the schema declares whether every
command must be signed (``principals.signatures: required``). Then unsigned, mis-signed,
unknown-key, wrong-agent and replayed commands are each rejected with their reason and change
nothing; verify re-decides it all byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import claimgraph
from claimgraph.core.model import Command
from claimgraph.core.wire import decode_command, encode_command
from claimgraph.errors import InputError
from claimgraph.http.app import create_app
from claimgraph.service.audit import verify
from claimgraph.service.graph import Graph
from claimgraph.service.inputs import now_millis
from claimgraph.service.signers import Signer
from tests.conftest import SCHEMA
from tests.http_fixtures import TOKENS, token_file


def _claim(cid: str, agent: str = "inventory", obj: str = "d") -> Command:
    return {  # type: ignore[return-value]
        "type": "claim",
        "command_id": cid,
        "graph": "test",
        "agent": agent,
        "task": "",
        "run_id": None,
        "edge_type": "owns",
        "subject_type": "service",
        "subject_id": "a",
        "object_type": "database",
        "object_id": obj,
        "polarity": "assert",
        "confidence": 1.0,
        "evidence": [],
        "reasoning": "",
        "asserted_at": now_millis(),
        "based_on_version": None,
        "properties": {},
    }


SIGNED = SCHEMA.replace("  admins: [admin]\n", "  admins: [admin]\n  signatures: required\n")


def _signed_graph(graph: Graph) -> tuple[Signer, Signer]:
    """Register an admin key and an inventory key, then a schema that requires signatures."""
    admin, inv = Signer.generate("admin-1"), Signer.generate("inv-1")
    r = graph.register_key("admin-1", "admin", admin.public_bytes, agent="admin")
    assert (r.kind, r.reason) == ("accepted", "key_registered")
    graph.signer = admin
    r = graph.register_key("inv-1", "inventory", inv.public_bytes, agent="admin")
    assert (r.kind, r.reason, r.decision["signed_by"]) == ("accepted", "key_registered", "admin-1")
    assert graph.publish_schema(SIGNED, agent="admin").reason == "schema_published"
    graph.signer = None
    return admin, inv


def test_signed_commands_are_admitted_and_say_who_signed(graph: Graph) -> None:
    """A command signed by a registered key is decided as usual, with ``signed_by`` set."""
    _, inv = _signed_graph(graph)
    (r,) = graph.submit([inv.sign(_claim("c1"))])
    assert (r.kind, r.decision["signed_by"], r.decision["agent"]) == (
        "accepted",
        "inv-1",
        "inventory",
    )
    assert graph.edge("owns", "service:a", "database:d").state == "present"


def test_every_forgery_is_rejected_recorded_and_changes_nothing(graph: Graph) -> None:
    """Unsigned, bad signature, unknown key, wrong agent, replay, revoked key: all rejected."""
    admin, inv = _signed_graph(graph)
    stranger = Signer.generate("inv-1")  # the same key id, another key
    (ok,) = graph.submit([inv.sign(_claim("c1"))])
    assert ok.kind == "accepted"
    good = inv.sign(_claim("c2", obj="e"))
    tampered = bytearray(good)
    tampered[-3] ^= 0x01  # a byte of the body: the signature no longer matches
    cases = {
        "unsigned": encode_command(_claim("c3", obj="f")),
        "bad_signature": bytes(tampered),
        "bad_signature ": stranger.sign(_claim("c4", obj="g")),
        "unknown_key": Signer.generate("nobody").sign(_claim("c5", obj="h")),
        "key_not_for_agent": inv.sign(_claim("c6", agent="tracer", obj="i")),
        "duplicate_command": inv.sign(_claim("c1")),  # the accepted command, sent again
    }
    for want, record in cases.items():
        before = list(graph.reader.rows_at(graph.head()))
        (r,) = graph.submit([record])
        assert (r.kind, r.reason) == ("rejected", want.strip()), r.decision
        assert r.version == graph.head()
        assert list(graph.reader.rows_at(graph.head())) == before
    # a forged copy must not burn the genuine command's id
    (r,) = graph.submit([good])
    assert r.kind == "accepted" and r.command_id == "c2"
    graph.signer = admin
    assert graph.revoke_key("inv-1", agent="admin").reason == "key_revoked"
    graph.signer = None
    (r,) = graph.submit([inv.sign(_claim("c7", obj="j"))])
    assert (r.kind, r.reason) == ("rejected", "unknown_key")
    rep = verify(graph)  # the governor re-decides the whole log to identical bytes
    assert rep.decisions == graph.head() + 1


def test_revoking_the_last_key_does_not_turn_signing_off(graph: Graph) -> None:
    """The schema says signatures are required: with no key left, commands are refused until
    an admin registers a key, and only a signed schema revision turns the requirement off."""
    admin = Signer.generate("admin-1")
    graph.register_key("admin-1", "admin", admin.public_bytes, agent="admin")
    assert graph.tick().reason == "tick"  # a key alone requires nothing
    graph.signer = admin
    assert graph.publish_schema(SIGNED, agent="admin").kind == "accepted"
    graph.signer = None
    assert graph.tick().reason == "unsigned"
    graph.signer = admin
    assert graph.revoke_key("admin-1", agent="admin").reason == "key_revoked"
    graph.signer = None
    r = graph.grant("intern", "*", agent="admin")  # the hole this closes: an unsigned grant
    assert r.reason == "unsigned" and "no signing key is active" in r.decision["detail"]
    assert graph.tick().reason == "unsigned"
    again = Signer.generate("admin-2")
    assert graph.register_key("admin-2", "admin", again.public_bytes, agent="inventory").reason == (
        "not_admin"
    )
    assert graph.register_key("admin-2", "admin", again.public_bytes, agent="admin").kind == (
        "accepted"
    )
    assert graph.publish_schema(SCHEMA, agent="admin").reason == "unsigned"
    graph.signer = again
    assert graph.publish_schema(SCHEMA, agent="admin").kind == "accepted"  # signed: optional
    graph.signer = None
    assert graph.tick().reason == "tick"
    verify(graph)


def test_key_administration_needs_an_admin_and_a_valid_key(graph: Graph) -> None:
    """register_key is an admin command; the public key must be 32 raw bytes (its declared
    domain: the keyword writer refuses another length before sending, nothing recorded)."""
    r = graph.register_key("k", "*", Signer.generate("k").public_bytes, agent="inventory")
    assert (r.kind, r.reason) == ("rejected", "not_admin")
    head = graph.head()
    with pytest.raises(InputError, match="public_key has 5 bytes; exactly 32 bytes allowed"):
        graph.register_key("k", "*", b"short", agent="admin")
    assert graph.head() == head
    assert graph.revoke_key("nope", agent="admin").reason == "unknown_key"
    assert graph.tick().reason == "tick"  # nothing registered: signatures not required


def test_a_signed_graph_over_http_needs_the_ingress_key(graph: Graph, tmp_path: Path) -> None:
    """On a signed graph the HTTP ingress signs with its own key; without it, writes fail."""
    admin, _ = _signed_graph(graph)
    ingress = Signer.generate("ingress")
    graph.signer = admin
    graph.register_key("ingress", "*", ingress.public_bytes, agent="admin")
    graph.signer = None
    body = {"edge_type": "owns", "subject": "service:a", "object": "database:z"}
    for signer, want in ((None, "unsigned"), (ingress, "new")):
        with claimgraph.connect(
            "http://t",
            token=TOKENS["inventory"],
            app=create_app(graph, token_file(), signer=signer),
        ) as c:
            r = c.assert_(body["edge_type"], body["subject"], body["object"], agent="inventory")
            assert r.reason == want
    d = graph.decisions(graph.head(), 1)[0][1]
    assert d["signed_by"] == "ingress" and d["agent"] == "inventory"


def test_signed_records_round_trip_through_the_wire(graph: Graph) -> None:
    """A signed record decodes to its key id, signature and the command's own bytes."""
    s = Signer.generate("k")
    body = encode_command(_claim("c9"))
    rec = decode_command(s.sign(body))
    assert rec["type"] == "signed"  # type: ignore[comparison-overlap]
    assert rec["body"] == body and rec["key_id"] == "k"  # type: ignore[typeddict-item]
    assert "k" in repr(s) and "PRIVATE" not in repr(s)
