"""DynamoCapture: the caller-driven multi-graph capture and its write gates."""

from __future__ import annotations

import contextlib
import os
import sys
import types
from typing import Any, Callable

from .. import _artifact, _lifecycle
from .._compat import dynamo as _compat
from .._bases import Capture
from .._errors import PrecompileError
from .._progress import log, step
from .._summary import PrecompileSummary
from .._tracers import DynamoTracer
from .rendering.frames import main_script

_MODULE_LEVEL = ("capture a module-level function of an importable module that takes what it "
                 "needs as arguments, e.g. 'def step(model, x): return model(x)' in mymodels.py, "
                 "calling cap(model, x)")


def check_fn(fn: Callable[..., Any]) -> None:
    """A Dynamo artifact rebuilds fn from its code object inside its module, so fn
    must be a module-level function of an importable module."""
    import torch

    if isinstance(fn, torch.nn.Module):
        raise PrecompileError(
            f"capture(fn={type(fn).__name__} module): Dynamo compiles a module through its "
            f"own wrapper frame, which an artifact cannot rebuild; {_MODULE_LEVEL}"
        )
    if isinstance(fn, types.MethodType):
        raise PrecompileError(
            f"capture(fn={fn.__qualname__}): a bound method is served without its receiver; "
            f"pass the receiver as an argument instead: {_MODULE_LEVEL}"
        )
    if not isinstance(fn, types.FunctionType):
        raise PrecompileError(
            f"capture(fn={fn!r}): a DynamoTracer capture takes a plain Python function; {_MODULE_LEVEL}"
        )
    where = f"{fn.__module__}.{fn.__qualname__}"
    if fn.__name__ == "<lambda>":
        raise PrecompileError(
            f"capture(fn={where}): a DynamoTracer capture does not take a lambda (only a "
            "MakeFxTracer capture does): the artifact finds fn again by its name in its "
            f"module; {_MODULE_LEVEL}"
        )
    if fn.__code__.co_freevars:
        raise PrecompileError(
            f"capture(fn={where}): fn is a closure over {list(fn.__code__.co_freevars)}, and "
            "the artifact rebuilds fn from its code object, which cannot restore closure "
            f"cells; {_MODULE_LEVEL}"
        )
    if fn.__module__ == "__main__" and main_script() is None:
        raise PrecompileError(
            f"capture(fn={where}): fn is defined in a __main__ that is not a script file "
            "(python -c, a REPL, a notebook), which no later process can run again; put it "
            f"in a script or a module and {_MODULE_LEVEL}"
        )
    if "<locals>" in fn.__qualname__:
        raise PrecompileError(
            f"capture(fn={where}): fn is defined inside another function, so the serving "
            f"process cannot find it by name; {_MODULE_LEVEL}"
        )
    module = sys.modules.get(fn.__module__)
    if module is None or (getattr(module, "__spec__", None) is None and fn.__module__ != "__main__"):
        raise PrecompileError(
            f"capture(fn={where}): module {fn.__module__!r} is not an importable module "
            f"(no import spec), so a serving process cannot import it; {_MODULE_LEVEL}"
        )


class _ArtifactRecords:
    """``CacheArtifactManager.with_fresh_cache()`` that can be entered again: the
    block's records of what compiled in it are set aside on exit and put back on
    the next entry; the manager's previous records come back on every exit."""

    _FIELDS = ("_new_cache_artifacts", "_seen_artifacts", "_serializer", "_cache_info")

    def __init__(self, manager: Any) -> None:
        self._manager = manager
        self._mine: list[Any] | None = None
        self._saved: list[Any] = []

    def __enter__(self) -> None:
        manager = self._manager
        self._saved = [getattr(manager, f) for f in self._FIELDS]
        if self._mine is None:
            with manager.with_fresh_cache():
                self._mine = [getattr(manager, f) for f in self._FIELDS]
        for field, value in zip(self._FIELDS, self._mine):
            setattr(manager, field, value)

    def __exit__(self, *exc: Any) -> None:
        manager = self._manager
        self._mine = [getattr(manager, f) for f in self._FIELDS]
        for field, value in zip(self._FIELDS, self._saved):
            setattr(manager, field, value)


class DynamoCapture(Capture):
    def __init__(self, fn: Callable[..., Any], artifact_path: str | os.PathLike[str],
                 cache_path: str | os.PathLike[str], *, tracer: DynamoTracer, backend: str) -> None:
        check_fn(fn)
        self._fn = fn
        self._fn_name = f"{fn.__module__}.{fn.__qualname__}"
        self._artifact_path = artifact_path
        self._cache_path = cache_path
        self._tracer = tracer
        self._backend = backend
        self._state = "new"  # new -> open -> spent
        self._session: Any = None
        self._scopes = contextlib.ExitStack()
        self._block: Any = None

    def _kernel_cache_scope(self) -> contextlib.AbstractContextManager[Any]:
        """The block's kernel scope: fresh Inductor/Triton cache directories, the
        compiler journal armed, C++ kernel libraries recorded (see _kernels)."""
        from .._kernels.block import KernelBlock

        self._block = KernelBlock()
        return self._block

    def _kernel_entries(self) -> tuple[list[tuple[str, str, bytes]], dict[str, Any]]:
        """The frozen kernels each write adds to the cache, with the envelope meta."""
        from .._kernels.freeze import freeze

        return freeze(self._block)

    def __enter__(self) -> DynamoCapture:
        _lifecycle.check_enter(self._state)
        from torch.compiler._cache import CacheArtifactManager

        from .recording.session import Session

        with contextlib.ExitStack() as scopes:
            scopes.enter_context(self._kernel_cache_scope())
            # Only what compiles inside the block goes into the kernel bundle.
            self._artifacts = _ArtifactRecords(CacheArtifactManager)
            scopes.enter_context(self._artifacts)
            self._session = Session(self._fn, self._tracer, self._backend)
            self._scopes = scopes.pop_all()
        self._state = "open"
        return self

    def suspend(self) -> None:
        """The block's scopes: kernel cache directories, the journal, the
        cache-artifact records."""
        self._scopes.close()

    def resume(self) -> None:
        scopes = contextlib.ExitStack()
        scopes.enter_context(self._block)
        scopes.enter_context(self._artifacts)
        self._scopes = scopes

    def close(self, *, write: bool = True) -> None:
        self._state = "spent"
        try:
            with self._scopes:
                if write:
                    self._write()
        finally:
            if self._session is not None:
                _compat.release(self._fn)
            if self._block is not None:
                self._block.close()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _lifecycle.check_call(self._state)
        return self._session.call(args, kwargs)

    def save(self) -> None:
        _lifecycle.check_save(self._state)
        self._write()
        self._saved_mark = self._mark()

    def unsaved(self) -> bool:
        """Whether calls since the last save() compiled something it does not hold
        (a frame, a variant, a graph): the zero-code modes checkpoint only then."""
        return self._mark() != getattr(self, "_saved_mark", None)

    def _mark(self) -> tuple[int, int, int]:
        entry = self._session.package.cache_entry()
        return (len(entry.codes), sum(len(c.guarded_codes) for c in entry.codes), len(entry.backend_ids))

    def summary(self) -> PrecompileSummary:
        if self._session is None:
            return PrecompileSummary(frames=0, resume_functions=0, guarded_codes=0, backend_graphs=0)
        from .rendering.summary import summarize

        return summarize(self._session)

    def _write(self) -> None:
        from .rendering.render import kernel_bundle, render

        session = self._session
        if session is None or session.calls == 0:
            raise PrecompileError(
                "capture: nothing was captured; call the capture with your example "
                "arguments inside the `with` block before it exits"
            )
        with step("capture %s: rendered %d call(s)", self._fn_name, session.calls):
            code, entries, summary, reasons = render(
                session, fn_name=self._fn_name,
                bundle=kernel_bundle() if self._backend == "inductor" else None,
            )
        log.info("capture %s: %s", self._fn_name, summary)
        self._gate(summary, reasons)
        kernels, meta = self._kernel_entries()
        cache = _artifact.encode_cache(code, backend=self._backend, tracer="dynamo",
                                       entries=[*entries, *kernels], meta=meta)
        with step("capture: wrote %s (%d bytes) and %s (%d bytes)", self._artifact_path,
                  len(code), self._cache_path, len(cache)):
            _artifact.write_pair(self._artifact_path, self._cache_path, code, cache)

    def _bypass_reasons(self) -> list[tuple[str, str]]:
        """(frame name, Dynamo's reason) for each frame a compile of which was bypassed."""
        reasons = self._session.bypass_reasons if self._session is not None else {}
        return [(key[0], reason) for key, reason in reasons.items()]

    def _gate(self, s: PrecompileSummary, reasons: dict[tuple[str, str], str]) -> None:
        """The DynamoTracer require_* gates, checked before anything is written."""
        t = self._tracer
        if t.require_complete:
            gaps = []
            if s.bypassed:
                from .rendering.frames import bypass_explanation

                gaps.append(f"bypassed frames {list(s.bypassed)} (nothing of them could be packaged)")
                gaps.extend(f"{name!r}: {bypass_explanation(reason)}" for name, reason
                            in self._bypass_reasons() if name in s.bypassed)
            if s.uncovered_frames:
                gaps.append(f"uncovered frames {list(s.uncovered_frames)} (they ended with no guarded code)")
            if s.capture_errors:
                gaps.append(f"capture calls that raised: {list(s.capture_errors)}")
            if gaps:
                raise PrecompileError(
                    f"capture: refusing to write an artifact of {self._fn_name} with a coverage "
                    f"gap: {'; '.join(gaps)}. A call reaching such a frame would raise at serve "
                    "time. Fix the cause and capture again, or pass "
                    "DynamoTracer(require_complete=False) to write it anyway. "
                    f"Summary: {s}"
                )
        if t.require_no_risky_drops and s.risky_dropped_guards:
            risky = risky_lines(s.risky_dropped_guards, reasons)
            raise PrecompileError(
                f"capture: refusing to write an artifact of {self._fn_name}: dropped guards "
                f"{risky} told captured variants apart or hang off a configuration-chosen "
                "slot, and the artifact will not check them, so a serving process could run "
                f"the wrong graph without an error.{run_time_identity_hint(reasons.values())} "
                "Keep those guards (guard_filter_fn), make "
                "the slot fixed (a module-level def or class the artifact can check by name), "
                "or pass DynamoTracer(require_no_risky_drops=False) to accept the risk (the "
                "drops are listed in the artifact's RISKY_DROPPED_GUARDS)."
            )


def _under(src: str, parent: str) -> bool:
    return src.startswith(parent) and src[len(parent):len(parent) + 1] in (".", "[")


def risky_lines(risky: tuple[tuple[str, str], ...], reasons: dict[tuple[str, str], str]) -> list[str]:
    """One line per risky dropped guard, those under another one's slot (the entries
    of a configuration object whose identity was dropped: ``model.config.__dict__[...]``
    under ``model.config``) folded into their outermost slot's line with a count."""
    sources = {src for _g, src in risky}
    lines, folded = [], {}
    for g, src in risky:
        outer = [p for p in sources if p != src and _under(src, p)]
        if outer:
            root = min(outer, key=len)
            folded.setdefault(root, []).append(src)
            continue
        lines.append((src, f"{g} {src} ({reasons.get((g, src), 'risky')})"))
    out = []
    for src, line in lines:
        below = sorted(set(folded.pop(src, ())))
        if below:
            shown = ", ".join(below[:3]) + (", ..." if len(below) > 3 else "")
            line += f" and {len(below)} more under it ({shown})"
        out.append(line)
    return out


def run_time_identity_hint(reasons: Any) -> str:
    """Where an identity guard on an object made at run time comes from, when one is
    among the risky drops."""
    if not any("made at run time" in r for r in reasons):
        return ""
    return (" An identity guard on an object made at run time comes from code that "
            "copies it or takes its id() (copy.deepcopy; a transformers encoder-decoder "
            "model called with use_cache=True deep-copies its config to build its cache: "
            "pass use_cache=False), or keeps it across calls; take that out of the "
            "captured function.")
