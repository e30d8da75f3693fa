"""Synthesized prompts go into request bodies without being scanned for escapes
(runner/client/openai.py `JsonSafeText`, runner/wallclock/prompts.py): the bytes are exactly
json.dumps's, whatever else the body holds, and a synthesized prompt really has nothing that
JSON escapes."""

from __future__ import annotations

import json
import random
from typing import Any

from runner.affinity.emitters import AffinityDecision
from runner.client import ChatRequest, JsonSafeText
from runner.client.openai import encode_body
from runner.trace import SyntheticConfig, generate_synthetic
from runner.trace.prompts import instance_marker, synthesize_prompt
from runner.wallclock.prompts import RequestBuilder

# What a body's own text may hold: everything JSON escapes, non-ASCII, and text shaped like
# the encoder's placeholder (with another nonce: the process's own is never in a body).
_AWKWARD = [
    'say "hi"',
    "back\\slash",
    "line\nbreak\ttab\r",
    "nul \x00 and \x1f",
    "héllo wörld 你好 🙂",
    "\u2028\u2029",
    "\ue000123\ue000",
    "\ue000" + "0" * 16 + ":0\ue000",  # a placeholder's shape with another nonce
    "",
]


def _plain(value: Any) -> Any:
    """The same body with every JsonSafeText as a plain str."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def _safe(rng: random.Random) -> JsonSafeText:
    words = ["alpha", "beta", "[rid:0a1b2c3d4e5f]", "z" * rng.randint(1, 40)]
    return JsonSafeText(" ".join(rng.choice(words) for _ in range(rng.randint(0, 60))))


def _body(rng: random.Random) -> dict[str, Any]:
    messages: list[Any] = []
    for _ in range(rng.randint(0, 12)):
        role = rng.choice(["user", "assistant", "system"])
        roll = rng.random()
        if roll < 0.4:
            messages.append({"role": role, "content": _safe(rng)})
        elif roll < 0.8:
            messages.append({"role": role, "content": rng.choice(_AWKWARD)})
        else:  # content parts, and a message with no content
            parts = [{"type": "text", "text": rng.choice(_AWKWARD)}]
            messages.append({"role": role, "content": parts} if rng.random() < 0.7 else {})
    body: dict[str, Any] = {"model": rng.choice(["m", 'q"uoted']), "messages": messages}
    if rng.random() < 0.3:
        body["prompt"] = _safe(rng) if rng.random() < 0.5 else rng.choice(_AWKWARD)
    if rng.random() < 0.5:
        body["stream_options"] = {"include_usage": True}
        body["nvext"] = {"extra_fields": ["worker_id"], "note": rng.choice(_AWKWARD)}
    return body


def test_the_bytes_are_json_dumps_whatever_the_body_holds() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        body = _body(rng)
        before = json.dumps(body)
        expected = json.dumps(_plain(body), separators=(",", ":"), ensure_ascii=False).encode(
            "utf-8"
        )
        assert encode_body(body) == expected, body
        assert json.dumps(body) == before  # the caller's body is left as it was


def test_a_synthesized_prompt_holds_nothing_json_escapes() -> None:
    rng = random.Random(3)
    for _ in range(400):
        block = rng.choice([1, 16, 64, 512])
        text = synthesize_prompt(
            input_tokens=rng.randint(1, 5000),
            hash_ids=[rng.randint(0, 10**9) for _ in range(rng.randint(0, 40))],
            block_size=block,
            scope=rng.choice(["t1", "scope with spaces", "ü"]),
            request_key=str(rng.random()),
            marker=instance_marker(rng.random()) if rng.random() < 0.7 else None,
        )
        assert json.dumps(text, ensure_ascii=False) == f'"{text}"'


def test_the_builder_hands_synthesized_prompts_over_as_json_safe_text() -> None:
    trace = generate_synthetic(SyntheticConfig(seed=1, trees=2, main_turns=(2, 2)))
    builder = RequestBuilder([trace], model="m", isolate_trees=True)
    tree = trace.trees[0]
    request, _ = builder.build_turn(
        tree,
        builder.scope(tree),
        tree.root_id,
        1,
        root_id="t1:" + tree.root_id,
        session_id="t1:" + tree.root_id,
        priming=False,
        affinity=AffinityDecision(),
    )
    assert isinstance(request, ChatRequest)
    content = request.messages[0]["content"]
    assert type(content) is JsonSafeText and len(content) > 0
    decoded = json.loads(request.encoded())
    assert decoded["messages"][0]["content"] == content
