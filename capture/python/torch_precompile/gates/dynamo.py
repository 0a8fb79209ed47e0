"""Dynamo: a frame compile (first compile or recompile) under lockdown.

Dynamo's C frame evaluator checks a frame's cache entries (their guards) itself
and calls back into Python only on a miss; the callback reaches
``torch._dynamo.convert_frame._compile`` only once it has decided the frame is
worth compiling (not in a skipfile, holds tensors, ...). Gating ``_compile``
therefore refuses exactly the first compiles and the recompiles, and a call
whose cache entry exists never reaches the gate.

``ConvertFrame.__call__`` (the non-fullgraph callback) catches compile errors
and, with ``torch._dynamo.config.suppress_errors``, runs the frame eagerly
instead; it would swallow the refusal. So it re-raises a refusal recorded on
this thread. Without suppress_errors the refusal propagates through the C
callback to the caller unchanged.

``fullgraph_capture`` (the graph capture behind torch.export's Dynamo path and
``torch._dynamo.aot_compile``) traces without that callback, so it is gated too.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import threading
from types import CodeType, ModuleType
from typing import Any, Callable

from .. import _lockdown
from .._compat import dynamo as _compat
from .._errors import PrecompileError
from .on_import import when_imported
from .patch import gate, name_of, refuse, replace

REMEDY = (
    "Capture this function ahead of time with torch.compiler.precompile.capture(), "
    "calling it there with inputs of these shapes, dtypes and devices, so the artifact "
    "covers the call; or call it outside the lockdown."
)

_tls = threading.local()


def install() -> None:
    when_imported("torch._dynamo.convert_frame", _arm)


def _arm(convert_frame: ModuleType) -> None:
    replace(convert_frame, "_compile", functools.partial(_gate_compile, convert_frame))
    replace(convert_frame.ConvertFrame, "__call__", _reraise_refusal)
    gate(
        convert_frame,
        "fullgraph_capture",
        lambda mod, *args, **kwargs: f"Dynamo full-graph capture of {name_of(mod)}",
        REMEDY,
    )


def _gate_compile(convert_frame: ModuleType, original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def _compile(*args: Any, **kwargs: Any) -> Any:
        if _lockdown.current() is not None:
            try:
                what = describe(convert_frame, signature.bind(*args, **kwargs).arguments)
            except Exception:  # noqa: BLE001
                what = "a torch.compile frame compile"
            try:
                refuse(what, REMEDY)
            except PrecompileError as refusal:
                _tls.refused = refusal
                raise
        return original(*args, **kwargs)

    return _compile


def _reraise_refusal(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        _tls.refused = None
        try:
            result = original(self, *args, **kwargs)
            refused, _tls.refused = _tls.refused, None
            if refused is not None:
                raise refused
            return result
        finally:
            _tls.refused = None

    return __call__


def where(code: CodeType) -> str:
    name = getattr(code, "co_qualname", code.co_name)
    return f"'{name}' ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def describe(convert_frame: ModuleType, arguments: dict[str, Any]) -> str:
    """What Dynamo was about to do: a first compile, or a recompile and why."""
    code: CodeType = arguments["code"]
    entries, _ = _compat.compile_cache_entries(arguments)
    verb = "torch._dynamo.export" if arguments.get("export") else "torch.compile"
    if not entries and arguments.get("cache_entry") is None:
        return f"{verb} of {where(code)} — first compile, no cache entry —"
    return (
        f"{verb} of {where(code)} — recompile: no cache entry matches "
        f"({len(entries)} compiled before; {_guard_failure(convert_frame, arguments)}) —"
    )


def _guard_failure(convert_frame: ModuleType, arguments: dict[str, Any]) -> str:
    """The first failed guard, as Dynamo's recompile log would name it."""
    try:
        reasons = convert_frame.get_and_maybe_log_recompilation_reasons(
            _compat.compile_cache_entries(arguments)[1],
            arguments["frame"],
            convert_frame.innermost_backend(arguments["compiler_fn"]),
            skip_logging=True,
        )
    except Exception:  # noqa: BLE001
        reasons = []
    if not reasons:
        return "guards failed"
    # "0/1: tensor 'x' size mismatch ..." -> drop the compile id.
    return re.sub(r"^\d+/\d+: ", "", " ".join(reasons[0].split()))
