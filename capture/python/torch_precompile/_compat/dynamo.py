"""Dynamo's capture-side entry points.

- ``torch._dynamo.optimize`` takes ``recompile_limit`` and ``isolate_recompiles``
  from 2.12 (earlier: a config patch around each call, and no isolation, so a
  capture refuses a function this process already compiled);
- ``PrecompileContext.take_artifact`` exists from 2.12 (earlier: the same pop on
  the class's artifact dict);
- ``CompilePackage.bypass_current_compile`` exists from 2.12 (earlier: a bypass
  is not observable, so no bypassed frame is told apart);
- ``CompilePackage.current_entry`` is public from 2.12 (earlier: ``_current_entry``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, Callable, Iterator

from .._errors import PrecompileError


@functools.cache
def _optimize_takes(name: str) -> bool:
    from torch._dynamo import eval_frame

    return name in inspect.signature(eval_frame._optimize).parameters


def optimize(fn: Callable[..., Any], backend: Any, *, package: Any, guard_filter_fn: Any,
             dynamic: Any, recompile_limit: int) -> Callable[..., Any]:
    """fn under Dynamo with its own recompile region where torch has one."""
    import torch

    kwargs: dict[str, Any] = dict(package=package, guard_filter_fn=guard_filter_fn, dynamic=dynamic)
    if _optimize_takes("isolate_recompiles"):
        kwargs.update(recompile_limit=recompile_limit, isolate_recompiles=True)
    else:
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

        if _debug_get_cache_entry_list(fn.__code__):
            raise PrecompileError(
                f"capture: {fn.__module__}.{fn.__qualname__} was already compiled in this "
                f"process, and torch {torch.__version__} cannot give a capture a recompile "
                "region of its own (its cache entries would be served instead of recorded); "
                "capture in a fresh process, or on torch 2.12 or later"
            )
    return torch._dynamo.optimize(backend, **kwargs)(fn)


@contextlib.contextmanager
def recompile_limit(limit: int) -> Iterator[None]:
    """The per-frame recompile limit for one capture call where optimize() could
    not take it."""
    import torch

    if _optimize_takes("recompile_limit"):
        yield
        return
    with torch._dynamo.config.patch(recompile_limit=limit):
        yield


def take_artifact(key: str) -> Any:
    from torch._dynamo.precompile_context import PrecompileContext

    take = getattr(PrecompileContext, "take_artifact", None)
    if take is not None:
        return take(key)
    return PrecompileContext._backend_artifacts_by_key.pop(key, None)


def watches_bypasses(package: Any) -> bool:
    return hasattr(package, "bypass_current_compile")


def current_entry(package: Any) -> Any:
    if hasattr(type(package), "current_entry") or "current_entry" in vars(package):
        return package.current_entry
    return package._current_entry


def tracer_unavailable() -> str | None:
    """Why DynamoTracer cannot capture on this torch, or None. Its guard audit reads
    each guard's code parts from the guard filter's entries, which torch has from
    2.15 (``GuardFilterEntry.code_parts``); earlier releases give only the source
    and type, so the audit could not tell a risky drop from a harmless one."""
    import dataclasses

    import torch
    import torch._dynamo.guards as guards

    if "code_parts" not in {f.name for f in dataclasses.fields(guards.GuardFilterEntry)}:
        return (f"DynamoTracer needs torch 2.15 or later (torch {torch.__version__}'s guard filter "
                "gives no guard code parts, which the capture's guard audit reads); on this "
                "torch capture with MakeFxTracer(), backend='eager'")
    return None
