"""Serving the mock app on a socket: in the foreground, a background thread, or a subprocess.

Owns the uvicorn setup (httptools parser, uvloop loop, no access log: measured fastest, see
bench.py), the listening socket, the one "ready" line, and clean stops. It knows nothing of
routes or the cluster; those are `app.py`'s.

    serve(config, host=..., port=..., ready=print)       blocks until Ctrl-C / SIGTERM
    start_mock_server(config, host=..., port=0) -> MockServerHandle   (thread; tests)
    start_mock_server(..., process=True)                   (own process and core; benchmarks)

`processes=N` (N >= 2) serves from N front processes sharing the port, with this process (or
thread) owning the cluster state: `multi.py`. The default, 1, is one process as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

import uvicorn
import uvloop

from runner.cluster import ClusterConfig
from runner.errors import RunnerError, SpecError
from runner.mockserver.app import DeliberateDisconnect, MockApp
from runner.mockserver.config import FaultConfig, MockServerConfig

__all__ = [
    "MockServerHandle",
    "child_main",
    "config_from_json",
    "config_to_json",
    "serve",
    "start_mock_server",
]

# Idle keep-alive connections are kept this long: a replay's think times run to tens of
# seconds, and uvicorn's default of 5 s would make the client reconnect after most of them.
_KEEP_ALIVE_S = 120
# On stop, answers still streaming get this long to finish before they are cut.
_GRACEFUL_S = 2
_STARTUP_TIMEOUT_S = 30.0
_READY_PREFIX = "mock server ready at "
_URL = re.compile(r"http://\S+")


def serve(
    config: MockServerConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    ready: Callable[[str], None] | None = None,
    processes: int = 1,
) -> None:
    """Serve in the foreground until SIGINT or SIGTERM; `ready(line)` once listening.

    `processes` >= 2: that many HTTP front processes, this one owning the state (multi.py).
    Raises SpecError when the address cannot be listened on.
    """
    _check_processes(processes)
    if processes > 1:
        from runner.mockserver.multi import run_owner

        def announce_multi(url: str) -> None:
            if ready is not None:
                ready(_ready_line(url, config, processes))

        run_owner(config, host=host, port=port, processes=processes, on_ready=announce_multi)
        return
    sock = _listen(host, port)
    server = _uvicorn_server(MockApp(config))
    url = _url(host, sock)

    def announce() -> None:
        if ready is not None:
            ready(_ready_line(url, config))

    # uvicorn catches SIGINT and SIGTERM itself, shuts down gracefully, then raises the
    # signal again under the handler it found: make that a KeyboardInterrupt for both, so a
    # `kill` ends the process as cleanly (exit 0) as Ctrl-C does.
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main_thread else None
    try:
        with contextlib.suppress(KeyboardInterrupt):
            _run(server, sock, announce)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class MockServerHandle:
    """A running mock server: `url`, `stop()`; also a context manager that stops it.

    Thread mode keeps the live `app` reachable, but it belongs to the server's event loop:
    read it (e.g. `app.stats()`) only while no request is in flight, or use `GET /stats`.
    """

    def __init__(
        self,
        url: str,
        *,
        app: MockApp | None = None,
        stop: Callable[[float], None],
        pid: int | None = None,
    ) -> None:
        self.url = url
        self.app = app  # thread mode only
        self.pid = pid  # process mode only
        self._stop = stop
        self._stopped = False

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop serving (idempotent); answers in flight get a short grace period."""
        if not self._stopped:
            self._stopped = True
            self._stop(timeout_s)

    def __enter__(self) -> MockServerHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"MockServerHandle({self.url!r})"


def start_mock_server(
    config: MockServerConfig | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    process: bool = False,
    processes: int = 1,
) -> MockServerHandle:
    """Start the mock server and return once it accepts connections.

    `port=0` picks a free port; the handle's `url` says which. By default it runs in a
    daemon thread of this process (fast to start; fine for tests). With `process=True` it
    runs in its own Python process, so a client measured in this process does not share a
    core or the GIL with it (benchmarks, live-replay measurements).

    `processes` >= 2 serves from that many front processes (multi.py); the state is owned by
    a thread of this process, or with `process=True` by that process. Either way the handle
    has no `app`: read the state over HTTP (`GET /stats`).
    """
    config = config if config is not None else MockServerConfig()
    _check_processes(processes)
    if process:
        return _start_process(config, host, port, processes)
    if processes > 1:
        return _start_owner_thread(config, host, port, processes)
    return _start_thread(config, host, port)


def _check_processes(processes: int) -> None:
    from runner.mockserver.multi import MAX_PROCESSES

    if not 1 <= processes <= MAX_PROCESSES:
        raise SpecError(f"processes must be 1..{MAX_PROCESSES}, got {processes}")


def _start_owner_thread(
    config: MockServerConfig, host: str, port: int, processes: int
) -> MockServerHandle:
    from runner.mockserver.multi import run_owner

    stop_event = threading.Event()
    started = threading.Event()
    urls: list[str] = []
    failure: list[BaseException] = []

    def ready(url: str) -> None:
        urls.append(url)
        started.set()

    def main() -> None:
        try:
            run_owner(
                config,
                host=host,
                port=port,
                processes=processes,
                on_ready=ready,
                stop=stop_event,
            )
        except BaseException as exc:
            failure.append(exc)
            started.set()

    thread = threading.Thread(target=main, name="mock-server-owner", daemon=True)
    thread.start()
    if not started.wait(_STARTUP_TIMEOUT_S * 2) or not urls:
        stop_event.set()
        thread.join(_STARTUP_TIMEOUT_S)
        if failure and isinstance(failure[0], SpecError):
            raise failure[0]
        raise RunnerError(f"the mock server did not start: {failure[0] if failure else 'timeout'}")

    def stop(timeout_s: float) -> None:
        stop_event.set()
        thread.join(timeout_s + 2 * _GRACEFUL_S)

    return MockServerHandle(urls[0], stop=stop)


def _start_thread(config: MockServerConfig, host: str, port: int) -> MockServerHandle:
    sock = _listen(host, port)
    app = MockApp(config)
    server = _uvicorn_server(app)
    started = threading.Event()
    failure: list[BaseException] = []

    def main() -> None:
        try:
            _run(server, sock, started.set)
        except BaseException as exc:
            failure.append(exc)
            started.set()

    thread = threading.Thread(target=main, name=f"mock-server-{sock.getsockname()[1]}", daemon=True)
    thread.start()
    if not started.wait(_STARTUP_TIMEOUT_S) or failure:
        server.should_exit = True
        raise RunnerError(f"the mock server did not start: {failure[0] if failure else 'timeout'}")

    def stop(timeout_s: float) -> None:
        server.should_exit = True
        thread.join(timeout_s)

    return MockServerHandle(_url(host, sock), app=app, stop=stop)


def _start_process(
    config: MockServerConfig, host: str, port: int, processes: int = 1
) -> MockServerHandle:
    # -c rather than -m: runpy would import this module twice (package, then __main__).
    script = "import sys; from runner.mockserver.server import child_main; sys.exit(child_main())"
    command = [sys.executable, "-c", script, host, str(port), str(processes)]
    # The child must import this very `runner` package, whatever its working directory.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    child = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,  # the child's errors show on ours
        env=env,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(json.dumps(config_to_json(config)))
    child.stdin.close()
    line = _read_line(child, _STARTUP_TIMEOUT_S * (2 if processes > 1 else 1))
    match = _URL.search(line or "")
    if match is None:
        child.kill()
        child.wait()
        raise RunnerError(f"the mock server process did not start (said {line!r})")

    def stop(timeout_s: float) -> None:
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
            try:
                child.wait(timeout_s)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if child.stdout is not None:
            child.stdout.close()

    return MockServerHandle(match.group(0), stop=stop, pid=child.pid)


def _read_line(child: subprocess.Popen[str], timeout_s: float) -> str | None:
    """The child's first stdout line ("" if it exited first), or None if it stays silent."""
    assert child.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            return None
    # The child writes its ready line whole and flushes it, so this does not block.
    return child.stdout.readline()


def config_to_json(config: MockServerConfig) -> dict[str, Any]:
    """A MockServerConfig as plain JSON (round-trips through config_from_json)."""
    return dataclasses.asdict(config)


def config_from_json(data: dict[str, Any]) -> MockServerConfig:
    return MockServerConfig(
        cluster=ClusterConfig(**data.pop("cluster")),
        faults=FaultConfig(**data.pop("faults")),
        **data,
    )


def _run(
    server: uvicorn.Server,
    sock: socket.socket,
    on_ready: Callable[[], None],
    setup: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Run uvicorn on `sock` in a fresh uvloop loop on this thread; call on_ready once up.

    `setup`, when given, is awaited in that loop before serving starts.
    """

    async def main() -> None:
        if setup is not None:
            await setup()
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        # uvicorn has no startup callback; `started` flips once the listener is serving.
        while not server.started and not task.done():
            await asyncio.sleep(0.005)
        if server.started:
            on_ready()
        await task

    _hide_deliberate_disconnects()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


def _uvicorn_server(app: MockApp) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        http="httptools",
        loop="none",  # _run supplies the loop
        lifespan="off",
        ws="none",
        interface="asgi3",
        log_config=None,
        log_level="warning",
        access_log=False,  # a log line per request would cost more than serving it
        server_header=False,
        proxy_headers=False,  # no proxy in front of a mock: skip the per-request middleware
        timeout_keep_alive=_KEEP_ALIVE_S,
        timeout_graceful_shutdown=_GRACEFUL_S,
        backlog=4096,
    )
    return uvicorn.Server(config)


def _listen(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A bound TCP socket (uvicorn listens on it), so port 0 resolves before serving.

    `reuse_port`: SO_REUSEPORT, so several processes' sockets share the port and the kernel
    spreads new connections over those listening (the multi-process mock's fronts).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SpecError(f"cannot listen on {host}:{port}: {reason}") from None
    return sock


def _url(host: str, sock: socket.socket) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _ready_line(url: str, config: MockServerConfig, processes: int = 1) -> str:
    cluster = config.cluster
    served = f", {processes} processes" if processes > 1 else ""
    return (
        f"{_READY_PREFIX}{url} (model {config.model}, {cluster.workers} workers, "
        f"router {cluster.router}, time scale {cluster.time_scale:g}{served})"
    )


class _DeliberateDisconnectFilter(logging.Filter):
    """Drops uvicorn's "Exception in ASGI application" record for a disconnect fault."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DeliberateDisconnect)


def _hide_deliberate_disconnects() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _DeliberateDisconnectFilter) for f in logger.filters):
        logger.addFilter(_DeliberateDisconnectFilter())


def child_main() -> int:
    """The process mode's child: argv HOST PORT [PROCESSES], the config as JSON on stdin."""
    host, port = sys.argv[1], int(sys.argv[2])
    processes = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    config = config_from_json(json.loads(sys.stdin.read()))

    def ready(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    serve(config, host=host, port=port, ready=ready, processes=processes)
    return 0
