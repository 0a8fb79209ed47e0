"""A torchrun worker that calls torch.compile and knows nothing of precompile
(tests/test_compile_sites.py): ``sites_dist.py SEED [--rank-site]``. Each rank
compiles an MLP, runs it on its own batches and all-reduces the mean;
``--rank-site`` also compiles a function whose graph reads the rank
(``dist.get_rank()``), reporting its error instead of failing; ``--ddp`` also
trains a DistributedDataParallel-wrapped MLP through ``torch.compile(ddp)`` for
three steps (SGD with momentum, each rank its own batches) beside the same loop
eagerly. Prints ``RESULT <json>``."""

import json
import os
import sys

import torch
import torch.distributed as dist


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def by_rank(x):
    return x * (dist.get_rank() + 1)


def train_ddp(seed, rank):
    """Whether the compiled DDP loop's losses and parameters equal eager DDP's."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(seed + 1)
    model = MLP()
    reference = MLP()
    reference.load_state_dict(model.state_dict())
    ddp, eager = DDP(model), DDP(reference)
    compiled = torch.compile(ddp)
    g = torch.Generator().manual_seed(7 + rank + seed)
    batches = [torch.randn(4, 6, generator=g) for _ in range(3)]
    losses = []
    for m, net in ((compiled, model), (eager, reference)):
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        run = []
        for x in batches:
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            run.append(loss.item())
        losses.append(run)
    return bool(torch.allclose(torch.tensor(losses[0]), torch.tensor(losses[1]), atol=1e-5)
                and all(torch.allclose(a, b, atol=1e-5) for a, b in zip(model.parameters(), reference.parameters())))


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(int(sys.argv[1]))
    net = MLP()
    compiled = torch.compile(net)
    g = torch.Generator().manual_seed(100 + rank + int(sys.argv[1]))
    close = []
    for _ in range(2):
        x = torch.randn(4, 6, generator=g)
        y = compiled(x)
        dist.all_reduce(y)
        want = net(x)
        dist.all_reduce(want)
        close.append(bool(torch.allclose(y, want, atol=1e-5)))
    result = {"rank": rank, "close": close}
    if "--ddp" in sys.argv:
        result["ddp"] = train_ddp(int(sys.argv[1]), rank)
    if "--rank-site" in sys.argv:
        x = torch.randn(3, generator=g)
        try:
            result["by_rank"] = bool(torch.allclose(torch.compile(by_rank)(x), x * (rank + 1)))
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            result["by_rank"] = f"{type(e).__name__}: {e}"
    sys.stdout.flush()
    os.write(1, ("RESULT " + json.dumps(result) + "\n").encode())
    dist.barrier()
    dist.destroy_process_group()


main()
