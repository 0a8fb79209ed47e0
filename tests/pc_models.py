"""Models and step functions the end-to-end tests capture and serve.

Importable by the fresh processes the tests start (they run with this directory on
sys.path), so a captured fn's module exists at load time as it would in production.
"""

from __future__ import annotations

import torch
from torch import nn

from dyn_models import MLP  # noqa: F401 - the tests' one MLP, used as pc_models.MLP


class ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        return self.head(h.mean(dim=(2, 3)))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                                dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


class TiedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 12)
        self.mix = nn.Linear(12, 12)
        self.head = nn.Linear(12, 20, bias=False)
        self.head.weight = self.emb.weight  # tied

    def forward(self, ids):
        return self.head(torch.tanh(self.mix(self.emb(ids))))


def step(model, x):
    return model(x)


def train_step(model, x, target):
    loss = ((model(x) - target) ** 2).mean()
    loss.backward()
    return loss.detach()


def two_outputs(model, x, scale):
    y = model(x)
    return {"y": y * scale, "n": y.sum()}


def make(name: str, seed: int):
    """(fn, model, example args) for a scenario, weights drawn from ``seed``."""
    torch.manual_seed(seed)
    if name == "mlp":
        m = MLP()
        return step, m, (m, torch.randn(4, 8))
    if name == "convbn":
        m = ConvBN().train()
        return step, m, (m, torch.randn(2, 3, 8, 8))
    if name == "block":
        m = Block().train()
        return step, m, (m, torch.randn(2, 6, 32))
    if name == "train":
        m = MLP()
        return train_step, m, (m, torch.randn(4, 8), torch.randn(4, 4))
    if name == "tied":
        m = TiedLM()
        return step, m, (m, torch.randint(0, 20, (3, 5)))
    if name == "dict":
        m = MLP()
        return two_outputs, m, (m, torch.randn(4, 8), 3)
    if name == "unbacked":
        m = MLP()
        x = torch.randn(4, 8)
        torch._dynamo.decorators.mark_unbacked(x, 0)
        return step, m, (m, x)
    raise KeyError(name)


def bmm_step(a, b):
    """A batched matmul of two inputs: with max-autotune, Inductor's CPU GEMM template
    competes with ATen and the choice is benchmarked."""
    return torch.relu(torch.bmm(a, b))


def mutate_and_alias(model, x):
    """Mutates its input in place and returns a view of it beside the model output."""
    x.mul_(2)
    return model(x), x[:2]


def shared_dims(a, b):
    return a + b


def needs_guard(model, x):
    if x.shape[0] > 3:          # branching on a marked dim cannot serve every size
        return model(x)
    return model(x) * 2
