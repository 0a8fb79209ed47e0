"""Triton's in-memory caches around a capture block.

A JIT kernel or autotuner used before the block would otherwise serve its first
launch inside the block from memory, so nothing would land in the block's cache
directory and nothing would ship. At entry every JITFunction's compiled
specializations and every Autotuner's decisions are set aside (the block compiles
and tunes again, on its own inputs); at exit what the block produced stays and the
set-aside entries it did not produce again come back.
"""

from __future__ import annotations

import gc
import sys
from collections import defaultdict
from typing import Any

Saved = list[tuple[str, Any, Any]]


def set_aside() -> Saved:
    if "triton.runtime.jit" not in sys.modules or not _can_launch():
        return []
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    saved: Saved = []
    for obj in gc.get_objects():
        cls = type(obj)  # never isinstance(): some objects warn when asked for __class__
        if issubclass(cls, JITFunction) and getattr(obj, "device_caches", None):
            saved.append(("jit", obj, obj.device_caches))
            obj.device_caches = defaultdict(obj.create_binder)
        elif issubclass(cls, Autotuner) and getattr(obj, "cache", None):
            saved.append(("tune", obj, obj.cache))
            obj.cache = {}
    return saved


def _can_launch() -> bool:
    """Whether a Triton kernel can have run here: a GPU is visible. Without one no
    JITFunction holds a compiled specialization, and the scan of every live object
    (a fifth of a second in a process that imported transformers) is skipped: a
    torch.compile site's capture enters its block once per call."""
    import torch

    return torch.cuda.is_available() or torch.xpu.is_available()


def bring_back(saved: Saved) -> None:
    for kind, obj, old in saved:
        if kind == "tune":
            for key, config in old.items():
                obj.cache.setdefault(key, config)
            continue
        for device, entry in old.items():
            if device not in obj.device_caches:
                obj.device_caches[device] = entry
                continue
            kernels, keyed = obj.device_caches[device][0], obj.device_caches[device][1]
            for key, kernel in entry[0].items():
                kernels.setdefault(key, kernel)
            for key, kernel in entry[1].items():
                keyed.setdefault(key, kernel)
