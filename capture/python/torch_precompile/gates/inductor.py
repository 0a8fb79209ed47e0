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

``_compile_fx_inner`` wraps every error of ``fx_codegen_and_compile`` in an
``InductorError``; it is wrapped in turn so that a refusal reaches the caller
(e.g. a ``.backward()`` whose graph compiles lazily) as the PrecompileError.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any, Callable

from .._errors import PrecompileError
from .on_import import when_imported
from .patch import gate, replace


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
                f"{_what} of {graph_of(gm)}{' (backward)' if kwargs.get('is_backward') else ''} "
                f"(torch._inductor.compile_fx.{_name})"
            ),
        )
    replace(compile_fx, "_compile_fx_inner", _unwrap_refusal)


def _unwrap_refusal(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _compile_fx_inner(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        except Exception as error:
            inner = getattr(error, "inner_exception", None)
            if isinstance(inner, PrecompileError):
                raise inner.with_traceback(error.__traceback__) from None
            raise

    return _compile_fx_inner


def _arm_aot_apis(inductor: ModuleType) -> None:
    for name in ("standalone_compile", "aot_compile", "aoti_compile_and_package"):
        gate(
            inductor,
            name,
            lambda gm, *args, _name=name, **kwargs: f"torch._inductor.{_name} of {graph_of(gm)}",
        )
