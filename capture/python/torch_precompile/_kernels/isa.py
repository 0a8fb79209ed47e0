"""Inductor's CPU vector ISA decision, recorded at capture and checked at serve time
from the CPU's flags alone.

Inductor decides the ISA by compiling and running probe programs on a fresh cache
directory; a frozen kernel was built for the capture host's decision, so the serving
host only needs to have every flag that decision names (cpuinfo, no compiler).
"""

from __future__ import annotations

from typing import Any


def decision() -> dict[str, Any]:
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    isa = pick_vec_isa()
    return {"vec_isa": str(isa), "flags": str(isa).split() if str(isa) else []}


def missing_flags(recorded: dict[str, Any]) -> list[str]:
    """Flags the recorded decision needs that this CPU lacks (empty: it can serve)."""
    import platform

    flags = recorded.get("flags") or []
    if not flags:
        return []
    if platform.machine() not in ("x86_64", "AMD64"):
        return flags
    from torch._inductor.cpu_vec_isa import x86_isa_checker

    have = set(x86_isa_checker())
    return [f for f in flags if f not in have]
