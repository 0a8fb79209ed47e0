"""The capture block's kernel scope: fresh Inductor/Triton cache directories, the
journal armed, and a recorder of every C++ kernel library Inductor loads.

Inside the block Inductor and Triton compile into directories nobody else uses, so
what the block compiled is known exactly (DESIGN.md, "cache-directory
redirection"). Child processes started in the block inherit the directories and
the journal through the environment. On exit the previous values come back.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import threading
from typing import Any

from .. import _lockdown, _settings
from .._compat.inductor import clear_memory_caches
from . import content, triton_memory

log = logging.getLogger(__name__)

_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TRITON_CACHE_AUTOTUNING")
_active: list["KernelBlock"] = []
_lock = threading.Lock()


class KernelBlock:
    """One capture block's kernel bookkeeping. Enter/exit around the block; a
    capture that is suspended between its calls (torch.compile sites, one capture
    each) exits and enters it again, keeping its directories and records until
    close()."""

    def __init__(self) -> None:
        self.root = ""
        self.kernels: dict[str, dict[str, Any]] = {}   # content key -> record
        self._saved_env: dict[str, str | None] = {}
        self._patched: Any = None
        self._journal_armed = False
        self._triton_saved: Any = []

    @property
    def inductor_dir(self) -> str:
        return os.path.join(self.root, "inductor")

    @property
    def triton_dir(self) -> str:
        return os.path.join(self.root, "triton")

    @property
    def journal_path(self) -> str:
        return os.path.join(self.root, "journal.jsonl")

    def __enter__(self) -> "KernelBlock":
        with _lock:
            if _active:
                from .._errors import PrecompileError

                raise PrecompileError(
                    "capture: another capture block is open in this process; do not "
                    "overlap two captures (their kernel caches would mix)"
                )
            _active.append(self)
        if not self.root:  # entered again after an exit (a suspended capture): same directories
            self.root = tempfile.mkdtemp(prefix="precompile-block-")
            os.makedirs(self.inductor_dir)
            os.makedirs(self.triton_dir)
        # Triton's autotuning cache is on inside the block so decisions ship.
        for name, value in zip(_ENV, (self.inductor_dir, self.triton_dir, "1")):
            self._saved_env[name] = os.environ.get(name)
            os.environ[name] = value
        self._arm_journal()
        clear_memory_caches()
        self._triton_saved = triton_memory.set_aside()
        _install_recorder()
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._disarm_journal()
        _remove_recorder()
        with _lock:
            if self in _active:
                _active.remove(self)
        # What was loaded from the block directory stays loaded; the next compile
        # outside the block must not find (and reuse paths into) our directory.
        clear_memory_caches()
        triton_memory.bring_back(self._triton_saved)
        self._triton_saved = []

    def close(self) -> None:
        """Delete the block directory once nothing more will be frozen from it."""
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)

    def record(self, key: str, record: dict[str, Any]) -> None:
        self.kernels.setdefault(key, record)

    def compiler_runs(self) -> list[dict[str, Any]]:
        import json

        try:
            with open(self.journal_path, encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.strip()]
        except (OSError, ValueError):
            return []

    def _arm_journal(self) -> None:
        # The user's own journal keeps recording; the block's copy is ours.
        if _settings.get(_settings.JOURNAL) is None:
            state = _lockdown.state()
            try:
                state.journal_arm(self.journal_path)
                os.environ[_settings.JOURNAL.env] = self.journal_path
                self._journal_armed = True
            except OSError as e:
                log.warning("capture: could not arm the compiler journal: %s", e)

    def _disarm_journal(self) -> None:
        if self._journal_armed:
            _lockdown.state().journal_disarm()
            if os.environ.get(_settings.JOURNAL.env) == self.journal_path:
                os.environ.pop(_settings.JOURNAL.env, None)
            self._journal_armed = False


def active() -> KernelBlock | None:
    return _active[0] if _active else None


def _install_recorder() -> None:
    """Wrap CppCodeCache.load_async while a block is open: remember which library
    each kernel source became. Undone when the block exits (_remove_recorder)."""
    from torch._inductor.codecache import CppCodeCache

    current = CppCodeCache.__dict__["load_async"]
    if getattr(current.__func__, "__precompile_recorder__", False):
        return
    original = current.__func__

    def load_async(cls, main_code, device_type="cpu", submit_fn=None, extra_flags=(),
                   optimized_code=None, *args, **kwargs):
        load_fn = original(cls, main_code, device_type, submit_fn, extra_flags, optimized_code, *args, **kwargs)
        block = active()
        if block is None:
            return load_fn
        key = content.cpp_key(cls.__qualname__, main_code, device_type, extra_flags, optimized_code)

        def recorded_load():
            lib = load_fn()
            path = content.library_path(lib)
            current = active()
            if current is not None and path:
                current.record(key, {"binding": cls.__qualname__, "key": getattr(lib, "key", ""), "path": path})
            return lib

        return recorded_load

    load_async.__precompile_recorder__ = True
    load_async.__precompile_replaced__ = current
    CppCodeCache.load_async = classmethod(load_async)


def _remove_recorder() -> None:
    """Put back what the recorder replaced. When something wrapped it since (a load
    inside the block hooks frozen kernels over it: restore._install_hook), it stays
    under that wrapper, forwarding to torch's own outside a block."""
    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is None:
        return
    current = codecache.CppCodeCache.__dict__["load_async"]
    if getattr(current.__func__, "__precompile_recorder__", False):
        codecache.CppCodeCache.load_async = current.__func__.__precompile_replaced__
