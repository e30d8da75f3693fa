"""Text people type (names, descriptions, tags, notes, searches) must be text a database keeps.

JSON can carry what no form can: NUL (PostgreSQL refuses it, SQLite stores it and then matches
every row in a LIKE search) and a lone UTF-16 surrogate such as "\\ud800" (not encodable as
UTF-8, so saving it fails). Both are refused at the boundary with a message saying where.

What another server said goes the other way: quoted in a short excerpt, one line, HTML
stripped, never a whole page (an internal service's 404 page lists its routes).
"""

from __future__ import annotations

import html
import re


def text_problem(value: str) -> str | None:
    """Why `value` is not storable text, or None when it is."""
    at = value.find("\x00")
    if at >= 0:
        return f"contains a NUL character (\\u0000) at position {at}: remove it"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"contains a lone UTF-16 surrogate (\\u{ord(value[exc.start]):04x}) at position "
            f"{exc.start}, which is not text: send valid Unicode"
        )
    return None


def text_check(value: str) -> str:
    """`value` unchanged, or ValueError saying what is wrong (for pydantic validators)."""
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# Whole elements whose text is no message (style sheets, scripts), comments, any tag, and a tag
# cut off where a body was truncated.
_MARKUP = re.compile(
    r"<(script|style)\b.*?(?:</\1\s*>|$)|<!--.*?(?:-->|$)|<[a-zA-Z!/?][^<>]*(?:>|$)",
    re.DOTALL | re.IGNORECASE,
)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.DOTALL | re.IGNORECASE)
EXCERPT_CHARS = 160


def text_excerpt(text: str, *, limit: int = EXCERPT_CHARS) -> str:
    """`text` (a server's answer) as one line of at most `limit` characters: an HTML page by
    its title (else its text without tags), entities decoded, white space collapsed."""
    if _MARKUP.search(text):
        title = _TITLE.search(text)
        text = title.group(1) if title and title.group(1).strip() else _MARKUP.sub(" ", text)
        text = " ".join(html.unescape(text).split()) or "an HTML page without text"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# The engine's connection messages quote the server's answer as "(HTTP 404: <body>); advice"
# or "(text/html: <start of body>); advice".
_QUOTED = re.compile(
    r"(?P<head>.*?\((?:HTTP \d{3}|[a-z]+/[\w.+-]+[^:()]*): )(?P<body>.*)"
    r"(?P<tail>\)(?: \(retry after [^)]*\))?; [^()]*)",
    re.DOTALL,
)


def message_quoting_server(message: str, *, limit: int = 600) -> str:
    """An engine message that quotes a server, with the quote cut to a short clean excerpt and
    the rest (what failed, how to fix it) kept; one line of at most `limit` characters."""
    match = _QUOTED.fullmatch(message)
    if match is None:
        return text_excerpt(message, limit=limit)
    head, tail = (re.sub(r"\s+", " ", match[part]) for part in ("head", "tail"))
    # The quote gives way first: what failed and the advice are the message.
    quote = max(40, min(EXCERPT_CHARS, limit - len(head) - len(tail)))
    return text_excerpt(f"{head}{text_excerpt(match['body'], limit=quote)}{tail}", limit=limit)


# A Python traceback: its header and indented frame lines (the exception line after them,
# unindented, is what it says), or the same run together on one line (as the engine quotes a
# server's answer), up to its exception or, when that was cut off, to the end.
_TRACEBACK_LINES = re.compile(r"Traceback \(most recent call last\):[ \t]*\n(?:(?:[ \t].*)?\n)*")
_TRACEBACK_FLAT = re.compile(
    r"Traceback \(most recent call last\):.*?"
    r"(?=\b[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt): |\Z)",
    re.DOTALL,
)
REASON_CHARS = 200


def _without_traceback(text: str) -> str:
    text = _TRACEBACK_LINES.sub("", text)
    return _TRACEBACK_FLAT.sub(
        lambda m: "" if m.end() < len(text) else "a Python traceback (in the run's log)", text
    )


def reason_excerpt(text: str, *, limit: int = REASON_CHARS) -> str:
    """A run's reason from what the engine, a server or the database said: one line of at
    most `limit` characters, a traceback reduced to its exception line, a quoted server answer
    cut first. The whole text belongs in the run's log."""
    match = _QUOTED.fullmatch(text)
    if match is None:
        text = _without_traceback(text)
    else:
        text = f"{match['head']}{_without_traceback(match['body'])}{match['tail']}"
    return message_quoting_server(text, limit=limit)
