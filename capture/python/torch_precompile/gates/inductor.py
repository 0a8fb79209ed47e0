"""Inductor graph compiles under lockdown.

The entry points, gated where they are defined (torch imports them lazily, by
name, at call time, and the gate is armed before any importer binds them):

- ``torch._inductor.compile_fx.compile_fx``: what the "inductor" backend and
  ``torch._inductor.compile`` call for every Dynamo graph;
- ``compile_fx_inner``: one forward or backward graph, called directly by tools;
- ``fx_codegen_and_compile``: the FX graph cache's miss path, also reached by
  the lazy backward compile of a graph compiled before the lockdown (which
  binds the ungated ``compile_fx_inner`` as a default argument);
- ``torch._inductor.standalone_compile``, ``aot_compile`` and
  ``aoti_compile_and_package``: the ahead-of-time APIs.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .on_import import when_imported
from .patch import gate


def install() -> None:
    when_imported("torch._inductor.compile_fx", _arm_compile_fx)
    when_imported("torch._inductor", _arm_aot_apis)


def graph_of(gm: Any) -> str:
    graph = getattr(gm, "graph", None)
    nodes = getattr(graph, "nodes", None)
    if nodes is None:
        return f"a {type(gm).__name__}"
    return f"an FX graph of {len(nodes)} nodes"


def _arm_compile_fx(compile_fx: ModuleType) -> None:
    for name, what in (
        ("compile_fx", "Inductor compile"),
        ("compile_fx_inner", "Inductor compile"),
        ("fx_codegen_and_compile", "Inductor codegen and compile (no FX graph cache entry)"),
    ):
        gate(
            compile_fx,
            name,
            lambda gm, *args, _what=what, _name=name, **kwargs: (
                f"{_what} of {graph_of(gm)} (torch._inductor.compile_fx.{_name})"
            ),
        )


def _arm_aot_apis(inductor: ModuleType) -> None:
    for name in ("standalone_compile", "aot_compile", "aoti_compile_and_package"):
        gate(
            inductor,
            name,
            lambda gm, *args, _name=name, **kwargs: f"torch._inductor.{_name} of {graph_of(gm)}",
        )
