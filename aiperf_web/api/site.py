"""The JSON API under /api/v1/ (bearer tokens; OpenAPI at /api/v1/openapi.json): the NinjaAPI,
its authentication, its error bodies, and the apps' routers mounted on it.

Each app owns its `api.py` (a router and the shapes it answers with), thin like its views:
parse (ninja validates bodies into the schemas), call a selector or service, shape the answer.
Service errors map here, once, to 404 / 403 / 422 (409 a conflict with stored state, 429 over
a team's cap) JSON bodies naming the field, which api/contract.py declares in the schema;
unknown and other teams' ids are 404 alike.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.operation import Operation
from ninja.security import HttpBearer

from aiperf_web.api.contract import declare_errors
from aiperf_web.core.errors import Conflict, Forbidden, Invalid, NotFound, TooMany
from aiperf_web.endpoints.api import router as endpoints_router
from aiperf_web.reports.api import router as reports_router
from aiperf_web.runs.api import router as runs_router
from aiperf_web.scenarios.api import router as scenarios_router
from aiperf_web.sweeps.api import router as sweeps_router
from aiperf_web.teams.api import router as teams_router
from aiperf_web.teams.services import api_token_authenticate

log = logging.getLogger(__name__)


class TokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        user = api_token_authenticate(raw=token)
        if user is not None:
            request.user = user
        return user


class _API(NinjaAPI):
    def get_openapi_operation_id(self, operation: Operation) -> str:
        # Operation ids are published (clients generated from the schema name their methods
        # after them): the routes that moved out of api/views.py into their apps keep the ids
        # they had there; the reports router always had its own module in its ids.
        if operation.view_func.__module__ == "aiperf_web.reports.api":
            return super().get_openapi_operation_id(operation)
        return f"aiperf_web_api_views_{operation.view_func.__name__}"

    def get_openapi_schema(
        self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None
    ) -> Any:
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        # Every error answer each operation gives, with its body (api/contract.py).
        prefix = path_prefix if path_prefix is not None else self.get_root_path(path_params or {})
        declare_errors(schema, prefix=prefix)
        return schema


api = _API(
    title="aiperf-web API",
    version="1",
    description="Run and monitor agentic LLM-inference benchmarks. "
    "Authenticate with `Authorization: Bearer <token>` (`manage.py create_api_token <user>`).",
    auth=TokenAuth(),
    urls_namespace="api",
    docs_url="/docs",
    openapi_url="/openapi.json",
)


# -- errors --


def _error(
    request: HttpRequest, status: int, detail: str, fields: dict[str, str] | None = None
) -> HttpResponse:
    body = {
        "detail": detail,
        "errors": [{"field": k, "message": v} for k, v in (fields or {}).items()],
    }
    return api.create_response(request, body, status=status)


@api.exception_handler(NotFound)
def _not_found(request: HttpRequest, exc: NotFound) -> HttpResponse:
    return _error(request, 404, str(exc))


@api.exception_handler(Forbidden)
def _forbidden(request: HttpRequest, exc: Forbidden) -> HttpResponse:
    return _error(request, 403, str(exc))


@api.exception_handler(Invalid)
def _invalid(request: HttpRequest, exc: Invalid) -> HttpResponse:
    return _error(request, 422, str(exc), exc.fields)


@api.exception_handler(Conflict)
def _conflict(request: HttpRequest, exc: Conflict) -> HttpResponse:
    # Well-formed input the stored state refuses: a name taken, an object in use.
    return _error(request, 409, str(exc), exc.fields)


@api.exception_handler(TooMany)
def _too_many(request: HttpRequest, exc: TooMany) -> HttpResponse:
    # A quota, not bad input: the same request succeeds once runs have started or ended.
    return _error(request, 429, str(exc), exc.fields)


def _loc_part(part: object) -> str:
    # A location names an object's key (a header name), which is the sender's text: one over
    # its bound is named by its start, not echoed whole.
    text = str(part)
    return text if len(text) <= 60 else f"{text[:40]}...({len(text)} characters)"


@api.exception_handler(NinjaValidationError)
def _schema_invalid(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    fields: dict[str, str] = {}
    for error in exc.errors:
        # ("body", "payload", "overrides", "duration_s") -> "overrides.duration_s"
        loc = [
            _loc_part(p)
            for p in error.get("loc", ())
            if p not in ("body", "payload", "query", "form", "file")
        ]
        loc = [p for p in loc if p not in ("endpoint", "simulated") or len(loc) == 1]
        fields.setdefault(
            ".".join(loc) or "body", str(error.get("msg", "invalid")).removeprefix("Value error, ")
        )
    return _error(request, 422, "; ".join(f"{k}: {v}" for k, v in fields.items()), fields)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return _error(request, 401, "authentication required: Authorization: Bearer <token>")


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return _error(request, exc.status_code, str(exc))


@api.exception_handler(RequestDataTooBig)
def _too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    # Normally refused earlier, by Content-Length (core/limits.py); this is Django's own check.
    cap = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return _error(
        request, 413, f"the request body is over {cap} bytes: send less in one request", {}
    )


@api.exception_handler(MultiPartParserError)
@api.exception_handler(TooManyFieldsSent)
@api.exception_handler(TooManyFilesSent)
def _bad_multipart(request: HttpRequest, exc: Exception) -> HttpResponse:
    message = (
        f"malformed multipart/form-data body ({exc}): send one form with a boundary in its "
        "Content-Type (as curl -F or any HTTP library builds it), part headers under 1 KB "
        "(a file name of at most a few hundred characters) and fewer than 100 files"
    )
    return _error(request, 400, message, {"body": message})


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def _database_away(request: HttpRequest, exc: Exception) -> HttpResponse:
    # The database restarting or failing over (PostgreSQL's "terminating connection due to
    # administrator command", a refused connection): the same request succeeds in a moment.
    log.warning("API: database unavailable on %s %s: %s", request.method, request.path, exc)
    response = _error(
        request, 503, "the database is unreachable for now (a restart?): try again in a few seconds"
    )
    response["Retry-After"] = "5"
    return response


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    # Never a traceback to the caller: the log keeps it.
    log.exception("API error on %s %s", request.method, request.path)
    return _error(request, 500, "internal error; the server log has the details")


# -- the apps' routers, mounted in the order their paths are listed --

api.add_router("", reports_router)  # compare, verdict, leak monitor, A/B
api.add_router("", teams_router)
api.add_router("", scenarios_router)  # the spec schema, traces, scenarios
api.add_router("", endpoints_router)
api.add_router("", runs_router)
api.add_router("", sweeps_router)  # sweeps of runs along a load axis (issue 20)
