"""Inductor autotuning and benchmarking under lockdown.

A benchmark under lockdown means a decision was not captured: the artifact
should carry it. Gated where the measuring happens, not where a cached
decision is looked up, so a recorded choice is still used:

- max-autotune choice selection: ``AlgorithmSelectorCache.benchmark`` (every
  in-process and sub-process selection path goes through it) and the
  ``benchmark_choices`` classmethod;
- the coordinate descent tuner: ``CoordescTuner.autotune``;
- the runtime autotuner of Inductor's Triton kernels:
  ``CachingAutotuner.benchmark_all_configs`` and ``coordinate_descent_tuning``
  (reached only when a kernel still has more than one config);
- every ``benchmark*`` method that ``Benchmarker`` and its subclasses in
  ``torch._inductor.runtime.benchmarking`` define (the shared ``benchmarker``
  instance and the do_bench_using_profiling helpers end there).
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

from .on_import import when_imported
from .patch import gate, name_of


def install() -> None:
    when_imported("torch._inductor.select_algorithm", _arm_select_algorithm)
    when_imported("torch._inductor.runtime.coordinate_descent_tuner", _arm_coordesc)
    when_imported("torch._inductor.runtime.triton_heuristics", _arm_caching_autotuner)
    when_imported("torch._inductor.runtime.benchmarking", _arm_benchmarker)


def _arm_select_algorithm(select_algorithm: ModuleType) -> None:
    cache = select_algorithm.AlgorithmSelectorCache
    gate(cache, "benchmark", lambda self, choices, *a, **k: _choices("max-autotune benchmark", choices))
    gate(cache, "benchmark_choices", lambda cls, choices, *a, **k: _choices("max-autotune benchmark", choices))


def _choices(what: str, choices: Any) -> str:
    try:
        names = [getattr(c, "name", type(c).__name__) for c in choices]
    except TypeError:
        names = []
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    return f"Inductor {what} of {len(names)} choices ({shown}) (AlgorithmSelectorCache)"


def _arm_coordesc(tuner: ModuleType) -> None:
    gate(
        tuner.CoordescTuner,
        "autotune",
        lambda self, *a, **k: f"Inductor coordinate descent tuning of {getattr(self, 'name', None) or 'a kernel'}",
    )


def _arm_caching_autotuner(heuristics: ModuleType) -> None:
    def kernel(self: Any) -> str:
        name = (getattr(self, "inductor_meta", None) or {}).get("kernel_name")
        fn = getattr(self, "fn", None)
        return repr(name or getattr(fn, "__name__", "a Triton kernel"))

    for method, what in (
        ("benchmark_all_configs", "runtime autotuning (benchmarking every config)"),
        ("coordinate_descent_tuning", "runtime coordinate descent tuning"),
    ):
        gate(
            heuristics.CachingAutotuner,
            method,
            lambda self, *a, _what=what, **k: f"Inductor {_what} of kernel {kernel(self)}",
        )


def _arm_benchmarker(benchmarking: ModuleType) -> None:
    base = benchmarking.Benchmarker
    classes = [c for c in vars(benchmarking).values() if isinstance(c, type) and issubclass(c, base)]
    for cls in classes:
        for method, value in list(vars(cls).items()):
            if method.startswith("benchmark") and inspect.isfunction(value):
                gate(
                    cls,
                    method,
                    lambda self, fn=None, *a, _m=f"{cls.__name__}.{method}", **k: (
                        f"Inductor benchmarking of {name_of(fn)} ({_m})"
                    ),
                )
