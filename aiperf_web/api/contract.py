"""What the OpenAPI schema promises beyond what ninja writes from the routes (issue 26 item 7):
every error answer an operation can give, with its body, and the rules the server enforces
that the route's types alone do not state.

The error answers come from rules over the operation, so a route added later is held to
them without anyone listing it: every operation behind a token can answer 401; one with a
path parameter or a body, 404 (an unknown id, or one of a team the caller is not in: never
403 for those); one with query parameters or a body, 422; one with a body, 400 (a body that
does not parse) and 413 (over the request size limit); one that writes, 403 (a role that does
not allow it); every one, 503 while the database is away (api/site.py). 409 and 429 are
declared where the services raise them (Conflict, TooMany): OPERATION_ERRORS below.
tests/web/test_api_fuzz.py holds the schema to the server with schemathesis (every check,
every operation), so a code missing here fails it.
"""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA: dict[str, Any] = {
    "title": "Error",
    "type": "object",
    "description": "Every error answer of the API: what went wrong in one line, and the fields "
    "it concerns (a field named `a.b` is key `b` of object `a`; `body` the body as a whole).",
    "properties": {
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                "required": ["field", "message"],
            },
        },
    },
    "required": ["detail", "errors"],
}

ERROR_MEANING = {
    400: "the body does not parse (JSON, or a multipart form)",
    401: "no token, or a token that is unknown, revoked or expired",
    403: "your role in the object's team does not allow this (the message names the role)",
    404: "an id (in the path, or in the body or query) unknown, or of a team you are not in",
    409: "well-formed, but the stored state refuses it (a name taken, an object in use, a run "
    "not ended)",
    413: "the request body is over the server's size limit",
    422: "a field breaks a rule (each named in `errors`)",
    429: "a team's cap of queued runs is reached (AIPERF_TEAM_MAX_QUEUED); try again once runs "
    "have started",
    503: "the database is unreachable for now (a restart or failover): try again after "
    "Retry-After seconds",
}

# Codes only some operations answer, by (method, path under /api/v1).
OPERATION_ERRORS: dict[tuple[str, str], tuple[int, ...]] = {
    ("post", "/traces"): (409,),
    ("delete", "/traces/{trace_id}"): (409,),
    ("post", "/scenarios"): (409,),
    ("patch", "/scenarios/{scenario_id}"): (409,),
    ("post", "/endpoints"): (409,),
    ("patch", "/endpoints/{endpoint_id}"): (409,),
    ("post", "/runs"): (429,),
    ("post", "/runs/{run_id}/rerun"): (409, 429),
    ("delete", "/runs/{run_id}"): (409,),
    ("get", "/runs/{run_id}/verify"): (409,),
    ("post", "/ab"): (429,),
    ("get", "/compare"): (404,),
}

# Rules on a query parameter that its route's type does not state, by (method, path, name).
# compare's ids: two or more non-empty items (its view refuses fewer; that each is named once
# is said in words, a pattern cannot state it).
_ANY = r"[^\u0000,]*"
_ID = rf"{_ANY}[^\s\u0000,]{_ANY}"
PARAMETER_RULES: dict[tuple[str, str, str], dict[str, Any]] = {
    ("get", "/compare", "runs"): {
        "pattern": rf"^({_ANY},)*{_ID}(,{_ANY})*,{_ID}(,{_ANY})*$",
        "description": "two to eight run ids, comma-separated, each named once (white space "
        "and empty items are ignored); an id unknown or of another team is 404",
    },
}

_WRITES = ("post", "put", "patch", "delete")


def declare_errors(schema: dict[str, Any], *, prefix: str) -> dict[str, Any]:
    """Add each operation's error answers (ERROR_MEANING) to `schema` (an OpenAPI document
    whose paths start with `prefix`), all with the Error body; returns it."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = ERROR_SCHEMA
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, item in schema.get("paths", {}).items():
        short = path.removeprefix(prefix.rstrip("/"))
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            params = operation.get("parameters") or []
            for param in params:
                rule = PARAMETER_RULES.get((method, short, param.get("name", "")))
                if rule is not None:
                    param["schema"].update(rule)
            has_path = any(p.get("in") == "path" for p in params)
            has_query = any(p.get("in") == "query" for p in params)
            has_body = "requestBody" in operation
            codes: set[int] = set(OPERATION_ERRORS.get((method, short), ()))
            if operation.get("security"):
                codes.update((401, 503))  # the token is read from the database
            if has_path or has_body:
                codes.add(404)
            if has_query or has_body:
                codes.add(422)
            if has_body:
                codes.update((400, 413))
            if method in _WRITES:
                codes.add(403)
            responses = operation.setdefault("responses", {})
            for code in sorted(codes):
                responses.setdefault(
                    str(code), {"description": ERROR_MEANING[code], "content": body}
                )
    return schema
