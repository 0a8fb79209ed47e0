"""Run a callback right after a named module finishes importing: the one
after-import hook of the package (the boot's torch install, the gates, the
zero-code modes all register here).

Most gated subsystems (Dynamo, Inductor, AOTAutograd, Triton, cpp_extension) are
imported lazily by torch, and importing them costs seconds; a process that only
runs eager PyTorch must not pay for them. So each gate waits for its module: a
meta-path finder wraps that module's loader, and the callback runs after the
module body and before the importer sees it, so even ``from m import f`` done by
the importer binds the gated ``f``. No torch import here.
"""

from __future__ import annotations

# Imported at every booted interpreter's start: nothing heavier than these
# (no logging, typing or importlib.abc, which cost ~25 ms of each start).
import _thread
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Callable

    Callback = Callable[[ModuleType], None]

_lock = _thread.RLock()
_waiting: dict[str, list[tuple[Callback, bool]]] = {}


def when_imported(name: str, callback: Callback, *, strict: bool = False) -> None:
    """Call ``callback(module)`` now if ``name`` is imported, else right after it is.
    A gate's callback that fails is logged, so a torch/Triton version without the
    gated attribute still imports; a ``strict`` one (the boot's install, arming
    the gates, a zero-code mode) raises into the import that ran it."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _waiting.setdefault(name, []).append((callback, strict))
            _ensure_finder()
            return
    _run(name, module, [(callback, strict)])


def _run(name: str, module: ModuleType, callbacks: list[tuple[Callback, bool]]) -> None:
    for callback, strict in callbacks:
        if strict:
            callback(module)
            continue
        try:
            callback(module)
        except Exception:  # noqa: BLE001
            import logging

            logging.getLogger("torch_precompile.gates").warning(
                "could not arm a lockdown gate on %s", name, exc_info=True)


class _Finder:
    """Finds nothing itself: asks the finders after it, then wraps the loader."""

    def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
        if name not in _waiting:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        real_exec = getattr(loader, "exec_module", None)
        if real_exec is None:
            return spec

        def exec_module(module: ModuleType) -> None:
            real_exec(module)
            with _lock:
                callbacks = _waiting.pop(name, [])
            _run(name, module, callbacks)

        loader.exec_module = exec_module  # type: ignore[union-attr]
        return spec


_finder: _Finder | None = None


def _ensure_finder() -> None:
    global _finder
    if _finder is None:
        _finder = _Finder()
        sys.meta_path.insert(0, _finder)
