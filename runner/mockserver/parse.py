"""Request bodies of the mock's completion routes, validated into one `Call`.

Owns the OpenAI request rules the mock enforces (which fields, which types, which status on
a bad one) and the prompt → tokens → block keys step, counted with the shared token contract
(`runner.trace.tokens`). Pure: bytes in, a Call or an ApiError out; no I/O, no clock, no
cluster. Nothing is cached across requests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from http import HTTPStatus
from typing import NamedTuple

from runner.mockserver.config import MAX_OUTPUT_TOKENS
from runner.trace.tokens import message_problem, message_words

__all__ = ["ApiError", "Call", "DynamoError", "block_keys", "parse_call"]


class ApiError(Exception):
    """An OpenAI-style error answer: `{"error": {"message", "type", "param", "code"}}`."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str | None = None,  # shadows the builtin: it is the OpenAI field name
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or _DEFAULT_TYPES.get(status, "server_error")
        self.param = param
        self.code = code

    def body(self) -> bytes:
        error = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        return json.dumps({"error": error}).encode()


class DynamoError(ApiError):
    """An error Dynamo's own frontend answers, in its shape: `{"message", "type", "code"}`
    with the status's reason phrase as `type` (real 1.6.1, docs/dynamo-observed.md §a, §c)."""

    def body(self) -> bytes:
        phrase = HTTPStatus(self.status).phrase
        error = {"message": self.message, "type": phrase, "code": self.status}
        # Compact and UTF-8, as serde_json writes it.
        return json.dumps(error, separators=(",", ":"), ensure_ascii=False).encode()


# OpenAI's error `type` by status when the raiser names none (the API's error object).
_DEFAULT_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}


class Call(NamedTuple):
    """One validated completion request (NamedTuple: built once per request, cheaply)."""

    chat: bool  # /v1/chat/completions (else /v1/completions)
    stream: bool
    include_usage: bool  # stream_options.include_usage: a usage chunk before [DONE]
    prompt_tokens: int
    block_keys: tuple[int, ...]  # chained keys of the prompt's full blocks
    output_tokens: int
    finish_reason: str  # "length" when max_tokens was given, else "stop"
    want_worker_id: bool  # nvext.extra_fields contains "worker_id"
    session_control: object  # nvext.session_control as sent (the cluster validates it)


def parse_call(
    body: bytes,
    *,
    chat: bool,
    model: str,
    block_size_tokens: int,
    default_max_tokens: int,
    nvext_fields: frozenset[str] | None = None,
    unknown_nvext_field: Callable[[str], str] | None = None,
) -> Call:
    """Validate one request body for the served `model`; raise ApiError (400/404) if bad.

    `nvext_fields`, when given, are the only `nvext` keys the server knows (Dynamo 1.3 on):
    another one is refused first, as serde does while deserializing, with
    `unknown_nvext_field(name)` and the body position as the text.
    """
    try:
        obj = _decode(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "the request body nests JSON too deeply") from None
    if type(obj) is not dict:
        raise ApiError(400, "the request body must be a JSON object")
    if nvext_fields is not None and unknown_nvext_field is not None:
        _check_nvext_fields(body, obj, nvext_fields, unknown_nvext_field)

    name = obj.get("model")
    if type(name) is not str:
        raise ApiError(400, "`model` is required and must be a string", param="model")
    if name != model:
        raise ApiError(
            404,
            f"The model `{name}` does not exist; this server serves `{model}`.",
            param="model",
            code="model_not_found",
        )

    if chat:
        keys, prompt_tokens = _chat_prompt(obj.get("messages"), block_size_tokens)
    else:
        keys, prompt_tokens = _completion_prompt(obj.get("prompt"), block_size_tokens)

    max_tokens = obj.get("max_tokens")
    param = "max_tokens"
    if max_tokens is None:
        max_tokens = obj.get("max_completion_tokens")
        param = "max_completion_tokens"
    if max_tokens is None:
        output_tokens, finish_reason = default_max_tokens, "stop"
    elif type(max_tokens) is int and 1 <= max_tokens <= MAX_OUTPUT_TOKENS:
        # The mock always writes the whole allowance: with or without ignore_eos, the length
        # is exactly max_tokens, so token counts are known before the answer starts.
        output_tokens, finish_reason = max_tokens, "length"
    else:
        raise ApiError(
            400,
            f"`{param}` must be an integer 1..{MAX_OUTPUT_TOKENS}, got {max_tokens!r}",
            param=param,
        )
    _optional_bool(obj, "ignore_eos")

    stream = _optional_bool(obj, "stream")
    include_usage = False
    options = obj.get("stream_options")
    if options is not None:
        if type(options) is not dict:
            raise ApiError(400, "`stream_options` must be an object", param="stream_options")
        include_usage = _optional_bool(options, "include_usage", "stream_options.")

    want_worker_id = False
    session_control: object = None
    nvext = obj.get("nvext")
    if nvext is not None:
        if type(nvext) is not dict:
            raise ApiError(400, "`nvext` must be an object", param="nvext")
        extra = nvext.get("extra_fields")
        if extra is not None:
            if type(extra) is not list or not all(type(f) is str for f in extra):
                raise ApiError(
                    400,
                    "`nvext.extra_fields` must be a list of strings",
                    param="nvext.extra_fields",
                )
            want_worker_id = "worker_id" in extra
        session_control = nvext.get("session_control")

    return Call(
        chat,
        stream,
        include_usage,
        prompt_tokens,
        keys,
        output_tokens,
        finish_reason,
        want_worker_id,
        session_control,
    )


def _check_nvext_fields(
    body: bytes,
    obj: dict[str, object],
    known: frozenset[str],
    unknown_field: Callable[[str], str],
) -> None:
    nvext = obj.get("nvext")
    if type(nvext) is not dict:
        return
    for name in nvext:  # document order: the first unknown key is the one serde meets
        if name not in known:
            text = body.decode("utf-8")
            line, column = _nvext_key_position(text, name)
            raise DynamoError(400, f"{unknown_field(name)} at line {line} column {column}")


def _nvext_key_position(text: str, name: str) -> tuple[int, int]:
    """Where serde stops on key `name` of the top-level `nvext` object: the line and the
    1-based byte column of the key's closing quote (real 1.6.1 reports exactly that). `text`
    is a JSON object already decoded without error."""
    end = 0
    for key, _, value_start, _ in _members(text, _skip_ws(text, 0)):
        if key == "nvext":  # a repeated key: the last one is the value json.loads kept
            for inner, key_end, _, _ in _members(text, value_start):
                if inner == name:
                    end = key_end
                    break
    line_start = text.rfind("\n", 0, end) + 1
    return text.count("\n", 0, end) + 1, len(text[line_start:end].encode("utf-8"))


_WHITESPACE = " \t\n\r"


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITESPACE:
        pos += 1
    return pos


def _members(text: str, pos: int) -> Iterator[tuple[str, int, int, int]]:
    """(key, index past the key's closing quote, value start, value end) of each member of the
    object whose `{` is at `pos`."""
    pos = _skip_ws(text, pos + 1)
    if text[pos] == "}":
        return
    while True:
        key, key_end = _raw_decode(text, pos)  # a key is a JSON string like any other
        value_start = _skip_ws(text, _skip_ws(text, key_end) + 1)  # past the colon
        _, value_end = _raw_decode(text, value_start)
        yield key, key_end, value_start, value_end
        pos = _skip_ws(text, value_end)
        if text[pos] != ",":
            return
        pos = _skip_ws(text, pos + 1)


def _chat_prompt(messages: object, block_size: int) -> tuple[tuple[int, ...], int]:
    if type(messages) is not list or not messages:
        raise ApiError(400, "`messages` must be a non-empty list", param="messages")
    words: list[str] = []
    for i, message in enumerate(messages):
        # Refused as vLLM refuses them: a body a real server would not serve gets no 200 here.
        problem = (
            message_problem(message)
            if type(message) is dict
            else " must be an object with a string `role`"
        )
        if problem is not None:
            raise ApiError(400, f"messages[{i}]{problem}", param="messages")
        words += message_words(message)
    return block_keys(words, block_size), len(words)


def _completion_prompt(prompt: object, block_size: int) -> tuple[tuple[int, ...], int]:
    if type(prompt) is list and len(prompt) == 1 and type(prompt[0]) is str:
        prompt = prompt[0]  # a batch of one prompt
    if type(prompt) is str:
        words = prompt.split()  # the token contract: one token per whitespace-separated word
        return block_keys(words, block_size), len(words)
    if type(prompt) is list and prompt and all(type(t) is int for t in prompt):
        return block_keys(prompt, block_size), len(prompt)  # pre-tokenized
    raise ApiError(
        400,
        "`prompt` must be a string, a list of one string, or a non-empty list of token ids",
        param="prompt",
    )


def block_keys(tokens: Sequence[Hashable], block_size: int) -> tuple[int, ...]:
    """Chained keys of the full `block_size`-token blocks: key_i = hash((key_i-1, *block_i)).

    The same chaining as `runner.cluster.chain_block_keys`, on the tokens (words or token
    ids) directly: hashing a tuple of a block's words costs about half of joining them and
    blake2b-ing the text (measured on 2k- and 30k-word prompts). str hashes are salted per
    process, so these keys mean something only inside this process's cluster, the one place
    they go.
    """
    key = 0
    keys: list[int] = []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        key = hash((key, *tokens[start : start + block_size]))
        keys.append(key)
    return tuple(keys)


# The C scanner behind json.loads, without the wrapper's encoding sniffing (~3 µs a request).
_raw_decode = json.JSONDecoder().raw_decode


def _decode(body: bytes) -> object:
    text = body.decode("utf-8")
    try:
        value, end = _raw_decode(text)
    except ValueError:
        return json.loads(text)  # leading whitespace, or a real error with json's message
    if end != len(text) and text[end:].strip():
        return json.loads(text)  # trailing garbage: json.loads raises with a proper message
    return value


def _optional_bool(obj: Mapping[str, object], name: str, prefix: str = "") -> bool:
    value = obj.get(name)
    if value is None:
        return False
    if type(value) is not bool:
        raise ApiError(
            400, f"`{prefix}{name}` must be true or false, got {value!r}", param=prefix + name
        )
    return value
