"""A torchrun worker that calls torch.compile and knows nothing of precompile
(tests/test_compile_sites.py): ``sites_dist.py SEED``. Each rank compiles an MLP,
runs it on its own batches and all-reduces the mean; prints ``RESULT <json>``."""

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
    sys.stdout.flush()
    os.write(1, ("RESULT " + json.dumps({"rank": rank, "close": close}) + "\n").encode())
    dist.barrier()
    dist.destroy_process_group()


main()
