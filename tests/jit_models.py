"""A step that calls a TorchScript function, as DeBERTa-v2's attention does. Imported
only in the fresh processes of the test that needs it: ``torch.jit.script`` warns
that it is deprecated, which pytest's warning filter would turn into an error."""

from __future__ import annotations

import torch


@torch.jit.script
def scaled(x: torch.Tensor, k: float) -> torch.Tensor:
    return x * k


def step(x):
    return scaled(x, 2.0) + 1
