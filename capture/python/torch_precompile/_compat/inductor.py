"""Inductor's in-process caches.

- ``CppPythonBindingsCodeCache.cache_clear`` also forgets the kernel modules it
  put in ``sys.modules`` from 2.12 (earlier it clears only its own dict, so the
  next load of the same kernel source returns the module loaded before, whose
  ``__file__`` may be a capture block's deleted directory).
"""

from __future__ import annotations

import re
import sys

# CppPythonBindingsCodeCache registers a loaded kernel library as "<key>.<entry>",
# the key being its content hash.
_KERNEL_MODULE = re.compile(r"^[a-z0-9]{40,}\.\w+$")


def clear_memory_caches() -> None:
    """Every in-memory Inductor cache, the loaded kernel modules' names included."""
    if "torch._inductor.codecache" not in sys.modules:
        return
    from torch._inductor import codecache
    from torch._inductor.utils import clear_caches

    clear_caches()
    if hasattr(codecache.CppPythonBindingsCodeCache, "_loaded_module_names"):
        return  # 2.12+: cache_clear did it
    entries = {codecache.CppPythonBindingsCodeCache.entry_function}
    entries |= {c.entry_function for c in _subclasses(codecache.CppPythonBindingsCodeCache)}
    for name in [n for n in list(sys.modules) if _KERNEL_MODULE.match(n)]:
        if name.rsplit(".", 1)[1] in entries:
            sys.modules.pop(name, None)


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out
