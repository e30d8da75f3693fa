"""Dynamo's generations are one vocabulary, defined once (runner/dynamo.py's Generation): the
simulated cluster, the mock server, the live probe, the spec, the web service and its pages
name a generation through it and never write its value out or compare against one. A scan of
the source (Python by AST, templates and scripts by text) holds it; what each generation speaks
and which modes a server accepts are checked from the one definition too."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import runner
from runner.cluster import ClusterConfig
from runner.dynamo import GENERATION_ALIASES, GENERATIONS, Generation, GenerationName
from runner.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "runner" / "dynamo.py"
# A generation's value that means nothing else in this code base ("bind" is also an action).
UNAMBIGUOUS = (set(GENERATIONS) | set(GENERATION_ALIASES)) - {"bind"}
# Names under which code holds a generation; comparing one of them with a string restates a
# value. "open" and "headers" were the live probe's own names before it spoke Generation.
_HOLDS_GENERATION = re.compile(r"generation|dynamo_version|version$", re.IGNORECASE)


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _strings(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts) and all(_strings(e) for e in node.elts)
    return False


def spelled(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each place that writes a generation out: a constant that is one's value,
    or a name holding a generation compared with strings."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in UNAMBIGUOUS:
            found.append((node.lineno, repr(node.value)))
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            held = [o for o in operands if _HOLDS_GENERATION.search(_name(o))]
            if held and any(_strings(o) for o in operands):
                found.append((node.lineno, f"{_name(held[0])} compared with a string"))
    return found


def _python_sources() -> list[Path]:
    paths = [*(ROOT / "runner").rglob("*.py"), *(ROOT / "aiperf_web").rglob("*.py")]
    return sorted(p for p in paths if p != HOME and "migrations" not in p.parts)


def test_no_module_but_runner_dynamo_spells_a_generation() -> None:
    offenders = {
        f"{path.relative_to(ROOT)}:{line}": what
        for path in _python_sources()
        for line, what in spelled(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}, "name the generation through runner.dynamo.Generation"


# In a page or a script: a generation compared with a string, or a value of one quoted.
_PAGE_COMPARISON = re.compile(r"(generation|dynamo_version)\w*\s*(==|!=|===|!==)\s*[\"']")
_QUOTED = re.compile(r"[\"'`]([^\"'`\n]*)[\"'`]")


def page_spellings(text: str) -> list[str]:
    found = [m.group(0) for m in _PAGE_COMPARISON.finditer(text)]
    found += [m.group(0) for m in _QUOTED.finditer(text) if m.group(1) in UNAMBIGUOUS]
    return found


def test_no_page_or_script_spells_a_generation() -> None:
    paths = [*(ROOT / "templates").rglob("*.html"), *(ROOT / "static" / "js").rglob("*.js")]
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in sorted(paths)
        if (found := page_spellings(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_the_scans_find_a_restated_generation() -> None:
    planted = ast.parse(
        'VERSION = "1.6"\n'
        'if config.dynamo_version == "bind": pass\n'
        'if found.generation in ("open", "headers"): pass\n'
        'if action == "bind": pass\n'  # an nvext action, not a generation
    )
    assert [line for line, _ in spelled(planted)] == [1, 2, 3]
    assert page_spellings('{% if endpoint.affinity_generation != "headers" %}')
    assert page_spellings('const fresh = version === "1.6";')
    assert not page_spellings("const label = found.actions_labels[mode];")


def test_the_literal_type_and_the_enum_are_the_same_values() -> None:
    from typing import get_args

    assert get_args(GenerationName) == GENERATIONS == tuple(g.value for g in Generation)
    assert runner.GENERATIONS == GENERATIONS
    assert runner.RunSpec.model_json_schema()["$defs"]["SimulatedTarget"]["properties"][
        "dynamo_version"
    ]["enum"] == list(GENERATIONS)


def test_each_generation_says_what_it_speaks() -> None:
    assert Generation.V1_2.session_actions == ("open", "close")
    assert Generation.BIND.session_actions == ("open", "bind", "close")
    assert Generation.V1_6.session_actions == ()
    assert [g.nvext_actions for g in Generation] == ["open", "bind", None]
    assert [g.header_affinity for g in Generation] == [False, True, True]
    assert len({g.label for g in Generation}) == len(Generation)
    assert Generation.parse("1.3") is Generation.BIND  # the deprecated alias
    with pytest.raises(ValueError):
        Generation.parse("headers")


def test_the_cluster_takes_a_generation_by_value_and_refuses_header_ttl_without_one() -> None:
    assert ClusterConfig(dynamo_version="1.6").dynamo_version is Generation.V1_6  # type: ignore[arg-type]
    assert ClusterConfig(dynamo_version="1.3").dynamo_version is Generation.BIND  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="unknown dynamo_version 'headers'"):
        ClusterConfig(dynamo_version="headers")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"Dynamo 1\.2 has no header affinity"):
        ClusterConfig(dynamo_version=Generation.V1_2, header_affinity_ttl_s=60.0)


def test_one_function_says_which_modes_a_server_accepts() -> None:
    accepted = runner.accepted_affinities
    every = runner.AFFINITIES
    plain = tuple(m for m in every if m not in runner.DYNAMO_AFFINITIES)
    assert accepted(dynamo=False) == plain
    assert accepted(dynamo=True) == every  # not detected yet: all of Dynamo's
    found = {
        (g, header): accepted(dynamo=True, detected=True, generation=g, header_affinity=header)
        for g in (*Generation, None)
        for header in (True, False, None)
    }
    assert found[Generation.BIND, True] == every
    assert found[Generation.V1_2, None] == ("none", "dynamo-nvext", "header")  # no headers
    assert found[Generation.V1_6, True] == ("none", "dynamo-headers", "header")
    assert found[Generation.V1_6, False] == plain  # header affinity off: nothing of Dynamo's
    assert found[None, None] == ("none", "dynamo-headers", "header")  # could not be told
    for (generation, _header), modes in found.items():
        assert ("dynamo-nvext" in modes) == (generation is not None and generation.session_control)
        assert set(plain) <= set(modes) and modes == tuple(m for m in every if m in modes)


@pytest.mark.parametrize(
    ("spec", "scope"),
    [
        ({}, "none"),
        ({"affinity": "dynamo-nvext", "scope": "lineage"}, "lineage"),
        ({"affinity": "dynamo-headers"}, "conversation"),
        ({"affinity": "header", "header_source": "root"}, "lineage"),
        ({"affinity": "header", "header_source": "parent", "scope": "lineage"}, "conversation"),
    ],
)
def test_the_key_scope_is_the_configs(spec: dict[str, str], scope: str) -> None:
    parsed = runner.RunSpec.model_validate(spec)
    assert parsed.key_scope == parsed.engine_config().affinity.key_scope == scope
