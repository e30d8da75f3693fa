"""Server-sent events: an incremental parser with no I/O.

Feed it bytes exactly as they come off the wire, in any split; it returns the complete events
(WHATWG HTML §9.2 "event stream interpretation"). It knows nothing of HTTP, JSON or OpenAI:
`openai.py` reads the events' data. One deliberate departure from the standard: `flush()` at
end of stream dispatches a final event that lacks its closing blank line, because servers
that end with `data: [DONE]` and no blank line exist and the standard would drop it.
`feed_raw()` is `feed()` for a hot reader: a one-line `data:` event of the default type comes
back as its undecoded data bytes instead of an `SSEEvent`, which is most events of a stream.
"""

from __future__ import annotations

from typing import NamedTuple, cast

__all__ = ["SSEEvent", "SSEParser"]

_BOM = b"\xef\xbb\xbf"


class SSEEvent(NamedTuple):
    data: str  # data lines joined with "\n"
    event: str = "message"  # the `event:` name, "message" when none was given
    id: str | None = None  # the last event id seen so far (`id:`), as the standard carries it


class SSEParser:
    """Incremental SSE parser: `feed(bytes) -> list[SSEEvent]`, then `flush()` at the end."""

    __slots__ = ("_buf", "_cr", "_data", "_event", "_started", "last_event_id", "retry_ms")

    def __init__(self) -> None:
        self._buf = b""  # an incomplete line, carried to the next feed
        self._cr = False  # the previous feed ended in CR: a leading LF now belongs to it
        self._started = False  # past the optional byte-order mark
        self._data: list[bytes] = []
        self._event = ""
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None  # the server's reconnection delay (`retry:`)

    def feed(self, data: bytes) -> list[SSEEvent]:
        return cast("list[SSEEvent]", self._feed(data, False))  # not raw: no bytes in it

    def feed_raw(self, data: bytes) -> list[bytes | SSEEvent]:
        """`feed`, but a one-line `data:` event named "message" comes back as its data bytes,
        undecoded (UTF-8, as `feed` would decode it): no per-event object or decode for the
        common event. The event id is not carried; every other event is an `SSEEvent`."""
        return self._feed(data, True)

    def _feed(self, data: bytes, raw: bool) -> list[bytes | SSEEvent]:
        if self._cr:
            self._cr = False
            if data[:1] == b"\n":
                data = data[1:]
        if b"\r" in data:
            # CRLF, LF and lone CR all end a line. A CR closing this read may be the first
            # half of a CRLF split across reads: remember it so the LF is not a second line.
            self._cr = data[-1:] == b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._buf:
            data = self._buf + data
        if not self._started:
            if len(data) < 3 and _BOM.startswith(data):
                self._buf = data  # too short to tell a BOM from data
                return []
            self._started = True
            if data.startswith(_BOM):
                data = data[3:]
        events: list[bytes | SSEEvent] = []
        # Blocks end with a blank line. Most are one `data:` line, so take those whole and
        # walk line by line only through the rest: a third of the parsing cost per event.
        blocks = data.split(b"\n\n")
        tail = blocks.pop()  # lines after the last blank line, the last one maybe partial
        # Lines of an event begun in an earlier read can only continue in the first block.
        pending = bool(self._data or self._event)
        for block in blocks:
            if block.startswith(b"data:") and b"\n" not in block and not pending:
                value = block[6:] if block[5:6] == b" " else block[5:]
                if raw:
                    events.append(value)
                else:
                    events.append(
                        SSEEvent(value.decode("utf-8", "replace"), "message", self.last_event_id)
                    )
            else:
                lines = block.split(b"\n")
                lines.append(b"")  # the blank line that ended the block
                self._lines(lines, events)
                pending = False  # the blank line dispatched or dropped the event
        lines = tail.split(b"\n")
        self._buf = lines.pop()
        if lines:
            self._lines(lines, events)
        return events

    def flush(self) -> list[SSEEvent]:
        """End of stream: process an unterminated last line and dispatch a pending event."""
        lines = [self._buf] if self._buf else []
        self._buf = b""
        self._cr = False
        lines.append(b"")
        events: list[bytes | SSEEvent] = []
        self._lines(lines, events)
        return cast("list[SSEEvent]", events)  # `_lines` makes only SSEEvents

    def _lines(self, lines: list[bytes], events: list[bytes | SSEEvent]) -> None:
        parts = self._data
        for line in lines:
            if line.startswith(b"data:"):
                parts.append(line[6:] if line[5:6] == b" " else line[5:])
            elif not line:
                if parts:
                    raw = parts[0] if len(parts) == 1 else b"\n".join(parts)
                    events.append(
                        SSEEvent(
                            raw.decode("utf-8", "replace"),
                            self._event or "message",
                            self.last_event_id,
                        )
                    )
                    parts.clear()
                self._event = ""
            elif line[0] != 0x3A:  # lines starting with ":" are comments (keep-alives)
                self._field(line)

    def _field(self, line: bytes) -> None:
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:  # the standard ignores ids containing NUL
                self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():
                self.retry_ms = int(value)
        elif name == b"data":  # "data" with no colon: an empty data line
            self._data.append(b"")
        # any other field name is ignored, as the standard says
