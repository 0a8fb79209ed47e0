"""Models, step functions and child-side helpers for test_upstream_cases.py.

The DynamoTracer cases need their captured functions to be module-level
functions of an importable module, so they live here; the fresh interpreters
the tests start put this directory on sys.path. The helpers at the bottom run
the cases of one child script and print one ``NAME | result`` line per case,
which the parent test asserts on. ``makefx`` and ``dynamo`` perturb the modules
they captured once the capture is written (``perturb``), so later serves run on
other weights than the capture's.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib
import itertools
import os
import sys
import traceback
import warnings

import torch
import torch.utils._pytree as _pytree
from torch import nn

# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


class LinBuf(nn.Module):
    """A Linear plus a registered buffer (upstream's ``M`` with ``b2``)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("b2", torch.randn(3))

    def forward(self, x):
        return torch.relu(self.lin(x)) + self.b2


class PlainTensorAttr(nn.Module):
    """A tensor held as a plain attribute: neither a parameter nor a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 4))
        self.scale = torch.randn(4)

    def forward(self, x):
        return (x @ self.weight) * self.scale


class TwoLinearsNamed(nn.Module):
    """The same parameter count and shapes as Sequential(Linear, Linear), other names."""

    def __init__(self, d_in: int = 4, d_mid: int = 4, d_out: int = 4, chain: bool = False) -> None:
        super().__init__()
        self.l0 = nn.Linear(d_in, d_mid)
        self.l1 = nn.Linear(d_mid, d_out)
        self.chain = chain

    def forward(self, x):
        if self.chain:
            return self.l1(self.l0(x))
        return self.l0(x) + self.l1(x)


class WithBuf(nn.Module):
    """A Linear plus a buffer whose name is chosen at construction."""

    def __init__(self, bufname: str = "buf") -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer(bufname, torch.randn(3))
        self._bn = bufname

    def forward(self, x):
        return self.lin(x) + getattr(self, self._bn)


class SumBuf(nn.Module):
    """A Linear plus a buffer read through ``.sum()`` (its shape and dtype can vary)."""

    def __init__(self, size: int = 3, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("b", torch.randn(size).to(dtype))

    def forward(self, x):
        return self.lin(x) + self.b.sum()


class GradBuffer(nn.Module):
    """A registered buffer that requires grad and receives one."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.randn(4, requires_grad=True))

    def forward(self, x):
        return (x * self.b).sum()


class Tied(nn.Module):
    """A weight tied across two layers: one tensor under two names."""

    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(4, 4, bias=False)
        self.l2 = nn.Linear(4, 4, bias=False)
        self.l2.weight = self.l1.weight

    def forward(self, x):
        return self.l2(self.l1(x))


class TiedRelu(nn.Module):
    """Upstream's numerics ``Tied``: a ReLU between the two tied layers."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4, bias=False)
        self.b = nn.Linear(4, 4, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class FrozenTrainable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.frozen = nn.Linear(4, 4)
        self.trainable = nn.Linear(4, 4)
        for p in self.frozen.parameters():
            p.requires_grad_(False)

    def forward(self, x):
        return self.trainable(self.frozen(x))


class ShapeOnly(nn.Module):
    """Reads ``x`` only for its shape."""

    def forward(self, x, y):
        return y * x.shape[0]


class AddBmm(nn.Module):
    """addbmm is an AutocastCPU op and an Inductor fallback without a decomposition."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(3, 3))

    def forward(self, x):
        return torch.addbmm(self.bias, x, x.transpose(1, 2))


class HasNestedBuffer(nn.Module):
    def __init__(self, nt) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("nt", nt)

    def forward(self, t):
        return self.lin(t)


class HasNestedParam(nn.Module):
    def __init__(self, nt) -> None:
        super().__init__()
        self.p = nn.Parameter(nt)

    def forward(self, t):
        return t


# A custom pytree node whose context (a set) is not JSON-dumpable and which has
# no to_dumpable_context serializer.
class UnserializableCtxInput:
    def __init__(self, a, b) -> None:
        self.a = a
        self.b = b


_pytree.register_pytree_node(
    UnserializableCtxInput,
    lambda n: ([n.a, n.b], {"ctx"}),
    lambda children, _ctx: UnserializableCtxInput(children[0], children[1]),
    serialized_type_name="upstream_models.UnserializableCtxInput",
)

# An unregistered namedtuple (importable, so a serving process could rebuild it).
Pair = collections.namedtuple("Pair", ["x", "y"])
# The same shape registered with a serialized type name.
RegisteredPair = collections.namedtuple("RegisteredPair", ["p", "q"])
_pytree._register_namedtuple(RegisteredPair, serialized_type_name="upstream_models.RegisteredPair")

GLOBAL_TENSOR = torch.randn(3)


def adds_global_tensor(x):
    return x + GLOBAL_TENSOR


# ---------------------------------------------------------------------------
# DynamoTracer step functions (module-level, importable)
# ---------------------------------------------------------------------------

MULTIGRAPH_SCALE = 2


def step(model, x):
    return model(x)


def step_varargs(model, x, *rest, scale=2.0):
    """A keyword-only default, *args and a module global guarded by value."""
    return model(x) * scale * MULTIGRAPH_SCALE + len(rest)


def step_varargs_break(model, x, *rest, scale=2.0):
    """As step_varargs, with a graph break and a continuation closing over a cell."""
    y = model(x) * scale * MULTIGRAPH_SCALE
    torch._dynamo.graph_break()

    def rows():
        return y.shape[0]

    return y + rows() + len(rest)


def make_closure_step(scale):
    def closure_step(x):
        return x * scale

    return closure_step


# ---------------------------------------------------------------------------
# Child-side helpers
# ---------------------------------------------------------------------------

OUT = os.environ.get("UPSTREAM_OUT", "/tmp")
_names = itertools.count()


def one_line(text: str, limit: int = 600) -> str:
    return " ".join(str(text).split())[:limit]


def outcome(thunk) -> str:
    """``OK`` when thunk returns, else ``ExceptionType: message`` on one line."""
    try:
        thunk()
    except BaseException as e:  # noqa: BLE001 - the type is the observation
        return one_line(f"{type(e).__name__}: {e}")
    return "OK"


class Art:
    """The two files of one capture, and ways to load them."""

    def __init__(self, artifact: str, cache: str, result=None) -> None:
        self.artifact = artifact
        self.cache = cache
        self.result = result

    @property
    def code(self) -> str:
        with open(self.artifact) as f:
            return f.read()

    def load(self, **kw):
        import torch_precompile as tp

        return tp.load(self.artifact, self.cache, **kw)

    def load_inlined(self):
        """Load with a foreign cache: load ignores it and serves from python_code alone."""
        import torch_precompile as tp

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return tp.load(self.artifact, foreign_cache())

    def loaders(self, backend: str):
        """(label, runnable) for the load paths a backend has (upstream's cached/inlined)."""
        yield "default", self.load()
        if backend == "inductor":
            yield "inlined", self.load_inlined()


def paths(name: str | None = None) -> tuple[str, str]:
    name = name or f"a{next(_names)}"
    return os.path.join(OUT, f"{name}.py"), os.path.join(OUT, f"{name}.cache")


_perturbations = itertools.count()


def _modules(objs) -> list[nn.Module]:
    """The nn.Modules among ``objs`` and inside their containers (pytree leaves)."""
    return [leaf for leaf in _pytree.tree_leaves(list(objs)) if isinstance(leaf, nn.Module)]


def perturb(*objs):
    """Other weights than the capture's: move every floating parameter and floating
    buffer of every nn.Module among ``objs`` (or inside their lists, tuples and dicts)
    in place, under no_grad, by seeded noise as large as the values themselves.

    A tensor shared by several modules or names (tied weights) moves once, so ties
    hold; strides, dtype, device and requires_grad stay; integer buffers
    (BatchNorm's num_batches_tracked) are left alone. A tensor whose values are all
    >= 0 and not all 0 (a running variance) is scaled by a positive factor, so it
    stays a valid one; any other is moved by noise of its mean absolute value (0.1
    for an all-zero one). The global RNG is not touched. Returns ``objs[0]`` when one
    object is given, else ``objs``.
    """
    g = torch.Generator().manual_seed(1000 + next(_perturbations))
    seen: set[int] = set()
    with torch.no_grad():
        for module in _modules(objs):
            for t in itertools.chain(module.parameters(), module.buffers()):
                if id(t) in seen or not t.is_floating_point():
                    continue
                seen.add(id(t))
                _perturb_tensor(t, g)
    return objs[0] if len(objs) == 1 else objs


def _perturb_tensor(t: torch.Tensor, g: torch.Generator) -> None:
    to_local = getattr(t, "to_local", None)   # a DTensor: its local tensor (an alias under no_grad)
    local = to_local() if callable(to_local) else t
    if local.numel() == 0:
        return
    noise = torch.randn(local.shape, generator=g, dtype=torch.float64).to(dtype=local.dtype, device=local.device)
    if bool((local >= 0).all()) and bool((local != 0).any()):
        local.mul_(torch.exp(noise * 0.5))
    else:
        scale = float(local.abs().mean()) or 0.1
        local.add_(noise * scale)


def _perturb_after(args) -> None:
    """After a capture: every later serve of the case runs on other weights (the
    comparison with eager uses the same perturbed modules)."""
    if _modules(args):
        perturb(*args)


def makefx(fn, *args, backend: str = "inductor", decompositions=None, name: str | None = None) -> Art:
    """One MakeFxTracer capture of ``fn(*args)``: upstream's ``precompile(fn, *args)``.

    Once the capture is written, every module among ``args`` is perturbed (see
    ``perturb``): a case that serves those modules serves other weights than the
    capture's, so a weight baked into the artifact cannot pass for a lifted one.
    """
    import torch_precompile as tp

    a, c = paths(name)
    with tp.capture(fn, artifact_path=a, cache_path=c, tracer=tp.MakeFxTracer(decompositions),
                    backend=backend) as cap:
        out = cap(*args)
    _perturb_after(args)
    return Art(a, c, out)


def dynamo(fn, *calls, backend: str = "eager", name: str | None = None, **tracer_kw) -> Art:
    """One DynamoTracer capture over ``calls`` (each an args tuple or (args, kwargs));
    the modules among the calls' arguments are perturbed afterwards, as in ``makefx``."""
    import torch_precompile as tp

    a, c = paths(name)
    with tp.capture(fn, artifact_path=a, cache_path=c, tracer=tp.DynamoTracer(**tracer_kw),
                    backend=backend) as cap:
        for call in calls:
            if isinstance(call, tuple) and len(call) == 2 and isinstance(call[1], dict):
                out = cap(*call[0], **call[1])
            else:
                out = cap(*call)
    _perturb_after(calls)
    return Art(a, c, out)


# Where Inductor measures to choose (torch 2.15): the runtime autotuner of its Triton
# kernels (a kernel launched with more than one config and no recorded decision), the
# coordinate descent tuner, max-autotune's choice selection (every
# autotune_select_algorithm call goes through AlgorithmSelectorCache.__call__) and the
# benchmarker they all end in.
BENCHMARK_SITES = (
    ("torch._inductor.runtime.triton_heuristics", "CachingAutotuner",
     ("autotune_to_one_config", "benchmark_all_configs", "bench", "coordinate_descent_tuning")),
    ("torch._inductor.runtime.coordinate_descent_tuner", "CoordescTuner", ("autotune",)),
    ("torch._inductor.select_algorithm", "AlgorithmSelectorCache",
     ("__call__", "benchmark", "benchmark_choices", "benchmark_example_value")),
)


@contextlib.contextmanager
def count_benchmarks():
    """Count every call into Inductor's autotuning and benchmarking while open (the
    counter it yields maps ``Class.method`` to calls; empty means nothing was
    measured). Each site of BENCHMARK_SITES and every ``benchmark*`` method the
    Benchmarker classes define is wrapped; the core sites must exist (a renamed one
    fails loudly instead of counting nothing)."""
    counts: collections.Counter = collections.Counter()
    undo = []

    def wrap(cls, name: str) -> None:
        raw = vars(cls)[name]
        kind = type(raw) if isinstance(raw, (staticmethod, classmethod)) else None
        fn = raw.__func__ if kind else raw
        key = f"{cls.__name__}.{name}"

        @functools.wraps(fn)
        def counted(*a, **k):
            counts[key] += 1
            return fn(*a, **k)

        setattr(cls, name, kind(counted) if kind else counted)
        undo.append((cls, name, raw))

    for module_name, class_name, methods in BENCHMARK_SITES:
        cls = getattr(importlib.import_module(module_name), class_name)
        for name in methods:
            if name in vars(cls):
                wrap(cls, name)
    benchmarking = importlib.import_module("torch._inductor.runtime.benchmarking")
    for cls in [c for c in vars(benchmarking).values()
                if isinstance(c, type) and issubclass(c, benchmarking.Benchmarker)]:
        for name, value in list(vars(cls).items()):
            if name.startswith("benchmark") and callable(value):
                wrap(cls, name)
    wrapped = {f"{cls.__name__}.{name}" for cls, name, _ in undo}
    core = {"CachingAutotuner.benchmark_all_configs", "CachingAutotuner.coordinate_descent_tuning",
            "AlgorithmSelectorCache.__call__", "Benchmarker.benchmark"}
    if not core <= wrapped:
        raise RuntimeError(f"count_benchmarks: torch has no {sorted(core - wrapped)}")
    try:
        yield counts
    finally:
        for cls, name, raw in reversed(undo):
            setattr(cls, name, raw)


def autotune_cache_states() -> collections.Counter:
    """How this process's Inductor Triton kernels found their config: ``hit`` (a
    recorded decision was read), ``miss`` (none: it benchmarks at first launch),
    ``only 1 config``, ... (CachingAutotuner.autotune_cache_info)."""
    import gc

    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    return collections.Counter(
        (o.autotune_cache_info or {}).get("autotune_cache_state", "none")
        for o in gc.get_objects() if issubclass(type(o), CachingAutotuner))


def cache_meta(cache: str) -> tuple[dict, collections.Counter]:
    """(the header's meta, entry count by kind) of a cache file."""
    import json

    from torch_precompile import _native

    with open(cache, "rb") as f:
        header, entries = _native.cache_decode(f.read())
    return json.loads(header).get("meta", {}), collections.Counter(kind for kind, _name, _data in entries)


def foreign_cache() -> str:
    path = os.path.join(OUT, "foreign.cache")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(b"not-a-precompile-cache")
    return path


def flags(**kw) -> str:
    """``key=True key2=False ...``: the parent asserts every flag is True."""
    return " ".join(f"{k}={bool(v)}" for k, v in kw.items())


def metadata(code: str, name: str):
    """The literal value of a top-level ``NAME = ...`` assignment of an artifact."""
    import ast

    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(name)


def close(a, b, **kw) -> bool:
    try:
        torch.testing.assert_close(a, b, **kw)
    except AssertionError:
        return False
    return True


def run_cases(cases: dict) -> None:
    """Run each case; print ``NAME | result`` (a crash prints ``CRASH ...``)."""
    for name, fn in cases.items():
        try:
            result = fn()
        except BaseException as e:  # noqa: BLE001
            tb = traceback.format_exc().strip().splitlines()[-3:]
            result = "CRASH " + one_line(f"{type(e).__name__}: {e} @ {' / '.join(tb)}")
        print(f"{name} | {result}", flush=True)


def collect(namespace: dict) -> dict:
    """The functions of a child script named ``case_*``, in definition order."""
    return {k[len("case_"):]: v for k, v in namespace.items() if k.startswith("case_") and callable(v)}


def main(namespace: dict) -> None:
    run_cases(collect(namespace))
    sys.stdout.flush()
