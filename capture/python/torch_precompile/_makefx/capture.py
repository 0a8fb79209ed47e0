"""MakeFxCapture: exactly one positional call, traced and lowered when it runs."""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

from .. import _artifact, _lifecycle
from .._bases import Capture
from .._errors import PrecompileError
from .._progress import step
from .._summary import PrecompileSummary
from .._tracers import MakeFxTracer



def fn_name(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', repr(fn)))}"


def _refuse_ddp(args: tuple[Any, ...]) -> None:
    """make_fx traces through DistributedDataParallel's forward and reads its
    gradient buckets as tensors of no argument: say so, and what serves instead."""
    ddp = getattr(sys.modules.get("torch.nn.parallel.distributed"), "DistributedDataParallel", None)
    i = next((i for i, a in enumerate(args) if ddp is not None and isinstance(a, ddp)), None)
    if i is not None:
        raise PrecompileError(
            f"capture: argument {i} is a DistributedDataParallel-wrapped module, which MakeFxTracer "
            "cannot capture (make_fx traces DDP's forward and its gradient buckets, tensors no "
            "argument holds); capture the step with DynamoTracer (the default), which serves DDP's "
            "forward and gradients, or pass ddp.module for inference"
        )


class MakeFxCapture(Capture):
    def __init__(self, fn: Callable[..., Any], artifact_path: str | os.PathLike[str],
                 cache_path: str | os.PathLike[str], *, tracer: MakeFxTracer, backend: str) -> None:
        self._fn = fn
        self._artifact_path = artifact_path
        self._cache_path = cache_path
        self._tracer = tracer
        self._backend = backend
        self._state = "new"  # new -> open -> spent
        self._called = False
        self._errors: list[str] = []  # what the call raised, for summary()
        self._code: bytes | None = None
        self._block: Any = None

    def __enter__(self) -> MakeFxCapture:
        _lifecycle.check_enter(self._state)
        from .._kernels.block import KernelBlock

        self._block = KernelBlock().__enter__()
        self._state = "open"
        return self

    def close(self, *, write: bool = True) -> None:
        self._state = "spent"
        try:
            if write:
                self._write()
        finally:
            self._block.__exit__(None, None, None)
            self._block.close()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _lifecycle.check_call(self._state)
        if kwargs:
            raise PrecompileError(
                f"capture: a MakeFxTracer capture takes positional arguments only, got "
                f"keywords {sorted(kwargs)}; pass them positionally or use DynamoTracer"
            )
        _refuse_ddp(args)
        if self._called:
            raise PrecompileError(
                "capture: a MakeFxTracer capture takes exactly ONE call (it traces one "
                "execution and specializes to it); use DynamoTracer to capture several calls"
            )
        self._called = True
        from .render import render
        from .trace import trace

        try:
            with step("capture %s: traced with make_fx", fn_name(self._fn)):
                traced = trace(self._fn, args, self._tracer.decompositions, self._backend)
            with step("capture %s: rendered the %s program", fn_name(self._fn), self._backend):
                self._code = render(traced, backend=self._backend, fn_name=fn_name(self._fn))
        except Exception as e:
            self._errors.append(f"{type(e).__name__}: {e}")
            raise
        return traced.result

    def save(self) -> None:
        _lifecycle.check_save(self._state)
        self._write()

    def summary(self) -> PrecompileSummary:
        n = 1 if self._code is not None else 0
        return PrecompileSummary(frames=n, resume_functions=0, guarded_codes=n, backend_graphs=n,
                                 capture_errors=tuple(self._errors))

    def _write(self) -> None:
        if self._code is None:
            raise PrecompileError(
                "capture: nothing was captured (the capture's call raised)" if self._called
                else "capture: nothing was captured; call the capture with your example "
                     "arguments inside the `with` block before it exits"
            )
        from .._kernels.freeze import freeze

        entries, meta = freeze(self._block)
        cache = _artifact.encode_cache(self._code, backend=self._backend, tracer="make_fx",
                                       entries=entries, meta=meta)
        with step("capture: wrote %s (%d bytes) and %s (%d bytes)", self._artifact_path,
                  len(self._code), self._cache_path, len(cache)):
            _artifact.write_pair(self._artifact_path, self._cache_path, self._code, cache)
