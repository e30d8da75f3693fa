"""The run page's chart list (aiperf_web/live/charts.py) against the code that reads it: every
declared chart has its code in the browser's catalog, the history keeps what the series charts
read and nothing else, and the offline export's bundle holds every module the report imports."""

from __future__ import annotations

import posixpath
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from aiperf_web.live.charts import CHARTS, SLIM_FIELDS
from aiperf_web.live.selectors import sample_slim
from aiperf_web.reports.bundle import EXPORT_MODULES, STATIC_JS, BundleError, bundle, export_script

IMPORT = re.compile(r'^import\s*\{[^}]*\}\s*from\s*"(\.{1,2}/[^"]+)"', re.M)


def _imports(name: str) -> set[str]:
    """The modules `name` imports, as paths below static/js."""
    here = posixpath.dirname(name)
    text = (STATIC_JS / name).read_text()
    return {posixpath.normpath(posixpath.join(here, m)) for m in IMPORT.findall(text)}


def test_every_declared_chart_has_its_code_in_the_catalog_or_the_comparison() -> None:
    catalog = set(
        re.findall(r'^  "([\w-]+)": ', (STATIC_JS / "charts/catalog.js").read_text(), re.M)
    )
    compare = set(re.findall(r'^  "([\w-]+)": ', (STATIC_JS / "compare.js").read_text(), re.M))
    declared = {c["id"] for c in CHARTS if c["kind"] != "compare"}
    assert catalog == declared
    assert compare == {c["id"] for c in CHARTS if c["kind"] == "compare"}
    assert len({c["id"] for c in CHARTS}) == len(CHARTS)


def test_a_slim_sample_keeps_what_the_series_charts_read_and_drops_the_rest() -> None:
    data = {
        "t_s": 3.0, "wall_s": 3.1, "requests": 30, "state": {"sessions": 4},
        "recent": [{"t_s": 2.0, "requests": 3}, {"t_s": 3.0, "requests": 4}],
        "client_workers": {"in_flight": [1, 2], "session_copies": [3, 4], "orphaned_copies": [0, 1],
                           "cached_bytes": [5, 6], "sticky_entries": [1, 1]},
        "routing": {"worker_switches": 2, "sessions_multi_worker": 1, "orphaned_session_copies": 1,
                    "context_rebuilds": 9},
        "migrations": [[0, 1, 2]], "inference_workers": {"ids": [0]},
        "output_tokens_per_s": 12.5,
    }  # fmt: skip
    slim = sample_slim(data, after_t_s=2.0)
    assert slim["recent"] == [{"t_s": 3.0, "requests": 4}]
    assert set(slim["client_workers"]) == {"session_copies", "orphaned_copies", "cached_bytes"}
    assert slim["routing"] == {"worker_switches": 2, "sessions_multi_worker": 1,
                               "orphaned_session_copies": 1}  # fmt: skip
    assert slim["output_tokens_per_s"] == 12.5 and slim["wall_s"] == 3.1
    for latest_only in ("migrations", "inference_workers", "state", "requests"):
        assert latest_only not in slim
    # Every field a series chart declares is a path of the slim tree.
    for chart in CHARTS:
        if chart["kind"] == "latest":
            continue
        for path in chart["reads"]:
            node: object = SLIM_FIELDS
            for part in path.split("."):
                if node is None:
                    break
                assert isinstance(node, dict) and part in node, (chart["id"], path)
                node = node[part]


def test_the_export_bundle_holds_every_module_the_report_imports_dependencies_first() -> None:
    seen: list[str] = []

    def visit(name: str) -> None:
        for dep in sorted(_imports(name)):
            if dep not in seen:
                visit(dep)
        if name not in seen:
            seen.append(name)

    visit("charts/report.js")
    assert set(seen) == set(EXPORT_MODULES)
    for i, name in enumerate(EXPORT_MODULES):
        assert _imports(name) <= set(EXPORT_MODULES[:i]), name
    # The export page calls these by name.
    exposed = re.search(
        r"^const \{ ([^}]*) \} = __aiperf\[\"charts/report.js\"\];$", export_script(), re.M
    )
    assert exposed is not None
    assert {"drawRunPage", "drawTrees"} <= {n.strip() for n in exposed.group(1).split(",")}


def test_a_bundle_refuses_a_module_named_after_its_importer_or_an_unknown_form(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.js").write_text('import { b } from "./b.js";\nexport const a = b;\n')
    (tmp_path / "b.js").write_text("export const b = 1;\n")
    (tmp_path / "c.js").write_text('import * as all from "./b.js";\n')
    with pytest.raises(BundleError, match=r"a\.js imports b\.js, which is not before it"):
        bundle(["a.js", "b.js"], expose=["a.js"], root=tmp_path)
    with pytest.raises(BundleError, match=r"c\.js, line 1"):
        bundle(["b.js", "c.js"], expose=["c.js"], root=tmp_path)
    script = bundle(["b.js", "a.js"], expose=["a.js"], root=tmp_path)
    if shutil.which("node"):
        out = subprocess.run(["node", "-e", script + "\nconsole.log(a);"], capture_output=True,
                             text=True, check=True)  # fmt: skip
        assert out.stdout.strip() == "1"


@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed: syntax not checked")
def test_the_export_bundle_parses() -> None:
    subprocess.run(["node", "--check", "-"], input=export_script(), text=True, check=True)
