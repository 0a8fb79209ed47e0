"""``_native.pyi`` says what the built pyo3 module holds: the same public names,
and for each function the same parameters (names, order, which have defaults),
read from the module's own text signatures. Fails when a binding is added,
removed or changed without its stub."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import torch_precompile
from torch_precompile import _native


def _stub() -> tuple[dict[str, list[tuple[str, bool]]], set[str]]:
    path = Path(torch_precompile.__file__).with_name("_native.pyi")
    assert path.exists(), f"{path} is not installed with the package"
    functions: dict[str, list[tuple[str, bool]]] = {}
    others: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef):
            args = node.args.args
            first_default = len(args) - len(node.args.defaults)
            functions[node.name] = [(a.arg, i >= first_default) for i, a in enumerate(args)]
        elif isinstance(node, ast.ClassDef):
            others.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            others.add(node.target.id)
    return functions, others


def test_the_stub_names_every_binding_with_its_parameters() -> None:
    functions, others = _stub()
    built = {n for n in dir(_native) if not n.startswith("_")} | {"__version__"}
    assert built == set(functions) | others, (sorted(built - set(functions) - others),
                                              sorted(set(functions) | others - built))
    for name, params in functions.items():
        sig = inspect.signature(getattr(_native, name))
        got = [(p.name, p.default is not inspect.Parameter.empty) for p in sig.parameters.values()]
        assert got == params, (name, got, params)
    assert (Path(torch_precompile.__file__).with_name("py.typed")).exists()
