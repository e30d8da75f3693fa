"""Request latency of this process as a Prometheus histogram, recorded by a middleware that
sits first in MIDDLEWARE (so it times the whole Django stack). A streamed response is timed
to its headers, not to its last byte."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest
from django.http.response import HttpResponseBase

# Seconds: page and API requests take milliseconds; exports and the 1M-request report take
# seconds.
BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Histogram:
    """Cumulative-on-read bucket counts per status class (`2xx`, `4xx`, `5xx`, ...)."""

    def __init__(self, buckets: tuple[float, ...] = BUCKETS_S) -> None:
        self.buckets = buckets
        self._lock = threading.Lock()
        # status class -> (per-bucket counts incl. +Inf, sum of seconds)
        self._counts: dict[str, list[int]] = {}
        self._sums: dict[str, float] = {}

    def observe(self, status_class: str, seconds: float) -> None:
        i = bisect.bisect_left(self.buckets, seconds)
        with self._lock:
            counts = self._counts.setdefault(status_class, [0] * (len(self.buckets) + 1))
            counts[i] += 1
            self._sums[status_class] = self._sums.get(status_class, 0.0) + seconds

    def snapshot(self) -> dict[str, tuple[list[int], float]]:
        """status class -> (cumulative counts per bucket, the last one +Inf; sum of seconds)."""
        with self._lock:
            out = {}
            for key, counts in self._counts.items():
                running, cumulative = 0, []
                for n in counts:
                    running += n
                    cumulative.append(running)
                out[key] = (cumulative, self._sums[key])
            return out


REQUESTS = Histogram()

GetResponse = Callable[[HttpRequest], Any]


class RequestLatencyMiddleware:
    """Times every request into REQUESTS; sync and async, so it never forces an adaptation."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        started = time.perf_counter()
        response: HttpResponseBase = self.get_response(request)
        _observe(response, started)
        return response

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]] = self.get_response
        response = await get_response(request)
        _observe(response, started)
        return response


def _observe(response: HttpResponseBase, started: float) -> None:
    REQUESTS.observe(f"{response.status_code // 100}xx", time.perf_counter() - started)
