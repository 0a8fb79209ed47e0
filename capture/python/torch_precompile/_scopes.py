"""The lockdown's scopes: process-wide ``no_compilation()`` and thread-local
``serving()``, and arming the gates they need. The state they enter is
``_lockdown``'s, which the gates read. No torch import.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator

from . import _settings, gates
from ._lockdown import current, shim_loaded, state
from .gates.on_import import when_imported

_armed = False
_arm_lock = threading.Lock()


def arm() -> None:
    """Arm every gate a lockdown needs, without install(): the compiler-subprocess
    gates when the shim is absent, and the torch-side gates now or the moment torch
    finishes importing. Runs on the first no_compilation(), serving(), or import of
    this package with TORCH_PRECOMPILE_NO_COMPILATION=1; idempotent."""
    global _armed
    with _arm_lock:
        if _armed:
            return
        _armed = True
    if not shim_loaded():
        gates.install_process_gates()
    when_imported("torch", lambda _torch: gates.install_all(), strict=True)


# The exported variable is saved by the first owner and restored by the last.
_env_lock = threading.Lock()
_saved_env: list[str | None] = []


@contextlib.contextmanager
def no_compilation() -> Iterator[None]:
    """Forbid graph/kernel compilation and autotuning on every thread of this process.

    Use it around a serving worker's lifetime to prove that a loaded artifact and
    its kernel/autotune cache cover every execution: anything that would trace a
    graph, compile a kernel, benchmark or autotune raises PrecompileError instead
    of silently compiling::

        runnable = torch.compiler.precompile.load(artifact_path, cache_path)
        with torch.compiler.precompile.no_compilation():
            serve(runnable)  # raises rather than compiling on a cache miss

    Only kernels already in the in-process kernel cache may run.

    Unlike precompile.serving(), which is thread-local, the policy is process-wide.
    Nested and overlapping uses are depth-counted, so it stays active until the last
    owner exits; callers must drain work they dispatched (e.g. to compile workers)
    before that exit. While active, TORCH_PRECOMPILE_NO_COMPILATION=1 is exported so
    child processes inherit it, and setting exactly "1" before startup enables the
    policy for the whole process.
    """
    arm()
    s = state()
    with _env_lock:
        if s.enter() == 1:
            _saved_env.append(os.environ.get(_settings.NO_COMPILATION.env))
            os.environ[_settings.NO_COMPILATION.env] = "1"
    try:
        yield
    finally:
        with _env_lock:
            if s.exit() == 0 and _saved_env:
                previous = _saved_env.pop()
                if previous is None:
                    os.environ.pop(_settings.NO_COMPILATION.env, None)
                else:
                    os.environ[_settings.NO_COMPILATION.env] = previous
        _after_lockdown()


@contextlib.contextmanager
def serving() -> Iterator[None]:
    """Forbid compilation on the current thread only (the thread-local
    counterpart of no_compilation()). Nested uses are depth-counted. Child
    processes this thread starts are locked down too: the shim (or, without it,
    the Python subprocess gate) hands them TORCH_PRECOMPILE_NO_COMPILATION=1."""
    arm()
    s = state()
    s.serving_enter()
    try:
        yield
    finally:
        s.serving_exit()
        _after_lockdown()


def _after_lockdown() -> None:
    """Once no lockdown scope is left: forget what refused builds left cached."""
    if current() is None:
        from .gates import aftermath

        aftermath.after_lockdown()
