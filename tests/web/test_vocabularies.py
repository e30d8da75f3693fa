"""The knobs' vocabularies have one source, the engine's exported tuples: every choice the web
offers is derived from them, and no list of their values is written out again under
aiperf_web/ (a new policy or affinity mode needs no edit on the web side)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, get_args

from django.utils import timezone

import runner
from aiperf_web.endpoints.models import Endpoint, ServerKind
from aiperf_web.reports.api import ABIn
from aiperf_web.reports.forms import KNOB_CHOICES
from aiperf_web.reports.services import AB_DEFAULTS, AB_KNOBS
from aiperf_web.runs.forms import SCENARIO_SLOT, LaunchForm, RunFilterForm, actions_label

ROOT = Path(__file__).resolve().parents[2]

VOCABULARIES: dict[str, tuple[str, ...]] = {
    "policies": runner.POLICIES,
    "affinity modes": runner.AFFINITIES,
    "scopes": runner.SCOPES,
    "timing modes": runner.TIMING_MODES,
    "arrivals": runner.ARRIVALS,
    "trace formats": tuple(f.value for f in runner.FILE_FORMATS),
}
# Lists of engine values the web may write out, with why: a choice of values, not a list of
# the knob's values.
ALLOWED = {"AB_DEFAULTS": "the pair a paired launch compares when it names none"}


def _choices(field: Any) -> tuple[str, ...]:
    return tuple(value for value, _ in field.choices if value)


def test_the_run_filter_offers_the_engines_policies_and_scopes():
    form = RunFilterForm(scenarios=[], endpoints=[])
    assert _choices(form.fields["policy"]) == runner.POLICIES
    assert _choices(form.fields["scope"]) == runner.SCOPES


def test_a_pair_varies_the_engines_values_and_its_knobs_are_named_once():
    assert AB_KNOBS == {"policy": runner.POLICIES, "scope": runner.SCOPES}
    assert get_args(ABIn.model_fields["knob"].annotation) == tuple(AB_KNOBS)
    assert tuple(knob for knob, _ in KNOB_CHOICES) == tuple(AB_KNOBS)
    for knob, pair in AB_DEFAULTS.items():
        assert set(pair) <= set(AB_KNOBS[knob]), knob


def test_only_dynamo_endpoints_offer_the_dynamo_affinity_modes():
    assert Endpoint(server_kind=ServerKind.DYNAMO).affinity_choices == runner.AFFINITIES
    for kind in ServerKind:
        if kind != ServerKind.DYNAMO:
            assert set(Endpoint(server_kind=kind).affinity_choices) == set(runner.AFFINITIES) - set(
                runner.DYNAMO_AFFINITIES
            ), kind


def test_an_endpoints_modes_are_the_engines_answer_for_its_detection():
    """The endpoint keeps the generation and header affinity; the modes are the engine's
    accepted_affinities of them, whatever the generation (nothing is stored twice)."""
    when = timezone.now()
    for generation in (*runner.Generation, None):
        for header in (True, False, None):
            endpoint = Endpoint(
                server_kind=ServerKind.DYNAMO,
                affinity_generation=None if generation is None else generation.value,
                header_affinity=header,
                affinity_detected_at=when,
            )
            assert endpoint.generation == generation
            assert endpoint.affinity_choices == runner.accepted_affinities(
                dynamo=True, detected=True, generation=generation, header_affinity=header
            )
            expected = None if generation is None else generation.nvext_actions
            assert endpoint.nvext_actions == expected


# A string literal in a script: '...', "..." or `...` on one line.
_QUOTED = re.compile(r"[\"'`]([^\"'`\n]*)[\"'`]")


def test_the_launch_script_holds_no_copy_of_a_mode_list_or_a_label():
    """static/js/launch.js gets every mode list, preset and label from the form's json_script
    ("affinity-data"): it quotes no affinity mode, action or generation, and no label."""
    script = (ROOT / "static" / "js" / "launch.js").read_text(encoding="utf-8")
    quoted = {m.group(1) for m in _QUOTED.finditer(script)}
    vocabulary = {*runner.AFFINITIES, *runner.GENERATIONS, "bind", "open", "close"}
    assert quoted & vocabulary == set()
    for words in ("not sent with", "its connection test"):  # actions_label's
        assert not any(words in text for text in quoted), words


def test_the_launch_data_carries_the_forms_own_labels_for_every_mode():
    """What the script shows is what actions_label says, made on the server for each target
    and mode (the scenario's actions go in SCENARIO_SLOT)."""
    offers = LaunchForm(scenarios=[], endpoints=[]).affinity_by_target
    simulated = offers["simulated"]
    assert tuple(simulated["choices"]) == runner.accepted_affinities(dynamo=True)
    assert set(simulated["actions_labels"]) == {"", *runner.AFFINITIES}
    for mode, label in simulated["actions_labels"].items():
        shown = label.replace(SCENARIO_SLOT, "bind")
        assert shown == actions_label(affinity=mode, scenario="bind", endpoint=None), mode
    assert simulated["sends_actions"] == ["dynamo-nvext"]


def _restated(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, vocabulary) of every tuple, list or set literal of two or more strings that all
    belong to one engine vocabulary, outside the ALLOWED assignments."""
    allowed_nodes: set[int] = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id in ALLOWED for t in targets):
            allowed_nodes.update(id(inner) for inner in ast.walk(node))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Tuple | ast.List | ast.Set) or id(node) in allowed_nodes:
            continue
        values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if len(values) < 2 or len(values) != len(node.elts):
            continue
        for name, vocabulary in VOCABULARIES.items():
            if all(isinstance(v, str) and v in vocabulary for v in values):
                found.append((node.lineno, name))
    return found


def test_no_list_of_an_engine_vocabulary_is_written_out_in_the_web_service():
    offenders = {
        f"{path.relative_to(ROOT)}:{line}": name
        for path in sorted((ROOT / "aiperf_web").rglob("*.py"))
        if "migrations" not in path.parts
        for line, name in _restated(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "derive the choices from runner's exported tuples"


def test_the_restatement_check_finds_a_restated_list():
    tree = ast.parse(
        'CHOICES = [("spawn-pin", "legacy")]\nAB_DEFAULTS = {"p": ("legacy", "spawn-pin")}'
    )
    assert _restated(tree) == [(1, "policies")]
