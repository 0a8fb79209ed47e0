"""Benchmark: MakeFxTracer capture and serve, this project vs torch 2.15's own
torch.compiler.precompile (the reference), side by side in one run.

Reports medians: capture time, warm load time, fresh-process time to first output,
per-call latency, and the ratio ours / reference. Called by scripts/bench; never by
the product or the tests. Usage: bench_makefx.py [--repeat N] [--backend inductor]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

MODEL = textwrap.dedent("""
    import torch
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(64, 256); self.fc2 = torch.nn.Linear(256, 64)
        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))
    def step(model, x):
        return model(x)
""")

CHILD = textwrap.dedent("""
    import json, sys, time
    t_start = time.perf_counter()
    impl, phase, d, backend = sys.argv[1:5]
    sys.path.insert(0, d)
    import torch
    import bench_model
    if impl == "ours":
        import torch_precompile as pc
    else:
        import torch.compiler.precompile as pc   # torch 2.15's reference
    torch.manual_seed(0)
    m = bench_model.MLP(); x = torch.randn(32, 64)
    out = {}
    art, cache = f"{d}/artifact_{impl}.py", f"{d}/artifact_{impl}.cache"
    if phase == "capture":
        t = time.perf_counter()
        with pc.capture(bench_model.step, artifact_path=art, cache_path=cache,
                        tracer=pc.MakeFxTracer(), backend=backend) as cap:
            cap(m, x)
        out["capture_s"] = time.perf_counter() - t
    else:
        t = time.perf_counter()
        f = pc.load(art, cache)
        out["load_s"] = time.perf_counter() - t
        y = f(m, x)
        out["first_output_s"] = time.perf_counter() - t_start
        for _ in range(20):
            f(m, x)
        times = []
        for _ in range(200):
            t = time.perf_counter(); f(m, x); times.append(time.perf_counter() - t)
        times.sort()
        out["per_call_us"] = times[len(times) // 2] * 1e6
    print("RESULT " + json.dumps(out))
""")


def run_child(py: str, d: str, impl: str, phase: str, backend: str) -> dict:
    t = time.perf_counter()
    p = subprocess.run([py, f"{d}/bench_child.py", impl, phase, d, backend], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{impl} {phase} failed:\n{p.stderr[-3000:]}")
    line = next(x for x in p.stdout.splitlines() if x.startswith("RESULT "))
    out = json.loads(line[7:])
    out["process_s"] = wall
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default="inductor")
    a = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as d:
        with open(f"{d}/bench_model.py", "w") as f:
            f.write(MODEL)
        with open(f"{d}/bench_child.py", "w") as f:
            f.write(CHILD)
        rows: dict[str, dict[str, list[float]]] = {"ours": {}, "torch": {}}
        for i in range(a.repeat):
            for impl in ("ours", "torch"):  # interleaved, so drift hits both alike
                print(f"  makefx: round {i + 1}/{a.repeat} {impl} capture + serve", file=sys.stderr, flush=True)
                for phase in ("capture", "serve"):
                    for k, v in run_child(py, d, impl, phase, a.backend).items():
                        if phase == "capture" and k == "process_s":
                            continue
                        key = "fresh_process_first_output_s" if (phase == "serve" and k == "process_s") else k
                        rows[impl].setdefault(key, []).append(v)
    print(f"\nMakeFxTracer, backend={a.backend}, 64-256-64 MLP, medians of {a.repeat} runs")
    print(f"{'metric':38} {'ours':>12} {'torch 2.15':>12} {'ratio':>8} target")
    targets = {"capture_s": 1.1, "load_s": 1.0, "per_call_us": 1.05}
    for key in ("capture_s", "load_s", "first_output_s", "fresh_process_first_output_s", "per_call_us"):
        o, r = statistics.median(rows["ours"][key]), statistics.median(rows["torch"][key])
        t = targets.get(key)
        print(f"{key:38} {o:12.4f} {r:12.4f} {o / r:8.2f} {'<= ' + str(t) if t else ''}")


if __name__ == "__main__":
    main()
