"""What a refused build leaves cached, forgotten when the lockdown ends.

Inductor caches the answers of its compiler probes for the process: whether each
vector ISA builds (``VecISA.__bool__``, ``valid_vec_isa_list``), the compiler's
kind and version (``cpp_builder``). A probe the lockdown refused reads as "no"
(``check_build`` catches the refusal and returns False) and stays "no": a kernel
generated with ``at::vec`` at capture then builds, after the lockdown, without the
ISA's flags and fails (``'at::vec' has not been declared``). So a refusal is
noted, and when the last lockdown scope ends those caches are cleared: the next
allowed build probes again. No torch import here.
"""

from __future__ import annotations

import sys
import threading

_lock = threading.Lock()
_refused = False

# Inductor modules whose functools caches hold compiler-probe answers.
_PROBE_MODULES = ("torch._inductor.cpu_vec_isa", "torch._inductor.cpp_builder")


def note_refusal() -> None:
    global _refused
    with _lock:
        _refused = True


def after_lockdown() -> None:
    """Called as the last lockdown scope of the process exits."""
    global _refused
    with _lock:
        if not _refused:
            return
        _refused = False
    for name in _PROBE_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            _clear_caches(module)


def _clear_caches(module: object) -> None:
    seen: set[int] = set()
    stack = [v for v in vars(module).values() if getattr(v, "__module__", None) == module.__name__]  # type: ignore[attr-defined]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        clear = getattr(obj, "cache_clear", None)
        if callable(clear):
            clear()
        if isinstance(obj, type):
            stack.extend(vars(obj).values())
            stack.extend(obj.__subclasses__())
