"""The token contract shared by the trace loaders, prompt synthesis and the mock server.

A token is one whitespace-separated word: `count_tokens(text) == len(text.split())`. The prompt
token count of a chat request is the sum of the word counts of its messages' text content;
roles, names, tool schemas and non-text parts count nothing. Synthetic prompts are built so
that this count is exact, and the mock server reports `usage.prompt_tokens` with these same
functions, so trace token counts, prompts and server usage agree without a real tokenizer.
This module only counts; it never builds text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["count_message_tokens", "count_tokens", "message_words"]


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
