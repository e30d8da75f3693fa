"""HTTP/1.1 wire format for the client side: request heads out, one response parsed in.

A protocol core with no I/O (h11-style): bytes go in, parsed heads and decoded body bytes
come out, whatever the read boundaries. It knows Content-Length, chunked and read-until-close
framing and skips interim 1xx responses; it never touches sockets, timeouts or pools (that is
`transport.py`) and never decodes content encodings (the client asks for identity).
"""

from __future__ import annotations

import enum

__all__ = ["ProtocolError", "ResponseParser", "encode_request_head"]

# Bounds that keep a hostile or broken server from growing our buffers without limit.
_MAX_HEAD_BYTES = 64 * 1024
_MAX_LINE_BYTES = 4 * 1024


class ProtocolError(Exception):
    """The bytes received are not a valid HTTP/1.1 response."""


class _State(enum.Enum):
    HEAD = 0
    LENGTH = 1  # Content-Length body: `_remaining` bytes left
    CHUNK_SIZE = 2  # expecting a chunk-size line
    CHUNK_DATA = 3  # inside a chunk: `_remaining` bytes left
    CHUNK_END = 4  # expecting the CRLF that closes a chunk
    TRAILERS = 5  # after the last chunk: trailer lines until an empty one
    UNTIL_CLOSE = 6  # no framing: the body ends when the server closes
    DONE = 7


def encode_request_head(method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    """Serialize a request line and headers (the caller supplies Host and framing headers)."""
    parts = [method, b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        if b"\r" in value or b"\n" in value or b"\r" in name or b"\n" in name:
            # A newline in a header would let a value inject extra headers or a second request.
            raise ProtocolError(f"header {name!r} contains a line break")
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    return b"".join(parts)


class ResponseParser:
    """Parses one response; feed it bytes as they arrive.

    `feed` returns the body bytes decoded from the data given (empty while the head is still
    incomplete). Once `head_complete` is true, `status`, `reason`, `headers` and `keep_alive`
    are set. `complete` turns true when the message ends; bytes after it are kept in
    `trailing` (a well-behaved server sends none). Call `feed_eof` when the server closes.
    """

    __slots__ = (
        "_buf",
        "_no_body",
        "_remaining",
        "_state",
        "headers",
        "http_version",
        "keep_alive",
        "reason",
        "status",
        "trailing",
    )

    def __init__(self, *, no_body: bool = False) -> None:
        # `no_body`: the request was HEAD, so whatever the headers say, no body follows.
        self._no_body = no_body
        self._state = _State.HEAD
        self._buf = b""
        self._remaining = 0
        self.status = 0
        self.reason = b""
        self.http_version = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.keep_alive = True
        self.trailing = b""

    @property
    def head_complete(self) -> bool:
        return self._state is not _State.HEAD

    @property
    def complete(self) -> bool:
        return self._state is _State.DONE

    def feed(self, data: bytes) -> bytes:
        state = self._state
        # Fast path: the middle of a Content-Length body, the common case for a big read.
        if state is _State.LENGTH:
            n = len(data)
            if n < self._remaining:
                self._remaining -= n
                return data
        if state is _State.UNTIL_CLOSE:
            return data
        if state is _State.DONE:
            self.trailing += data
            return b""
        if self._buf:
            data = self._buf + data
            self._buf = b""
        body: list[bytes] = []
        pos = 0
        end = len(data)
        while pos < end:
            state = self._state
            if state is _State.HEAD:
                pos = self._parse_head(data, pos)
                if pos < 0:  # incomplete head: wait for more
                    return b""
            elif state is _State.LENGTH:
                take = min(self._remaining, end - pos)
                body.append(data[pos : pos + take])
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._state = _State.DONE
            elif state is _State.CHUNK_DATA:
                take = min(self._remaining, end - pos)
                body.append(data[pos : pos + take])
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._state = _State.CHUNK_END
            elif state is not _State.UNTIL_CLOSE and state is not _State.DONE:
                # CHUNK_SIZE, CHUNK_END or TRAILERS: one framing line at a time
                if state is _State.CHUNK_SIZE:
                    pos = self._whole_chunks(data, pos, body)
                    if pos >= end:
                        break
                nl = data.find(b"\n", pos)
                if nl < 0:
                    if end - pos > _MAX_LINE_BYTES:
                        raise ProtocolError("chunk framing line too long")
                    self._buf = data[pos:]
                    break
                line = data[pos:nl]
                pos = nl + 1
                if line.endswith(b"\r"):
                    line = line[:-1]
                self._on_chunk_line(line)
            elif state is _State.UNTIL_CLOSE:
                body.append(data[pos:])
                break
            else:  # DONE
                self.trailing += data[pos:]
                break
        if not body:
            return b""
        return body[0] if len(body) == 1 else b"".join(body)

    def feed_eof(self) -> None:
        """The server closed the connection: fine after a complete or close-delimited body."""
        if self._state is _State.UNTIL_CLOSE:
            self._state = _State.DONE
            self.keep_alive = False
        elif self._state is not _State.DONE:
            where = "response head" if self._state is _State.HEAD else "response body"
            raise ProtocolError(f"server closed the connection in the middle of the {where}")

    @staticmethod
    def _whole_chunks(data: bytes, pos: int, body: list[bytes]) -> int:
        """Take every complete, plainly framed chunk from `pos` on; return where it stopped.

        A server writing one SSE event per chunk sends dozens per read: this loop costs a
        third of the state machine's per-chunk work. Anything unusual (extensions, bare LF,
        the last chunk, a partial chunk) is left to the state machine.
        """
        while True:
            nl = data.find(b"\n", pos)
            if nl < 0 or nl - pos > 32:
                return pos
            try:
                size = int(data[pos:nl], 16)  # int() ignores the CR before the LF
            except ValueError:
                return pos
            if size <= 0:
                return pos
            start = nl + 1
            stop = start + size
            if data[stop : stop + 2] != b"\r\n":
                return pos
            body.append(data[start:stop])
            pos = stop + 2

    def _on_chunk_line(self, line: bytes) -> None:
        state = self._state
        if state is _State.CHUNK_SIZE:
            size_text = line.split(b";", 1)[0].strip()  # drop chunk extensions
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size line {line[:40]!r}") from None
            if size < 0:
                raise ProtocolError(f"bad chunk size line {line[:40]!r}")
            if size == 0:
                self._state = _State.TRAILERS
            else:
                self._remaining = size
                self._state = _State.CHUNK_DATA
        elif state is _State.CHUNK_END:
            if line:
                raise ProtocolError("chunk data longer than its declared size")
            self._state = _State.CHUNK_SIZE
        elif not line:  # TRAILERS: an empty line ends the message
            self._state = _State.DONE

    def _parse_head(self, data: bytes, pos: int) -> int:
        """Parse a head starting at `pos`; return the offset after it, or -1 if incomplete."""
        end = data.find(b"\r\n\r\n", pos)
        sep = 4
        if end < 0:
            # Tolerate bare-LF heads (RFC 9112 §2.2 lets a recipient accept them).
            end = data.find(b"\n\n", pos)
            sep = 2
        if end < 0:
            if len(data) - pos > _MAX_HEAD_BYTES:
                raise ProtocolError("response head larger than 64 KiB")
            self._buf = data[pos:]
            return -1
        lines = data[pos:end].split(b"\n")
        status_line = lines[0].rstrip(b"\r")
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ProtocolError(f"not an HTTP/1.x response: {status_line[:60]!r}")
        try:
            status = int(parts[1])
        except ValueError:
            raise ProtocolError(f"bad status line {status_line[:60]!r}") from None
        if not 100 <= status <= 999:
            raise ProtocolError(f"bad status code {status}")
        headers: list[tuple[bytes, bytes]] = []
        for raw in lines[1:]:
            line = raw.rstrip(b"\r")
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise ProtocolError(f"bad header line {line[:60]!r}")
            headers.append((name, value.strip()))
        after = end + sep
        if 100 <= status < 200 and status != 101:
            # Interim response (100 Continue, 103 Early Hints): the real one follows.
            return after
        self.status = status
        self.reason = parts[2] if len(parts) > 2 else b""
        self.http_version = parts[0]
        self.headers = headers
        self._choose_framing(headers)
        return after

    def _choose_framing(self, headers: list[tuple[bytes, bytes]]) -> None:
        length: int | None = None
        chunked = False
        connection = b""
        for name, value in headers:
            lname = name.lower()
            if lname == b"content-length":
                try:
                    n = int(value)
                except ValueError:
                    raise ProtocolError(f"bad Content-Length {value[:40]!r}") from None
                if n < 0 or (length is not None and n != length):
                    raise ProtocolError(f"bad Content-Length {value[:40]!r}")
                length = n
            elif lname == b"transfer-encoding":
                chunked = value.lower().rsplit(b",", 1)[-1].strip() == b"chunked"
            elif lname == b"connection":
                connection = value.lower()
        if self.http_version == b"HTTP/1.0":
            self.keep_alive = b"keep-alive" in connection
        else:
            self.keep_alive = b"close" not in connection
        if self._no_body or self.status in (204, 304):
            self._state = _State.DONE
        elif chunked:  # chunked wins over Content-Length (RFC 9112 §6.3)
            self._state = _State.CHUNK_SIZE
        elif length is not None:
            self._remaining = length
            self._state = _State.LENGTH if length else _State.DONE
        else:
            self._state = _State.UNTIL_CLOSE
            self.keep_alive = False
