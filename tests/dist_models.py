"""Tiny steps with collectives inside, for the 2-rank torchrun tests
(test_multirank.py); module-level so a serving job can import them."""

import os

import torch
import torch.distributed as dist

from dyn_models import MLP  # the tests' one MLP


def make(rank: int) -> tuple[MLP, torch.Tensor]:
    """The same weights on every rank, a different input per rank (so the
    all_reduce has something to do)."""
    torch.manual_seed(0)
    model = MLP()
    return model, torch.randn(3, 8) + rank


def step_ar(model: MLP, x: torch.Tensor) -> torch.Tensor:
    """The mean of every rank's output: Dynamo bakes the world size into the graph."""
    y = model(x)
    dist.all_reduce(y)
    return y / dist.get_world_size()


def step_rank(model: MLP, x: torch.Tensor) -> torch.Tensor:
    """Weighted by rank: Dynamo bakes this process's rank into the graph."""
    y = model(x) * (dist.get_rank() + 1)
    dist.all_reduce(y)
    return y


def step_env(model: MLP, x: torch.Tensor) -> torch.Tensor:
    """Weighted by torchrun's RANK, read from the environment: no process group in
    sight, and still a rank baked into the graph."""
    return model(x) * (int(os.environ["RANK"]) + 1)


def step_train(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A training step over a DistributedDataParallel-wrapped MLP: DDP's hooks
    all-reduce the gradients."""
    loss = model(x).sum()
    loss.backward()
    return loss.detach()


def step_grads(model: MLP, x: torch.Tensor) -> torch.Tensor:
    """A training step with DDP's gradient all-reduce written out: the mean of
    every rank's gradients, what DistributedDataParallel leaves in .grad."""
    loss = model(x).sum()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad.div_(dist.get_world_size())
    return loss.detach()


class Breaking(torch.nn.Module):
    """A graph break inside a child module's forward: the artifact is installed."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        torch._dynamo.graph_break()
        dist.all_reduce(y)
        return y


class Wrapper(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Breaking()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) * 2


def step_plain(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x)


class Deep(torch.nn.Module):
    """Four 32x32 layers: with a small bucket_cap_mb, DDP puts them in several
    gradient buckets."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def make_deep(rank: int, seed: int = 0) -> tuple[Deep, list[torch.Tensor]]:
    """The same weights on every rank (``seed``), four batches that differ by rank."""
    torch.manual_seed(seed)
    model = Deep()
    g = torch.Generator().manual_seed(100 + rank)
    return model, [torch.randn(6, 32, generator=g) for _ in range(4)]


def step_mse(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A training step with a loss that keeps the ReLU net learning (a sum of its
    outputs drives them to zero within a few steps)."""
    loss = ((model(x) - 1.0) ** 2).mean()
    loss.backward()
    return loss.detach()


def fully_sharded(model: Deep) -> Deep:
    """FSDP2 as its docs use it: ``fully_shard`` on each block, then on the root."""
    from torch.distributed.fsdp import fully_shard

    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    return model


# 3 KB buckets: once DDP rebuilds its buckets (second step), each layer's weight and
# bias land in buckets of their own (4 or more)
BUCKET_CAP_MB = 0.003
