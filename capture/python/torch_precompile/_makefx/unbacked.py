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
