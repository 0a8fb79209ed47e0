"""The installed runnable: calls served by the frame evaluator from the entries
the artifact installed onto the live code objects.

The process-wide stance is read per call and never changed:

- "force_eager": no frame evaluator, so every call runs eagerly;
- "eager_on_recompile": run-only evaluation, so captured variants are served
  and anything else runs eagerly;
- any stance that would compile ("default", force_backend, "eager_then_compile",
  "fail_on_recompile", ...): a frame the captured entries miss is served by a
  live cache entry of its code that passes (a torch.compile of it in this
  process after load, whatever its backend), and one both miss is refused with
  the guards that failed, as under fail_on_recompile -- unless the artifact was
  loaded with allow_serve_time_compiles=True, in which case the miss compiles
  with the artifact's backend through torch.compile's own path, stance and all.
"""

from __future__ import annotations

from typing import Any, Callable

from ..._artifact import MODULE_PREFIX
from ..._bases import PrecompiledRunnable
from ..._compat import dynamo as _compat
from ..._errors import PrecompileError


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


def _refusing_callback(fn_name: str) -> Callable[..., Any]:
    """A frame-evaluator callback that compiles nothing. A frame Dynamo would not
    have compiled anyway (the early exits of its frame converter: skipfiles, no
    tensors, generators, its own generated code, exec'd code) runs as is, and so
    does the artifact's own code (a graph program's backward, which a
    ``loss.backward()`` inside the call runs: its module is named under
    ``MODULE_PREFIX``, as ``load`` names the artifact's); any other miss
    raises naming the guards that failed. A live cache entry of the frame's code
    (a torch.compile of it after load, whatever its backend) that passes serves
    the frame before this callback is called: see
    ``_compat.dynamo.serving_live_entries``."""
    import inspect

    from torch._dynamo import convert_frame, trace_rules
    from torch._dynamo.types import ConvertFrameReturn

    never = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR

    def refuse(frame: Any, *args: Any, **kwargs: Any) -> Any:
        code = frame.f_code
        if (code.co_flags & never or code in convert_frame.output_codes
                or code.co_name in ("<module>", "__setattr__")
                or frame.f_globals.get("__name__", "").startswith(MODULE_PREFIX)
                or trace_rules.check(code) or not convert_frame.has_tensor_in_frame(frame)):
            return ConvertFrameReturn()
        raise PrecompileError(
            f"precompiled {fn_name}: no captured variant of {code.co_name!r} "
            f"({code.co_filename}:{code.co_firstlineno}) covers this call and an installed "
            f"artifact does not compile; failed guards: {_failed_guards(code, frame.f_locals)}. "
            "Capture a call like this one too, or load with allow_serve_time_compiles=True."
        )

    return _compat.serving_live_entries(refuse)


class _Return:
    """What the frame evaluator reads of a callback's answer (Dynamo's
    ConvertFrameReturn, without importing Dynamo)."""

    __slots__ = ("frame_exec_strategy", "apply_to_code", "guarded_code")

    def __init__(self, cur: str, recursive: str, *, for_good: bool = True) -> None:
        from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy

        self.frame_exec_strategy = _FrameExecStrategy(getattr(_FrameAction, cur), getattr(_FrameAction, recursive))
        self.apply_to_code = for_good  # for good marks the code, as Dynamo marks a frame it skips
        self.guarded_code = None


def _library_roots() -> tuple[str, str, tuple[str, ...]]:
    """(torch's directory, the standard library's, its site directories): the
    files whose frames Dynamo skips, but for the torch modules it compiles."""
    import os
    import site
    import sysconfig

    import torch

    sites = tuple(os.path.join(p, "") for p in (*site.getsitepackages(), site.getusersitepackages()))
    return (os.path.join(os.path.dirname(torch.__file__), ""),
            os.path.join(sysconfig.get_paths()["stdlib"], ""), sites)


def _has_tensor(frame: Any) -> bool:
    """Dynamo's has_tensor_in_frame: a global torch module the code names, or a
    tensor, module or numpy array among the locals (through lists, tuples,
    dicts and named tuples). Dynamo skips a frame without, for good."""
    import sys
    from types import ModuleType

    import torch

    np = sys.modules.get("numpy")
    for name in frame.f_code.co_names:
        obj = frame.f_globals.get(name)
        if isinstance(obj, ModuleType) and (obj is torch or obj.__name__.startswith("torch.")
                                            or (np is not None and obj is np)):
            return True
    seen: set[int] = set()

    def has(obj: Any) -> bool:
        if id(obj) in seen:
            return False
        seen.add(id(obj))
        if isinstance(obj, (torch.Tensor, torch.nn.Module)) or (
                type(obj) is type and issubclass(obj, torch.nn.Module)):
            return True
        if np is not None and (type(obj) is np.ndarray or isinstance(obj, np.generic)):
            return True
        if type(obj) in (list, tuple):
            return any(has(v) for v in obj)
        if type(obj) is dict:
            return any(has(v) for v in list(obj.values()))
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            return any(has(getattr(obj, f)) for f in obj._fields)
        return False

    return any(has(v) for v in frame.f_locals.values())


def _hooked_torch_module(frame: Any) -> bool:
    """Dynamo compiles the forward of one of torch's own modules (nn, ao) entered
    directly only when the module has forward hooks."""
    import torch

    module = frame.f_locals.get("self")
    return (isinstance(module, torch.nn.Module)
            and type(module).__module__.startswith(("torch.nn.", "torch.ao."))
            and bool(getattr(module, "_forward_pre_hooks", None) or getattr(module, "_forward_hooks", None)))


def _dynamo_free_refusing_callback(fn_name: str, installed: dict[Any, Any], torch_compiled: list[str]) -> Callable[..., Any]:
    """The refusing callback of a Dynamo-free installed artifact: the same
    decisions as ``_refusing_callback`` without importing Dynamo. A captured
    frame whose entries miss raises naming the failed guards; a frame Dynamo
    would skip (the artifact's own code, torch's and the standard library's, one
    with no tensors, generators, module bodies) runs as is and is skipped for
    good, as Dynamo marks it; only a frame Dynamo might compile is handed to
    Dynamo's own rules (imported then), which refuse it or run it."""
    import inspect
    import os
    import sys

    torch_dir, stdlib, sites = _library_roots()
    compiled_dirs = tuple(os.path.join(torch_dir, *m.split(".")[1:]) for m in torch_compiled)
    never = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
    skip, skip_all = _Return("SKIP", "DEFAULT"), _Return("SKIP", "SKIP")
    run_once = _Return("SKIP", "DEFAULT", for_good=False)
    dynamo: list[Callable[..., Any]] = []

    def library(frame: Any) -> bool:
        code = frame.f_code
        path = code.co_filename
        if path.startswith(torch_dir):
            return not (path.startswith(compiled_dirs) or (code.co_name == "forward"
                                                            and _hooked_torch_module(frame)))
        return path.startswith("<frozen ") or (path.startswith(stdlib) and not path.startswith(sites))

    def dynamo_imported() -> bool:
        # fully: a frame of Dynamo's own import (the model reading torch._dynamo
        # for the first time) must not be judged by the half-made module
        module = sys.modules.get("torch._dynamo.convert_frame")
        return module is not None and not getattr(module.__spec__, "_initializing", False)

    def refuse(frame: Any, cache_entry: Any, frame_state: Any) -> Any:
        code = frame.f_code
        if code in installed:
            why = installed[code]
            if why is None:
                return skip
            failed = f"failed guards: {why(frame.f_locals)}" if callable(why) else why
            raise PrecompileError(
                f"precompiled {fn_name}: no captured variant of {code.co_name!r} "
                f"({code.co_filename}:{code.co_firstlineno}) covers this call and an installed "
                f"artifact does not compile; {failed}. Capture a call like this one too, or "
                "load with allow_serve_time_compiles=True."
            )
        if frame.f_globals.get("__name__", "").startswith(MODULE_PREFIX):
            return skip_all  # the artifact's graphs, run as torch._dynamo.disable runs them
        if (code.co_flags & never or code.co_name in ("<module>", "__setattr__")
                or code.co_filename == "<string>" or library(frame)):
            return skip
        importing = "torch._dynamo" in sys.modules and not dynamo_imported()
        if not importing and not dynamo_imported() and not _has_tensor(frame):
            return skip
        if importing:
            return run_once  # judged again on its next call, once Dynamo is whole
        if not dynamo:
            dynamo.append(_refusing_callback(fn_name))
        return dynamo[0](frame, cache_entry, frame_state)

    return _compat.serving_live_entries(refuse)


class InstalledRunnable(PrecompiledRunnable):
    """An installed artifact: its entries live on the captured code objects."""

    installed = True

    def __init__(self, fn: Callable[..., Any], meta: dict[str, Any], path: str, *,
                 allow_serve_time_compiles: bool, ns: dict[str, Any]) -> None:
        import torch

        self._fn = fn
        self.metadata = meta
        self.artifact_path = path
        self.allow_serve_time_compiles = allow_serve_time_compiles
        name = meta.get("FN_NAME", fn.__qualname__)
        self._refuse = (_dynamo_free_refusing_callback(name, ns["_PC_INSTALLED"],
                                                ns["_pc_unpack"](ns["_TORCH_COMPILED"]))
                        if meta.get("DYNAMO_FREE") else _refusing_callback(name))
        self._compiling = (torch._dynamo.optimize(meta["BACKEND"])(fn)
                           if allow_serve_time_compiles else None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        stance = _compat.stance()
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
                f"backend={self.metadata.get('BACKEND')} installed"
                f"{', Dynamo-free' if self.metadata.get('DYNAMO_FREE') else ''} from {self.artifact_path}>")
