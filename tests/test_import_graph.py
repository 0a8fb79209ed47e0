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


def _stage_violations(graph: dict[str, set[str]]) -> list[str]:
    """Edges inside ``_dynamo`` that run against its stage order: a module imports
    its own stage, a later one, or a shared module; a shared module imports only
    shared modules and the serving stage's driver templates."""
    from torch_precompile._dynamo import SHARED, STAGES

    root = "torch_precompile._dynamo"

    def stage(m: str) -> str | None:
        if not m.startswith(root + "."):
            return None
        top = m[len(root) + 1:].split(".")[0]
        return "shared" if top in SHARED else top

    bad = []
    for m, targets in graph.items():
        sm = stage(m)
        for t in targets:
            st = stage(t)
            if sm is None or st is None or st == "shared":
                continue
            ok = st == "serving" if sm == "shared" else STAGES.index(st) >= STAGES.index(sm)
            if not ok:
                bad.append(f"{m} ({sm}) imports {t} ({st})")
    return sorted(bad)


def test_dynamo_is_grouped_by_stage_and_the_stages_import_one_way() -> None:
    from torch_precompile._dynamo import SHARED, STAGES

    mods = _modules()
    root = "torch_precompile._dynamo"
    tops = {m[len(root) + 1:].split(".")[0] for m in mods if m.startswith(root + ".")}
    assert tops == set(STAGES) | set(SHARED), tops  # every module in a stage or shared
    assert _stage_violations(_edges(mods)) == []
    # the check sees a planted edge against the order
    planted = {f"{root}.serving.load": {f"{root}.recording.session"}, f"{root}.recording.session": set()}
    assert _stage_violations(planted) == [
        f"{root}.serving.load (serving) imports {root}.recording.session (recording)"]
