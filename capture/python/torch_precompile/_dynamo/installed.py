"""The installed runnable: calls served by the frame evaluator from the entries
the artifact installed onto the live code objects.

The process-wide stance is read per call and never changed:

- "force_eager": no frame evaluator, so every call runs eagerly;
- "eager_on_recompile": run-only evaluation, so captured variants are served
  and anything else runs eagerly;
- any stance that would compile ("default", force_backend, "eager_then_compile",
  "fail_on_recompile", ...): a frame the captured entries miss is refused with
  the guards that failed, as under fail_on_recompile -- unless the artifact was
  loaded with allow_serve_time_compiles=True, in which case the miss compiles
  with the artifact's backend through torch.compile's own path, stance and all.
"""

from __future__ import annotations

from typing import Any, Callable

from .._bases import PrecompiledRunnable
from .._errors import PrecompileError


def _with_callback(callback: Any, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from torch._C._dynamo.eval_frame import set_eval_frame

    prior = set_eval_frame(None)
    try:
        set_eval_frame(callback)
        try:
            return fn(*args, **kwargs)
        finally:
            set_eval_frame(None)
    finally:
        set_eval_frame(prior)


def _failed_guards(code: Any, f_locals: dict[str, Any]) -> str:
    from torch._C._dynamo.eval_frame import _debug_get_precompile_entries

    parts = []
    for i, entry in enumerate(_debug_get_precompile_entries(code)):
        try:
            info = entry.guard_manager.check_verbose(f_locals)
            failed = [" ".join(p.split()) for p in info.verbose_code_parts if p][:3]
        except Exception as e:  # noqa: BLE001 - the refusal must still be raised
            failed = [f"<guards not evaluable: {type(e).__name__}>"]
        parts.append(f"variant {i}: " + ("; ".join(failed) or "<guard failed>"))
    return " | ".join(parts) if parts else "no captured variant of this frame"


# The module name of an artifact's own code: its driver, graph programs and the
# Inductor modules they exec (``load`` names the artifact's module so).
_ARTIFACT_MODULES = "torch_precompile.artifact."


def _refusing_callback(fn_name: str) -> Callable[..., Any]:
    """A frame-evaluator callback that compiles nothing. A frame Dynamo would not
    have compiled anyway (the early exits of its frame converter: skipfiles, no
    tensors, generators, its own generated code, exec'd code) runs as is, and so
    does the artifact's own code (a graph program's backward, which a
    ``loss.backward()`` inside the call runs: its module is named under
    ``_ARTIFACT_MODULES``, as ``load`` names the artifact's); any other miss
    raises naming the guards that failed."""
    import inspect

    from torch._dynamo import convert_frame, trace_rules
    from torch._dynamo.types import ConvertFrameReturn

    never = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR

    def refuse(frame: Any, *args: Any, **kwargs: Any) -> Any:
        code = frame.f_code
        if (code.co_flags & never or code in convert_frame.output_codes
                or code.co_name in ("<module>", "__setattr__")
                or frame.f_globals.get("__name__", "").startswith(_ARTIFACT_MODULES)
                or trace_rules.check(code) or not convert_frame.has_tensor_in_frame(frame)):
            return ConvertFrameReturn()
        raise PrecompileError(
            f"precompiled {fn_name}: no captured variant of {code.co_name!r} "
            f"({code.co_filename}:{code.co_firstlineno}) covers this call and an installed "
            f"artifact does not compile; failed guards: {_failed_guards(code, frame.f_locals)}. "
            "Capture a call like this one too, or load with allow_serve_time_compiles=True."
        )

    return refuse


class InstalledRunnable(PrecompiledRunnable):
    """An installed artifact: its entries live on the captured code objects."""

    installed = True

    def __init__(self, fn: Callable[..., Any], meta: dict[str, Any], path: str, *,
                 allow_serve_time_compiles: bool) -> None:
        import torch

        self._fn = fn
        self.metadata = meta
        self.artifact_path = path
        self.allow_serve_time_compiles = allow_serve_time_compiles
        self._refuse = _refusing_callback(meta.get("FN_NAME", fn.__qualname__))
        self._compiling = (torch._dynamo.optimize(meta["BACKEND"])(fn)
                           if allow_serve_time_compiles else None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from torch._dynamo import eval_frame

        stance = eval_frame._stance.stance
        if stance == "force_eager":
            return _with_callback(None, self._fn, args, kwargs)
        if stance == "eager_on_recompile":
            return _with_callback(False, self._fn, args, kwargs)
        if self._compiling is not None:
            return self._compiling(*args, **kwargs)
        return _with_callback(self._refuse, self._fn, args, kwargs)

    def unload(self) -> None:
        """Removing installed entries is not implemented: they stay until the
        process exits, so serve an installed artifact from a disposable process."""

    def __repr__(self) -> str:
        return (f"<PrecompiledRunnable {self.metadata.get('FN_NAME')} tracer=dynamo "
                f"backend={self.metadata.get('BACKEND')} installed from {self.artifact_path}>")
