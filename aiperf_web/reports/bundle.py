"""The run page's chart modules as one inline script, for the offline HTML export (a file opened
with no server, where `import` cannot fetch anything).

The modules are named in EXPORT_MODULES, dependencies first. Each becomes a function scope that
returns its exports, and its imports become reads of the modules before it, so two modules may
use the same private name and a missing or misordered module is an error at build time, not
a blank report. Only the forms our modules use are accepted (named imports from a relative
path; `export` before a function, class, const or let declaration); anything else is refused
with the module and line, so a new form is met here and not silently dropped.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings

STATIC_JS = Path(settings.BASE_DIR) / "static" / "js"

# What the export draws: the report's page (charts/report.js) and everything it imports.
EXPORT_MODULES = (
    "vocabulary.js",
    "charts/format.js",
    "charts/plot.js",
    "charts/catalog.js",
    "charts/view.js",
    "charts/report.js",
)

_IMPORT = re.compile(r'^import\s*\{([^}]*)\}\s*from\s*"(\.{1,2}/[^"]+)";?[ \t]*$', re.M)
_EXPORT = re.compile(
    r"^export\s+(?:async\s+)?(?:function\*?|class|const|let)\s+([A-Za-z_$][\w$]*)", re.M
)
_OTHER = re.compile(r"^(import|export)\b", re.M)


class BundleError(ValueError):
    pass


def _module_expr(name: str) -> str:
    return f"__aiperf[{name!r}]".replace("'", '"')


def _transform(name: str, text: str, known: Sequence[str]) -> str:
    here = posixpath.dirname(name)

    def imported(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(here, match.group(2)))
        if target not in known:
            raise BundleError(f"{name} imports {target}, which is not before it in EXPORT_MODULES")
        names = []
        for part in match.group(1).split(","):
            part = part.strip()
            if not part:
                continue
            source, _, alias = (p.strip() for p in part.partition(" as "))
            names.append(f"{source}: {alias}" if alias else source)
        return f"const {{ {', '.join(names)} }} = {_module_expr(target)};"

    body = _IMPORT.sub(imported, text)
    exports = _EXPORT.findall(body)
    body = re.sub(r"^export\s+", "", body, flags=re.M)
    leftover = _OTHER.search(body)
    if leftover is not None:
        line = body[: leftover.start()].count("\n") + 1
        raise BundleError(f"{name}, line {line}: an import or export form the bundle cannot take")
    return f"{_module_expr(name)} = (() => {{\n{body}\nreturn {{ {', '.join(exports)} }};\n}})();"


def bundle(modules: Sequence[str], *, expose: Sequence[str], root: Path = STATIC_JS) -> str:
    """The modules in one script; the exports of `expose` as top-level names after it."""
    parts = ["const __aiperf = {};"]
    for i, name in enumerate(modules):
        text = (root / name).read_text(encoding="utf-8")
        parts.append(_transform(name, text, modules[:i]))
    for name in expose:
        if name not in modules:
            raise BundleError(f"{name} is not in the bundle")
        exports = _EXPORT.findall((root / name).read_text(encoding="utf-8"))
        parts.append(f"const {{ {', '.join(exports)} }} = {_module_expr(name)};")
    return "\n".join(parts)


@functools.cache
def export_script() -> str:
    """The export's chart code (built once per process: the files ship with the release)."""
    return bundle(EXPORT_MODULES, expose=("charts/report.js",))
