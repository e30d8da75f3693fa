"""A small HTTP client of the service's JSON API (/api/v1, bearer token), on httpx. Owns the
translation of every failure into one line for the person at the terminal: what failed, where,
how to fix it. Knows routes, not Django: the service is reached only over HTTP.

    BadInput      the command cannot do its job as asked: no connection, not the service's API
                  at that address, a refused token, an unknown id, a refused value, a quota
                  (exit 2)
    RunnerError   the service failed (a 5xx answer: exit 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import httpx

from runner.errors import BadInput, RunnerError
from runner.service.config import LOGIN_HINT, TOKEN_ENV

__all__ = ["ServiceClient"]

API = "/api/v1"

# What to do about each refusal, after the server's own sentence.
_HINTS = {
    400: "the request was malformed",
    401: f"log in again with `{LOGIN_HINT} --url {{url}}`, or pass --token or set {TOKEN_ENV} "
    "(tokens: the Team page, or `manage.py create_api_token <user>`)",
    403: "an admin of the team can give you the role",
    404: "it does not exist or belongs to a team you are not in: list what you can see with "
    "`python -m runner service {listing}`",
    409: "it conflicts with what is stored (a name taken, an object in use, a run not ended)",
    413: "send less in one request",
    422: "correct the value named",
    429: "try again once some of the team's runs have started or ended",
}


class ServiceClient:
    """One server, one token, one connection pool; `close` (or `with`) when done."""

    def __init__(
        self,
        *,
        url: str,
        token: str,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._http = httpx.Client(
            base_url=url + API,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            transport=transport,
        )

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def page_url(self, path: str) -> str:
        """A page of the site (not the API), e.g. a run's: /runs/<id>/."""
        return self.url + path

    def get(self, path: str, params: Mapping[str, str | int] | None = None) -> Any:
        return self._json(self._send("GET", path, params=params))

    def post(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        return self._json(self._send("POST", path, json=dict(body or {})))

    def download(self, path: str, target: IO[bytes] | Path) -> int:
        """Stream a route's body into `target` (an open binary file, or a path written only
        once the server has accepted the request); returns the bytes written."""
        try:
            with self._http.stream("GET", path) as response:
                if response.status_code >= 400:
                    response.read()
                    self._refuse("GET", path, response)
                if isinstance(target, Path):
                    try:
                        with target.open("wb") as handle:
                            return self._copy(response, handle)
                    except OSError as exc:
                        raise BadInput(f"cannot write {target}: {exc.strerror or exc}") from None
                return self._copy(response, target)
        except httpx.TransportError as exc:
            raise self._unreachable("GET", path, exc) from None

    @staticmethod
    def _copy(response: httpx.Response, handle: IO[bytes]) -> int:
        written = 0
        for chunk in response.iter_bytes():
            handle.write(chunk)
            written += len(chunk)
        return written

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(method, path, exc) from None
        if response.status_code >= 400:
            self._refuse(method, path, response)
        return response

    def _unreachable(self, method: str, path: str, exc: httpx.TransportError) -> BadInput:
        where = f"{method} {self.url}{API}{path}"
        fix = "start it (`make run`) or point --url or AIPERF_URL at it"
        if isinstance(exc, httpx.TimeoutException):
            return BadInput(f"{where}: no answer within {self.timeout_s:g} s: is the service up?")
        if isinstance(exc, httpx.ConnectError):
            reason = str(exc) or type(exc).__name__
            return BadInput(f"cannot connect to the service at {self.url} ({reason}): {fix}")
        return BadInput(f"{where} failed ({exc or type(exc).__name__}): {fix}")

    def _refuse(self, method: str, path: str, response: httpx.Response) -> None:
        status = response.status_code
        where = f"{method} {API}{path}"
        detail = _detail(response)
        if detail is None:
            kind = response.headers.get("content-type", "no content type").split(";")[0]
            raise BadInput(
                f"{self.url}{API}{path} answered {status} ({kind}), not the aiperf-web API: "
                "check --url or AIPERF_URL (the service's address, e.g. http://127.0.0.1:8000)"
            )
        if status >= 500:
            raise RunnerError(f"the service failed on {where} ({status}): {detail}")
        if status == 401:  # the server says a token is required; the one sent is refused
            raise BadInput(
                f"{self.url} refused the API token (401 on {where}); {_HINTS[401]}".format(
                    url=self.url
                )
            )
        listing = path.strip("/").split("/")[0]
        hint = _HINTS.get(status, "").format(
            listing=listing if listing in ("runs", "scenarios", "endpoints") else "runs"
        )
        if status == 422 and method == "POST" and path in ("/runs", "/ab"):
            hint += " (every knob, its bounds and meaning: GET /api/v1/spec/schema)"
        raise BadInput(f"{where} refused ({status}): {detail}" + (f"; {hint}" if hint else ""))

    def _json(self, response: httpx.Response) -> Any:
        if response.status_code == 204:
            return None
        try:
            return response.json()
        except ValueError:
            raise BadInput(
                f"{response.request.url} answered {response.status_code} with a body that is "
                "not JSON, not the aiperf-web API: check --url or AIPERF_URL"
            ) from None


def _detail(response: httpx.Response) -> str | None:
    """The API's error sentence ({"detail": ...}), or None when the answer is not the API's
    (an HTML page, a proxy's error, another program on that port)."""
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("detail"), str):
        return None
    return " ".join(body["detail"].split()) or f"HTTP {response.status_code}"
