"""The lockdown's state: whether this thread may compile, and why not.

There is one state per process. With the shim preloaded it lives in the shim and is
driven through its C ABI (so the shim's exec gate and these Python gates agree);
without it, ``_native`` keeps the same ``policy`` state machine. The scopes that
enter it (``no_compilation()``, ``serving()``) and arm the gates are ``_scopes``;
the gates read this module and nothing above it. No torch import.
"""

from __future__ import annotations

import ctypes
import functools
import os

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
