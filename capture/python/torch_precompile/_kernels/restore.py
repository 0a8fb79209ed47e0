"""Serve side: unpack frozen kernels into a private directory and let Inductor find
them by content, so loading compiles nothing.

Two ways in, one registry (content key -> restored library):

- a MakeFx program imports its kernels' loader from ``runtime``, which asks
  ``frozen_pybinding`` and loads the library itself, so serving never imports
  Inductor at all;
- anything that does go through Inductor (Dynamo artifacts, a program run without
  ``runtime``) meets ``CppCodeCache.load_async``, wrapped once per process as soon
  as Inductor's code cache is imported: a frozen source loads the restored library
  before Inductor computes a build command, probes the compiler or the vector ISA,
  or builds a precompiled header.

Any other source takes Inductor's own path (a build, which the lockdown refuses).
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import threading
from typing import Any, Sequence

from .. import _lockdown
from .._errors import PrecompileError
from . import content, isa
from .freeze import CPP_WRAPPER, MANIFEST, PYBINDING, TEMPLATE_FIELDS

_frozen: dict[str, tuple[str, str]] = {}   # content key -> (library path, inductor key)
# Inductor's binding templates (see freeze), per binding flavour: a kernel's
# (CppPythonBindingsCodeCache) and a C++ wrapper's (CppWrapperCodeCache)
_templates: dict[str, dict[str, str]] = {}
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
    wanted = [e for e in entries if e[0] in ("cpp_kernel", "triton", "inductor_autotune")]
    if not wanted:
        return manifest
    root = _serve_root()
    for kind, name, data in wanted:
        path = os.path.join(root, *name.split("/"))
        if kind == "triton" and os.path.basename(path).startswith("__grp__"):
            data = _absolute_group(data, os.path.dirname(path))
        _place(path, data, executable=kind == "cpp_kernel")
    with _lock:
        for rec in manifest.get("cpp", []):
            _frozen[rec["content"]] = (os.path.join(root, *rec["entry"].split("/")), rec["key"])
        for flavour, field in TEMPLATE_FIELDS.items():
            if manifest.get(field):
                _templates[flavour] = dict(manifest[field])
    if any(k == "triton" for k, _, _ in wanted):
        # Triton finds a binary by the hash directory it computes; a private root
        # holding the restored directories is all it needs.
        os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")
        # Frozen autotuning decisions are read from that directory only with the
        # autotuning cache on; with them found, no autotuner benchmarks.
        os.environ["TRITON_CACHE_AUTOTUNING"] = "1"
        _seed_ptxas_versions(manifest.get("ptxas_versions") or {})
    if any(k == "inductor_autotune" for k, _, _ in wanted):
        # Inductor looks a kernel's decision up beside the source it writes into
        # its cache directory; the private one holds the frozen decisions.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    from ..gates.on_import import when_imported

    when_imported("torch._inductor.codecache", _install_hook)
    return manifest


_root: list[str] = []


def _serve_root() -> str:
    """One private directory per process: every artifact loaded here unpacks into
    it (names are content-addressed), so the cache directories pointed at it see
    the kernels of all of them."""
    with _lock:
        if not _root:
            _root.append(tempfile.mkdtemp(prefix="precompile-serve-"))
            atexit.register(shutil.rmtree, _root[0], True)
        return _root[0]


def _place(path: str, data: bytes, *, executable: bool) -> None:
    # A library already there may be mapped by this process: never rewrite it in
    # place (same name, same content); a new file appears whole, by rename.
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    if executable:
        os.chmod(tmp, 0o755)
    os.replace(tmp, path)


def _absolute_group(data: bytes, directory: str) -> bytes:
    grp = json.loads(data)
    grp["child_paths"] = {k: os.path.join(directory, os.path.basename(v))
                          for k, v in grp.get("child_paths", {}).items()}
    return json.dumps(grp).encode()


def frozen_pybinding(argtypes: Sequence[str], main_code: str) -> Any | None:
    """The kernel function of a frozen ``cpp_pybinding(argtypes, main_code)``
    library, loaded as Inductor would load it; None when it is not frozen here."""
    return _frozen_binding(PYBINDING, argtypes, main_code)


def frozen_cpp_wrapper(argtypes: Sequence[str], main_code: str, device_type: str = "cpu",
                       num_outputs: int = -1, extra_flags: Sequence[str] = (),
                       kernel_code: str | None = None) -> Any | None:
    """The entry function of a frozen C++ wrapper, as
    ``CppWrapperCodeCache.load_pybinding`` returns it; None when not frozen here."""
    return _frozen_binding(CPP_WRAPPER, argtypes, main_code, device_type, num_outputs,
                           extra_flags, kernel_code)


def _frozen_binding(flavour: str, argtypes: Sequence[str], main_code: str, device_type: str = "cpu",
                    num_outputs: int = -1, extra_flags: Sequence[str] = (),
                    kernel_code: str | None = None) -> Any | None:
    templates = _templates.get(flavour)
    if not templates:
        return None
    source = main_code + _binding_suffix(templates, argtypes, num_outputs)
    hit = _frozen.get(content.cpp_key(flavour, source, device_type, extra_flags, kernel_code))
    if hit is None:
        return None
    path, ind_key = hit
    entry = templates["entry_function"]
    return getattr(_load_binding_module(path, ind_key, entry), entry)


def _binding_suffix(t: dict[str, str], argtypes: Sequence[str], num_outputs: int) -> str:
    # CppPythonBindingsCodeCache.load_pybinding_async's suffix, from the templates
    # the capture's torch build recorded (the build is checked equal before this).
    parseargs = ", ".join(f"parse_arg<{a.replace('const ', '')}>(args, {n})" for n, a in enumerate(argtypes))
    return t["suffix_template"].format(
        arg_len=len(argtypes),
        call_entry_func=t["call_entry_function"].format(parseargs),
        entry_func=t["entry_function"],
        extra_parse_arg=t["extra_parse_arg"].format(array_len=num_outputs),
    )


def _load_binding_module(path: str, ind_key: str, entry: str) -> Any:
    """CppPythonBindingsCodeCache._load_library_inner without Inductor: the binding
    reads the tensor data-pointer offset from the environment when it initializes."""
    import torch

    os.environ["_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"] = str(
        torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr
    )
    name = f"{ind_key}.{entry}"
    with _lock:
        module = sys.modules.get(name)
        if module is not None:
            return module
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load the frozen kernel library {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    return module


def _install_hook(_codecache: Any = None) -> None:
    """Wrap ``CppCodeCache.load_async`` for the rest of the process: a loaded
    artifact's compiled code asks Inductor for its kernels on every call, so the
    hook must outlive load(). For a source no loaded artifact froze it calls
    torch's own, unchanged."""
    global _hooked
    if _hooked:
        return
    from torch._inductor.codecache import CppCodeCache

    original = CppCodeCache.__dict__["load_async"].__func__

    def load_async(cls, main_code, device_type="cpu", submit_fn=None, extra_flags=(),
                   optimized_code=None, *args, **kwargs):
        key = content.cpp_key(cls.__qualname__, main_code, device_type, extra_flags, optimized_code)
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
    every CUDA cache key), so finding a frozen binary runs no ptxas at all. Stays
    for the rest of the process, as the loaded kernels do (Triton asks again at
    each cache lookup); an arch no manifest names gets torch's own answer."""
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
