"""The live channel's words and the pages' vocabularies have one home each (runs/messages.py,
live/vocabulary.py), and the scripts in static/js agree with them: every message type a script
switches on is declared and every declared one a page acts on is handled; no script writes a
close code, a list of run statuses or a category colour of its own; the writers and the
consumers send only what the module builds."""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest

from aiperf_web.live import consumers as live_consumers
from aiperf_web.live.vocabulary import ERROR_COLOURS, page_vocabulary
from aiperf_web.runs import messages
from aiperf_web.runs.models import FINAL, Status
from aiperf_web.sweeps import consumers as sweep_consumers
from runner.errors import ERROR_CATEGORIES

ROOT = Path(__file__).resolve().parents[2]
JS = sorted((ROOT / "static" / "js").rglob("*.js"))
# `m.type === "snapshot"`, `msg.type !== "sweep"`: what a script switches on (the scripts
# name a socket's message m or msg; a fetch response's r.type is not one).
SWITCH = re.compile(r"""\b(?:m|msg)\.type\s*[!=]==?\s*["']([\w.<> -]+)["']""")


def _js_text() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in JS}


def test_every_message_type_a_script_handles_is_declared_and_every_declared_one_is_handled() -> (
    None
):
    handled = {t for text in _js_text().values() for t in SWITCH.findall(text)}
    declared = {m.type for m in messages.BROWSER_MESSAGES}
    assert handled - declared == set(), "a script switches on a type no socket sends"
    for_pages = {m.type for m in messages.BROWSER_MESSAGES if m.page_handles}
    assert for_pages - handled == set(), "a declared message no page handles"
    # The scan finds what it should: the run page's four and the shared client's error.
    assert {"history", "snapshot", "status", "log", "runs", "sweep", "error"} <= handled


def test_every_group_message_has_its_consumer_method() -> None:
    methods = {
        name
        for cls in (
            live_consumers.RunConsumer,
            live_consumers.RunsListConsumer,
            sweep_consumers.SweepConsumer,
        )
        for name, _ in inspect.getmembers(cls, inspect.isfunction)
    }
    for kind in messages.GROUP_MESSAGES:
        assert kind.replace(".", "_") in methods, kind


def _literal_types(path: Path) -> list[tuple[int, str]]:
    """(line, value) of every dict literal with a "type" key written out in a module (but the
    stand-in decode_json gives a frame that is not JSON: what came in, not a message sent)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "type"
                    and ast.unparse(value) != "'<not JSON>'"
                ):
                    found.append((node.lineno, ast.unparse(value)))
    return found


@pytest.mark.parametrize(
    "module",
    [
        "aiperf_web/runs/publisher.py",
        "aiperf_web/live/consumers.py",
        "aiperf_web/sweeps/publisher.py",
        "aiperf_web/sweeps/consumers.py",
    ],
)
def test_writers_and_consumers_build_their_messages_with_the_module(module: str) -> None:
    assert _literal_types(ROOT / module) == []
    text = (ROOT / module).read_text(encoding="utf-8")
    assert not re.search(r"close\(code=\d", text), "a close code written out"


def test_the_constructors_say_what_the_declarations_say() -> None:
    state = messages.run_state(
        status="running", reason="", started_at=None, finished_at=None, cancel_requested_at=None
    )
    event = messages.run_status_event(run_id="r", state=state)
    assert event["type"] in messages.GROUP_MESSAGES and messages.state_of(dict(event)) == state
    built = [
        messages.snapshot_message(run_id="r", seq=1, t_s=1.0, data={}, leak=None),
        messages.status_message(run_id="r", state=state),
        messages.log_message(run_id="r", lines=[]),
        messages.runs_message(rows=[]),
        messages.error_message("no"),
        messages.pong_message(),
        messages.sweep_message({"status": "running"}),
        messages.history_message(run_id="r", history={}, state=state, leak={}, log=[]),
    ]
    assert {m["type"] for m in built} == {m.type for m in messages.BROWSER_MESSAGES}
    for kind, shape in messages.GROUP_MESSAGES.items():
        assert get_args(get_type_hints(shape)["type"]) == (kind,)


def test_access_revoked_is_final_and_is_what_the_server_sends() -> None:
    codes = {c.code: c for c in messages.CLOSE_CODES}
    assert len(codes) == len(messages.CLOSE_CODES)
    assert messages.ACCESS_REVOKED.final and messages.ACCESS_REVOKED.code == 1008
    assert all(c.final for c in messages.CLOSE_CODES)
    # The consumers close with these and no other.
    for module in (live_consumers, sweep_consumers):
        used = set(re.findall(r"close\(code=(\w+)\.code\)", inspect.getsource(module)))
        assert used == {"UNAUTHENTICATED", "NOT_FOUND", "ACCESS_REVOKED"}, module.__name__


# `["succeeded", "failed", "cancelled"]`, `new Set(["a", "b"])`: two or more names in a row.
LIST_OF_NAMES = r"""[\[{(]\s*((?:["'][a-z_]+["']\s*,\s*)+["'][a-z_]+["'])"""


def test_no_script_writes_a_close_code_a_status_list_or_a_category_colour() -> None:
    statuses = {s.value for s in Status}
    categories = {c.value for c in ERROR_CATEGORIES}
    for name, text in _js_text().items():
        assert not re.search(r"\b(1008|440[134])\b", text), f"{name}: a close code"
        for quoted in re.findall(
            r"""[\[{(]\s*((?:["'][a-z_]+["']\s*,\s*)+["'][a-z_]+["'])""", text
        ):
            values = set(re.findall(r"""["']([a-z_]+)["']""", quoted))
            assert not values <= statuses, f"{name}: a list of run statuses {sorted(values)}"
        for key in re.findall(r"\b([a-z0-9_]+)\s*:\s*[\"']#[0-9a-fA-F]{3,6}", text):
            assert key not in categories, f"{name}: a colour for error category {key}"
    # A status a script compares with is one Python has.
    for name, text in _js_text().items():
        for value in re.findall(r"status\s*[!=]==\s*[\"']([a-z_]+)[\"']", text):
            assert value in statuses, f"{name}: status {value!r}"


def test_each_error_category_has_its_own_colour() -> None:
    assert set(ERROR_COLOURS) == set(ERROR_CATEGORIES)
    assert len(set(ERROR_COLOURS.values())) == len(ERROR_COLOURS)
    vocabulary = page_vocabulary()
    assert vocabulary["error_categories"] == [c.value for c in ERROR_CATEGORIES]
    assert vocabulary["final_statuses"] == [s.value for s in FINAL]
    assert {c["code"] for c in vocabulary["close_codes"] if c["final"]} == {1008, 4401, 4404}


def test_the_vocabulary_reaches_the_pages(client: Any) -> None:
    """Every page (base.html) carries it, as the scripts read it."""
    response = client.get("/accounts/login/")
    text = response.content.decode()
    match = re.search(r'<script id="vocabulary" type="application/json">(.*?)</script>', text)
    assert match is not None
    assert json.loads(match.group(1)) == json.loads(json.dumps(page_vocabulary()))


def test_every_other_list_of_run_statuses_is_held_equal_to_the_models() -> None:
    """Copies that cannot import runs.models (the engine's end and the service client are
    below the web; the API filter is a type) are checked here instead."""
    from aiperf_web.runs import api as runs_api
    from runner import ending
    from runner.service import shapes, sweeps

    final = tuple(s.value for s in FINAL)
    assert get_args(runs_api._STATUS) == ("", *(s.value for s in Status))
    assert get_args(ending.RunStatus) == final
    assert (final, final) == (shapes.ENDED, sweeps.FINAL)
