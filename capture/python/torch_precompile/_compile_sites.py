"""torch.compile call sites, captured into a directory and served from it.

``PRECOMPILE_CAPTURE_DIR=DIR`` (``precompile run --capture DIR``): in every booted
process, ``torch.compile(obj, ...)`` and ``nn.Module.compile(...)`` return an
object that behaves as torch.compile's would, and every call of it goes through one
capture per call site. The pairs are checkpointed after each call that captured
something and indexed in ``DIR/index.json`` (site -> pair, options, summary).
Capture never breaks the job: a site that cannot be captured compiles as usual,
with one line on stderr naming it and why.

``PRECOMPILE_SERVE_DIR=DIR`` (``precompile run --serve DIR``): each such
``torch.compile(...)`` returns the loaded runnable of its site. A site the index
lacks raises PrecompileError naming it under the lockdown; outside it, it compiles
as usual after one warning naming it.

A site is named by what it compiles and where (``Net@app.py:12``: the compiled
object's qualified name, the caller's place and line; the place is a script's path
relative to the working directory, or an imported file's module, so that another
install root finds it): stable across runs and hosts of the same code. In a torchrun worker every rank
has its own pair of each site.

What is captured: a module through an entry function of its own site
(``_sites``); a function as itself, when it is a plain function of a module or of
the script run as ``__main__`` (a closure or a lambda compiles as usual, named on
stderr); a bound method (``model.forward = torch.compile(model.forward)``, the
Hugging Face static-cache recipe) through an entry that calls the method's
function, found on its receiver's class, on the receiver. ``backend`` "inductor" and "eager", ``dynamic``,
``fullgraph`` (a capture with a graph break is not written), ``mode`` and
``options`` (Inductor's configuration while the site's calls are captured) are
honoured; another backend is refused by name and compiles as usual.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import hashlib
import itertools
import json
import os
import re
import sys
import threading
import types
import warnings
from typing import Any, Callable

from . import _optim_steps, _settings
from ._live_capture import BACKENDS, LiveCapture, rank, say

INDEX = "index.json"


def arm() -> None:
    capture_dir = _settings.get(_settings.CAPTURE_DIR)
    serve_dir = _settings.get(_settings.SERVE_DIR)
    if capture_dir and serve_dir:
        say("PRECOMPILE_CAPTURE_DIR and PRECOMPILE_SERVE_DIR are both set; give one "
            "(sites are neither captured nor served)")
        return
    if not (capture_dir or serve_dir):
        return
    from .gates.on_import import when_imported

    mode = _Capturing(capture_dir) if capture_dir else _Serving(serve_dir)  # type: ignore[arg-type]
    when_imported("torch", mode.patch, strict=True)


# --------------------------------------------------------------------------- sites


def _caller_site(obj: Any, depth: int) -> str:
    """``qualname@where:line`` of the torch.compile call ``depth`` frames up, where
    names the call's place the same on any host: the module of an imported file
    (``accelerate.accelerator``, wherever the environment is installed), else the
    script's path relative to the working directory (absolute outside it)."""
    frame = sys._getframe(depth + 1)
    path = _portable_place(frame)
    import torch

    # a module by its class (an instance has no qualname of its own), else the callable's
    name = type(obj).__qualname__ if isinstance(obj, torch.nn.Module) else \
        getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return f"{name}@{path}:{frame.f_lineno}"


def _portable_place(frame: Any) -> str:
    path = frame.f_code.co_filename
    name = frame.f_globals.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) and name != "__main__" else None
    file = getattr(module, "__file__", None)
    if isinstance(file, str) and os.path.realpath(file) == os.path.realpath(path):
        return name  # an imported module: found by its name wherever it is installed
    try:
        rel = os.path.relpath(path)
        return rel if not rel.startswith("..") else path
    except ValueError:
        return path


def _versions(site: str) -> dict[str, str]:
    """The versions a site was captured with: torch, Python, and the distribution
    that holds the site's module (``accelerate``), where it is an installed one."""
    import platform
    from importlib import metadata

    import torch

    out = {"torch": torch.__version__, "python": platform.python_version()}
    where = site.split("@", 1)[-1].rsplit(":", 1)[0]
    if where.endswith(".py") or os.sep in where:
        return out  # a script, not an installed module
    try:
        for dist in _distributions().get(where.split(".")[0], [])[:1]:
            out[dist] = metadata.version(dist)
    except Exception:  # noqa: BLE001 - a version that cannot be read is left out
        pass
    return out


@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    from importlib import metadata

    return metadata.packages_distributions()


def _rank_independent(artifact: str) -> bool:
    """Whether a pair serves any rank: no trace of it read this process's rank (every
    such read is pinned to the rank, PINNED_BINDINGS "rank=N"; a process group's
    world size stays checked wherever it is served)."""
    from ._artifact import read_metadata

    try:
        with open(artifact, encoding="utf-8") as f:
            pins = read_metadata(f.read()).get("PINNED_BINDINGS")
    except Exception:  # noqa: BLE001 - unreadable: served to its own rank only
        return False
    return isinstance(pins, list) and not any(re.search(r"\brank=\d", str(p)) for p in pins)


def _site_id(site: str) -> str:
    return hashlib.sha256(site.encode()).hexdigest()[:12]


def _site_stem(site: str) -> str:
    """``<slug>-<site id>``: what every file of a site's pairs is named from."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", site.split("@", 1)[0]).strip("_")[:40] or "site"
    return f"{slug}-{_site_id(site)}"


def _pair_names(site: str) -> tuple[str, str]:
    """Where this rank's capture writes a site's pair; the index names it by content."""
    base = f"{_site_stem(site)}.rank{rank()}"
    return base + ".py", base + ".cache"


def _bound_method(obj: Any) -> str | None:
    """The name of a bound method's function on its receiver's class, or None when
    obj is not a method bound to an instance whose class holds that function."""
    import inspect

    if not isinstance(obj, types.MethodType) or isinstance(obj.__self__, type):
        return None
    name = getattr(obj.__func__, "__name__", None)
    try:
        found = inspect.getattr_static(type(obj.__self__), name) if isinstance(name, str) else None
    except AttributeError:
        return None
    return name if found is obj.__func__ else None


def _site_entry(site: str, method: str | None = None, pair_rank: str | None = None) -> Any:
    """The entry module of a site that compiles a module or a bound method: one
    name on every rank, so that the ranks' pairs of one program are equal. A pair
    captured before names its rank's (``s_<id>r<rank>``): ``pair_rank`` gives it
    the method's name too."""
    from ._sites import entry_module

    entry = entry_module(_site_id(site))
    if method is not None:
        entry.METHOD = method
        if pair_rank is not None:
            entry_module(_site_id(site) + "r" + pair_rank).METHOD = method
    return entry


def _not_capturable(obj: Any, backend: Any, mode: Any) -> str | None:
    """Why a site cannot be captured, or None."""
    import torch

    if not isinstance(backend, str) or backend not in BACKENDS:
        return (f"backend={backend!r} is not one an artifact holds (use "
                f"{' or '.join(map(repr, BACKENDS))})")
    if mode not in (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        return f"mode={mode!r} is not one of torch.compile's modes"
    if isinstance(obj, torch.nn.Module) or _bound_method(obj) is not None:
        return None
    if isinstance(obj, types.MethodType):
        return (f"{obj.__qualname__} is bound to a class, or its function is not the "
                f"attribute of its receiver's class it is named by")
    from ._dynamo.capture import check_fn
    from ._errors import PrecompileError

    try:
        check_fn(obj)
    except PrecompileError as e:
        return str(e).split(": ", 1)[-1]
    return None


@contextlib.contextmanager
def _inductor_config(mode: Any, options: Any, dynamic: Any):
    """Inductor's configuration for ``mode`` and ``options`` while a site's calls
    are captured, as torch.compile sets it for its own compiles."""
    if mode in (None, "default") and not options:
        yield
        return
    import torch._inductor.config as inductor_config
    from torch._inductor import list_mode_options

    patch = dict(list_mode_options(mode, dynamic) if mode not in (None, "default") else {})
    patch.update(options or {})
    with inductor_config.patch(patch):
        yield


# --------------------------------------------------------------------------- index


def _program_key(code: bytes, cache: bytes) -> str:
    """What names a pair by content: its python_code, and its cache's header with
    each entry by kind and name. Two processes that compiled one program write
    caches whose bytes differ (build paths and build ids inside the kernels'
    binaries, compile times in Inductor's metadata) while every name, a hash of
    the kernel's source, is the same; the python_code holds the program itself
    (guards, graphs, bytecode)."""
    from . import _native

    header = json.loads(_native.cache_read_header(cache))
    entries = sorted((e.get("kind"), e.get("name")) for e in header.pop("entries", []))
    header.pop("code_hash", None)  # the code is hashed whole below
    digest = hashlib.sha256(code)
    digest.update(json.dumps([header, entries], sort_keys=True).encode())
    return digest.hexdigest()[:16]


class _Index:
    """``DIR/index.json``: site -> {"ranks": {rank: pair and summary}, options, what}.
    Read-modify-write under a lock file: the ranks of a job share the directory.

    Pairs are content-addressed: a rank's capture writes ``<stem>.rank<N>.py/.cache``,
    and recording it moves the pair to ``<stem>-<program key>.py/.cache``, or drops
    it when another rank (or an earlier checkpoint) stored that program already; the
    ranks' entries name the pair they serve, and a content pair no entry names any
    more is removed. So N data-parallel ranks of one program store one pair."""

    def __init__(self, root: str) -> None:
        self.root = root

    def read(self) -> dict[str, Any]:
        try:
            with open(os.path.join(self.root, INDEX), encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {"format": "torch_precompile/sites/1", "sites": {}}
        except (OSError, ValueError) as e:
            raise ValueError(f"{os.path.join(self.root, INDEX)} is not a readable index ({e})") from e
        return data

    def record(self, site: str, entry: dict[str, Any], rank_entry: dict[str, Any]) -> None:
        """``rank_entry``'s pairs (its own and each of its ``optimizer_steps``) are
        stored by content first; their names in it are then the stored ones."""
        os.makedirs(self.root, exist_ok=True)
        with open(os.path.join(self.root, ".index.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self.read()
            slot = data["sites"].setdefault(site, {})
            slot.update(entry)
            for pair in (rank_entry, *rank_entry.get("optimizer_steps", [])):
                pair["artifact"], pair["cache"] = self._store(site, pair["artifact"], pair["cache"])
            slot.setdefault("ranks", {})[rank()] = rank_entry
            self._collect(site, slot)
            tmp = os.path.join(self.root, f".{INDEX}.{os.getpid()}")
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, os.path.join(self.root, INDEX))

    def _store(self, site: str, artifact: str, cache: str) -> tuple[str, str]:
        """The content names of the pair a capture wrote as ``artifact``/``cache``
        (names in the directory); a name that is already a content name is kept."""
        from . import _artifact, _native

        code_path, cache_path = os.path.join(self.root, artifact), os.path.join(self.root, cache)
        if _CONTENT.fullmatch(artifact) or not os.path.exists(code_path):
            return artifact, cache
        with open(code_path, "rb") as f:
            code = f.read()
        with open(cache_path, "rb") as f:
            data = f.read()
        stem = f"{_site_stem(site)}-{_program_key(code, data)}"
        names = (stem + ".py", stem + ".cache")
        stored = [os.path.join(self.root, n) for n in names]
        if not all(os.path.exists(p) for p in stored):
            _artifact.write_pair(stored[0], stored[1], code, data)  # signed anew for its names
        for p in (code_path, cache_path, _native.pair_signature_path(code_path)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
        return names

    def _collect(self, site: str, slot: dict[str, Any]) -> None:
        """Remove the site's content pairs no rank's entry names any more (an
        earlier checkpoint's program)."""
        named = {pair.get(k) for e in slot.get("ranks", {}).values()
                 for pair in (e, *e.get("optimizer_steps", [])) for k in ("artifact", "cache")}
        stem = _site_stem(site) + "-"
        for name in os.listdir(self.root):
            if name.startswith(stem) and (m := _CONTENT.fullmatch(name.removesuffix(".sig"))) \
                    and m.group(0) not in named:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.root, name))


# a content-addressed pair's file: <stem>-<16 hex>.py / .cache
_CONTENT = re.compile(r".+-[0-9a-f]{12}-[0-9a-f]{16}\.(?:py|cache)")


# --------------------------------------------------------------------------- patching


class _Mode:
    """Both modes patch the same two entry points the moment torch is imported."""

    def patch(self, torch: Any) -> None:
        real_compile = torch.compile
        real_module_compile = torch.nn.Module.compile
        mode = self

        def compile_(model: Any = None, **kwargs: Any) -> Any:
            if model is None:  # @torch.compile(...) with options: a decorator
                return lambda fn: mode.site(fn, kwargs, real_compile, depth=1)
            return mode.site(model, kwargs, real_compile, depth=1)

        def module_compile(module: Any, *args: Any, **kwargs: Any) -> None:
            if args:  # torch.compile's positional order after model
                kwargs = dict(zip(("fullgraph", "dynamic", "backend", "mode", "options", "disable"), args),
                              **kwargs)
            module._compiled_call_impl = mode.site(module, kwargs, real_compile, depth=1, own_call=True)

        compile_.__doc__ = real_compile.__doc__
        compile_.__wrapped__ = real_compile  # type: ignore[attr-defined]
        compile_.__precompile_sites__ = True  # type: ignore[attr-defined]
        module_compile.__doc__ = real_module_compile.__doc__
        torch.compile = compile_
        torch.nn.Module.compile = module_compile

    def site(self, obj: Any, kwargs: dict[str, Any], real: Callable[..., Any], *, depth: int,
             own_call: bool = False) -> Any:
        """What torch.compile returns for ``obj`` here (each mode defines it)."""
        raise NotImplementedError


def _as_torch_compiles(obj: Any, kwargs: dict[str, Any], real: Callable[..., Any], own_call: bool) -> Any:
    """What torch.compile would have returned (``own_call``: what Module.compile stores)."""
    if own_call:
        return real(obj._call_impl, **kwargs)
    return real(obj, **kwargs)


def _split(kwargs: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """torch.compile's options, or why one of them is not one it takes."""
    known = {"fullgraph": False, "dynamic": None, "backend": "inductor", "mode": None,
             "options": None, "disable": False}
    unknown = set(kwargs) - set(known)
    if unknown:
        return known, f"torch.compile takes no option {sorted(unknown)}"
    known.update(kwargs)
    return known, None


@functools.cache
def _site_module_class() -> type:
    """The class of what ``torch.compile(module)`` returns here (made at first use:
    torch is not imported when this module is)."""
    import torch

    class PrecompiledSite(torch.nn.Module):
        """The module's attributes, state and parameters as the module's own
        (``_orig_mod``, as torch.compile's wrapper keeps it); calls go through the site."""

        def __init__(self, module: Any, call: Callable[..., Any]) -> None:
            super().__init__()
            self._orig_mod = module
            self._pc_call = call

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return self._pc_call(self._orig_mod, *args, **kwargs)

        def __getattr__(self, name: str) -> Any:
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self._modules["_orig_mod"], name)

        def _get_name(self) -> str:  # what repr() prints: PrecompiledSite[Net]
            return f"PrecompiledSite[{type(self._orig_mod).__qualname__}]"

    return PrecompiledSite


class _Capturing(_Mode):
    def __init__(self, root: str) -> None:
        self.root = root
        self.index = _Index(root)
        self.sites: dict[str, _SiteCapture] = {}
        self.optim_armed = False
        atexit.register(self.finish)

    def site(self, obj: Any, kwargs: dict[str, Any], real: Callable[..., Any], *, depth: int,
             own_call: bool = False) -> Any:
        import torch

        options, bad = _split(kwargs)
        site = _caller_site(obj, depth + 1)
        if options["disable"]:
            return _as_torch_compiles(obj, kwargs, real, own_call)
        why = bad or _not_capturable(obj, options["backend"], options["mode"])
        if why is None and site in self.sites:
            why = "a second torch.compile at the same line (a loop?) shares its site's name"
        if why is not None:
            say(f"torch.compile site {site}: not captured ({why}); it compiles as usual")
            return _as_torch_compiles(obj, kwargs, real, own_call)
        if not self.optim_armed:
            _optim_steps.arm_capture()
            self.optim_armed = True
        capture = self.sites[site] = _SiteCapture(self, site, obj, options, own_call)
        if isinstance(obj, torch.nn.Module):
            if own_call:
                return lambda *args, **kw: capture.call((obj, *args), kw)
            return _site_module_class()(obj, lambda m, *args, **kw: capture.call((m, *args), kw))
        receiver = (obj.__self__,) if capture.what == "method" else ()

        def compiled(*args: Any, **kw: Any) -> Any:
            return capture.call((*receiver, *args), kw)

        return _wrapped(compiled, obj)

    def finish(self) -> None:
        for capture in self.sites.values():
            capture.finish()


def _wrapped(compiled: Callable[..., Any], fn: Any) -> Callable[..., Any]:
    try:
        compiled = functools.wraps(fn)(compiled)
    except (AttributeError, TypeError):
        pass
    compiled.__wrapped__ = fn  # type: ignore[attr-defined]
    # an artifact of fn finds fn through this wrapper bound under fn's name (@torch.compile)
    compiled.__precompile_site__ = True  # type: ignore[attr-defined]
    return compiled


class _SiteCapture:
    """One site's capture, open for the process's lifetime, written at exit."""

    def __init__(self, mode: _Capturing, site: str, obj: Any, options: dict[str, Any], own_call: bool) -> None:
        import torch

        self.mode, self.site, self.options = mode, site, options
        code, cache = _pair_names(site)
        self.paths = (os.path.join(mode.root, code), os.path.join(mode.root, cache))
        if isinstance(obj, torch.nn.Module):
            entry = _site_entry(site)
            self.fn = entry.call_impl if own_call else entry.call
            self.what = "module.compile()" if own_call else "module"
        elif (method := _bound_method(obj)) is not None:
            self.fn, self.what = _site_entry(site, method).call_method, "method"
        else:
            self.fn, self.what = obj, "function"
        self.live = LiveCapture(f"torch.compile site {site}", self.paths[0], self._open, suspended=True)
        # the updates of torch.optim steps inside the site's calls (the compiled optimizer)
        self.optim = _optim_steps.Recorder(site, options["backend"]) if options["backend"] == "inductor" else None
        self.indexed: int | None = None  # calls the index counted when it was last written
        self.names = itertools.count()  # the seeded graph names' sequence
        self.stored: tuple[str, str] | None = None  # the content names the index gives the pair
        self.lock = threading.Lock()

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        import torch

        from ._kernels.block import active

        # Inside another site's capture call (a compiled module calling a compiled
        # function) or a trace, the site is part of that capture: it runs as itself.
        if torch.compiler.is_compiling() or active() is not None or self.live.failed is not None:
            return self.fn(*args, **kwargs)
        with self.lock:
            with self.optim.recording() if self.optim is not None else contextlib.nullcontext():
                result = self.live.call(self.fn, args, kwargs, scope=self._scope,
                                        check=self._graph_break, on_save=self._index)
            if self.optim is not None and self.optim.pending and self.live.failed is None:
                with self._inductor():
                    added = self.optim.write(self.paths[0][:-len(".py")])
                if added and self.live.saved:
                    self._index()
            return result

    @contextlib.contextmanager
    def _scope(self) -> Any:
        """What a capture call runs inside: Inductor's configuration for the site's
        mode and options, and graph names seeded by the site (the ranks' pairs of
        one program come out equal, and are stored once)."""
        from ._compat.dynamo import seeded_compiled_fn_names

        with self._inductor(), seeded_compiled_fn_names(self.site, self.names):
            yield

    def _inductor(self) -> Any:
        """Inductor's configuration for the site's mode and options."""
        o = self.options
        return _inductor_config(o["mode"], o["options"], o["dynamic"])

    def _graph_break(self, cap: Any) -> str | None:
        if self.options["fullgraph"] and cap.summary().frames > 1:
            return f"fullgraph=True and the capture has a graph break ({cap.summary()}); nothing of it is kept"
        return None

    def _open(self) -> Any:
        import torch_precompile as tp

        return tp.capture(self.fn, artifact_path=self.paths[0], cache_path=self.paths[1],
                          tracer=tp.DynamoTracer(dynamic=self.options["dynamic"]), backend=self.options["backend"])

    def _index(self) -> None:
        assert self.live.cap is not None
        names = tuple(os.path.basename(p) for p in self.paths)
        if not os.path.exists(self.paths[0]) and self.stored is not None:
            names = self.stored  # nothing written since the pair was stored by content
        pair = {"artifact": names[0], "cache": names[1], "summary": str(self.live.cap.summary()),
                "calls_captured": self.live.captured,
                "rank_independent": _rank_independent(os.path.join(self.mode.root, names[0])),
                **({"optimizer_steps": self.optim.entries} if self.optim and self.optim.entries else {})}
        self.mode.index.record(
            self.site, {"what": self.what, "options": self.options, "captured_with": _versions(self.site)}, pair)
        self.stored = (pair["artifact"], pair["cache"])
        self.indexed = self.live.captured

    def finish(self) -> None:
        live = self.live
        if live.cap is None:
            if live.failed is None and live.calls == 0:
                say(f"torch.compile site {self.site}: never called, so nothing was captured")
            return
        # the pair is the last checkpoint's when nothing new came since; the index
        # counts every call since
        summary = live.finish(on_close=lambda: self._index() if self.indexed != live.captured else None)
        if summary is None:
            return
        say(f"captured torch.compile site {self.site} from {live.captured} of {live.calls} "
            f"call(s) into {self.paths[0]}: {summary}")
        updates = self.optim.entries if self.optim is not None else []
        if updates:
            say(f"torch.compile site {self.site}: {len(updates)} torch.optim update(s) captured as "
                f"pairs of their own ({', '.join(sorted({u['functional'] for u in updates}))}), served "
                "compiled in the site's calls")
        elif summary.backend_graphs == 0:
            say(f"torch.compile site {self.site}: no graph was captured, so it serves as eager "
                "Python (Dynamo left all of it to eager)")


class _Serving(_Mode):
    def __init__(self, root: str) -> None:
        self.root = root
        self.index = _Index(root)
        self.warned: set[str] = set()

    def site(self, obj: Any, kwargs: dict[str, Any], real: Callable[..., Any], *, depth: int,
             own_call: bool = False) -> Any:
        import torch

        from . import _lockdown
        from ._errors import PrecompileError

        site = _caller_site(obj, depth + 1)
        options, _bad = _split(kwargs)
        if options["disable"]:
            return _as_torch_compiles(obj, kwargs, real, own_call)
        try:
            entry = self.index.read()["sites"].get(site)
        except ValueError as e:
            raise PrecompileError(f"torch.compile site {site}: {e}") from None
        ranks = (entry or {}).get("ranks", {})
        pair, pair_rank = ranks.get(rank()), rank()
        if pair is None:  # a rank the capture did not run: any rank-independent pair serves it
            shared = sorted((r for r, e in ranks.items() if e.get("rank_independent")), key=int)
            if shared:
                pair_rank = shared[0]
                pair = ranks[pair_rank]
        if pair is None:
            why = (f"torch.compile site {site} has no captured pair in {self.root}"
                   + ("" if entry is None else
                      f" for rank {rank()} (the pairs of ranks {sorted(ranks, key=int)} read their "
                      "rank, so each serves its own rank only)"))
            if _lockdown.current() is not None:
                raise PrecompileError(
                    f"{why}, and this process is locked down; capture it (precompile run "
                    f"--capture {self.root} -- ...) or serve without --lockdown")
            if site not in self.warned:
                self.warned.add(site)
                warnings.warn(f"{why}; it compiles as usual", RuntimeWarning, stacklevel=depth + 2)
            return _as_torch_compiles(obj, kwargs, real, own_call)
        paths = (os.path.join(self.root, pair["artifact"]), os.path.join(self.root, pair["cache"]))
        steps = pair.get("optimizer_steps") or []
        if isinstance(obj, torch.nn.Module):
            runnable = _load(site, paths)
            optim = _optim_steps.load(site, self.root, steps, _load)
            if own_call:
                return _named(site, runnable, obj, optim=optim)
            return _site_module_class()(obj, _named(site, runnable, optim=optim))
        if (method := _bound_method(obj)) is not None:
            _site_entry(site, method, pair_rank)  # the method's name, before the artifact imports it
            runnable = _load(site, paths)
            return _wrapped(_named(site, runnable, obj.__self__,
                                   optim=_optim_steps.load(site, self.root, steps, _load)), obj)
        # Loaded at the first call: under @torch.compile the function's name is bound
        # (to what this returns) only after the decorator ran, and the artifact finds
        # fn by that name.
        loaded: list[Any] = []
        lock = threading.Lock()

        def served(*args: Any, **kw: Any) -> Any:
            if not loaded:
                with lock:
                    if not loaded:
                        runnable = _load(site, paths)
                        loaded.append(_named(site, runnable, optim=_optim_steps.load(site, self.root, steps, _load)))
            return loaded[0](*args, **kw)

        return _wrapped(served, obj)


def _load(site: str, paths: tuple[str, str]) -> Any:
    import torch_precompile as tp
    from ._errors import PrecompileError

    try:
        return tp.load(*paths)
    except PrecompileError as e:
        raise PrecompileError(f"torch.compile site {site}: {e}") from None


def _named(site: str, runnable: Any, *first: Any, optim: Any = None) -> Callable[..., Any]:
    """runnable called with ``first`` before the call's arguments (a module, a
    method's receiver), its refusals naming the site, not the entry it serves;
    ``optim``: the site's captured optimizer updates, served during its calls."""
    from ._errors import PrecompileError

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            if optim is None:
                return runnable(*first, *args, **kwargs)
            with optim.serving():
                return runnable(*first, *args, **kwargs)
        except PrecompileError as e:
            raise _site_refusal(site, e) from None

    return call


def _site_refusal(site: str, e: Exception) -> Exception:
    from ._errors import PrecompileError

    return PrecompileError(f"torch.compile site {site}: {e}")
