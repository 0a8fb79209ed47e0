"""One rank of scripts/bench_dist.py (under torchrun, gloo, CPU): ``bench_dist_worker.py
WRAP MODE DIR``. WRAP is ddp (several gradient buckets) or fsdp (fully_shard on each
block and the root); MODE is eager, compile (torch.compile of the step), capture
(our capture of it, writing DIR/step.RANK.py) or serve (that pair, loaded, under
no_compilation()). Rank 0 prints RESULT with the median step time."""

import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

WIDTH, DEPTH, BATCH = 512, 6, 32


class Blocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(WIDTH, WIDTH) for _ in range(DEPTH))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def step(model, x):
    loss = ((model(x) - 1.0) ** 2).mean()
    loss.backward()
    return loss.detach()


def main():
    wrap, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Blocks()
    if wrap == "ddp":
        model = DDP(model, bucket_cap_mb=1)   # a layer a bucket (1 MB weights): six buckets
    else:
        from torch.distributed.fsdp import fully_shard

        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    batches = [torch.randn(BATCH, WIDTH, generator=g) for _ in range(4)]
    paths = (os.path.join(out, f"step.{rank}.py"), os.path.join(out, f"step.{rank}.cache"))
    fn, cap = step, None
    if mode == "compile":
        fn = torch.compile(step)
    elif mode == "capture":
        import torch_precompile as tp

        cap = tp.capture(step, artifact_path=paths[0], cache_path=paths[1])
        fn = cap.__enter__()
    elif mode == "serve":
        import torch_precompile as tp

        fn = tp.load(*paths)
    times = []
    for i in range(3 if mode == "capture" else 23):
        x = batches[i % len(batches)]
        t = time.perf_counter()
        fn(model, x)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    if cap is not None:
        cap.__exit__(None, None, None)
    dist.barrier()
    if rank == 0:
        sys.stdout.flush()
        os.write(1, ("RESULT " + json.dumps({"step_ms": statistics.median(times[3:] or times) * 1e3}) + "\n").encode())
    dist.destroy_process_group()


main()
