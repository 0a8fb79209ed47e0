"""The package's import graph, drawn from the code (every ``import`` and
``from … import`` in every module, at module level or inside a function), has no
circle: layers depend one way (docs/layout.md; issue 40). Fails naming the
modules of any strongly connected component."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import torch_precompile

PACKAGE = Path(torch_precompile.__file__).resolve().parent
EXTENSIONS = {"torch_precompile._native"}


def _modules() -> dict[str, Path]:
    mods = {}
    for p in PACKAGE.rglob("*.py"):
        rel = p.relative_to(PACKAGE.parent).with_suffix("")
        if "_prefix" in rel.parts or "driver" in rel.parts:   # the shim's boot file; artifact templates
            continue
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        package = m.split(".") if path.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else (node.module or "")
                # `from pkg import name`: the submodule when it is one, else pkg itself
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods or f"{base}.{a.name}" in EXTENSIONS
                           else base for a in node.names]
            graph[m] |= {t for t in targets if t in mods and t != m}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_package_has_no_import_circle() -> None:
    mods = _modules()
    assert len(mods) > 60 and "torch_precompile._boot" in mods
    assert _circles(_edges(mods)) == []


def test_the_check_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
