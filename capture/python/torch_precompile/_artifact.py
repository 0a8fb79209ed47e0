"""The pair on disk: python_code's literal metadata section and the cache envelope.

Both tracers write through here, so the header fields, the code_hash binding and the
atomic pair write are spelled once.
"""

from __future__ import annotations

import ast
import json
import os
import platform
import sys
import types
from typing import Any

from . import _native, _signing
from ._errors import PrecompileError

FORMAT = "torch_precompile/1"
CREATED_BY = "torch_precompile 0.1.0"
# The module name a loaded artifact's code runs under (its driver, graph programs
# and the Inductor modules they exec): installed serving tells its frames by it.
MODULE_PREFIX = "torch_precompile.artifact."


# The cache entry holding python_code compiled at capture: kind, and the name for
# this interpreter (its bytecode magic number: another Python compiles the source).
COMPILED_KIND = "python_code"


def compiled_name() -> str:
    import importlib.util

    return f"{sys.implementation.cache_tag}-{importlib.util.MAGIC_NUMBER.hex()}.marshal"


def compiled_entry(code: bytes) -> tuple[str, str, bytes]:
    """python_code compiled once, at capture, for the cache: a load on the same
    Python unmarshals it instead of compiling the source again (the cache is bound
    to the source's sha256, so it is this source's code)."""
    import marshal

    return COMPILED_KIND, compiled_name(), marshal.dumps(compile(code, "<artifact>", "exec"))


def _placed(code: types.CodeType, path: str) -> types.CodeType:
    """code (and the code nested in it) as compiled from ``path``: tracebacks and
    linecache name the artifact where it is loaded, not where it was captured."""
    consts = tuple(_placed(c, path) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=path, co_consts=consts)


def execute(text: str, path: str, compiled: bytes | None = None) -> dict[str, Any]:
    """Run an artifact's python_code as its own module; its namespace, which
    defines ``forward``. ``compiled``: the capture's marshalled code of this text
    (the cache's COMPILED_KIND entry for this Python), used instead of compiling."""
    ns: dict[str, Any] = {"__name__": f"{MODULE_PREFIX}{_native.sha256_hex(text.encode('utf-8'))[:12]}",
                          "__file__": path}
    code = None
    if compiled is not None:
        import marshal

        try:
            code = _placed(marshal.loads(compiled), path)
        except (ValueError, EOFError, TypeError):
            pass  # unreadable here: the source is compiled instead
    if code is None:
        try:
            code = compile(text, path, "exec")
        except SyntaxError as e:
            raise PrecompileError(f"load: {path!r} is not valid Python ({e}); it is not a torch.compiler.precompile "
                                  "artifact, or it was damaged: capture again") from e
    exec(code, ns)
    if not callable(ns.get("forward")):
        raise PrecompileError(f"load: {path!r} defines no forward(); it is not a torch.compiler.precompile artifact")
    return ns


def literal_block(items: dict[str, Any]) -> str:
    """Module-level ``NAME = <literal>`` lines, readable and parseable without exec."""
    lines = []
    for name, value in items.items():
        text = repr(value)
        ast.literal_eval(text)  # the loader parses these without executing anything
        lines.append(f"{name} = {text}")
    return "\n".join(lines) + "\n"


def text_literal(text: str) -> str:
    """A triple-quoted literal that reads back as exactly ``text`` (a program
    carried inside the artifact stays readable as the source it is)."""
    body = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if body.endswith('"'):
        body = body[:-1] + '\\"'
    return '"""\\\n' + body + '"""'


# The banner both renderers put above literal_block: what follows it, up to the
# first blank line, is the metadata, read without parsing the program after it.
METADATA_BANNER = "# Metadata (literals: load() reads them without executing this file)\n"


def _metadata_block(code: str) -> str:
    """The metadata lines of python_code (after the banner and its rule, up to the
    first blank line); the whole text when it has no banner."""
    at = code.find(METADATA_BANNER)
    if at < 0:
        return code
    start = code.find("\n", at + len(METADATA_BANNER)) + 1  # past the rule under the banner
    end = code.find("\n\n", start)
    return code[start:] if end < 0 else code[start:end + 1]


def read_metadata(code: str) -> dict[str, Any]:
    """The literal ``NAME = value`` assignments of python_code's metadata block (the
    whole top level of a file without one). Only that block is parsed: the program
    below it is compiled once, when it runs."""
    try:
        tree = ast.parse(_metadata_block(code))
    except SyntaxError as e:
        raise PrecompileError(f"python_code is not valid Python ({e}); it is not a torch.compiler.precompile artifact") from e
    meta: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.isupper():
                try:
                    meta[name] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return meta


def torch_build() -> str:
    import torch

    return f"{torch.__version__}+git{getattr(torch.version, 'git_version', 'unknown')[:12]}"


def header_for(code: bytes, *, backend: str, tracer: str, meta: dict[str, Any] | None = None) -> str:
    return json.dumps({
        "backend": backend,
        "tracer": tracer,
        "code_hash": _native.sha256_hex(code),
        "torch_build": torch_build(),
        "python_version": platform.python_version(),
        "platform": f"{sys.platform}-{platform.machine()}",
        "created_by": CREATED_BY,
        "meta": meta or {},
    })


def encode_cache(code: bytes, *, backend: str, tracer: str, entries: list[tuple[str, str, bytes]],
                 meta: dict[str, Any] | None = None) -> bytes:
    entries = [*entries, compiled_entry(code)]
    return bytes(_native.cache_encode(header_for(code, backend=backend, tracer=tracer, meta=meta), entries))


def write_pair(artifact_path: str | os.PathLike[str], cache_path: str | os.PathLike[str],
               code: bytes, cache: bytes) -> None:
    """Both files, or neither: temps are written and fsynced before either rename.
    With a signing key set, `<artifact>.sig` is written after them."""
    code_path, cache_path_s = os.fspath(artifact_path), os.fspath(cache_path)
    signature = _signing.signature_for(code_path, code, cache_path_s, cache)
    try:
        for p in (code_path, cache_path_s):
            parent = os.path.dirname(os.path.abspath(p))
            os.makedirs(parent, exist_ok=True)
        _native.write_pair_atomic(code_path, code, cache_path_s, cache)
        # the pair's signature follows it; an unsigned write drops a stale one
        # (which would refuse the new pair under a trust policy)
        sig_path = _native.pair_signature_path(code_path)
        if signature is not None:
            _native.write_atomic(sig_path, signature)
        elif os.path.exists(sig_path):
            os.unlink(sig_path)
    except OSError as e:
        raise PrecompileError(
            f"could not write the artifact pair ({code_path}, {cache_path_s}): {e} "
            "Fix the path or permissions and capture again."
        ) from e
