"""The demo's model: a small transformer block and the step function captured.

``step`` is a module-level function of an importable module, as a capture needs;
the model is passed in, so no weights are baked into the artifact.
"""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def make(seed: int = 0):
    torch.manual_seed(seed)
    return Block().eval(), torch.randn(2, 16, 64)


def step(model, x):
    h = model(x)
    # A graph break in the entry, as real code has (logging, a data-dependent
    # branch, an unsupported call): Dynamo splits the step into two graphs and
    # a continuation, and the artifact carries all of them.
    torch._dynamo.graph_break()
    return torch.nn.functional.layer_norm(h, h.shape[-1:]) * 2
