"""What every router of the HTTP API shares: the graph, its service layer, JSON views.

A route authenticates (the bearer token) and maps errors; everything else — roles, task
scope, limits, runs — is the service layer's (:class:`~claimgraph.service.access.Access`),
which ``/mcp`` and the writer socket call too.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from claimgraph.core.model import LIMITS, Decision
from claimgraph.errors import ConfigError, InputError
from claimgraph.http.auth import Principal, TokenFile
from claimgraph.service.access import Access, Scoped
from claimgraph.service.api import Receipt
from claimgraph.service.limits import DEFAULT_LIMITS, Limits, RunTally, Slots
from claimgraph.service.port import GraphAPI
from claimgraph.service.reads import Browsable
from claimgraph.service.signers import Signer

__all__ = ["Context", "browsable", "clean", "cursor_of", "decision_json", "key_of", "receipt_json"]


@dataclass(slots=True)
class Context:
    """The app's one graph (embedded or Kafka, through the graph port), its identities, and
    its service layer (``access``: given, when other surfaces share it, or made here)."""

    graph: GraphAPI
    tokens: TokenFile
    signer: Signer | None = None
    limits: Limits = DEFAULT_LIMITS
    access: Access = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.access is None:
            self.access = Access(
                self.graph, self.tokens.principal, limits=self.limits, signer=self.signer
            )
        self.limits = self.access.limits

    @property
    def waits(self) -> Slots:
        return self.access.waits

    @property
    def runs(self) -> RunTally:
        return self.access.tally

    @staticmethod
    def bearer(request: Request) -> str | None:
        """The request's bearer token, if it carries one."""
        h = request.headers.get("authorization", "")
        scheme, _, token = h.partition(" ")
        return token.strip() if scheme.lower() == "bearer" and token.strip() else None

    def principal(self, request: Request) -> Principal:
        """The caller's principal; 401 without a valid token (nothing is recorded)."""
        return self.access.authenticate(self.bearer(request))

    def scoped(self, request: Request) -> Scoped:
        """The graph as the caller's principal may use it (401 without a valid token)."""
        return self.access.of(self.principal(request))


def clean(value: str, limit: int = LIMITS["id"]) -> str:
    """Text safe to put in a record: valid UTF-8, bounded."""
    return value.encode("utf-8", "replace").decode("utf-8")[:limit]


def decision_json(d: Decision) -> dict[str, Any]:
    """A decision as JSON (bytes as hex)."""
    out = dict(d)
    if d["key"] is not None:
        out["key"] = {**d["key"], "public_key": d["key"]["public_key"].hex()}
    return out


def receipt_json(r: Receipt) -> dict[str, Any]:
    """A write's receipt as JSON: where the command sits, its decision and its version."""
    return {
        "command_id": r.command_id,
        "position": r.position,
        "version": r.version,
        "decision": decision_json(r.decision),
    }


def browsable(graph: GraphAPI) -> Browsable:
    """The graph's paging reads (the embedded and the Kafka graph have them)."""
    if not isinstance(graph, Browsable):
        raise ConfigError(f"{type(graph).__name__} cannot be browsed page by page")
    return graph


def cursor_of(key: str | None) -> str | None:
    """A page's resume key as an opaque, URL-safe cursor."""
    return None if key is None else base64.urlsafe_b64encode(key.encode("utf-8")).decode()


def key_of(cursor: str | None) -> str | None:
    """The resume key a cursor stands for; a cursor we did not make is a 422."""
    if not cursor:
        return None
    try:
        raw = base64.b64decode(cursor.encode("ascii"), altchars=b"-_", validate=True)
        return raw.decode("utf-8")
    except (ValueError, UnicodeError):
        raise InputError("cursor: not a cursor this API returned") from None
