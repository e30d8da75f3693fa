"""The token contract shared by the trace loaders, prompt synthesis and the mock server.

A token is one whitespace-separated word: `count_tokens(text) == len(text.split())`. The prompt
token count of a chat request is the sum of the word counts of its messages' text content;
roles, names, tool schemas and non-text parts count nothing. Synthetic prompts are built so
that this count is exact, and the mock server reports `usage.prompt_tokens` with these same
functions, so trace token counts, prompts and server usage agree without a real tokenizer.
The same parties share what a well-formed chat message is (`message_problem`): what a trace may
carry is exactly what the mock, like vLLM, accepts. This module only counts and checks; it
never builds text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "CHAT_ROLES",
    "count_message_tokens",
    "count_tokens",
    "message_problem",
    "message_words",
]

# The chat roles an OpenAI-compatible server (vLLM, SGLang, Dynamo) accepts; any other is a 400.
CHAT_ROLES = frozenset(("system", "developer", "user", "assistant", "tool", "function"))
_ROLE_NAMES = ", ".join(sorted(CHAT_ROLES))


def count_tokens(text: str) -> int:
    """Tokens in `text`: its whitespace-separated words."""
    return len(text.split())


def message_words(message: Mapping[str, Any]) -> list[str]:
    """The words (tokens) of one chat message's text content, in order.

    `content` may be a string or a list of OpenAI content parts; only `{"type": "text"}` parts
    carry tokens. Anything else (None for a tool-call-only reply, images) counts nothing.
    """
    content = message.get("content")
    if isinstance(content, str):
        return content.split()
    if isinstance(content, list):
        words: list[str] = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                text = part.get("text")
                if isinstance(text, str):
                    words.extend(text.split())
        return words
    return []


def count_message_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """Prompt tokens of a chat request: the words of every message's text content."""
    return sum(len(message_words(message)) for message in messages)


def message_problem(message: Mapping[str, Any]) -> str | None:
    """Why a server would refuse this chat message, None if it would not (vLLM's rules, as far
    as they decide a 400): a known role, text content (a string, or a list of typed parts; only
    an assistant turn may omit it), a string name. Phrased to follow the message's JSON path,
    e.g. ".role must be one of ...". Values are quoted and shortened."""
    role = message.get("role")
    if type(role) is not str:
        return " must be an object with a string `role`"
    if role not in CHAT_ROLES:
        shown = repr(role) if len(role) <= 40 else repr(role[:37]) + "..."
        return f".role must be one of {_ROLE_NAMES}, got {shown}"
    content = message.get("content")
    if type(content) is str:
        pass  # the common case first
    elif content is None:
        if role != "assistant":
            return f".content is required for role {role!r}"
    elif type(content) is list:
        for j, part in enumerate(content):
            if type(part) is not dict or type(part.get("type")) is not str:
                return f".content[{j}] must be an object with a string `type`"
            if part["type"] == "text" and type(part.get("text")) is not str:
                return f".content[{j}].text must be a string"
    else:
        return f".content must be a string or a list of content parts, got {type(content).__name__}"
    name = message.get("name")
    if name is not None and type(name) is not str:
        return ".name must be a string"
    return None
