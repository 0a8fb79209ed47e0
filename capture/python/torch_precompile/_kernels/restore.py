"""Serve side: unpack frozen kernels into a private directory and let Inductor find
them by content, so loading compiles nothing.

``CppCodeCache.load_async`` is wrapped once per process: a kernel source whose
content key is frozen loads the restored library directly, before Inductor computes
a build command, probes the compiler or the vector ISA, or builds a precompiled
header. Any other source takes Inductor's own path (a build, which the lockdown
refuses).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from typing import Any

from .. import _lockdown
from .._errors import PrecompileError
from . import content, isa
from .freeze import MANIFEST

_frozen: dict[str, tuple[str, str]] = {}   # content key -> (library path, inductor key)
_lock = threading.Lock()
_hooked = False


def restore(entries: list[tuple[str, str, bytes]], artifact: str) -> dict[str, Any] | None:
    """Unpack and register; returns the manifest, or None when nothing is frozen."""
    manifest_bytes = next((d for k, n, d in entries if k == "kernel_manifest" and n == MANIFEST), None)
    if manifest_bytes is None:
        return None
    manifest = json.loads(manifest_bytes)
    missing = isa.missing_flags(manifest.get("isa", {}))
    if missing:
        why = (f"its frozen C++ kernels were built for {manifest['isa']['vec_isa']} and this "
               f"CPU lacks {missing}")
        if _lockdown.current() is not None:
            raise PrecompileError(
                f"load: {artifact}: {why}; under the lockdown they cannot be rebuilt. "
                "Serve on a CPU with those flags, or capture on this host"
            )
        import warnings

        warnings.warn(f"load: {artifact}: {why}; the kernels are rebuilt here (JIT)", stacklevel=4)
        return manifest
    wanted = [e for e in entries if e[0] in ("cpp_kernel", "triton")]
    if not wanted:
        return manifest
    root = tempfile.mkdtemp(prefix="precompile-serve-")
    for kind, name, data in wanted:
        path = os.path.join(root, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if kind == "triton" and os.path.basename(path).startswith("__grp__"):
            data = _absolute_group(data, os.path.dirname(path))
        with open(path, "wb") as f:
            f.write(data)
        if kind == "cpp_kernel":
            os.chmod(path, 0o755)
    with _lock:
        for rec in manifest.get("cpp", []):
            _frozen[rec["content"]] = (os.path.join(root, *rec["entry"].split("/")), rec["key"])
    if any(k == "triton" for k, _, _ in wanted):
        # Triton finds a binary by the hash directory it computes; a private root
        # holding the restored directories is all it needs.
        os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
        # Frozen autotuning decisions are read from that directory only with the
        # autotuning cache on; with them found, no autotuner benchmarks.
        os.environ["TRITON_CACHE_AUTOTUNING"] = "1"
        _seed_ptxas_versions(manifest.get("ptxas_versions") or {})
    _install_hook()
    return manifest


def _absolute_group(data: bytes, directory: str) -> bytes:
    grp = json.loads(data)
    grp["child_paths"] = {k: os.path.join(directory, os.path.basename(v))
                          for k, v in grp.get("child_paths", {}).items()}
    return json.dumps(grp).encode()


def _install_hook() -> None:
    global _hooked
    if _hooked:
        return
    from torch._inductor.codecache import CppCodeCache

    original = CppCodeCache.__dict__["load_async"].__func__

    def load_async(cls, main_code, device_type="cpu", submit_fn=None, extra_flags=(),
                   optimized_code=None, *args, **kwargs):
        key = content.cpp_key(cls, main_code, device_type, extra_flags, optimized_code)
        hit = _frozen.get(key)
        if hit is None:
            return original(cls, main_code, device_type, submit_fn, extra_flags, optimized_code, *args, **kwargs)
        path, ind_key = hit
        cache_key = f"frozen-{key}"
        if cache_key not in cls.cache:
            lib: list[Any] = []

            def load_frozen() -> Any:
                if not lib:
                    lib.append(cls._load_library(path, ind_key or f"precompile_{key[:32]}"))
                return lib[0]

            cls.cache[cache_key] = load_frozen
        return cls.cache[cache_key]

    CppCodeCache.load_async = classmethod(load_async)
    _hooked = True


def _seed_ptxas_versions(versions: dict[str, str]) -> None:
    """Answer Triton's ``ptxas --version`` question from the manifest (it is part of
    every CUDA cache key), so finding a frozen binary runs no ptxas at all."""
    if not versions:
        return
    from ..gates.on_import import when_imported

    def seed(module: Any) -> None:
        original = module.get_ptxas_version
        if getattr(original, "__precompile_seeded__", False):
            original.__precompile_versions__.update(versions)
            return

        def get_ptxas_version(arch: int = 80) -> str:
            known = get_ptxas_version.__precompile_versions__.get(str(arch))
            return known if known is not None else original(arch)

        get_ptxas_version.__precompile_seeded__ = True
        get_ptxas_version.__precompile_versions__ = dict(versions)
        module.get_ptxas_version = get_ptxas_version

    when_imported("triton.backends.nvidia.compiler", seed)
