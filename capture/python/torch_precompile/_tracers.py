"""Tracer configurations passed as ``tracer=`` to :func:`capture`."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class DynamoTracer:
    """The dynamo capture front-end (the default), passed as tracer= to torch.compiler.precompile.capture().

    An execution-driven multi-graph capture that analyzes the Python (bytecode)
    rather than tracing one path: it records graph-break continuations and every
    guarded recompilation the calls exercise, so a capture with this tracer takes as
    many calls as you make, keyword arguments included. Part of the prototype
    torch.compiler.precompile API, so it may change without a deprecation cycle.

    guard_filter_fn takes the GuardFilterEntry records (guard_type, name, …) and
    returns one keep flag per entry. It filters the runtime guards during capture as
    well as the serialized ones (the default drops only what cannot be serialized),
    so a dropped guard never triggers a recompile during capture; recompile_limit
    caps recompilations per frame, and a call past it runs eager and is absent from
    the artifact without any gate refusing it; dynamic forces dynamic shapes as
    torch.compile(dynamic=) does. The require_* gates refuse, at write time, an
    artifact with a coverage gap (require_complete: a bypassed or uncovered frame, a
    call that raised) or one whose dropped guards told captured variants apart or
    hang off a configuration-chosen slot (require_no_risky_drops). Other dropped
    guards, such as the identity guards every model drops because they cannot be
    serialized, are listed in the artifact rather than refused.
    """

    guard_filter_fn: Callable[[list[Any]], list[bool]] | None = None
    recompile_limit: int = 256
    dynamic: bool | None = None
    require_complete: bool = True
    require_no_risky_drops: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.recompile_limit, int) or self.recompile_limit < 1:
            raise ValueError(
                f"DynamoTracer(recompile_limit={self.recompile_limit!r}): must be a positive int"
            )
        if self.dynamic not in (None, True, False):
            raise ValueError(f"DynamoTracer(dynamic={self.dynamic!r}): must be None, True or False")


@dataclasses.dataclass(frozen=True)
class MakeFxTracer:
    """The make_fx capture front-end, passed as tracer= to a precompile capture.

    A NON-STRICT single make_fx trace: it records the ATen ops of ONE execution of
    fn, so a capture with this tracer takes exactly one call and refuses a second,
    and control flow and shapes are specialized to that call (the source of the
    programming-model contract). Part of the prototype torch.compiler.precompile
    API, so it may change without a deprecation cycle.

    The contract in brief: every tensor fn reads is an argument or a registered
    parameter/buffer of an nn.Module argument, and shapes are static unless a dim is
    marked with mark_unbacked (torch._dynamo.decorators, inductor backend only)
    before the call: a marked dim is captured as an unbacked symint, so one artifact
    serves any runtime size of it, and a graph that needs to guard on it fails at
    capture. Dims that must be equal at runtime must share a shape_id: marked
    independently they bake a silent equal-size assumption, and a mismatch at
    runtime is not caught. Each input's dtype and device are specialized too (a
    runtime mismatch is rejected), the inductor backend additionally specializes on
    memory format, and a nested-tensor example input is refused.

    decompositions is an optional decomposition table (a dict mapping each
    OpOverload to a decomposition function) forwarded to make_fx as its
    decomposition_table; it is specific to this tracer (Dynamo lowers through the
    backend instead).
    """

    decompositions: dict | None = None
