"""Capture side of ``runtime``: point a generated program's Inductor imports at the
stand-ins, so serving it imports no Inductor.

Only top-level imports whose every name has a stand-in are rewritten (an import
inside the program's docstrings is text, not code). They become one block that
falls back to the original lines when torch_precompile is not installed, so the
program stays runnable on its own.
"""

from __future__ import annotations

import ast
import re
from typing import Any

# (module, name, bound as) -> the stand-in's name in runtime
STAND_INS = {
    ("torch._inductor.async_compile", "AsyncCompile", "AsyncCompile"): "AsyncCompile",
    ("torch._inductor.hooks", "run_intermediate_hooks", "run_intermediate_hooks"): "run_intermediate_hooks",
    ("torch._inductor.utils", "maybe_profile", "maybe_profile"): "maybe_profile",
    ("torch._inductor.codegen.memory_planning", "_align", "align"): "align",
    ("torch._inductor.runtime.runtime_utils", "assert_tensor_metadata", "assert_tensor_metadata"):
        "assert_tensor_metadata",
    ("torch._inductor.select_algorithm", "extern_kernels", "extern_kernels"): "ExternKernels",
    ("torch._inductor.codecache", "CppWrapperCodeCache", "CppWrapperCodeCache"): "CppWrapperCodeCache",
    ("torch._functorch._aot_autograd.standalone_runtime", "mark_dynamo_propagated_dynamic_indices",
     "mark_dynamo_propagated_dynamic_indices"): "mark_dynamo_propagated_dynamic_indices",
}


def rewrite(program: str) -> str:
    lines = program.splitlines(keepends=True)
    spans: list[tuple[int, int]] = []   # 0-based [start, end) line ranges to replace
    names: list[str] = []
    for node in ast.parse(program).body:
        if not isinstance(node, ast.ImportFrom) or node.level or node.module is None:
            continue
        keys = [(node.module, a.name, a.asname or a.name) for a in node.names]
        if not keys or any(k not in STAND_INS for k in keys):
            continue
        spans.append((node.lineno - 1, node.end_lineno or node.lineno))
        names += [STAND_INS[k] for k in keys if STAND_INS[k] not in names]
    if not spans:
        return program
    originals = "".join("".join(lines[a:b]) for a, b in spans)
    plain = sorted(n for n in names if n != "ExternKernels")
    block = ["try:  # torch_precompile serves frozen kernels without importing Inductor\n"]
    if plain:
        block.append(f"    from torch_precompile._kernels.runtime import {', '.join(plain)}\n")
    if "ExternKernels" in names:
        block.append("    from torch_precompile._kernels.runtime import ExternKernels as _PcExternKernels\n")
        block.append(f"    extern_kernels = _PcExternKernels({extern_places(program)!r})\n")
        block.append("    del _PcExternKernels\n")
    block.append("except ImportError:  # run without torch_precompile: Inductor's own\n")
    block += ["    " + line for line in originals.splitlines(keepends=True)]
    first = spans[0][0]   # the block takes the first import's place
    drop = {i for a, b in spans for i in range(a, b)}
    rest = [line for i, line in enumerate(lines[first:], first) if i not in drop]
    return "".join(lines[:first] + block + rest)


def extern_places(program: str) -> dict[str, str]:
    """Where in torch each ``extern_kernels.<name>`` the program calls lives, for
    the names that are torch functions or operators."""
    from torch._inductor.select_algorithm import extern_kernels

    places = {}
    for name in sorted(set(re.findall(r"\bextern_kernels\.([A-Za-z_]\w*)", program))):
        place = _place(getattr(extern_kernels, name, None))
        if place is not None:
            places[name] = place
    return places


def _place(fn: Any) -> str | None:
    import torch

    if isinstance(fn, torch._ops.OpOverload):
        ns, op = fn._schema.name.split("::", 1)
        return f"torch.ops.{ns}.{op}.{fn._overloadname or 'default'}"
    if isinstance(fn, torch._ops.OpOverloadPacket):
        ns, op = fn._qualified_op_name.split("::", 1)
        return f"torch.ops.{ns}.{op}"
    name = getattr(fn, "__name__", None)
    if name and getattr(torch, name, None) is fn:
        return f"torch.{name}"
    return None
