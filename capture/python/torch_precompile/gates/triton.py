"""Triton kernel compiles and benchmarks under lockdown.

``triton.compile`` (what a ``@triton.jit`` kernel's first launch and Inductor's
Triton kernels call) looks the kernel up in the Triton cache first and, on a
hit, loads the binary without compiling. Only a miss turns the source into IR,
through ``ASTSource.make_ir`` / ``IRSource.make_ir``, before running the
backend stages (and ``ptxas``); gating ``make_ir`` therefore refuses the build
and keeps serving cached (frozen) kernels. The autotuner's per-config
measurement ``Autotuner._bench`` runs only when no tuning decision is cached,
in memory or on disk; ``triton.testing.do_bench`` and ``do_bench_cudagraph``
are the benchmarks themselves.

Triton is imported lazily (it costs time): the gates wait for its modules.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .on_import import when_imported
from .patch import gate, name_of


def install() -> None:
    when_imported("triton.compiler.compiler", _arm_compiler)
    when_imported("triton.runtime.autotuner", _arm_autotuner)
    when_imported("triton.testing", _arm_testing)


def _target(target: Any) -> str:
    backend = getattr(target, "backend", None)
    arch = getattr(target, "arch", None)
    return f" for {backend}:{arch}" if backend is not None else ""


def _arm_compiler(compiler: ModuleType) -> None:
    for source in ("ASTSource", "IRSource"):
        cls = getattr(compiler, source, None)
        if cls is None:
            continue
        gate(
            cls,
            "make_ir",
            lambda self, target=None, *a, **k: (
                f"Triton compile of kernel '{getattr(self, 'name', '?')}'{_target(target)} "
                "(no entry in the Triton cache)"
            ),
        )


def _arm_autotuner(autotuner: ModuleType) -> None:
    gate(
        autotuner.Autotuner,
        "_bench",
        lambda self, *a, config=None, **k: (
            f"Triton autotuning of kernel '{getattr(getattr(self, 'base_fn', None), '__name__', '?')}' "
            f"(benchmarking config {config}; no tuning decision cached)"
        ),
    )


def _arm_testing(testing: ModuleType) -> None:
    for name in ("do_bench", "do_bench_cudagraph"):
        gate(testing, name, lambda fn=None, *a, _n=name, **k: f"triton.testing.{_n} benchmark of {name_of(fn)}")
