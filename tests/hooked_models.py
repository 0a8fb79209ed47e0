"""A model whose forward Dynamo leaves to eager (tests/test_dynamo.py): its own
module, since the Dynamo-disabled hook imports Dynamo, which the Dynamo-free
serving tests' models must not."""

import torch
from torch import nn


@torch._dynamo.disable
def _note(layer):
    """A hook Dynamo must not trace, as FSDP2's pre-forward hooks are (``skip_fsdp_hooks``)."""
    layer.calls = getattr(layer, "calls", 0) + 1


class HookedBlocks(nn.Module):
    """A loop over blocks with a Dynamo-disabled call in it: a graph break inside a
    loop, which Dynamo cannot resume from, so it leaves ``forward`` to eager."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        for block in self.blocks:
            _note(block)
            x = torch.tanh(block(x))
        return x


def hooked_step(model, x):
    return (model(x) * 2).sum(dim=-1)
