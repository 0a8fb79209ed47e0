"""The content key of a C++ kernel library: what Inductor asked to build, without
the host's paths, so a frozen library is found by what it is."""

from __future__ import annotations

import hashlib
from typing import Any, Sequence


def cpp_key(binding: str, main_code: str, device_type: str, extra_flags: Sequence[str],
            optimized_code: str | None) -> str:
    """``binding`` is the code cache class's ``__qualname__`` (which loader, hence
    which kind of library, the source becomes)."""
    h = hashlib.sha256()
    for part in (binding, device_type, "\0".join(extra_flags), main_code, optimized_code or ""):
        h.update(part.encode("utf-8"))
        h.update(b"\0\1\0")
    return h.hexdigest()


def library_path(lib: Any) -> str | None:
    """Where a loaded kernel library lives: a module's __file__ or a CDLL's _name."""
    return getattr(lib, "__file__", None) or getattr(lib, "_name", None)
