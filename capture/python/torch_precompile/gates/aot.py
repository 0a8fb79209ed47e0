"""Graph tracing: make_fx, torch.export and AOTAutograd, under lockdown.

Each gate sits on the one callable every entry point of its tracer goes
through, looked up at call time, so names imported elsewhere (``make_fx`` is
re-exported and imported by name all over torch) cannot bypass it:

- make_fx: ``_MakefxTracer.trace`` (what ``make_fx(f)(*args)`` calls);
- torch.export: ``torch.export._trace._export`` (export, draft_export);
- AOTAutograd: ``torch._functorch.aot_autograd.create_aot_state``, reached by
  ``aot_function``, ``aot_module_simplified`` and ``aot_export_*`` only on an
  AOTAutograd cache miss, so a cache hit still loads.
"""

from __future__ import annotations

from types import ModuleType

from .on_import import when_imported
from .patch import gate, name_of


def install() -> None:
    when_imported("torch.fx.experimental.proxy_tensor", _arm_make_fx)
    when_imported("torch.export._trace", _arm_export)
    when_imported("torch._functorch.aot_autograd", _arm_aot_autograd)


def _arm_make_fx(proxy_tensor: ModuleType) -> None:
    gate(
        proxy_tensor._MakefxTracer,
        "trace",
        lambda self, f, *args: f"make_fx tracing of {name_of(f)}",
    )


def _arm_export(trace: ModuleType) -> None:
    gate(trace, "_export", lambda mod, *args, **kwargs: f"torch.export tracing of {name_of(mod)}")


def _arm_aot_autograd(aot_autograd: ModuleType) -> None:
    gate(
        aot_autograd,
        "create_aot_state",
        lambda stack, flat_fn, *args, **kwargs: (
            f"AOTAutograd graph trace of {name_of(flat_fn)} (no AOTAutograd cache entry)"
        ),
    )
