"""The import graph among aiperf_web's packages: circles and upward imports.

Reads every module under aiperf_web/ with `ast` (function-local imports count: a circle hidden
inside a function is still a circle) and folds each import to the package it lands in: an app
(`runs`, `core`, ...) or a module of the project root (`celery`, `urls`, ...). LAYERS orders
them from the kernel up; an import from a lower layer into a higher one is "upward". Run it
with no argument to print the graph; tests/web/test_layers.py holds the project to it.

    .venv/bin/python scripts/import_graph.py [--largest N]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "aiperf_web"

# From the bottom up; a package may import its own layer and those below. Within a layer,
# imports are allowed as long as they form no circle.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("settings",),  # read through django.conf; listed for completeness
    ("core",),  # the kernel: errors, ids, crypto, tags, specs, forms, outbound, streaming
    ("teams",),
    ("endpoints", "scenarios"),
    ("runs",),
    ("ops",),  # health and metrics read runs; live sockets count their viewers here
    ("live", "reports", "sweeps"),
    ("api",),
    # The composition root: the Celery app, URL and socket routing, ASGI/WSGI entry points,
    # the stack (serve, the demo bootstrap, the embedded worker) and the benchmarks.
    ("__init__", "celery", "urls", "routing", "asgi", "wsgi", "stack", "bench"),
)


@dataclass(frozen=True)
class Edge:
    source: str  # package that imports
    target: str  # package imported
    where: str  # path:line of the import
    local: bool  # inside a function (deferred) rather than at module level


def package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    return parts[1]


def _imports(tree: ast.Module) -> Iterator[tuple[str, int, bool]]:
    """(module, line, is_local) for every absolute import under aiperf_web."""

    def walk(node: ast.AST, local: bool) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                if child.module == PACKAGE:
                    for alias in child.names:
                        yield f"{PACKAGE}.{alias.name}", child.lineno, inner
                else:
                    yield child.module, child.lineno, inner
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno, inner
            yield from walk(child, inner)

    yield from walk(tree, False)


def edges(root: Path = ROOT) -> list[Edge]:
    found: list[Edge] = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        rel = path.relative_to(root)
        if "migrations" in rel.parts:
            continue
        source = rel.parts[1].removesuffix(".py")
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for module, line, local in _imports(tree):
            target = package_of(module)
            if target is None or target == source:
                continue
            found.append(Edge(source, target, f"{rel}:{line}", local))
    return found


def layer_of(package: str) -> int:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    raise KeyError(f"{package} is in no layer of scripts/import_graph.py")


def upward(found: list[Edge]) -> list[Edge]:
    return [e for e in found if layer_of(e.target) > layer_of(e.source)]


def circles(found: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one package (Tarjan)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for e in found:
        graph[e.source].add(e.target)
        graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


def largest(root: Path = ROOT, count: int = 15) -> list[tuple[int, str]]:
    sizes = [
        (len(path.read_text(encoding="utf-8").splitlines()), str(path.relative_to(root)))
        for folder in (PACKAGE, "runner")
        for path in (root / folder).rglob("*.py")
        if "migrations" not in path.parts
    ]
    return sorted(sizes, reverse=True)[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--largest", type=int, default=15, metavar="N")
    args = parser.parse_args(argv)
    found = edges()
    pairs: dict[tuple[str, str], list[Edge]] = defaultdict(list)
    for e in found:
        pairs[(e.source, e.target)].append(e)
    print("imports between packages (source -> target: how many, * = inside a function):")
    for (source, target), group in sorted(pairs.items()):
        deferred = sum(e.local for e in group)
        print(f"  {source} -> {target}: {len(group)}" + (f" ({deferred}*)" if deferred else ""))
    cycles = circles(found)
    print(f"circles: {len(cycles)}")
    for component in cycles:
        print("  " + " <-> ".join(component) + "; its ties:")
        for (source, target), group in sorted(pairs.items()):
            if source in component and target in component:
                where = ", ".join(e.where + ("*" if e.local else "") for e in group[:3])
                more = f" (+{len(group) - 3})" if len(group) > 3 else ""
                print(f"    {source} -> {target}: {where}{more}")
    up = upward(found)
    print(f"upward imports: {len(up)}")
    for e in up:
        print(f"  {e.source} -> {e.target}  {e.where}" + ("  *" if e.local else ""))
    if args.largest:
        print(f"largest modules (lines), aiperf_web and runner, top {args.largest}:")
        for lines, path in largest(count=args.largest):
            print(f"  {lines:5d}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
