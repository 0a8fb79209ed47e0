"""The public entry points: capture(), load(), Capture, PrecompiledRunnable.

No torch import at module level: the tracer-specific work lives in modules that
are imported when a capture or load actually runs.
"""

from __future__ import annotations

import os
from typing import Callable, ParamSpec, TypeVar

from ._bases import Capture, PrecompiledRunnable
from ._errors import PrecompileError
from ._tracers import DynamoTracer, MakeFxTracer

__all__ = ["BACKENDS", "Capture", "PrecompiledRunnable", "capture", "load"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

BACKENDS = ("inductor", "eager")


def capture(
    fn: Callable[_P, _R],
    /,
    *,
    artifact_path: str | os.PathLike[str],
    cache_path: str | os.PathLike[str],
    tracer: DynamoTracer | MakeFxTracer = DynamoTracer(),
    backend: str = "inductor",
) -> Capture[_P, _R]:
    """Capture fn across the calls YOUR loop makes, writing the artifact on exit.

    Warning: this is a prototype API. Its signature, error types and artifact
    format may change between releases without a deprecation cycle.

    Capture is caller-driven: this returns a capture object rather than running
    anything. Enter it as a context manager, call it exactly as you would fn inside
    the block (a MakeFxTracer capture takes exactly one call) – each call runs for
    real, folds what it exercised into the capture, and returns that run's result –
    and the (python_code, cache) artifact is written to artifact_path / cache_path
    when the block exits::

        with torch.compiler.precompile.capture(
            fn, artifact_path="m.py", cache_path="m.cache"
        ) as cap:
            y = cap(model, x)
        f = torch.compiler.precompile.load("m.py", "m.cache")

    To write the artifact before the block ends, call cap.save() inside it. A block
    that raises writes nothing it has not already saved, and a block that made no
    call raises PrecompileError on exit. A capture is single-use.

    tracer picks the capture front-end: DynamoTracer (the default) records every
    frame Dynamo compiles while the calls run and the artifact dispatches among the
    captured variants by their guards; MakeFxTracer is one non-strict ATen trace of
    exactly one call. fn is the whole computation, e.g. a module-level
    ``def step(model, x): return model(x)`` (only a MakeFxTracer capture also takes
    a lambda): the nn.Module arguments have their params/buffers lifted to graph
    inputs (no weights are baked in) and the rest are the runtime inputs.

    backend selects how the captured graph is realized: "inductor" (default)
    lowers through AOTAutograd + Inductor into one self-contained module, and the
    cache holds what primes the inductor kernel caches on load; "eager" keeps the
    captured ATen graph and runs it as-is.
    """
    import functools

    if isinstance(fn, functools.partial):
        raise PrecompileError(
            "capture(fn=functools.partial(...)): a partial cannot be rebuilt by the "
            "artifact; write a module-level function that takes every input as an "
            "argument and capture that."
        )
    if not callable(fn):
        raise PrecompileError(f"capture(fn={fn!r}): fn must be callable")
    if backend not in BACKENDS:
        raise PrecompileError(
            f"capture(backend={backend!r}): unknown backend; use one of {BACKENDS}"
        )
    for name, path in (("artifact_path", artifact_path), ("cache_path", cache_path)):
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise PrecompileError(f"capture({name}={path!r}): a file path is required")
    if os.path.abspath(artifact_path) == os.path.abspath(cache_path):
        raise PrecompileError(
            "capture(): artifact_path and cache_path name the same file; give the "
            "python_code and the cache two different paths"
        )
    from ._progress import register

    register()
    if isinstance(tracer, MakeFxTracer):
        from ._makefx.capture import MakeFxCapture

        return MakeFxCapture(fn, artifact_path, cache_path, tracer=tracer, backend=backend)
    if isinstance(tracer, DynamoTracer):
        from ._dynamo.capture import DynamoCapture

        return DynamoCapture(fn, artifact_path, cache_path, tracer=tracer, backend=backend)
    raise PrecompileError(
        f"capture(tracer={tracer!r}): tracer must be a DynamoTracer or a MakeFxTracer"
    )


def load(
    artifact_path: str | os.PathLike[str],
    cache_path: str | os.PathLike[str],
    *,
    allow_serve_time_compiles: bool = False,
) -> PrecompiledRunnable:
    """Reconstruct a runnable from the two files a precompile capture wrote.

    Warning: this is a prototype API. Its signature, error types and artifact
    format may change between releases without a deprecation cycle.

    Name the two files capture() wrote – the python_code artifact and its cache. A
    readable, current-format cache loads only against the python_code it was
    emitted with (it carries a sha256 of exactly those bytes); an unreadable or
    other-format cache is ignored with a warning.

    The driver runs from python_code – the single source of truth for the whole
    calling convention. load reads the source's BACKEND, checks the cache's backend
    tag against it, primes the kernel caches when the cache carries kernels so a
    reload loads precompiled kernels instead of JIT-compiling, and then exec's
    python_code. Both files are trusted, EXECUTABLE input: load only artifacts you
    produced or otherwise trust. With a trust policy set (PRECOMPILE_TRUST: public
    key files), the pair's bytes must first verify against its signature
    (`<artifact>.sig`, else the directory's `model.sig`) or PrecompileError is
    raised before anything of it is parsed or run.

    Call the result with the SAME argument structure fn took. allow_serve_time_compiles=True
    opts an installed artifact out of the compile refusal; passing it for a
    standalone artifact raises PrecompileError.

    Raises PrecompileError if either file cannot be read, if python_code is not a
    torch.compiler.precompile artifact, or if the cache's backend, tracer or
    code_hash does not match python_code. A cache whose format/version does not
    match is NOT fatal: load degrades to JIT'ing from python_code.
    """
    from ._loader import load_pair
    from ._progress import register

    register()
    return load_pair(artifact_path, cache_path, allow_serve_time_compiles=allow_serve_time_compiles)
