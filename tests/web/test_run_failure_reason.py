"""A failed run's reason is one short clean line (issue 13 item 8): what a server or the
engine said at length (a traceback page, a database's DETAIL lines) goes whole to the run's
log, and the run list, page and API show an excerpt: one line, at most 200 characters, no
traceback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from aiperf_web.core.text import reason_excerpt
from aiperf_web.endpoints.services import endpoint_create
from aiperf_web.runs.executing import run_execute
from aiperf_web.runs.models import RunLog, Status
from aiperf_web.runs.services import run_launch
from tests.web.conftest import World

# A Python server's debug answer: a traceback hundreds of lines long, then the exception.
TRACEBACK = (
    "Traceback (most recent call last):\n"
    + "".join(
        f'  File "/srv/model_server/layer_{n}.py", line {n}, in forward\n'
        f"    hidden = self.block_{n}(hidden)\n"
        for n in range(120)
    )
    + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
)


class _BrokenModelServer(BaseHTTPRequestHandler):
    """Lists its model, then fails every completion with the traceback as text/plain."""

    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "broken-model"}]}).encode()
        self._answer(200, "application/json", body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self._answer(500, "text/plain", TRACEBACK.encode())

    def _answer(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def broken_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BrokenModelServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_run_failed_by_a_servers_traceback_shows_one_short_line_and_logs_the_whole_text(
    transactional_db: Any, mock_url: str, broken_server: str
) -> None:
    world = World(mock_url)
    endpoint = endpoint_create(
        actor=world.owner,
        team=world.team,
        name="broken",
        base_url=broken_server,
        model="broken-model",
        server_kind="openai",
    )
    launched = run_launch(
        actor=world.owner,
        scenario_id=world.scenario.uuid,
        endpoint_id=endpoint.uuid,
        enqueue=False,
    )
    assert run_execute(run_uuid=str(launched.uuid), worker="reason-test:1") == Status.FAILED

    launched.refresh_from_db()
    reason = launched.reason
    assert "\n" not in reason and len(reason) <= 200, reason
    assert "Traceback" not in reason and 'File "' not in reason, reason
    # The engine quotes the answer's first 300 characters on one line (its exception, at the
    # end, is cut off): the reason says what failed, that a traceback came, and what to do.
    assert "failed a 1-token test request (HTTP 500: a Python traceback" in reason
    assert reason.endswith("check the server's logs"), reason
    logged = [
        m
        for m in RunLog.objects.filter(run=launched).values_list("message", flat=True)
        if "Traceback (most recent call last)" in m
    ]
    assert logged and 'File "/srv/model_server/layer_0.py"' in logged[0]
    assert logged[0].endswith("check the server's logs"), "the log keeps the engine's whole text"

    shown = world.api("owner").get(f"/api/v1/runs/{launched.uuid}").json()
    assert shown["reason"] == reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cancelled", "cancelled"),
        (
            "storing results failed: duplicate key value violates unique constraint\n"
            "DETAIL:  Key (run_id, seq)=(7, 12) already exists.",
            "storing results failed: duplicate key value violates unique constraint DETAIL: "
            "Key (run_id, seq)=(7, 12) already exists.",
        ),
        (
            "internal error: " + TRACEBACK,
            "internal error: torch.OutOfMemoryError: CUDA out of "
            "memory. Tried to allocate 2.00 GiB",
        ),
    ],
)
def test_a_reason_is_one_line_without_its_traceback(text: str, expected: str) -> None:
    assert reason_excerpt(text) == expected


def test_a_long_reason_keeps_its_advice_and_cuts_the_servers_words() -> None:
    text = (
        "http://10.0.0.7:8000/v1/chat/completions failed a 1-token test request "
        f"(HTTP 500: {'x' * 5000}); check the server's logs"
    )
    short = reason_excerpt(text)
    assert len(short) <= 200 and short.endswith("); check the server's logs"), short
