"""The lockdown: process-wide ``no_compilation()`` and thread-local ``serving()``.

There is one state per process. With the shim preloaded it lives in the shim and is
driven through its C ABI (so the shim's exec gate and these Python gates agree);
without it, ``_native`` keeps the same ``policy`` state machine. No torch import.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
from typing import Iterator

from . import _settings
from ._errors import refused

_REASONS = {
    "startup": "TORCH_PRECOMPILE_NO_COMPILATION=1 was set at process start",
    "no_compilation": "inside torch.compiler.precompile.no_compilation()",
    "serving": "this thread is serving (torch_precompile.serving())",
}
DEFAULT_REMEDY = (
    "Capture it ahead of time with torch.compiler.precompile.capture() so the "
    "artifact and its cache cover it, or run it outside the lockdown."
)


class _ShimState:
    """The shim's state, through its exported C ABI."""

    name = "shim"

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        for fn, res in (
            ("precompile_lockdown_enter", ctypes.c_uint32),
            ("precompile_lockdown_exit", ctypes.c_int64),
            ("precompile_lockdown_depth", ctypes.c_uint32),
            ("precompile_lockdown_startup", ctypes.c_int),
            ("precompile_serving_enter", ctypes.c_uint32),
            ("precompile_serving_exit", ctypes.c_int64),
            ("precompile_serving_depth", ctypes.c_uint32),
            ("precompile_journal_arm", ctypes.c_int),
            ("precompile_journal_disarm", ctypes.c_int),
            ("precompile_version", ctypes.c_char_p),
        ):
            getattr(lib, fn).restype = res
        lib.precompile_journal_arm.argtypes = [ctypes.c_char_p]

    def enter(self) -> int:
        return self._lib.precompile_lockdown_enter()

    def exit(self) -> int:
        return self._lib.precompile_lockdown_exit()

    def depth(self) -> int:
        return self._lib.precompile_lockdown_depth()

    def startup(self) -> bool:
        return bool(self._lib.precompile_lockdown_startup())

    def serving_enter(self) -> int:
        return self._lib.precompile_serving_enter()

    def serving_exit(self) -> int:
        return self._lib.precompile_serving_exit()

    def serving_depth(self) -> int:
        return self._lib.precompile_serving_depth()

    def journal_arm(self, path: str) -> None:
        if self._lib.precompile_journal_arm(os.fsencode(path)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"the shim could not arm the journal at {path}")

    def journal_disarm(self) -> None:
        self._lib.precompile_journal_disarm()


class _NativeState:
    """No shim: ``_native``'s own copy of the policy state machine."""

    name = "native"

    def __init__(self) -> None:
        from . import _native

        self._n = _native
        if _settings.is_on(_settings.NO_COMPILATION):
            _native.set_startup(True)

    def enter(self) -> int:
        return self._n.lockdown_enter()

    def exit(self) -> int:
        return self._n.lockdown_exit()

    def depth(self) -> int:
        return self._n.lockdown_depth()

    def startup(self) -> bool:
        return self._n.lockdown_startup()

    def serving_enter(self) -> int:
        return self._n.serving_enter()

    def serving_exit(self) -> int:
        return self._n.serving_exit()

    def serving_depth(self) -> int:
        return self._n.serving_depth()

    def journal_arm(self, path: str) -> None:
        os.environ[_settings.JOURNAL.env] = path

    def journal_disarm(self) -> None:
        pass


@functools.cache
def state() -> _ShimState | _NativeState:
    """The process's one lockdown state: the shim's when it is loaded."""
    lib = ctypes.CDLL(None, use_errno=True)
    if hasattr(lib, "precompile_lockdown_enter"):
        return _ShimState(lib)
    return _NativeState()


def shim_loaded() -> bool:
    return state().name == "shim"


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
    from . import _boot, gates

    if not shim_loaded():
        gates.install_process_gates()
    _boot.when_torch_imported(lambda _torch: gates.install_all())


def current() -> str | None:
    """Why this thread is locked down right now ("startup", "no_compilation",
    "serving"), or None when compiling is allowed."""
    s = state()
    if s.startup():
        return "startup"
    if s.depth() > 0:
        return "no_compilation"
    if s.serving_depth() > 0:
        return "serving"
    return None


def check(what: str, remedy: str = DEFAULT_REMEDY) -> None:
    """Raise PrecompileError naming ``what`` if this thread is locked down."""
    reason = current()
    if reason is not None:
        raise refused(what, _REASONS[reason], remedy)


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
