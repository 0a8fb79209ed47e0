"""Inductor's CPU vector ISA decision, recorded at capture and checked at serve time
from the CPU's flags alone.

Inductor decides the ISA by compiling and running probe programs on a fresh cache
directory; a frozen kernel was built for the capture host's decision, so the serving
host only needs the same machine type and every flag that decision names. The check
asks torch's own cpuinfo queries (``torch.cpu._is_*_supported``, what Inductor's
``x86_isa_checker`` asks) and imports nothing of Inductor: importing
``torch._inductor`` costs more than the rest of a cold start.
"""

from __future__ import annotations

import platform
from typing import Any, Callable


def decision() -> dict[str, Any]:
    """Capture side (Inductor is imported by then)."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    isa = pick_vec_isa()
    flags = str(isa).split() if str(isa) else []
    # Variants Inductor adds to the build flags without naming them in str(isa).
    if getattr(isa, "_is_avx512_bf16_supported", False):
        flags.append("avx512_bf16")
    if getattr(isa, "_is_amx_fp16_supported", False):
        flags.append("amx_fp16")
    return {"vec_isa": str(isa), "flags": flags, "machine": platform.machine()}


def _x86_checks() -> dict[str, Callable[[], bool]]:
    import torch

    cpu = torch.cpu
    return {
        "avx2": cpu._is_avx2_supported,
        "avx512": cpu._is_avx512_supported,
        "avx512_vnni": lambda: cpu._is_avx512_supported() and cpu._is_vnni_supported(),
        "amx_tile": cpu._is_amx_tile_supported,
        "avx512_bf16": cpu._is_avx512_bf16_supported,
        "amx_fp16": cpu._is_amx_fp16_supported,
    }


def _family(machine: str) -> str:
    return "x86" if machine in ("x86_64", "AMD64") else machine


def missing_flags(recorded: dict[str, Any]) -> list[str]:
    """Flags the recorded decision needs that this CPU lacks (empty: it can serve).

    Another machine type lacks all of them (a decision recorded without one was
    taken on x86). On a non-x86 machine of the capture's type the flags cannot be
    read without compiling, so they are taken as present (the torch build, checked
    separately, fixes the rest)."""
    flags = list(recorded.get("flags") or [])
    if not flags:
        return []
    here = _family(platform.machine())
    if _family(recorded.get("machine") or "x86_64") != here:
        return flags
    if here != "x86":
        return []
    checks = _x86_checks()
    return [f for f in flags if f not in checks or not checks[f]()]
