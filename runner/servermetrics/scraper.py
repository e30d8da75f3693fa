"""The I/O shell around the books: GET the endpoint's Prometheus page every interval of a run.

Owns the scrape loop, its own small HTTP client (one connection, never the run's pool: a
scrape must not take a slot a request is waiting for), which URL to scrape, and what happens
when the server has no metrics: the first failed scrape logs one warning and ends scraping,
and the summary says why (`{"available": false, "reason": ...}`); a run never fails for it.
Parsing runs in a worker thread so a large page does not hold the run's event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Final, Literal

import httpx

from runner.servermetrics.books import ServerMetricsBooks
from runner.servermetrics.catalogue import Reading, read_exposition
from runner.servermetrics.exposition import parse_exposition
from runner.servermetrics.shapes import ServerMetricsSummary, ServerMetricsView

__all__ = [
    "METRICS_OFF",
    "ServerMetricsScraper",
    "metrics_url_for",
    "same_origin",
    "scrape_headers",
]

METRICS_OFF: Final = "off"
_MAX_BYTES: Final = 8 * 1024 * 1024  # a /metrics page of a big vLLM deployment is ~1 MB
# The scrapes before and after the run must not hold its start or its result long.
_FIRST_TIMEOUT_S: Final = 2.0
_FINAL_TIMEOUT_S: Final = 2.0
_SLOW_PAGE_S: Final = 5.0  # the shortest read timeout of a scrape during the run

Log = Callable[[Literal["info", "warning", "error"], str], None]


def metrics_url_for(endpoint_url: str, setting: str | None) -> str | None:
    """The URL to scrape: `setting` when it is a URL, None when it is "off", else `/metrics`
    on the endpoint's origin (`http://h:8000/v1` -> `http://h:8000/metrics`)."""
    if setting is not None and setting.strip().lower() == METRICS_OFF:
        return None
    if setting:
        return setting
    url = httpx.URL(endpoint_url)
    return str(url.copy_with(path="/metrics", query=None, fragment=None))


def same_origin(a: str, b: str) -> bool:
    ua, ub = httpx.URL(a), httpx.URL(b)
    return (ua.scheme, ua.host, ua.port) == (ub.scheme, ub.host, ub.port)


def scrape_headers(
    url: str, *, endpoint_url: str, headers: Mapping[str, str], api_key: str | None
) -> dict[str, str]:
    """What a scrape of `url` sends: the endpoint's headers and API key, but only to the
    endpoint's own origin, never to another host."""
    if not same_origin(url, endpoint_url):
        return {}
    sent = dict(headers)
    if api_key:
        sent["authorization"] = f"Bearer {api_key}"
    return sent


class _ScrapeError(Exception):
    pass


class ServerMetricsScraper:
    """Scrapes `url` from `start()` to `stop()`; `latest()` is the compact view for snapshots,
    `summary()` the summary's `server_metrics`. `url` None: scraping is off."""

    def __init__(
        self,
        url: str | None,
        *,
        interval_s: float = 2.0,
        headers: Mapping[str, str] | None = None,
        log: Log | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self.interval_s = interval_s
        self.books = ServerMetricsBooks()
        self.failures = 0
        self.reason: str | None = None if url is not None else "turned off (metrics_url: off)"
        self._log = log
        self._headers = {"user-agent": "aiperf-web-runner", **(headers or {})}
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._t0 = time.perf_counter()
        self._view: ServerMetricsView = (
            {"available": True, "kind": None, "t_s": None, "figures": {}, "workers": None}
            if url is not None
            else {"available": False, "reason": self.reason or ""}
        )
        self._warned_later = False

    @property
    def available(self) -> bool:
        return self.reason is None

    async def start(self) -> None:
        """Take the first scrape (the counters' baseline, before the run sends anything),
        then scrape every interval in the background until `stop()`."""
        if self.url is None or self._client is not None:
            return
        # Scrapes never pile up (the loop waits for each and skips the ticks it outlasts), so a
        # page may take a few seconds: a vLLM streaming at full speed answers /metrics late,
        # and a timeout of one short interval lost every scrape while it was busy.
        timeout = httpx.Timeout(min(10.0, max(_SLOW_PAGE_S, self.interval_s)))
        self._client = httpx.AsyncClient(
            headers=self._headers,
            timeout=timeout,
            transport=self._transport,
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            follow_redirects=False,
            trust_env=False,  # like the run's own client: straight to the server, no env proxy
        )
        try:
            await asyncio.wait_for(self._scrape(t_s=0.0), _FIRST_TIMEOUT_S)
        except _ScrapeError as exc:
            self.failures += 1
            self._unavailable(str(exc))
            return
        except TimeoutError:
            pass  # a slow first answer: the loop's first scrape is the baseline then
        # Run time starts now, as the run's own clock does right after.
        self._t0 = time.perf_counter()
        self._task = asyncio.create_task(self._loop(), name="server-metrics")

    async def stop(self) -> None:
        """End scraping; one last scrape when the server answered before (counters' totals)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._client is None:
            return
        try:
            if self.available and self.books.scrapes:
                try:
                    await asyncio.wait_for(self._scrape(final=True), _FINAL_TIMEOUT_S)
                except (_ScrapeError, TimeoutError):
                    self.failures += 1
        finally:
            await self._client.aclose()
            self._client = None

    def latest(self) -> ServerMetricsView:
        return self._view

    def summary(self) -> ServerMetricsSummary:
        if not self.available:
            return {
                "available": False,
                "reason": self.reason or "",
                "url": self.url,
                "scrapes": 0,
                "failures": self.failures,
            }
        summary = self.books.summary()
        summary["url"] = self.url
        summary["interval_s"] = self.interval_s
        summary["scrapes"] = self.books.scrapes
        summary["failures"] = self.failures
        return summary

    # -- the loop -------------------------------------------------------------------------

    async def _loop(self) -> None:
        due = time.perf_counter()
        if self.books.scrapes:
            due += self.interval_s
            await asyncio.sleep(self.interval_s)
        while True:
            try:
                await self._scrape()
            except _ScrapeError as exc:
                self.failures += 1
                if not self.books.scrapes:
                    self._unavailable(str(exc))
                    return
                if not self._warned_later:
                    self._warned_later = True
                    self._emit("warning", f"server metrics: a scrape failed ({exc}); retrying")
            # On a fixed grid from the start: a slow scrape skips ticks instead of drifting.
            due += self.interval_s
            now = time.perf_counter()
            if due < now:
                due = now + self.interval_s - (now - due) % self.interval_s
            await asyncio.sleep(due - now)

    async def _scrape(self, *, final: bool = False, t_s: float | None = None) -> None:
        assert self._client is not None and self.url is not None
        text = await self._get(self._client, self.url)
        if t_s is None:
            t_s = time.perf_counter() - self._t0
        reading = await asyncio.to_thread(_read, text)
        if reading is None:
            raise _ScrapeError(f"GET {self.url}: the answer is not Prometheus text")
        first = not self.books.scrapes
        self.books.observe(t_s, reading, final=final)
        self._view = self.books.view()
        if first:
            self._announce(reading)

    async def _get(self, client: httpx.AsyncClient, url: str) -> str:
        try:
            async with client.stream("GET", url) as response:
                if response.status_code == 404:
                    raise _ScrapeError(f"GET {url}: HTTP 404, the server has no metrics page")
                if not 200 <= response.status_code < 300:
                    raise _ScrapeError(f"GET {url}: HTTP {response.status_code}")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > _MAX_BYTES:
                        raise _ScrapeError(f"GET {url}: larger than {_MAX_BYTES >> 20} MiB")
                return body.decode("utf-8", errors="replace")
        except httpx.ConnectError as exc:
            raise _ScrapeError(f"GET {url}: cannot connect ({_short(exc)})") from None
        except httpx.TimeoutException:
            raise _ScrapeError(f"GET {url}: no answer within the timeout") from None
        except httpx.HTTPError as exc:
            raise _ScrapeError(f"GET {url}: {type(exc).__name__} ({_short(exc)})") from None

    def _unavailable(self, reason: str) -> None:
        self.reason = reason
        self._view = {"available": False, "reason": reason}
        self._emit("warning", f"server metrics unavailable: {reason}")

    def _announce(self, reading: Reading) -> None:
        if reading.sources:
            figures = ", ".join(reading.sources)
            self._emit("info", f"server metrics: {reading.kind} at {self.url} ({figures})")
        else:
            self._emit(
                "info",
                f"server metrics: {reading.families} families at {self.url}, none of them known "
                "(kept as counts only)",
            )

    def _emit(self, level: Literal["info", "warning", "error"], message: str) -> None:
        if self._log is not None:
            self._log(level, message)


def _read(text: str) -> Reading | None:
    exposition = parse_exposition(text)
    if not exposition.sample_count:
        return None
    return read_exposition(exposition)


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."
