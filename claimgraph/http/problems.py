"""Errors as RFC 9457 problem+json, with the reason codes of the decision records.

A rejected command answers with the status its reason maps to and a body carrying the reason,
the detail, the version the rejection was recorded at and the decision itself. Errors that
are not decisions (a read above head, a malformed request) use the same codes where one fits
(``future_version``, ``invalid_field``, ``malformed``) and a few of their own, listed in
:data:`HTTP_REASONS`. Our errors map by family of the exception tree (:mod:`claimgraph.errors`):
one reason code, hence one status, per family, as README.md's exit-code table lists them.
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
    FencedError,
    InputError,
    IntegrityError,
    LimitError,
    NotFoundError,
    ResolverError,
    SchemaError,
    StorageError,
    UnknownSlotError,
    VersionError,
    VersionNotYetAvailable,
    VersionPruned,
)

__all__ = [
    "HTTP_REASONS",
    "PROBLEM",
    "error_problem",
    "error_reason",
    "error_status",
    "problem",
    "status_for",
]

PROBLEM = "application/problem+json"

# reason codes that only HTTP answers carry (no decision record has them)
HTTP_REASONS = (
    "not_found",
    "method_not_allowed",
    "not_implemented",
    "version_pruned",
    "unknown_slot",
    "version_unavailable",
    "unavailable",
    "fenced",
    "insufficient_storage",
    "integrity",
    "internal",
    "too_large",
    "too_many",
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
            "version_unavailable",
            "unknown_slot",
        ),
        409,
    ),
    "version_pruned": 410,
    "too_large": 413,
    "too_many": 429,
    "internal": 500,
    Reason.INTERNAL_ERROR: 500,  # decided (rejected, recorded with a version): the body says so
    "integrity": 500,
    "not_implemented": 501,
    **dict.fromkeys(("unavailable", "fenced"), 503),
    "insufficient_storage": 507,
}


# The HTTP side of the exception tree (claimgraph.errors): the reason code of each family and
# of each member that narrows it; the status is the reason's. AuthError and DecodeError answer
# with the reason they carry, at their family's status (the AuthError's own, 422).
_ERROR_REASONS: dict[type[ClaimgraphError], str] = {
    ClaimgraphError: "internal",
    ConfigError: Reason.INVALID_FIELD,
    SchemaError: Reason.INVALID_SCHEMA,
    InputError: Reason.INVALID_FIELD,
    LimitError: "too_large",
    VersionError: "version_unavailable",
    VersionNotYetAvailable: Reason.FUTURE_VERSION,
    VersionPruned: "version_pruned",
    UnknownSlotError: "unknown_slot",
    IntegrityError: "integrity",
    StorageError: "unavailable",
    DiskFullError: "insufficient_storage",
    NotFoundError: "not_found",
    AuthError: Reason.UNAUTHORIZED,
    FencedError: "fenced",
    DecodeError: Reason.MALFORMED,
    ResolverError: "internal",
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
    headers = dict(headers or {})
    if code == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if code == 429:
        headers.setdefault("Retry-After", "1")
    return JSONResponse(body, status_code=code, media_type=PROBLEM, headers=headers)


def error_reason(exc: ClaimgraphError) -> str:
    """The reason code an error answers with: its family's, or the member's that narrows it."""
    if isinstance(exc, AuthError | DecodeError | LimitError):
        return exc.reason  # recorded with its own reason code (not_admin, malformed, ...)
    return next(_ERROR_REASONS[c] for c in type(exc).__mro__ if c in _ERROR_REASONS)


def error_status(exc: ClaimgraphError) -> int:
    """The HTTP status of one of our errors (the family's, as README.md's table lists it)."""
    if isinstance(exc, AuthError | LimitError):
        return exc.status  # 401 without a known identity, 403 with one; 413 or 429
    return status_for(next(_ERROR_REASONS[c] for c in type(exc).__mro__ if c in _ERROR_REASONS))


def error_problem(exc: ClaimgraphError) -> JSONResponse:
    """Map one of our errors to a problem (the HTTP side of the exception tree)."""
    extra: dict[str, Any] = {}
    if isinstance(exc, VersionNotYetAvailable):
        extra["head"] = exc.head
    elif isinstance(exc, VersionPruned):
        extra["horizon"] = exc.horizon
    elif isinstance(exc, UnknownSlotError):
        extra["conflict_id"] = exc.conflict_id
    if isinstance(exc, SchemaError):
        detail = exc.report()
    elif isinstance(exc, AuthError | DecodeError):
        detail = exc.detail
    elif isinstance(exc, LimitError):
        detail = exc.detail
        extra["limit"] = exc.limit
    else:
        detail = str(exc)
    if isinstance(exc, IntegrityError):  # stored data is damaged: never a silently wrong answer
        extra["version"] = exc.version
    headers = None
    if isinstance(exc, StorageError):  # a full disk or a store away: writes resume by themselves
        headers = {"Retry-After": "10"}
    return problem(error_reason(exc), detail, status=error_status(exc), headers=headers, **extra)
