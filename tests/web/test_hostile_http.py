"""Hostile requests over real HTTP to the service as uvicorn serves it (the ASGI application,
in a thread of the test process, on the test database): each gets a clear 4xx naming what is
wrong and how to fix it, never a 500 or a traceback, and nothing is half-saved. A test client
would hide the behaviour that matters here (how much of a body is read before it is refused,
how a malformed multipart body reaches Django)."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from aiperf_web.runs.models import Run
from aiperf_web.scenarios.models import Scenario, Trace
from tests.web.conftest import World

JSON = "application/json"


@pytest.fixture
def served(transactional_db: Any, mock_url: str, service: str) -> tuple[World, str]:
    return World(mock_url), service


def _api(world: World, base: str, persona: str = "owner") -> httpx.Client:
    return httpx.Client(
        base_url=base,
        headers={"Authorization": f"Bearer {world.tokens[persona]}"},
        timeout=30,
    )


def _raw(base: str, head: str, body: bytes = b"", *, send_body: bool = True) -> tuple[int, bytes]:
    """Send `head` (request line and headers, without the blank line) and `body` on a plain
    socket; return the status and the response body. For requests httpx will not send."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n\r\n")
        if send_body and body:
            # The server may answer and close before taking it all: that is the point.
            with contextlib.suppress(OSError):
                sock.sendall(body)
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data and _complete(data):
                break
    head_bytes, _, rest = data.partition(b"\r\n\r\n")
    status = int(head_bytes.split(b" ", 2)[1])
    return status, rest


def _complete(data: bytes) -> bool:
    head, _, rest = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(rest) >= int(value.strip())
    return False


def _clear_4xx(status: int, body: bytes, *words: str) -> dict[str, Any]:
    assert 400 <= status < 500, (status, body[:300])
    text = body.decode("utf-8", "replace")
    assert "Traceback" not in text and "<html" not in text.lower(), text[:300]
    payload: dict[str, Any] = json.loads(text)
    for word in words:
        assert word in payload["detail"], (word, payload["detail"])
    return payload


def _multipart_head(world: World, base: str, content_type: str, length: int) -> str:
    return (
        "POST /api/v1/traces HTTP/1.1\n"
        f"Host: {base.removeprefix('http://')}\n"
        f"Authorization: Bearer {world.tokens['owner']}\n"
        f"Content-Type: {content_type}\n"
        f"Content-Length: {length}\n"
        "Connection: close"
    )


# -- multipart -------------------------------------------------------------------------------


def test_a_multipart_upload_without_a_boundary_is_400_saying_so(served: tuple[World, str]) -> None:
    world, base = served
    body = b"--x\r\nContent-Disposition: form-data; name=file; filename=a\r\n\r\nabc\r\n--x--\r\n"
    status, answer = _raw(
        base, _multipart_head(world, base, "multipart/form-data", len(body)), body
    )
    _clear_4xx(status, answer, "boundary")
    assert not Trace.objects.exclude(pk=world.trace.pk).exists()


def test_a_5000_character_filename_is_refused_or_shortened_never_500(
    served: tuple[World, str],
) -> None:
    world, base = served
    with _api(world, base) as api:
        response = api.post(
            "/api/v1/traces",
            files={"file": ("a" * 4990 + ".jsonl", b'{"x": 1}\n' * 400_000)},
        )
    assert response.status_code != 500, response.text[:300]
    _clear_4xx(response.status_code, response.content)
    assert not Trace.objects.exclude(pk=world.trace.pk).exists()


def test_an_oversized_part_header_is_400(served: tuple[World, str]) -> None:
    world, base = served
    boundary = "b0undary"
    body = (
        f"--{boundary}\r\n"
        f"Content-Disposition: form-data; name=file; filename=t.jsonl\r\n"
        f"X-Padding: {'p' * 200_000}\r\n\r\n"
        '{"x": 1}\r\n'
        f"--{boundary}--\r\n"
    ).encode()
    status, answer = _raw(
        base,
        _multipart_head(world, base, f"multipart/form-data; boundary={boundary}", len(body)),
        body,
    )
    _clear_4xx(status, answer)
    assert not Trace.objects.exclude(pk=world.trace.pk).exists()


# -- body size -------------------------------------------------------------------------------


def test_an_upload_over_the_limit_is_413_before_its_body_is_read(
    served: tuple[World, str],
) -> None:
    world, base = served
    # 200 MB announced, nothing sent: the answer must come from the Content-Length alone.
    head = _multipart_head(world, base, "multipart/form-data; boundary=x", 200_000_000)
    started = time.monotonic()
    status, answer = _raw(base, head, send_body=False)
    assert time.monotonic() - started < 10
    assert status == 413, answer[:300]
    _clear_4xx(status, answer, "MB")


def test_a_json_body_over_10_mb_is_413(served: tuple[World, str]) -> None:
    world, base = served
    body = json.dumps({"name": "big", "description": "d" * 10_500_000}).encode()
    with _api(world, base) as api:
        response = api.post("/api/v1/scenarios", content=body, headers={"content-type": JSON})
    assert response.status_code == 413, response.text[:300]
    _clear_4xx(response.status_code, response.content, "10 MB")
    assert not Scenario.objects.filter(name="big").exists()


def test_a_chunked_body_without_a_length_is_counted_and_cut_at_the_cap(
    served: tuple[World, str],
) -> None:
    world, base = served
    sent = 0

    def chunks() -> Iterator[bytes]:
        nonlocal sent
        yield b'{"name": "chunked", "description": "'
        for _ in range(40):  # 40 MB offered, 10 MB allowed
            sent += 1_000_000
            yield b"d" * 1_000_000
        yield b'"}'

    with _api(world, base) as api:
        try:
            response = api.post(
                "/api/v1/scenarios", content=chunks(), headers={"content-type": JSON}
            )
        except httpx.HTTPError:
            pytest.fail("the server should answer 413, not drop the connection silently")
    assert response.status_code == 413, response.text[:300]
    assert not Scenario.objects.filter(name="chunked").exists()


# -- text ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["\ud800", "a\u0000b"])
@pytest.mark.parametrize("field", ["name", "description"])
def test_a_lone_surrogate_or_nul_in_scenario_text_is_422(
    served: tuple[World, str], field: str, bad: str
) -> None:
    world, base = served
    payload = {"name": "fine", "description": "", field: bad}
    # json.dumps writes a lone surrogate as the escape "\ud800", as a hostile client would.
    body = json.dumps(payload).encode()
    with _api(world, base) as api:
        response = api.post("/api/v1/scenarios", content=body, headers={"content-type": JSON})
        patch = api.patch(
            f"/api/v1/scenarios/{world.scenario.uuid}",
            content=json.dumps({field: bad}).encode(),
            headers={"content-type": JSON},
        )
    for answer in (response, patch):
        payload_out = _clear_4xx(answer.status_code, answer.content)
        assert answer.status_code == 422
        assert any(e["field"] == field for e in payload_out["errors"]), payload_out
    assert not Scenario.objects.filter(name="fine").exists()
    assert Scenario.objects.get(pk=world.scenario.pk).name == "alpha-scenario"


def test_nul_in_a_run_search_or_tags_is_422(served: tuple[World, str]) -> None:
    world, base = served
    with _api(world, base) as api:
        search = api.get("/api/v1/runs", params={"q": "\x00"})
        tags = api.patch(
            f"/api/v1/runs/{world.run.uuid}",
            content=json.dumps({"tags": ["a\u0000"], "notes": "n\u0000"}).encode(),
            headers={"content-type": JSON},
        )
    assert search.status_code == 422, search.text[:300]
    assert "q" in {e["field"] for e in search.json()["errors"]}
    assert tags.status_code == 422, tags.text[:300]
    run = Run.objects.get(pk=world.run.pk)
    assert "\x00" not in run.notes and "\x00" not in run.tags


def test_a_huge_run_list_offset_is_422_naming_it(served: tuple[World, str]) -> None:
    world, base = served
    with _api(world, base) as api:
        response = api.get("/api/v1/runs", params={"offset": "100000000000000000000000"})
    payload = _clear_4xx(response.status_code, response.content)
    assert response.status_code == 422
    assert "offset" in {e["field"] for e in payload["errors"]}
