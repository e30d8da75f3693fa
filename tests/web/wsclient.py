"""A WebSocket test client over the ASGI application, as channels.testing's communicator does
(that module imports daphne, which the project does not install)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote, urlparse

from asgiref.testing import ApplicationCommunicator


class WebsocketCommunicator(ApplicationCommunicator):  # type: ignore[misc]
    def __init__(self, application: Any, path: str, headers: list[tuple[bytes, bytes]]) -> None:
        parsed = urlparse(path)
        scope = {
            "type": "websocket",
            "path": unquote(parsed.path),
            "query_string": parsed.query.encode("utf-8"),
            "headers": [(b"host", b"127.0.0.1:8000"), *headers],
            "subprotocols": [],
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8000),
        }
        super().__init__(application, scope)

    async def connect(self, timeout: float = 5) -> tuple[bool, int | None]:
        await self.send_input({"type": "websocket.connect"})
        response = await self.receive_output(timeout)
        if response["type"] == "websocket.close":
            return False, response.get("code", 1000)
        return True, None

    async def send_to(self, text_data: str) -> None:
        await self.send_input({"type": "websocket.receive", "text": text_data})

    async def send_json_to(self, data: Any) -> None:
        await self.send_to(json.dumps(data))

    async def receive_json_from(self, timeout: float = 5) -> Any:
        while True:
            response = await self.receive_output(timeout)
            if response["type"] == "websocket.send":
                return json.loads(response["text"])
            if response["type"] == "websocket.close":
                raise AssertionError(f"socket closed with {response.get('code')}")

    async def disconnect(self, code: int = 1000, timeout: float = 5) -> None:
        await self.send_input({"type": "websocket.disconnect", "code": code})
        await self.wait(timeout)
