"""Training steps as users write them, for the training-loop tests: a tiny MLP,
module-level steps (the loss and backward inside; the optimizer after the step or
inside it), and an eager-or-served loop around them."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.norm(F.gelu(self.fc1(x))))


def mlp(seed: int = 0) -> MLP:
    torch.manual_seed(seed)
    return MLP()


def batches(n: int, seed: int, batch: int = 6):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, 8, generator=g), torch.randn(batch, 4, generator=g)) for _ in range(n)]


def step(model, x, y):
    loss = F.mse_loss(model(x), y)
    loss.backward()
    return loss.detach()


def step_half(model, x, y):
    """One of two micro-batches: half the loss, gradients accumulate."""
    loss = F.mse_loss(model(x), y) / 2
    loss.backward()
    return loss.detach()


def step_clip(model, x, y):
    loss = F.mse_loss(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    return loss.detach()


def step_bf16(model, x, y):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
    loss = F.mse_loss(out.float(), y)
    loss.backward()
    return loss.detach()


def step_opt(model, opt, x, y):
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "sgd": lambda ps: torch.optim.SGD(ps, lr=5e-2, momentum=0.9),
}


def train(model, fn, data, optimizer: str, *, micro: int = 1, inside: bool = False, schedule: bool = False):
    """Losses of a loop over ``data``: ``micro`` micro-batches per optimizer step,
    the optimizer after the step or inside it, a LambdaLR that changes the
    learning rate every step when ``schedule``."""
    opt = OPTIMIZERS[optimizer](model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 / (1 + i)) if schedule else None
    losses = []
    for i, (x, y) in enumerate(data):
        if inside:
            losses.append(float(fn(model, opt, x, y)))
        else:
            losses.append(float(fn(model, x, y)))
            if (i + 1) % micro == 0:
                opt.step()
                opt.zero_grad(set_to_none=True)
        if sched is not None:
            sched.step()
    return losses
