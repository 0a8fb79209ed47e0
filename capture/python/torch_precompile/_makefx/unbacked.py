"""``mark_unbacked`` dims: read the marks, and build fakes with unbacked sizes.

A marked dim becomes an unbacked SymInt, which nothing can guard on, so one artifact
serves every runtime size of it and a graph that would need to branch on it fails at
capture. Dims sharing a ``shape_id`` share one symbol.
"""

from __future__ import annotations

from typing import Any

import torch

# Per leaf: {dim: (shape_id, min, max)}; the private attributes are what
# torch._dynamo.decorators.mark_unbacked sets.
Marks = dict[int, tuple[Any, Any, Any]]


def read_marks(user_flat: list[Any]) -> list[Marks]:
    out: list[Marks] = []
    for t in user_flat:
        if not isinstance(t, torch.Tensor):
            out.append({})
            continue
        dims = set(getattr(t, "_dynamo_unbacked_indices", None) or ())
        dims |= set(getattr(t, "_dynamo_strict_unbacked_indices", None) or ())
        shape_ids = getattr(t, "_dynamo_shape_ids", None) or {}
        bounds = getattr(t, "_dynamo_unbacked_bounds", None) or {}
        out.append({d: (shape_ids.get(d), *bounds.get(d, (None, None))) for d in sorted(dims)})
    return out


def refuse_unsupported_marks(user_flat: list[Any], marks: list[Marks]) -> None:
    """The dim marks one MakeFx trace cannot honor, refused before tracing:
    ``mark_dynamic`` (a backed dynamic dim: MakeFx specializes every unmarked dim),
    ``specialize_on`` (value-specialized variants need several compiles), and an
    unbacked mark on a leaf that is neither contiguous nor channels_last (its fake
    is built dense, so the program would expect other strides)."""
    from .._errors import PrecompileError

    for i, (t, per) in enumerate(zip(user_flat, marks)):
        if not isinstance(t, torch.Tensor):
            continue
        dynamic = sorted(getattr(t, "_dynamo_dynamic_indices", None) or ())
        if dynamic:
            raise PrecompileError(
                f"capture: input leaf {i} has dims {dynamic} marked with mark_dynamic, which a "
                "MakeFxTracer capture cannot honor (it specializes every dim to the example); "
                "mark them with torch._dynamo.decorators.mark_unbacked to serve any size, or "
                "capture with DynamoTracer"
            )
        special = {d: v for d, v in (getattr(t, "_specialize_on", None) or {}).items() if v}
        if special:
            raise PrecompileError(
                f"capture: input leaf {i} marks dims {sorted(special)} with specialize_on, which "
                "needs one compile per specialization; a MakeFxTracer capture is one trace. "
                "Drop specialize_on, or capture with DynamoTracer"
            )
        if per and not (t.is_contiguous() or (t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last))):
            raise PrecompileError(
                f"capture: input leaf {i} is marked with mark_unbacked but is not contiguous "
                f"(strides {tuple(t.stride())}); an unbacked capture is specialized to a dense "
                "layout: pass .contiguous() at capture and at serve time"
            )


def fakeify(pb: list[torch.Tensor], user_flat: list[Any], marks: list[Marks]) -> tuple[list[Any], Any]:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    shape_env = ShapeEnv()
    fake_mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True)
    shared: dict[Any, Any] = {}
    fakes: list[Any] = []
    with fake_mode:
        fakes += [fake_mode.from_tensor(t, static_shapes=True) for t in pb]
        for leaf, per in zip(user_flat, marks):
            if not isinstance(leaf, torch.Tensor):
                fakes.append(leaf)
                continue
            if not per:
                fakes.append(fake_mode.from_tensor(leaf, static_shapes=True))
                continue
            sizes: list[Any] = []
            for d, s in enumerate(leaf.shape):
                if d not in per:
                    sizes.append(int(s))
                    continue
                shape_id, lo, hi = per[d]
                u = shared.get(shape_id) if shape_id is not None else None
                if u is None:
                    u = shape_env.create_unbacked_symint()
                    torch._check(u >= 0)
                    if shape_id is not None:
                        shared[shape_id] = u
                if lo is not None:
                    torch._check(u >= lo)
                if hi is not None:
                    torch._check(u <= hi)
                sizes.append(u)
            fmt = torch.channels_last if (leaf.dim() == 4 and not leaf.is_contiguous()
                                          and leaf.is_contiguous(memory_format=torch.channels_last)) \
                else torch.contiguous_format
            f = torch.empty(sizes, dtype=leaf.dtype, device=leaf.device, memory_format=fmt)
            f.requires_grad_(leaf.requires_grad)
            fakes.append(f)
    return fakes, fake_mode
