"""The capture session: fn compiled by Dynamo into a CompilePackage, call by call.

``torch._dynamo.package.CompilePackage`` records every frame Dynamo compiles
under the wrapper (the entry, its graph-break continuations, any user frame
entered by an ordinary call) with one guarded code per variant. This module
owns the wrapper, the compiler configuration each call runs under, and the
bookkeeping the package does not keep: backend artifacts, frames that hit the
recompile limit, and the exceptions capture calls raised.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Callable, Iterator

from ..._compat import dynamo as _compat
from ..._errors import PrecompileError
from ..._progress import log as _log
from ..._tracers import DynamoTracer
from .guards import Ledger



@contextlib.contextmanager
def capture_config() -> Iterator[None]:
    """The compiler configuration a capture call runs under.

    - ``bundled_autograd_cache``: AOTAutograd hands each compiled graph to the
      package under its backend id, which is how an Inductor graph reaches the
      artifact;
    - ``force_non_lazy_backward_lowering``: with grad enabled the backward is
      lowered with the forward, not at the first ``.backward()`` (a capture
      that never runs one would otherwise save no backend at all);
    - ``bypass_autograd_cache_key``: a graph the cache declines to key would
      never be saved; the artifact is addressed by backend id instead;
    - ``allow_empty_graphs``: an empty frame still records its guards as a
      variant instead of being skipped for good on its code object;
    - ``reorderable_logging_functions``: a ``logger.warning(...)`` (or a library's
      ``warning_once``) inside the model runs after the graph instead of breaking
      it. A break there is one Dynamo cannot resume from inside an inlined call,
      so it splits the caller into frames of its own, down to dataclass
      ``__init__``s no artifact can name (transformers' ``loss_function`` warns);
    - ``optimize_ddp=False``: the forward of a module DistributedDataParallel
      wraps is compiled as one graph per frame, recorded by the package. With
      DDP's optimizer, Dynamo compiles it through a callback cloned without the
      package (``ConvertFrame._clone_with_backend``), so its graphs would never
      reach the artifact. DDP's reducer still all-reduces the gradients, from its
      hooks once the compiled backward produced them (no overlap with the
      backward, the same numbers);
    - what ``_compat.bytecode_config`` names: transformed bytecode that imports
      nothing of Dynamo's on a plain call.
    """
    import torch
    import torch._functorch.config as functorch_config

    if torch.compiler.config.force_disable_caches:
        raise PrecompileError(
            "capture: torch.compiler.config.force_disable_caches=True turns off the "
            "AOTAutograd cache through which compiled graphs reach the artifact; unset "
            "it (or TORCHINDUCTOR_FORCE_DISABLE_CACHES) for the capture"
        )
    with (
        functorch_config.patch(bundled_autograd_cache=True, force_non_lazy_backward_lowering=True,
                               bypass_autograd_cache_key=True),
        torch._dynamo.config.patch(allow_empty_graphs=True, optimize_ddp=False,
                                   reorderable_logging_functions=_reorderable_logging(),
                                   **_compat.bytecode_config()),
    ):
        yield


def _reorderable_logging() -> set[Any]:
    """The configured reorderable logging functions plus every logging method of
    ``logging.Logger``, those libraries attach included (``warning_once``)."""
    import torch

    methods = {getattr(logging.Logger, name) for name in
               ("debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log")}
    methods |= {v for k, v in vars(logging.Logger).items() if k.endswith("_once") and callable(v)}
    return set(torch._dynamo.config.reorderable_logging_functions) | methods


class Session:
    """fn under Dynamo with a CompilePackage, plus what the package does not record."""

    def __init__(self, fn: Callable[..., Any], tracer: DynamoTracer, backend: str) -> None:
        import torch
        from torch._dynamo.package import CompilePackage

        self.fn = fn
        self.backend = backend
        self.tracer = tracer
        self.package = CompilePackage(fn)
        _name_frames_torch_cannot(self.package)
        # every code object a compile traced (the frame's and what it inlined):
        # the artifact checks at load that each is unchanged (render.traced_code)
        self.traced_codes: dict[Any, None] = {}
        # frames a compile of which Dynamo bypassed: their guards are never checked
        self.bypassed_frames: set[Any] = set()
        self.ledger = Ledger(self.package, tracer.guard_filter_fn, warn_risky=tracer.require_no_risky_drops,
                             bypassed=self.bypassed_frames)
        # backend id -> the AOTAutograd bundle recorded for it (inductor)
        self.artifacts: dict[str, Any] = {}
        self.truncated: set[str] = set()
        # frames a bypassed compile of which had produced a graph (lost with it)
        self.graph_bypassed: set[Any] = set()
        # frame key -> the reason Dynamo gave for bypassing it (the first one)
        self.bypass_reasons: dict[Any, str] = {}
        self.fatal_bypass: tuple[str, str] | None = None  # see _compat.bypass_kills_the_compile
        self._watch_bypasses()
        # frame key -> the graph break for which Dynamo left the whole frame to eager
        self.eager_frames: dict[Any, str] = {}
        self.errors: list[str] = []
        self.calls = 0
        # Its own recompile region: an earlier compile of fn in this process
        # would otherwise serve its cache entries and the package record nothing.
        # backend id -> the program the backend lowered the graph to, as served
        self.programs: dict[str, str] = {}
        # backend id -> (graph, example inputs, grad mode) as the backend saw them,
        # for a graph it did not lower (eager; a refused lowering, with its refusal)
        self.graphs: dict[str, Any] = {}
        self.refused_lowerings: dict[str, Any] = {}
        self._record_variants()
        self._compiled = _compat.optimize(
            fn, self._seeing_backend(backend), package=self.package, guard_filter_fn=self.ledger.filter,
            dynamic=tracer.dynamic, recompile_limit=tracer.recompile_limit)

    def _seeing_backend(self, backend: str) -> Any:
        """The backend, keeping what the artifact needs of each graph it compiles;
        the package's add_backend_id, called right after, files it under the
        graph's id.

        inductor: each graph is lowered once, to its standalone program, and that
        program runs the capture's calls (dynamo_free_graphs.lower). A graph the
        lowering refuses is compiled by torch.compile's Inductor backend, kept with
        its refusal (an artifact served through Dynamo's state runs it); so is one
        whose program would not run on the arguments Dynamo passes
        (dynamo_free_graphs.runs_as_called), lowered when the artifact is written.
        eager: the graph itself, kept as it was handed over.
        """
        import copy

        import torch
        from torch._dynamo.backends.registry import lookup_backend
        from torch._inductor import config as inductor_config

        from ..rendering import dynamo_free_graphs as graphs
        from ..._compat.lowering import compile_to_python

        real = lookup_backend(backend)
        lowers = backend == "inductor" and compile_to_python() is not None
        # Inductor's own switch (TORCHINDUCTOR_CPP_WRAPPER=1): the served programs too
        cpp_wrapper = lowers and bool(inductor_config.cpp_wrapper)
        seen: list[Any] = []
        package, add = self.package, self.package.add_backend_id

        def compile_graph(gm: Any, example_inputs: Any) -> Any:
            inputs, grad = list(example_inputs), torch.is_grad_enabled()
            refused = None
            if lowers and graphs.runs_as_called(gm):
                try:
                    # outside Dynamo's tracing context: the lowering traces under fake
                    # modes of its own, which Dynamo's would clash with
                    with torch._guards.tracing(None):
                        program = graphs.lower(gm, inputs, grad, cpp_wrapper=cpp_wrapper)
                    run = graphs.runnable(program.raw, f"{fn_module}.<graph>")
                except graphs.NotDynamoFree as e:
                    refused = e
                else:
                    seen[:] = [(program.served, None, None)]
                    return run
            kept = copy.deepcopy(gm) if backend == "inductor" else gm
            seen[:] = [(None, (kept, inputs, grad), refused)]
            return real(gm, example_inputs)

        def add_backend_id(backend_id: str, compiled: Any = None) -> None:
            if seen:
                program, graph, refused = seen.pop()
                if program is not None:
                    self.programs[backend_id] = program
                else:
                    self.graphs[backend_id] = graph
                if refused is not None:
                    self.refused_lowerings[backend_id] = graphs.filed(refused, backend_id)
            add(backend_id, compiled)

        fn_module = getattr(self.fn, "__module__", None) or "precompile"
        package.add_backend_id = add_backend_id
        compile_graph.__name__ = getattr(real, "__name__", backend)
        return compile_graph

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        import torch

        from .guard_switches import refuse_unsafe_switches

        refuse_unsafe_switches()  # per call: a switch set between calls counts too
        self.calls += 1
        t = time.perf_counter()
        # The configuration is per call: code between calls runs in the ambient one.
        # The accumulated limit is raised so the per-frame limit is the effective one.
        accumulated = max(self.tracer.recompile_limit, torch._dynamo.config.accumulated_recompile_limit)
        self.fatal_bypass = None
        from .process_groups import take_rank_reads, watching_rank_reads

        take_rank_reads()  # reads before this call were of no trace of it
        try:
            with (capture_config(), torch._dynamo.config.patch(accumulated_recompile_limit=accumulated),
                  _compat.recompile_limit(self.tracer.recompile_limit), watching_rank_reads(),
                  self._watching_recompile_limit(), self._watching_eager_frames(),
                  self._dropped_identity_kept_at_run_time()):
                return self._compiled(*args, **kwargs)
        except Exception as e:
            if self.fatal_bypass is not None and _compat.killed_by_bypass(e):
                where, reason = self.fatal_bypass
                e = PrecompileError(
                    f"capture: Dynamo could not package the frame {where} of "
                    f"{self.fn.__module__}.{self.fn.__qualname__} ({reason}), and torch "
                    f"{torch.__version__} cannot go on compiling a frame it stopped packaging "
                    "(its compile fails on the missing guard state; torch 2.15 goes on and records "
                    "the frame as bypassed); keep that code out of fn, capture with MakeFxTracer, or "
                    "capture on torch 2.15")
            elif (serializing := _compat.guard_serialization_error(e)) is not None:
                from ..rendering.frames import bypass_explanation

                e = PrecompileError(
                    f"capture: Dynamo could not package a frame of {self.fn.__module__}."
                    f"{self.fn.__qualname__}, and torch {torch.__version__} fails its compile "
                    f"instead of bypassing it (torch 2.15 bypasses it). {bypass_explanation(serializing)}")
            elif type(e).__name__ == "PackageError":
                e = PrecompileError(
                    f"capture: Dynamo's package refused a frame of {self.fn.__module__}."
                    f"{self.fn.__qualname__} ({e}); capture with MakeFxTracer, or keep that "
                    "code out of fn")
            message = f"{type(e).__name__}: {e}"
            if message not in self.errors:
                self.errors.append(message)
            raise e
        finally:
            self._take_artifacts()
            if _log.isEnabledFor(logging.INFO):
                codes = self.package.cache_entry().codes
                _log.info("capture %s.%s: call %d done in %.2f s; %d frame(s), %d variant(s), %d graph(s) so far",
                          self.fn.__module__, self.fn.__qualname__, self.calls, time.perf_counter() - t,
                          len(codes), sum(len(c.guarded_codes) for c in codes),
                          len(self.package.cache_entry().backend_ids))

    def _record_variants(self) -> None:
        """File each variant's guard facts under its serialized guard state as the
        package records it (the ledger's per-variant pins), and note every code
        object a compile traced."""
        package, add_guarded, add_inlined = self.package, self.package.add_guarded_code, \
            self.package.add_inlined_source
        ledger, traced = self.ledger, self.traced_codes

        def add_guarded_code(guards_state: Any, dynamo_code: Any, *args: Any, **kwargs: Any) -> Any:
            ledger.bind(guards_state)
            return add_guarded(guards_state, dynamo_code, *args, **kwargs)

        def add_inlined_source(sources: Any, *args: Any, **kwargs: Any) -> Any:
            traced.update(dict.fromkeys(sources))
            return add_inlined(sources, *args, **kwargs)

        package.add_guarded_code = add_guarded_code
        package.add_inlined_source = add_inlined_source

    @contextlib.contextmanager
    def _dropped_identity_kept_at_run_time(self) -> Iterator[None]:
        """The identity guards the default filter drops from the serialized copy
        are dropped from this process's runtime guards too (Dynamo builds both from
        one filtered list), so a second capture call with another function or
        builtin would run the first one's graph. Put back as one lambda guard on
        each new guard manager's root, as Dynamo checks them (an object's identity,
        a function's code): the capture compiles a variant per value, which the
        artifact tells apart by its pins. Patched only for this call."""
        import torch._dynamo.guards as dynamo_guards

        cls = dynamo_guards.CheckFunctionManager
        real = cls.__init__
        ledger = self.ledger

        def __init__(manager: Any, *args: Any, **kwargs: Any) -> None:
            # (f_code, output_graph, ...): the graph is let go before __init__ returns
            graph = kwargs.get("output_graph", args[1] if len(args) > 1 else None)
            real(manager, *args, **kwargs)
            dropped = ledger.runtime_guards()
            root = getattr(getattr(manager, "guard_manager", None), "root", None)
            if dropped and root is not None and graph is not None:
                check = _identity_check(dropped, graph.global_scope)
                if check is not None:
                    root.add_lambda_guard(check, ["the identity guards the artifact checks by pins"], None)

        cls.__init__ = __init__
        try:
            yield
        finally:
            cls.__init__ = real

    def _watch_bypasses(self) -> None:
        """Tell a bypassed frame that compiled nothing (served as plain Python)
        from one whose graph the bypass threw away (a gap)."""
        from ..spelling import frame_key

        if _compat.bypass_kills_the_compile(self.package):
            package, entry_bypass = self.package, self.package.bypass_current_entry

            def bypass_current_entry() -> None:
                entry = _compat.current_entry(package)
                code = entry.python_code if entry is not None else None
                where = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})" if code else "a frame"
                self.fatal_bypass = (where, _compat.bypass_reason() or "Dynamo logged why")
                entry_bypass()

            package.bypass_current_entry = bypass_current_entry
            return
        if not _compat.watches_bypasses(self.package):
            return
        package, bypass = self.package, self.package.bypass_current_compile

        def bypass_current_compile() -> None:
            entry = _compat.current_entry(package)
            if entry is not None:
                key = frame_key(entry.python_code)
                self.bypassed_frames.add(key)
                if package._current_backend_ids:
                    self.graph_bypassed.add(key)
                reason = _compat.bypass_reason()
                if reason:
                    self.bypass_reasons.setdefault(key, reason)
            bypass()

        package.bypass_current_compile = bypass_current_compile

    @contextlib.contextmanager
    def _watching_recompile_limit(self) -> Iterator[None]:
        """Record each frame that hits the recompile limit from Dynamo's own decision
        (``convert_frame.exceeds_recompile_limit``), not from its warning text, which
        a logging configuration can silence. Patched only for this call."""
        import torch._dynamo.convert_frame as convert_frame

        real = convert_frame.exceeds_recompile_limit

        def exceeds_recompile_limit(*args: Any, **kwargs: Any) -> Any:
            verdict = real(*args, **kwargs)
            if verdict[0]:
                self.note_truncated()
            return verdict

        convert_frame.exceeds_recompile_limit = exceeds_recompile_limit
        try:
            yield
        finally:
            convert_frame.exceeds_recompile_limit = real

    @contextlib.contextmanager
    def _watching_eager_frames(self) -> Iterator[None]:
        """Record each frame Dynamo left to eager after a graph break it could not
        resume from (a break inside a loop: FSDP2's hooks around each block). Dynamo
        runs such a frame's own bytecode on every later call, and so does the
        artifact (frames.PLAIN). Read from the one place the soft failure is
        suppressed (``format_error_msg``), patched only for this call."""
        import torch._dynamo.convert_frame as convert_frame
        from torch._dynamo.exc import Unsupported, UserError

        from ..spelling import frame_key

        real = convert_frame.format_error_msg

        def format_error_msg(exc: Any, code: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(exc, (Unsupported, UserError)):
                self.eager_frames.setdefault(frame_key(code), str(exc).strip().splitlines()[0])
            return real(exc, code, *args, **kwargs)

        convert_frame.format_error_msg = format_error_msg
        try:
            yield
        finally:
            convert_frame.format_error_msg = real

    def note_truncated(self) -> None:
        entry = _compat.current_entry(self.package)
        code = entry.python_code if entry else None
        if code is not None:
            self.truncated.add(f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})")

    def _take_artifacts(self) -> None:
        """Move this capture's AOTAutograd bundles out of the process-global list
        after every call, before anything else can clear it."""
        for backend_id in self.package.cache_entry().backend_ids:
            if backend_id not in self.artifacts:
                artifact = _compat.take_artifact(backend_id)
                if artifact is not None:
                    self.artifacts[backend_id] = artifact


def _identity_check(entries: list[Any], scope: dict[str, Any]) -> Callable[[Any], bool] | None:
    """One check of the frame's locals for the dropped identity guards ``entries``:
    each source still holds the captured object (a function: its code)."""
    import builtins
    import types

    from ..spelling import plain_expression

    reads = []
    for e in entries:
        expr = e.orig_guard.originating_source.name
        if not plain_expression(expr):
            continue
        read = eval(compile(f"lambda G, L: {expr}", "<guard>", "eval"), {"__builtins__": builtins})
        value = e.value
        by_code = e.guard_type == "CLOSURE_MATCH" and isinstance(value, types.FunctionType)
        reads.append((read, value.__code__ if by_code else value, by_code))
    if not reads:
        return None

    def check(f_locals: Any) -> bool:
        try:
            for read, want, by_code in reads:
                got = read(scope, f_locals)
                if (got.__code__ if by_code else got) is not want:
                    return False
        except Exception:  # noqa: BLE001 - a source that cannot be read: a miss, as in Dynamo
            return False
        return True
    return check


def _name_frames_torch_cannot(package: Any) -> None:
    """Teach the package to name frames its resolver cannot: a property's getter,
    setter or deleter and a classmethod's function (``PreTrainedModel.loss_function``
    is a property). The name is a getattr chain from the module, which is how an
    installed artifact finds the live code object again. A frame neither can
    name is refused by name as a PrecompileError, not as a raw PackageError."""
    add = package._add_user_function

    def add_user_function(code: Any) -> None:
        from torch._dynamo.exc import PackageError

        try:
            return add(code)
        except PackageError as e:
            named = _static_name(code)
            if named is None:
                raise PrecompileError(
                    f"capture: Dynamo compiled {code.co_qualname} ({code.co_filename}:"
                    f"{code.co_firstlineno}) as a frame of its own, and the artifact cannot name "
                    f"it to find it again in a serving process ({e}). Call it from a function "
                    "Dynamo can name (a module-level def or a method), or capture with MakeFxTracer"
                ) from None
        from torch._dynamo.package import _FunctionId

        module, function_name, code_source = named
        package._add_function(code, module, function_name=_FunctionId(function_name), code_source=code_source)

    package._add_user_function = add_user_function


def _static_name(code: Any) -> tuple[str, str, str] | None:
    """(module, getattr path, code_source) of a code object held by a property
    or classmethod along its qualified name, or None."""
    import inspect

    module = inspect.getmodule(code)
    if module is None:
        return None
    obj: Any = module
    parts = code.co_qualname.split(".")
    for i, part in enumerate(parts):
        try:
            static = inspect.getattr_static(obj, part)
        except AttributeError:
            return None
        path = ".".join(parts[: i + 1])
        if isinstance(static, property):
            for accessor in ("fget", "fset", "fdel"):
                if getattr(getattr(static, accessor), "__code__", None) is code:
                    return module.__name__, path, f"{accessor}.__code__"
            return None
        if isinstance(static, classmethod) and getattr(static.__func__, "__code__", None) is code:
            return module.__name__, path, "__func__.__code__"
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return None
