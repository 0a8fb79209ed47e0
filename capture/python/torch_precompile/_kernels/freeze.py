"""Freeze what a capture block compiled into cache entries.

C++ kernel libraries go in by content key (``cpp/<key>.so``) with a manifest that
says which binding flavour loads each; Triton's cache directory goes in file by file
(``triton/<hash>/<file>``), which Triton finds again by its own content hash. The
ISA decision rides in the manifest so the serving host is checked without compiling.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

from .._errors import PrecompileError
from .._progress import log
from . import isa
from .block import KernelBlock

MANIFEST = "kernels.json"
# The binding flavours a frozen library is loaded by (Inductor's code cache class),
# and the manifest field holding each one's templates (restore reads them back)
PYBINDING = "CppPythonBindingsCodeCache"
CPP_WRAPPER = "CppWrapperCodeCache"
TEMPLATE_FIELDS = {PYBINDING: "pybinding", CPP_WRAPPER: "cpp_wrapper_binding"}


def freeze(block: KernelBlock) -> tuple[list[tuple[str, str, bytes]], dict[str, Any]]:
    """(entries, header meta) for everything the block compiled so far."""
    entries: list[tuple[str, str, bytes]] = []
    cpp: list[dict[str, Any]] = []
    for key, rec in sorted(block.kernels.items()):
        path = rec["path"]
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise PrecompileError(
                f"capture: cannot freeze the C++ kernel library {path} ({rec['binding']}, "
                f"content {key[:12]}): {e.strerror or e}. It was loaded but its file is gone; "
                "keep the block's cache directory intact until the capture is written"
            ) from e
        name = f"cpp/{key}.so"
        entries.append(("cpp_kernel", name, data))
        cpp.append({"content": key, "binding": rec["binding"], "key": rec["key"], "entry": name})
    triton_files = _triton_files(block.triton_dir)
    entries += triton_files
    autotune = _inductor_autotune_files(block.inductor_dir)
    entries += autotune
    runs = block.compiler_runs()
    manifest = {
        "cpp": cpp,
        "triton_files": len(triton_files),
        "inductor_autotune": len(autotune),
        "ptxas_versions": _ptxas_versions(triton_files),
        "isa": isa.decision() if cpp else {"vec_isa": "", "flags": []},
        TEMPLATE_FIELDS[PYBINDING]: _binding_templates(PYBINDING) if cpp else {},
        TEMPLATE_FIELDS[CPP_WRAPPER]: (_binding_templates(CPP_WRAPPER)
                                       if any(r["binding"] == CPP_WRAPPER for r in cpp) else {}),
        "capture_compiler_runs": sum(1 for r in runs if r.get("kind") == "compile"),
    }
    entries.append(("kernel_manifest", MANIFEST, json.dumps(manifest, indent=1).encode()))
    meta = {
        "frozen_cpp_kernels": len(cpp),
        "frozen_triton_files": len(triton_files),
        "frozen_autotune_decisions": len(autotune),
        "vec_isa": manifest["isa"]["vec_isa"],
        "host_requirements": _requirements(manifest),
    }
    log.info("capture: froze %d C++ kernel librar%s, %d Triton file(s), %d autotune decision(s) (%d bytes)",
             len(cpp), "y" if len(cpp) == 1 else "ies", len(triton_files), len(autotune),
             sum(len(e[2]) for e in entries))
    return entries, meta


def _binding_templates(flavour: str) -> dict[str, str]:
    """The strings Inductor wraps a ``cpp_pybinding`` source (flavour
    CppPythonBindingsCodeCache) or a C++ wrapper (CppWrapperCodeCache) in before
    building it; with them the serving side finds the library from the program's
    own call, without importing Inductor (see restore.frozen_pybinding and
    restore.frozen_cpp_wrapper)."""
    from torch._inductor import codecache

    c = getattr(codecache, flavour)
    return {name: getattr(c, name) for name in
            ("suffix_template", "call_entry_function", "extra_parse_arg", "entry_function")}


def _files(root: str, keep: Callable[[str], bool]) -> list[tuple[str, str, bytes]]:
    """(file name, path relative to root with '/', bytes) of each kept file, sorted
    by path."""
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for fname in files:
            if keep(fname):
                full = os.path.join(dirpath, fname)
                with open(full, "rb") as f:
                    out.append((fname, os.path.relpath(full, root).replace(os.sep, "/"), f.read()))
    return sorted(out, key=lambda e: e[1])


def _triton_files(root: str) -> list[tuple[str, str, bytes]]:
    out = []
    for fname, rel, data in _files(root, lambda f: not f.endswith(".lock") and not f.startswith("tmp")):
        if fname.startswith("__grp__") and fname.endswith(".json"):
            data = _relative_group(data)
        out.append(("triton", f"triton/{rel}", data))
    return out


def _inductor_autotune_files(root: str) -> list[tuple[str, str, bytes]]:
    """The decisions of Inductor's own Triton autotuner (``<hash>.best_config``
    beside each kernel source, named by the source's hash and the torch build, so
    the path relative to the cache directory is the same on any host). Serving
    finds them instead of benchmarking the kernel's configs on first launch."""
    return [("inductor_autotune", f"inductor/{rel}", data)
            for _f, rel, data in _files(root, lambda f: f.endswith(".best_config"))]


def _relative_group(data: bytes) -> bytes:
    """Triton's group file lists its members by absolute path; keep only the file
    names, and restore() points them at wherever the files are unpacked."""
    grp = json.loads(data)
    grp["child_paths"] = {k: os.path.basename(v) for k, v in grp.get("child_paths", {}).items()}
    return json.dumps(grp).encode()


def _ptxas_versions(files: list[tuple[str, str, bytes]]) -> dict[str, str]:
    """The ``ptxas --version`` text behind each CUDA arch the frozen Triton kernels
    target. Triton hashes it into every cache key, so serving answers with the
    recorded text instead of running ptxas to look the binaries up."""
    archs = set()
    for _kind, name, data in files:
        if name.endswith(".json") and not name.rsplit("/", 1)[-1].startswith("__grp__"):
            try:
                target = json.loads(data).get("target", {})
            except ValueError:
                continue
            if target.get("backend") == "cuda" and isinstance(target.get("arch"), int):
                archs.add(target["arch"])
    if not archs:
        return {}
    try:
        from triton.backends.nvidia.compiler import get_ptxas_version
    except ImportError:
        return {}
    return {str(arch): get_ptxas_version(arch) for arch in sorted(archs)}


def _requirements(manifest: dict[str, Any]) -> str:
    parts = []
    if manifest["cpp"]:
        flags = " ".join(manifest["isa"]["flags"]) or "no vector extension"
        parts.append(f"C++ kernels: this torch build, {manifest['isa']['vec_isa'] or 'scalar'} CPU ({flags})")
    if manifest["triton_files"] or manifest["inductor_autotune"]:
        parts.append("Triton kernels: this torch/Triton build and the GPU architecture they were compiled for")
    return "; ".join(parts) or "none (no compiled kernels)"
