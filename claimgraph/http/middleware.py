"""What wraps every route: our errors and FastAPI's mapped to problem+json."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from claimgraph.core.model import Reason
from claimgraph.errors import ClaimgraphError
from claimgraph.http.problems import error_problem, problem

__all__ = ["install"]


def install(app: FastAPI) -> None:
    """Map every error a route can raise to an RFC 9457 problem."""

    @app.exception_handler(ClaimgraphError)
    async def ours(request: Request, exc: ClaimgraphError) -> JSONResponse:
        return error_problem(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(x) for x in first.get("loc", ()))
        return problem(
            Reason.INVALID_FIELD,
            f"{where}: {first.get('msg', 'invalid')}"[:500],
            errors=[{"loc": [str(x) for x in e.get("loc", ())], "msg": e["msg"]} for e in errs],
        )

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        # a bug, not one of our errors: still problem+json, never a plain-text 500
        return problem("internal", f"{type(exc).__name__}: {exc}"[:500])

    @app.exception_handler(StarletteHTTPException)
    async def http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        reason = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "malformed")
        return problem(reason, str(exc.detail), status=exc.status_code)
