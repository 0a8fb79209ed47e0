"""Benchmark: a training step under torchrun (2 gloo ranks, CPU, one thread each)
with DDP (six gradient buckets) and FSDP2, per-step time of the served step
against eager and torch.compile, side by side in one run.

What it answers (docs/training.md): the served DDP step runs Dynamo's capture
with ``optimize_ddp`` off, one backward graph whose gradients DDP's reducer
all-reduces as they land (at its end), where torch.compile splits the graph at
bucket boundaries so all-reduce overlaps the backward; the served FSDP2 step runs
FSDP2's hooks and the blocks eagerly, as torch.compile of the whole step does.

Rows, per wrapper, each a median of --repeat jobs (each job: the median of 20
steps after 3 warm-up steps, rank 0): eager, torch.compile warm (after its
compiles), served (the pair captured in an earlier job, loaded, locked down).
Called by scripts/bench (section "dist"). Usage: bench_dist.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench_common import host, timed

WORKER = Path(__file__).resolve().parent / "bench_dist_worker.py"


def job(wrap: str, mode: str, out: str) -> dict[str, float]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           str(WORKER), wrap, mode, out]
    env = host("bench-dist-")
    env["OMP_NUM_THREADS"] = "1"
    return timed(cmd, env, f"bench_dist: {wrap} {mode}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; 2 ranks, one thread each; medians of {a.repeat} jobs")
    print("wrapper | eager ms | torch.compile ms | served ms | served/eager | served/compile")
    for wrap in ("ddp", "fsdp"):
        s: dict[str, list[float]] = {}
        for _ in range(a.repeat):
            out = tempfile.mkdtemp(prefix="bench-dist-pairs-")
            job(wrap, "capture", out)
            for mode in ("eager", "compile", "serve"):
                s.setdefault(mode, []).append(job(wrap, mode, out)["step_ms"])
        m = {k: statistics.median(v) for k, v in s.items()}
        print(f"{wrap} | {m['eager']:.2f} | {m['compile']:.2f} | {m['serve']:.2f} | "
              f"{m['serve'] / m['eager']:.2f} | {m['serve'] / m['compile']:.2f}")
    print("per step = forward, backward (with the wrapper's collectives), SGD step; served = our "
          "pair under no_compilation()")


if __name__ == "__main__":
    main()
