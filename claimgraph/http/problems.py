"""Errors as RFC 9457 problem+json, with the reason codes of the decision records.

A rejected command answers with the status its reason maps to and a body carrying the reason,
the detail, the version the rejection was recorded at and the decision itself. Errors that
are not decisions (a read above head, a malformed request) use the same codes where one fits
(``future_version``, ``invalid_field``, ``malformed``) and a few of their own, listed in
:data:`HTTP_REASONS`.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from claimgraph.core.model import Reason
from claimgraph.errors import (
    AuthError,
    ClaimgraphError,
    ConfigError,
    DecodeError,
    DiskFullError,
    InputError,
    IntegrityError,
    NotFoundError,
    SchemaError,
    StorageError,
    UnknownSlotError,
    VersionNotYetAvailable,
    VersionPruned,
)

__all__ = ["HTTP_REASONS", "PROBLEM", "error_problem", "problem", "status_for"]

PROBLEM = "application/problem+json"

# reason codes that only HTTP answers carry (no decision record has them)
HTTP_REASONS = (
    "not_found",
    "method_not_allowed",
    "not_implemented",
    "version_pruned",
    "unknown_slot",
    "unavailable",
    "insufficient_storage",
    "integrity",
    "internal",
)

_STATUS: dict[str, int] = {
    Reason.UNAUTHENTICATED: 401,
    **dict.fromkeys(
        (
            Reason.AGENT_MISMATCH,
            Reason.TASK_NOT_ALLOWED,
            Reason.UNAUTHORIZED,
            Reason.NOT_ADMIN,
            Reason.NOT_RESOLVER,
            Reason.SYSTEM_ONLY,
            Reason.NOT_OWNER,
            Reason.UNSIGNED,
            Reason.BAD_SIGNATURE,
            Reason.UNKNOWN_KEY,
            Reason.KEY_NOT_FOR_AGENT,
        ),
        403,
    ),
    **dict.fromkeys(
        (
            "not_found",
            Reason.UNKNOWN_CLAIM,
            Reason.UNKNOWN_CONFLICT,
            Reason.UNKNOWN_GRANT,
        ),
        404,
    ),
    "method_not_allowed": 405,
    **dict.fromkeys(
        (
            Reason.DUPLICATE_COMMAND,
            Reason.CONFLICT_CLOSED,
            Reason.ALREADY_RETIRED,
            Reason.NOT_LIVE,
            Reason.STALE_CLAIM,
            Reason.CONFLICT_OVERLAP,
            Reason.NOT_IN_CONFLICT,
            Reason.FUTURE_VERSION,
            "unknown_slot",
        ),
        409,
    ),
    "version_pruned": 410,
    "internal": 500,
    "integrity": 500,
    "not_implemented": 501,
    "unavailable": 503,
    "insufficient_storage": 507,
}


def status_for(reason: str) -> int:
    """The HTTP status of a reason code (422 for the input and policy rejections)."""
    return _STATUS.get(reason, 422)


def problem(
    reason: str,
    detail: str,
    *,
    status: int | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """A problem+json response for ``reason``."""
    code = status or status_for(reason)
    body = {
        "type": f"https://claimgraph.dev/problems/{reason}",
        "title": reason.replace("_", " "),
        "status": code,
        "reason": reason,
        "detail": detail,
        **extra,
    }
    if code == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JSONResponse(body, status_code=code, media_type=PROBLEM, headers=headers)


def error_problem(exc: ClaimgraphError) -> JSONResponse:
    """Map one of our errors to a problem (the HTTP side of the exception tree)."""
    if isinstance(exc, AuthError):
        return problem(exc.reason, exc.detail, status=exc.status)
    if isinstance(exc, VersionNotYetAvailable):
        return problem(Reason.FUTURE_VERSION, str(exc), head=exc.head)
    if isinstance(exc, VersionPruned):
        return problem("version_pruned", str(exc), horizon=exc.horizon)
    if isinstance(exc, UnknownSlotError):
        return problem("unknown_slot", str(exc), conflict_id=exc.conflict_id)
    if isinstance(exc, NotFoundError):
        return problem("not_found", str(exc))
    if isinstance(exc, SchemaError):
        return problem(Reason.INVALID_SCHEMA, exc.report())
    if isinstance(exc, DecodeError):
        return problem(exc.reason, exc.detail)
    if isinstance(exc, InputError | ConfigError):
        return problem(Reason.INVALID_FIELD, str(exc))
    if isinstance(exc, DiskFullError):  # nothing was decided; writes resume by themselves
        return problem("insufficient_storage", str(exc), headers={"Retry-After": "10"})
    if isinstance(exc, StorageError):
        return problem("unavailable", str(exc), headers={"Retry-After": "10"})
    if isinstance(exc, IntegrityError):  # stored data is damaged: never a silently wrong answer
        return problem("integrity", str(exc), version=exc.version)
    return problem("internal", str(exc))
