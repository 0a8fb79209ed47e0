"""Benchmark (issue #12): the serving path, side by side in one run.

For each model (a 64-128-10 MLP, a d=128 transformer encoder block, a small
convnet; weights of seed 0, eval mode, inputs under torch.no_grad()) and each
backend (eager, inductor), the artifacts are captured once beforehand:
MakeFxTracer, DynamoTracer, and DynamoTracer on a function with a graph break
(a print between two graphs), and DynamoTracer on a function whose break is
inside a child module's forward (served installed, through Dynamo). Then:

  cold start   fresh process on a cold host (empty Inductor/Triton dirs, its own
               TMPDIR and cwd, locked down, strict shim, journal) until the first
               output, against eager in the same conditions; also whether
               torch._dynamo / torch._inductor were imported, and compiler runs
  per call     median latency over --calls calls after a warm-up, one process per
               configuration, against eager and torch.compile warm (same backend)

Reports medians over --repeat rounds and ratios to eager (cold) and to
torch.compile (per call). Called by scripts/bench (section "serving").
Usage: bench_serving.py [--repeat N] [--calls N] [--models mlp,block,conv] [--tables cold,call]
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

MODELS = textwrap.dedent("""
    import torch
    from torch import nn

    def make(name):
        torch.manual_seed(0)
        if name == "mlp":
            return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).eval(), torch.randn(8, 64)
        if name == "block":
            layer = nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True).eval()
            return layer, torch.randn(2, 16, 128)
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)).eval(), torch.randn(2, 3, 16, 16)

    def step(model, x):
        return model(x)

    def broken(model, x):
        y = model(x)
        print("", end="")
        return torch.cos(y)

    class Tail(nn.Module):             # a break inside a child's forward: installed
        def forward(self, y):
            y = torch.sin(y)
            print("", end="")
            return torch.cos(y)

    TAIL = Tail()

    def installed(model, x):
        return TAIL(model(x))
""")

CAPTURE = textwrap.dedent("""
    import sys, torch, torch_precompile as tp, bench_models as bm
    torch.backends.mha.set_fastpath_enabled(False)
    name, tracer, backend, fn, out = sys.argv[1:6]
    model, x = bm.make(name)
    # installed artifacts do not check pinned bindings (README, Limits): the block's
    # activation slot is accepted as a risky drop there
    t = (tp.MakeFxTracer() if tracer == "makefx" else
         tp.DynamoTracer(require_no_risky_drops=fn != "installed"))
    with torch.no_grad():
        with tp.capture(getattr(bm, fn), artifact_path=out + ".py", cache_path=out + ".cache",
                        tracer=t, backend=backend) as cap:
            cap(model, x)
""")

SERVE = textwrap.dedent("""
    import sys, time
    t0 = time.perf_counter()
    import torch
    torch.backends.mha.set_fastpath_enabled(False)
    import bench_models as bm
    name, kind, fn, art, calls = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    model, x = bm.make(name)
    if kind == "eager":
        f = getattr(bm, fn)
    elif kind.startswith("compile-"):
        f = torch.compile(getattr(bm, fn), backend=kind.split("-", 1)[1])
    else:
        import torch_precompile as tp
        f = tp.load(art + ".py", art + ".cache")
    with torch.no_grad():
        y = f(model, x)
        first = time.perf_counter() - t0
        print("FIRST", flush=True)
        heavy = [m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules]
        per_call = None
        if calls:
            for _ in range(max(50, calls // 10)):
                f(model, x)
            t = time.perf_counter()
            for _ in range(calls):
                f(model, x)
            per_call = (time.perf_counter() - t) / calls * 1e6
    print("RESULT " + __import__("json").dumps({"first": first, "heavy": heavy, "per_call": per_call}))
""")


def run(py: str, script: str, args: list[str], env: dict[str, str], cwd: str) -> tuple[float, dict]:
    t = time.perf_counter()
    p = subprocess.Popen([py, "-c", script, *args], env=env, cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    wall = None
    out = []
    for line in p.stdout:
        if line.startswith("FIRST") and wall is None:
            wall = time.perf_counter() - t
        out.append(line)
    err = p.stderr.read()
    if p.wait() != 0:
        raise SystemExit(f"bench_serving: {args} failed:\n{err[-3000:]}")
    result = json.loads(next(l for l in out if l.startswith("RESULT"))[7:])
    return wall, result


def cold_env(base: dict[str, str], root: str, shim: str | None) -> dict[str, str]:
    env = dict(base)
    for sub in ("inductor", "triton", "tmp", "cwd"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    env.update(TORCHINDUCTOR_CACHE_DIR=os.path.join(root, "inductor"), TRITON_CACHE_DIR=os.path.join(root, "triton"),
               TMPDIR=os.path.join(root, "tmp"), TORCH_PRECOMPILE_NO_COMPILATION="1", PRECOMPILE_STRICT="1",
               PRECOMPILE_JOURNAL=os.path.join(root, "journal.jsonl"))
    if shim:
        env["LD_PRELOAD"] = shim
    return env


def compiles(root: str) -> int:
    path = os.path.join(root, "journal.jsonl")
    if not os.path.exists(path):
        return 0
    return sum(1 for line in open(path) if line.strip() and json.loads(line).get("kind") == "compile")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--models", default="mlp,block,conv")
    ap.add_argument("--shim", help="libprecompile.so to preload in the cold-host runs (scripts/bench passes it)")
    ap.add_argument("--tables", default="cold,call", help="which tables: cold, call or both")
    a = ap.parse_args()
    py = sys.executable
    work = tempfile.mkdtemp(prefix="bench-serving-")
    with open(os.path.join(work, "bench_models.py"), "w") as f:
        f.write(MODELS)
    base = dict(os.environ, PYTHONPATH=work + os.pathsep + os.environ.get("PYTHONPATH", ""))
    configs = [("makefx", "step"), ("dynamo", "step"), ("dynamo", "broken"), ("dynamo", "installed")]
    models = a.models.split(",")
    print(f"capturing {len(models) * 2 * len(configs)} artifacts ...", flush=True)
    for name in models:
        for backend in ("eager", "inductor"):
            for tracer, fn in configs:
                out = os.path.join(work, f"{name}-{backend}-{tracer}-{fn}")
                env = dict(base, TORCHINDUCTOR_CACHE_DIR=out + ".ind", TRITON_CACHE_DIR=out + ".tri")
                p = subprocess.run([py, "-c", CAPTURE, name, tracer, backend, fn, out], env=env, cwd=work,
                                   capture_output=True, text=True)
                if p.returncode:
                    raise SystemExit(f"bench_serving: capture {out} failed:\n{p.stderr[-3000:]}")
    n = 0

    def serve(name: str, kind: str, fn: str, art: str, calls: int, cold: bool) -> tuple[float, dict, int]:
        nonlocal n
        n += 1
        root = os.path.join(work, f"run{n}")
        env = cold_env(base, root, a.shim) if cold else dict(base)
        wall, result = run(py, SERVE, [name, kind, fn, art, str(calls)], env, os.path.join(root, "cwd") if cold else work)
        return wall, result, compiles(root) if cold else 0

    med = statistics.median
    tables = a.tables.split(",")
    if "cold" in tables:
        cold_table(a, models, configs, work, serve, med)
    if "call" in tables:
        call_table(a, models, configs, work, serve, med)


def cold_table(a, models, configs, work, serve, med) -> None:
    print("\ncold start: fresh process to first output, cold host, locked down (median of "
          f"{a.repeat}); ratio to eager")
    print(f"{'model':6} {'backend':8} {'eager':>7} {'MakeFx':>16} {'Dynamo':>16} {'Dynamo+break':>16} {'installed':>16}  imports of Dynamo/Inductor, compiler runs")
    for name in models:
        eager = med(serve(name, "eager", "step", "", 0, True)[0] for _ in range(a.repeat))
        for backend in ("eager", "inductor"):
            cells, notes = [], []
            for tracer, fn in configs:
                art = os.path.join(work, f"{name}-{backend}-{tracer}-{fn}")
                runs = [serve(name, "artifact", fn, art, 0, True) for _ in range(a.repeat)]
                t = med(r[0] for r in runs)
                cells.append(f"{t:6.2f} s ({t / eager:4.2f}x)")
                notes.append(f"{tracer}/{fn}: {'+'.join(runs[0][1]['heavy']) or 'none'}, {max(r[2] for r in runs)}")
            print(f"{name:6} {backend:8} {eager:6.2f}s " + " ".join(f"{c:>16}" for c in cells) + "  " + "; ".join(notes))


def call_table(a, models, configs, work, serve, med) -> None:
    print(f"\nper call: median us over {a.calls} calls (median of {a.repeat} processes); ratio to torch.compile warm")
    print(f"{'model':6} {'backend':8} {'eager':>8} {'compile':>8} {'MakeFx':>16} {'Dynamo':>16} {'Dynamo+break':>16} {'installed':>16}  compile: break, installed")
    for name in models:
        eager = med(serve(name, "eager", "step", "", a.calls, False)[1]["per_call"] for _ in range(a.repeat))
        for backend in ("eager", "inductor"):
            comp = {fn: med(serve(name, f"compile-{backend}", fn, "", a.calls, False)[1]["per_call"]
                            for _ in range(a.repeat)) for fn in ("step", "broken", "installed")}
            cells = []
            for tracer, fn in configs:
                art = os.path.join(work, f"{name}-{backend}-{tracer}-{fn}")
                t = med(serve(name, "artifact", fn, art, a.calls, False)[1]["per_call"] for _ in range(a.repeat))
                cells.append(f"{t:7.1f} ({t / comp[fn]:4.2f}x)")
            print(f"{name:6} {backend:8} {eager:8.1f} {comp['step']:8.1f} " + " ".join(f"{c:>16}" for c in cells)
                  + f"  {comp['broken']:.1f}, {comp['installed']:.1f}")


if __name__ == "__main__":
    main()
