"""torch.compiler.precompile on stock torch: ahead-of-time capture, compile-free
serving, and a lockdown that holds across threads and child processes.

Importing this package imports nothing heavy: the public names load on first use
(module ``__getattr__``), because the shim boots the package in every Python
process and a script that never captures must not pay for it. torch itself is
imported only when a capture or load runs, or by :func:`install`.
"""

__version__ = "0.1.0"

__all__ = [
    "capture",
    "load",
    "no_compilation",
    "serving",
    "install",
    "Capture",
    "PrecompiledRunnable",
    "PrecompileSummary",
    "DynamoTracer",
    "MakeFxTracer",
    "PrecompileError",
]

# public name -> the private module that defines it
_HOMES = {
    "capture": "_api",
    "load": "_api",
    "Capture": "_bases",
    "PrecompiledRunnable": "_bases",
    "no_compilation": "_scopes",
    "serving": "_scopes",
    "install": "_install",
    "PrecompileSummary": "_summary",
    "DynamoTracer": "_tracers",
    "MakeFxTracer": "_tracers",
    "PrecompileError": "_errors",
}


def _arm_at_startup():
    # TORCH_PRECOMPILE_NO_COMPILATION=1 locks the process down from its start:
    # the gates are armed on import, with or without the shim or install().
    import os

    if os.environ.get("TORCH_PRECOMPILE_NO_COMPILATION") == "1":
        from ._scopes import arm

        arm()


_arm_at_startup()


def __getattr__(name):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'torch_precompile' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"torch_precompile.{home}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *__all__])
