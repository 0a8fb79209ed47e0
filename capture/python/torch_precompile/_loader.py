"""load(): verify the pair, prime the kernel caches, exec python_code, wrap it."""

from __future__ import annotations

import json
import logging
import os
import stat
import warnings
from typing import Any

from . import _artifact, _native, _signing
from ._bases import PrecompiledRunnable, StandaloneRunnable
from ._errors import PrecompileError
from ._progress import step

log = logging.getLogger(__name__)


def _read(path: str | os.PathLike[str], what: str) -> bytes:
    """The file's bytes; a FIFO, device or directory is refused before any read
    (opened non-blocking, so a FIFO with no writer cannot hang the load)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise PrecompileError(f"load: cannot read the {what} {os.fspath(path)!r}: {e.strerror or e}") from e
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "a device")
            raise PrecompileError(
                f"load: the {what} {os.fspath(path)!r} is {kind}, not a regular file; "
                "pass the file a capture wrote")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as f:
            fd = -1
            return f.read()
    except OSError as e:
        raise PrecompileError(f"load: cannot read the {what} {os.fspath(path)!r}: {e.strerror or e}") from e
    finally:
        if fd >= 0:
            os.close(fd)


def verified_entries(code: bytes, cache: bytes, meta: dict[str, Any], cache_path: str) -> list[tuple[str, str, bytes]] | None:
    """The cache's entries once it is proven to belong to this python_code, or None
    (with a warning) when the cache is not one this build can use."""
    try:
        header_json, entries = _native.cache_decode(cache)
    except _native.ForeignCache as e:
        warnings.warn(f"load: ignoring the cache {cache_path!r}: {e}. Serving from python_code alone (kernels JIT-compile).", stacklevel=3)
        return None
    except _native.CacheError as e:
        warnings.warn(f"load: ignoring the unreadable cache {cache_path!r}: {e}. Serving from python_code alone (kernels JIT-compile).", stacklevel=3)
        return None
    header = json.loads(header_json)
    for field, key in (("backend", "BACKEND"), ("tracer", "TRACER")):
        if header[field] != meta.get(key):
            raise PrecompileError(
                f"load: the cache was written by a {field}={header[field]!r} capture but "
                f"python_code says {key} = {meta.get(key)!r}: the pair came from different "
                "captures; pass the two files one capture wrote"
            )
    if header["code_hash"] != _native.sha256_hex(code):
        raise PrecompileError(
            "load: the cache belongs to different python_code (its code_hash does not "
            "match the artifact's sha256): the pair came from different captures, or "
            "python_code was edited; pass the two files one capture wrote, or capture again"
        )
    if header["torch_build"] != _artifact.torch_build():
        warnings.warn(
            f"load: the cache was built by torch {header['torch_build']}, this is "
            f"{_artifact.torch_build()}; its kernels are not used (serving JIT-compiles).",
            stacklevel=3,
        )
        return None
    return [(k, n, bytes(d)) for k, n, d in entries]


def prime(entries: list[tuple[str, str, bytes]], artifact: str = "") -> None:
    """Make the cache's kernels findable before python_code runs: frozen kernels by
    content from a private directory; an Inductor cache bundle through torch."""
    import torch

    from ._kernels.restore import restore

    manifest = restore(entries, artifact)
    if manifest is not None and manifest.get("cpp") is not None:
        # Frozen kernels are found by content from a private directory; Inductor's
        # own bundle would only be written into the user's cache directory.
        return
    for kind, name, data in entries:
        if kind == "inductor_bundle":
            torch.compiler.load_cache_artifacts(data)


def load_pair(artifact_path: str | os.PathLike[str], cache_path: str | os.PathLike[str], *,
              allow_serve_time_compiles: bool = False) -> PrecompiledRunnable:
    code = _read(artifact_path, "python_code artifact")
    cache = _read(cache_path, "cache")
    # before anything of the pair is parsed, run or loaded
    _signing.check(os.fspath(artifact_path), code, os.fspath(cache_path), cache)
    try:
        text = code.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PrecompileError(f"load: {os.fspath(artifact_path)!r} is not UTF-8 text; it is not a torch.compiler.precompile artifact") from e
    meta = _artifact.read_metadata(text)
    if meta.get("FORMAT") != _artifact.FORMAT or "BACKEND" not in meta or "TRACER" not in meta:
        raise PrecompileError(
            f"load: {os.fspath(artifact_path)!r} is not a torch.compiler.precompile artifact "
            f"(no FORMAT = {_artifact.FORMAT!r} / BACKEND / TRACER header); pass the "
            "artifact_path a capture wrote"
        )
    mode = meta.get("SERVING_MODE", "standalone")
    if allow_serve_time_compiles and mode == "standalone":
        raise PrecompileError(
            "load(allow_serve_time_compiles=True): a standalone artifact has no compiler "
            "behind it, so it cannot compile at serve time; drop the flag"
        )
    entries = verified_entries(code, cache, meta, os.fspath(cache_path))
    if entries:
        with step("load: restored %d cache entr%s of %s", len(entries), "y" if len(entries) == 1 else "ies",
                  os.fspath(artifact_path)):
            prime(entries, os.fspath(artifact_path))
    log.info("load: %s (tracer %s, backend %s, %s%s)", meta.get("FN_NAME"), meta["TRACER"], meta["BACKEND"],
             meta.get("SERVING_MODE", "standalone"), ", Dynamo-free" if meta.get("DYNAMO_FREE") else "")
    # python_code as the capture compiled it, for this Python (else compiled here)
    name = _artifact.compiled_name()
    compiled = next((d for k, n, d in entries or () if k == _artifact.COMPILED_KIND and n == name), None)
    # One dispatch on the artifact's tracer and serving mode.
    path = os.fspath(artifact_path)
    if meta["TRACER"] == "make_fx":
        return _load_makefx(text, meta, path, compiled)
    from ._dynamo.serving import load as dynamo

    if mode == "standalone":
        return dynamo.standalone(text, meta, path, compiled)
    if mode == "installed":
        return dynamo.installed(text, meta, path, compiled, allow_serve_time_compiles=allow_serve_time_compiles)
    raise PrecompileError(f"load: {path!r} has an unknown SERVING_MODE {mode!r}")


def _load_makefx(text: str, meta: dict[str, Any], path: str, compiled: bytes | None = None) -> PrecompiledRunnable:
    return StandaloneRunnable(_artifact.execute(text, path, compiled)["forward"], meta, path)
