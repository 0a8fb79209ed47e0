"""Zero-code-change capture and serving, driven by environment variables.

``PRECOMPILE_CAPTURE=pkg.mod:fn`` (with ``PRECOMPILE_ARTIFACT``, ``PRECOMPILE_CACHE``
and optionally ``PRECOMPILE_TRACER=dynamo|make_fx``, ``PRECOMPILE_BACKEND=inductor|eager``)
wraps ``fn`` in one capture when ``pkg.mod`` is imported; every call goes through
it, the pair is checkpointed with ``save()`` after each call that captured
something, and written at interpreter exit. Capture mode never breaks the job: if
capturing fails, the call runs as it would have and capture stops.

In a torchrun worker, ``{rank}`` in any of these paths is the worker's rank
(``M.{rank}.py``): each rank writes and serves its own pair. A capture path
without it in a job of more than one rank is refused (the ranks would race).

``PRECOMPILE_SERVE=pkg.mod:fn=M.py,M.cache[;...]`` replaces ``fn`` with the loaded
artifact when ``pkg.mod`` is imported. Serve mode fails loudly: an unloadable pair
makes every call raise PrecompileError saying why.

The wrap happens right after the module body runs and before any importer sees the
module, so ``from pkg.mod import fn`` binds the wrapper too. ``fn`` may be a dotted
attribute path (``Class.method`` wraps the function stored on the class). Bad
configuration is one line on stderr naming the variable.

A target that is an ``nn.Module`` subclass (``pkg.mod:Class``) captures every call
of every instance as ``fn(model, *args, **kwargs)``: the class's ``__call__`` goes
through an entry function of the package (``_sites``) that runs the module's own
call, so a ``forward`` wrapped in decorators (``functools.wraps`` closures, as
transformers' are) is traced as the model runs it. ``Class.forward`` when that
``forward`` is a closure is the same target; another closure method is refused
naming the class as the remedy. A call of an instance inside another's captured
call (a model holding a module of its own class) is part of that capture.

A function defined in the script run as ``__main__`` (``__main__:step``) is wrapped
when the script's body binds it: a trace hook watches the script's own top-level
lines only until then.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from typing import Any, Callable, Iterator

from . import _settings
from ._live_capture import BACKENDS, LiveCapture, say


def parse_target(var: str, spec: str) -> tuple[str, list[str]]:
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr or any(not p.isidentifier() for p in attr.split(".")) \
            or any(not p.isidentifier() for p in module.split(".")):
        raise ValueError(f"{var}={spec!r}: expected 'pkg.module:function' (or 'pkg.module:Class.method')")
    return module, attr.split(".")


def _resolve(module: Any, path: list[str]) -> tuple[Any, str, Any]:
    owner = module
    for part in path[:-1]:
        owner = getattr(owner, part)
    name = path[-1]
    return owner, name, getattr(owner, name)


def _when_bound(module_name: str, name: str, callback: Callable[[Any], None]) -> None:
    """``callback(module)`` once ``module_name`` is imported; for ``__main__`` (the
    script being run, which is never imported), once its top-level code has bound
    ``name``: a trace function watches the lines of the script's own top level,
    and only until then."""
    if module_name != "__main__":
        from .gates.on_import import when_imported

        when_imported(module_name, callback)
        return
    main = sys.modules.get("__main__")
    if main is None:
        return
    scope = main.__dict__
    previous = sys.gettrace()

    def done(frame: Any) -> None:
        sys.settrace(previous)
        frame.f_trace = None
        callback(main)

    def lines(frame: Any, event: str, arg: Any) -> Any:
        if event == "line" and name in scope:
            done(frame)
            return None
        if event == "return":  # the script ended without binding it
            sys.settrace(previous)
        return lines

    def calls(frame: Any, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_globals is scope and frame.f_code.co_name == "<module>":
            return lines
        return None

    sys.settrace(calls)


def module_class_target(owner: Any, name: str, fn: Any, var: str, spec: str) -> Any:
    """The nn.Module subclass a target names (``Class``, or ``Class.forward`` when that
    forward is a closure), or None for a plain function target. Raises ValueError
    for a closure method that is not an nn.Module's forward."""
    torch_nn = sys.modules.get("torch.nn")
    module_type = getattr(torch_nn, "Module", None)
    if isinstance(fn, type):
        if module_type is None or not issubclass(fn, module_type):
            raise ValueError(f"{var}={spec!r}: {fn.__qualname__} is a class but not an "
                             "nn.Module subclass (name a function, or a module class)")
        return fn
    closure = getattr(getattr(fn, "__code__", None), "co_freevars", ())
    if isinstance(owner, type) and closure:
        if module_type is not None and issubclass(owner, module_type) and name == "forward":
            return owner
        raise ValueError(f"{var}={spec!r}: {owner.__qualname__}.{name} is a closure over "
                         f"{list(closure)}, which an artifact cannot rebuild; name the class "
                         f"({spec.rsplit('.', 1)[0]}) when it is an nn.Module, or a plain function")
    return None


def class_entry(spec: str) -> Callable[..., Any]:
    """The entry function a module-class target is captured and served through: the
    module's own call, in an entry module named after the target."""
    import hashlib

    from ._sites import entry_module

    target = spec.split("=", 1)[0].removesuffix(".forward")
    return entry_module("c" + hashlib.sha256(target.encode()).hexdigest()[:12]).call_impl


class NotAWorker(ValueError):
    """``{rank}`` in a path, in a process torchrun did not start."""


def per_rank(var: str, path: str, *, shared_ok: bool) -> str:
    """``{rank}`` in a path is this torchrun worker's rank (``RANK``). Without it,
    in a job of more than one rank every rank would use the one path: refused
    for paths a rank writes (``shared_ok=False``); a pair every rank reads is
    fine (the artifact checks the rank where its graph depends on it)."""
    rank = os.environ.get("RANK", "")
    if "{rank}" in path:
        if not rank.isdigit():
            raise NotAWorker(f"{var}={path!r} names {{rank}}, but RANK is not set: this is not "
                             "a torchrun worker")
        return path.replace("{rank}", rank)
    world = os.environ.get("WORLD_SIZE", "")
    if not shared_ok and world.isdigit() and int(world) > 1:
        raise ValueError(f"{var}={path!r}: in a job of WORLD_SIZE={world} every rank would write "
                         "this one path; put {rank} in it (m.{rank}.py); nothing will be captured")
    return path


def arm() -> None:
    capture_spec = _settings.get(_settings.CAPTURE)
    serve_spec = _settings.get(_settings.SERVE)
    if capture_spec:
        _arm_capture(capture_spec)
    if serve_spec:
        _arm_serve(serve_spec)


# --------------------------------------------------------------------------- capture


class _EnvCapture:
    """One capture kept open for the process's lifetime, written at exit."""

    def __init__(self, spec: str, module_name: str, path: list[str]) -> None:
        self.spec = spec
        self.module_name = module_name
        self.path = path
        self.artifact = _settings.get(_settings.ARTIFACT)
        self.cache = _settings.get(_settings.CACHE)
        self.tracer_name = _settings.get(_settings.TRACER) or "dynamo"
        self.backend = _settings.get(_settings.BACKEND) or "inductor"
        self.live: LiveCapture | None = None  # made once the paths are final
        self.cap_running = False  # a capture call is running (a nested call is part of it)
        self.imported = False
        self.reported = False  # a problem already said on stderr: say nothing more
        self.unresolved: str | None = None  # {rank} in a path outside a torchrun worker

    def check_config(self) -> str | None:
        if not self.artifact or not self.cache:
            return (f"PRECOMPILE_CAPTURE={self.spec!r} needs PRECOMPILE_ARTIFACT and "
                    "PRECOMPILE_CACHE (the two output paths); nothing will be captured")
        try:
            self.artifact = per_rank("PRECOMPILE_ARTIFACT", self.artifact, shared_ok=False)
            self.cache = per_rank("PRECOMPILE_CACHE", self.cache, shared_ok=False)
        except NotAWorker as e:
            # said only if this process imports the module: torchrun's agent has no rank
            self.unresolved = str(e)
        except ValueError as e:
            return str(e)
        if self.tracer_name not in ("dynamo", "make_fx"):
            return f"PRECOMPILE_TRACER={self.tracer_name!r}: use 'dynamo' or 'make_fx'; nothing will be captured"
        if self.backend not in BACKENDS:
            return (f"PRECOMPILE_BACKEND={self.backend!r}: use {' or '.join(map(repr, BACKENDS))}; "
                    "nothing will be captured")
        return None

    def wrap(self, module: Any) -> None:
        self.imported = True
        if self.unresolved is not None:
            say(f"{self.unresolved}; nothing will be captured")
            self.reported = True
            return
        try:
            owner, name, fn = _resolve(module, self.path)
        except AttributeError:
            say(f"PRECOMPILE_CAPTURE={self.spec!r}: {self.module_name} has no attribute "
                f"{'.'.join(self.path)}; nothing will be captured")
            self.reported = True
            return
        if not callable(fn):
            say(f"PRECOMPILE_CAPTURE={self.spec!r}: {'.'.join(self.path)} is not callable; "
                "nothing will be captured")
            self.reported = True
            return
        import functools

        env_capture = self
        try:
            cls = module_class_target(owner, name, fn, "PRECOMPILE_CAPTURE", self.spec)
        except ValueError as e:
            say(f"{e}; nothing will be captured")
            self.reported = True
            return
        if cls is not None:
            entry = class_entry(self.spec)

            def captured_call(model: Any, *args: Any, **kwargs: Any) -> Any:
                return env_capture.call(entry, (model, *args), kwargs)

            cls.__call__ = captured_call
            return

        @functools.wraps(fn)
        def captured(*args: Any, **kwargs: Any) -> Any:
            return env_capture.call(fn, args, kwargs)

        captured.__precompile_env_capture__ = True  # type: ignore[attr-defined]
        setattr(owner, name, captured)

    def _opener(self, fn: Callable[..., Any]) -> Callable[[], Any]:
        def open_capture() -> Any:
            import torch_precompile as tp

            tracer = tp.MakeFxTracer() if self.tracer_name == "make_fx" else tp.DynamoTracer()
            return tp.capture(fn, artifact_path=self.artifact, cache_path=self.cache,
                              tracer=tracer, backend=self.backend)
        return open_capture

    @contextlib.contextmanager
    def _running(self) -> Iterator[None]:
        self.cap_running = True
        try:
            yield
        finally:
            self.cap_running = False

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        import torch

        if self.cap_running or torch.compiler.is_compiling():
            return fn(*args, **kwargs)  # inside this capture's own call: part of it
        if self.live is None:
            self.live = LiveCapture(f"PRECOMPILE_CAPTURE={self.spec!r}", str(self.artifact), self._opener(fn))
        if self.tracer_name == "make_fx" and self.live.captured >= 1:  # MakeFx takes one call
            self.live.calls += 1
            return fn(*args, **kwargs)
        return self.live.call(fn, args, kwargs, scope=self._running)

    def finish(self) -> None:
        if self.reported:
            return
        if not self.imported:
            say(f"PRECOMPILE_CAPTURE={self.spec!r}: module {self.module_name} was never "
                "imported, so nothing was captured (a script run as __main__ is not "
                f"'{self.module_name}': name it __main__:{'.'.join(self.path)})"
                if self.module_name != "__main__" else
                f"PRECOMPILE_CAPTURE={self.spec!r}: the script never bound "
                f"{self.path[0]!r} at its top level, so nothing was captured")
            return
        live = self.live
        if live is None or live.cap is None:
            if live is None or live.failed is None:
                say(f"PRECOMPILE_CAPTURE={self.spec!r}: {'.'.join(self.path)} was never "
                    "called, so nothing was captured")
            return
        summary = live.finish()
        if summary is None:
            return
        say(f"captured {'.'.join(self.path)} from {live.captured} of {live.calls} call(s) "
            f"into {self.artifact} + {self.cache}: {summary}")


def _arm_capture(spec: str) -> None:
    try:
        module_name, path = parse_target("PRECOMPILE_CAPTURE", spec)
    except ValueError as e:
        say(str(e))
        return
    env_capture = _EnvCapture(spec, module_name, path)
    problem = env_capture.check_config()
    if problem:
        say(problem)
        return
    _when_bound(module_name, path[0], env_capture.wrap)
    atexit.register(env_capture.finish)


# --------------------------------------------------------------------------- serve


def parse_serve(spec: str) -> list[tuple[str, list[str], str, str]]:
    out = []
    for item in filter(None, (s.strip() for s in spec.split(";"))):
        target, sep, files = item.partition("=")
        parts = [p.strip() for p in files.split(",")]
        if not sep or len(parts) != 2 or not all(parts):
            raise ValueError(f"PRECOMPILE_SERVE item {item!r}: expected 'pkg.module:function=M.py,M.cache'")
        module_name, path = parse_target("PRECOMPILE_SERVE", target)
        out.append((module_name, path, parts[0], parts[1]))
    if not out:
        raise ValueError(f"PRECOMPILE_SERVE={spec!r}: no 'pkg.module:function=M.py,M.cache' item")
    return out


def _arm_serve(spec: str) -> None:
    try:
        items = parse_serve(spec)
    except ValueError as e:
        say(str(e))
        # Fail loudly at the point of use: nothing is served, and that must show.
        return
    for module_name, path, code, cache in items:
        _when_bound(module_name, path[0],
                    lambda m, p=path, c=code, k=cache, n=module_name: _serve(m, n, p, c, k))


def _serve(module: Any, module_name: str, path: list[str], code: str, cache: str) -> None:
    import functools

    try:
        owner, name, fn = _resolve(module, path)
    except AttributeError:
        say(f"PRECOMPILE_SERVE: {module_name} has no attribute {'.'.join(path)}; not served")
        return
    spec = f"{module_name}:{'.'.join(path)}"
    try:
        cls = module_class_target(owner, name, fn, "PRECOMPILE_SERVE", spec)
    except ValueError as e:
        say(f"{e}; not served")
        return
    if cls is not None:
        cls.__call__ = _class_server(spec, code, cache)
        return
    try:
        runnable = _load(spec, code, cache)
    except _Unloadable as e:
        message = str(e)
        say(message)

        @functools.wraps(fn)
        def unloadable(*args: Any, **kwargs: Any) -> Any:
            from ._errors import PrecompileError

            raise PrecompileError(message)

        setattr(owner, name, unloadable)
        return
    setattr(owner, name, runnable)


class _Unloadable(Exception):
    pass


def _load(spec: str, code: str, cache: str) -> Any:
    try:
        import torch_precompile as tp

        code = per_rank("PRECOMPILE_SERVE", code, shared_ok=True)
        cache = per_rank("PRECOMPILE_SERVE", cache, shared_ok=True)
        return tp.load(code, cache)
    except Exception as e:
        raise _Unloadable(f"PRECOMPILE_SERVE: {spec} could not be loaded from {code} + {cache}: "
                          f"{str(e).splitlines()[0]}") from e


def _class_server(spec: str, code: str, cache: str) -> Callable[..., Any]:
    """A module class's ``__call__`` served from the pair, loaded at the first call:
    the guards built at load read what constructing a model sets up (transformers
    registers each model class's recordable outputs in its ``__init__``)."""
    import threading

    class_entry(spec)  # the entry module the artifact imports
    lock = threading.Lock()
    loaded: list[Any] = []
    failed: list[str] = []

    def served_call(model: Any, *args: Any, **kwargs: Any) -> Any:
        if not loaded:
            with lock:
                if not loaded and not failed:
                    try:
                        loaded.append(_load(spec, code, cache))
                    except _Unloadable as e:
                        failed.append(str(e))
                        say(failed[0])
        if failed:
            from ._errors import PrecompileError

            raise PrecompileError(failed[0])
        return loaded[0](model, *args, **kwargs)

    return served_call
