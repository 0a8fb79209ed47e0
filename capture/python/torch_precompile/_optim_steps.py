"""The compiled optimizer at torch.compile sites: the update a torch.optim step
makes inside a site's call, captured as a graph of its own and served from it.

Dynamo enters an optimizer's ``step`` as a frame of torch's own and its package
drops that graph (the parameters and state are static addresses), so a site's
artifact runs the step as plain Python. The update itself is one call of the
optimizer's functional form (``torch.optim.adam.adam`` for Adam and AdamW,
``torch.optim.sgd.sgd``) on lists of tensors and a few constants. While a site is
captured, that call is recorded (its tensors cloned before it runs); after the
site's call each new *shape* of call (functional, constants, list lengths, every
tensor's dtype, device and size) is traced with make_fx on the clones and lowered
into a MakeFxTracer pair of its own, listed in the site's index entry.

Serving such a site replaces the functional, during the site's calls only, by a
dispatcher that runs the pair of the call's shape on the live tensors (the graph
updates them in place, as the functional does). A call of another shape runs the
functional eagerly, as torch.optim would: eager's result, nothing compiled, said
once on stderr. Adam's update is traced in its capturable form (the step count and
a float learning rate are 0-d tensor inputs, so one pair serves every step and an
LR schedule), which rounds like torch.compile's compiled optimizer, not like
eager's Python-float bias correction (equal within float rounding).
"""

from __future__ import annotations

import hashlib
import inspect
import os
import threading
from typing import Any, Callable

from ._live_capture import say

# module -> the functional its optimizers' step calls, looked up as a module global
FUNCTIONALS = (("torch.optim.adam", "adam"), ("torch.optim.sgd", "sgd"))
# functionals whose learning rate may be a 0-d tensor in their capturable form
_TENSOR_LR = {"torch.optim.adam.adam"}

_local = threading.local()
_KEYS: dict[tuple[Any, ...], str] = {}
# site -> updates served in this process: "compiled" by a captured pair, "eager" by torch.optim
served_updates: dict[str, dict[str, int]] = {}


# --------------------------------------------------------------------------- shapes


class _Shape:
    """A functional call's shape: what a pair is specialized to. ``args`` are the
    positional tensor lists, ``kwargs`` the keywords (tensors among them are
    inputs, everything else a constant of the graph)."""

    def __init__(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import torch

        self.name = name
        self.lengths = [len(a) for a in args]
        self.tensor_lr = name in _TENSOR_LR and isinstance(kwargs.get("lr"), float)
        self.tensor_kwargs = sorted(k for k, v in kwargs.items() if isinstance(v, torch.Tensor))
        if self.tensor_lr:
            self.tensor_kwargs = sorted({*self.tensor_kwargs, "lr"})
        self.constants = {k: v for k, v in kwargs.items() if k not in self.tensor_kwargs}

    def why_not(self, args: tuple[Any, ...]) -> str | None:
        """Why this call's update is left to eager, or None."""
        c = self.constants
        if any(t is None for a in args for t in a):
            return "a state list holds None (the first step creates that state)"
        for flag in ("differentiable", "has_sparse_grad", "has_complex"):
            if c.get(flag):
                return f"{flag}=True"
        if c.get("fused"):
            return "fused=True (already one kernel)"
        return None

    def flat(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        import torch

        out = [t for a in args for t in a]
        for k in self.tensor_kwargs:
            v = kwargs[k]
            out.append(torch.tensor(v, dtype=torch.float64) if not isinstance(v, torch.Tensor) else v)
        return out

    def key(self, flat: list[Any]) -> str:
        """A digest of the shape; memoized per distinct shape (it is computed on
        every served step)."""
        shape = (self.name, tuple(self.lengths), tuple(sorted(self.constants.items())),
                 tuple(self.tensor_kwargs), tuple((t.dtype, t.device, t.shape) for t in flat))
        key = _KEYS.get(shape)
        if key is None:
            text = repr((self.name, self.lengths, sorted(self.constants.items()), self.tensor_kwargs,
                         [(str(t.dtype), str(t.device), tuple(t.shape)) for t in flat]))
            key = _KEYS[shape] = hashlib.sha256(text.encode()).hexdigest()[:16]
        return key

    def update(self, functional: Callable[..., Any]) -> Callable[..., Any]:
        """``update(*flat)``: the functional on flat's tensors, as make_fx traces it."""
        import torch

        lengths, names, constants = self.lengths, self.tensor_kwargs, dict(self.constants)
        if "capturable" in inspect.signature(functional).parameters:
            constants["capturable"] = True  # the step count stays a tensor in the graph

        def update(*flat: Any) -> None:
            lists, i = [], 0
            for n in lengths:
                lists.append(list(flat[i:i + n]))
                i += n
            old = torch.compiler._is_compiling_flag
            torch.compiler._is_compiling_flag = True  # torch.optim's traced (tensor) path
            try:
                functional(*lists, **constants, **dict(zip(names, flat[i:])))
            finally:
                torch.compiler._is_compiling_flag = old

        update.__qualname__ = update.__name__ = f"{self.name.rsplit('.', 1)[-1]}_update"
        return update


def _originals() -> dict[str, tuple[Any, Callable[..., Any]]]:
    """qualified name -> (module, the functional as torch defines it)."""
    import importlib

    out = {}
    for module_name, attr in FUNCTIONALS:
        module = importlib.import_module(module_name)
        fn = getattr(module, attr)
        out[f"{module_name}.{attr}"] = (module, getattr(fn, "__precompile_original__", fn))
    return out


def _install(make: Callable[[str, Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace each functional (a module global its optimizers' step reads at each
    call) by ``make(name, original)``."""
    for name, (module, original) in _originals().items():
        replacement = make(name, original)
        replacement.__precompile_original__ = original  # type: ignore[attr-defined]
        replacement.__wrapped__ = original  # type: ignore[attr-defined]
        setattr(module, name.rsplit(".", 1)[1], replacement)


class _SaysOnce:
    """What a site's recorder or server says on stderr, each thing once."""

    def __init__(self) -> None:
        self.said: set[str] = set()

    def say_once(self, what: str, message: str) -> None:
        if what not in self.said:
            self.said.add(what)
            say(message)


# --------------------------------------------------------------------------- capture


class Recorder(_SaysOnce):
    """One site's optimizer updates while it is captured: ``recording()`` around a
    site call, ``write(base)`` after it, ``entries`` for the index."""

    def __init__(self, site: str, backend: str) -> None:
        from ._compat.lowering import compile_to_python

        super().__init__()
        self.site, self.backend = site, backend
        self.lowers = compile_to_python() is not None  # MakeFxTracer's Inductor lowering
        # (shape, its key, the cloned tensors, the functional) of each update to trace
        self.pending: list[tuple[_Shape, str, list[Any], Callable[..., Any]]] = []
        self.keys: set[str] = set()
        self.entries: list[dict[str, Any]] = []

    def recording(self) -> Any:
        return _Scope("recorder", self)

    def record(self, name: str, original: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> None:
        if not self.lowers:
            import torch

            self.say_once(
                "lowering", f"torch.compile site {self.site}: its torch.optim updates serve as eager "
                "torch.optim: capturing them needs MakeFxTracer's Inductor lowering, which torch "
                f"{torch.__version__} does not have (it has from 2.14)")
            return
        shape = _Shape(name, args, kwargs)
        why = shape.why_not(args)
        if why is None:
            flat = shape.flat(args, kwargs)
            key = shape.key(flat)
            if key not in self.keys:
                self.keys.add(key)
                self.pending.append((shape, key, [t.detach().clone() for t in flat], original))
        else:
            self.say_once(why, f"torch.compile site {self.site}: a {name} update is not captured "
                          f"({why}); that update serves as eager torch.optim")

    def write(self, base: str) -> bool:
        """Trace and write each pending update into ``base.optimN.py``/``.cache``;
        whether an entry was added."""
        import torch

        import torch_precompile as tp

        added = False
        pending, self.pending = self.pending, []
        for shape, key, flat, original in pending:
            n = len(self.entries)
            code, cache = f"{base}.optim{n}.py", f"{base}.optim{n}.cache"
            try:
                with torch.no_grad(), tp.capture(shape.update(original), artifact_path=code, cache_path=cache,
                                                 tracer=tp.MakeFxTracer(), backend=self.backend) as cap:
                    cap(*flat)
            except Exception as e:  # noqa: BLE001 - the update serves as eager; said
                say(f"torch.compile site {self.site}: the {shape.name} update could not be "
                    f"captured ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                    "it serves as eager torch.optim")
                continue
            self.entries.append({"artifact": os.path.basename(code), "cache": os.path.basename(cache),
                                 "functional": shape.name, "key": key})
            added = True
        return added


def arm_capture() -> None:
    """Record the functionals' calls made inside a recording site call (capture
    mode, once torch is imported)."""
    import torch

    def make(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            recorder = _current("recorder")
            if recorder is not None:
                recorder.record(name, original, args, kwargs)
            return original(*args, **kwargs)

        # Dynamo, tracing the step's frame, runs the call as itself: on real tensors
        return torch._dynamo.disable(recorded)
    _install(make)


# --------------------------------------------------------------------------- serving


class Served(_SaysOnce):
    """The loaded updates of one site: ``serving()`` around each of its calls."""

    def __init__(self, site: str, updates: dict[str, Callable[..., Any]]) -> None:
        super().__init__()
        self.site, self.updates = site, updates
        self.counts = served_updates.setdefault(site, {"compiled": 0, "eager": 0})

    def serving(self) -> Any:
        return _Scope("served", self)

    def run(self, name: str, original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        import torch

        shape = _Shape(name, args, kwargs)
        why = shape.why_not(args)
        if why is None:
            flat = shape.flat(args, kwargs)
            update = self.updates.get(shape.key(flat))
            if update is not None:
                with torch.no_grad():
                    update(*flat)
                self.counts["compiled"] += 1
                return None
            why = "no captured update has this call's constants, list lengths and tensor sizes"
        self.say_once(why, f"torch.compile site {self.site}: a {name} update runs as eager torch.optim ({why})")
        self.counts["eager"] += 1
        return original(*args, **kwargs)


_SERVING_ARMED = threading.Lock()
_serving_armed = False


def load(site: str, root: str, entries: list[dict[str, Any]],
         load_pair: Callable[[str, tuple[str, str]], Any]) -> Served | None:
    """The site's captured updates, loaded, and the dispatcher installed; None when
    the site has none."""
    global _serving_armed
    if not entries:
        return None
    updates = {e["key"]: load_pair(site, (os.path.join(root, e["artifact"]), os.path.join(root, e["cache"])))
               for e in entries}
    with _SERVING_ARMED:
        if not _serving_armed:
            _install(_dispatcher)
            _serving_armed = True
    return Served(site, updates)


def _dispatcher(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def dispatch(*args: Any, **kwargs: Any) -> Any:
        served = _current("served")
        if served is None:
            return original(*args, **kwargs)
        return served.run(name, original, args, kwargs)

    return dispatch


# --------------------------------------------------------------------------- scope


def _current(kind: str) -> Any:
    stack = getattr(_local, kind, None)
    return stack[-1] if stack else None


class _Scope:
    """Makes ``owner`` the current recorder or server of this thread for a site call."""

    def __init__(self, kind: str, owner: Any) -> None:
        self.kind, self.owner = kind, owner

    def __enter__(self) -> None:
        stack = getattr(_local, self.kind, None)
        if stack is None:
            stack = []
            setattr(_local, self.kind, stack)
        stack.append(self.owner)

    def __exit__(self, *exc: Any) -> None:
        getattr(_local, self.kind).pop()
