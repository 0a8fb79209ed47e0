"""Benchmark: DynamoTracer capture and serve, this project vs a plain torch.compile of
the same function with the same backend, side by side in one run (issue #5).

Two shapes of graph break, each its own block of the table:
  standalone  the break is in the captured function itself: the artifact serves
              standalone (f.installed is False), no Dynamo behind its calls;
  installed   the break is inside a child module's forward: the artifact serves
              installed (f.installed is True), through Dynamo's frame evaluator.

Reports medians over --repeat rounds, every number from a fresh child process:
  capture_s                     the capture with-block and its calls, vs torch.compile's
                                cold compile of the same calls (empty Inductor cache
                                for both);
  fresh_process_first_output_s  from spawning the interpreter to the first output: the
                                loaded artifact (on an empty Inductor cache, as on a
                                host it was deployed to) vs torch.compile in a fresh
                                process on the warm cache its cold compile left;
  load_s                        tp.load() alone (ours only: torch has no load step);
  per_call_us                   median latency of one call over --calls calls after a
                                warmup, small inputs so dispatch dominates, vs the warm
                                torch.compile'd function.
Called by scripts/bench (section "dynamo"); never by the product or the tests.
Usage: bench_dynamo.py [--repeat N] [--backend inductor[,eager]] [--calls N] [--warmup N]
                       [--no-grad] [--cold-headers]
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
    from torch import nn

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(16, 16); self.b = nn.Linear(16, 16)

    def standalone(model, x):          # the break in the entry function: standalone
        h = torch.relu(model.a(x))
        torch._dynamo.graph_break()
        return model.b(h)

    class BreakingChild(nn.Module):    # the break in a child's forward: installed
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(16, 16)
        def forward(self, x):
            h = torch.sin(self.inner(x))
            torch._dynamo.graph_break()
            return h * 2

    class Parent(nn.Module):
        def __init__(self):
            super().__init__()
            self.pre = nn.Linear(16, 16); self.child = BreakingChild(); self.post = nn.Linear(16, 4)
        def forward(self, x):
            return self.post(self.child(torch.relu(self.pre(x))))

    def step(model, x):
        return model(x)

    def make(kind):
        if kind == "standalone":
            return Two(), standalone
        return Parent(), step
""")

CHILD = textwrap.dedent("""
    import json, sys, time
    impl, phase, kind, d, backend, tag, t_spawn, warmup, calls, grad = sys.argv[1:11]
    t_spawn = float(t_spawn)
    sys.path.insert(0, d)
    import torch
    torch.set_grad_enabled(grad == "on")
    import bench_dyn_model as bm
    torch.manual_seed(0)
    m, fn = bm.make(kind)
    x, x2 = torch.randn(4, 16), torch.randn(8, 16)
    out = {}
    art, cache = f"{d}/{tag}.py", f"{d}/{tag}.cache"
    if phase == "capture":
        if impl == "ours":
            import torch_precompile as tp
            t = time.perf_counter()
            with tp.capture(fn, artifact_path=art, cache_path=cache, backend=backend) as cap:
                cap(m, x); cap(m, x2)
            out["capture_s"] = time.perf_counter() - t
        else:
            t = time.perf_counter()
            c = torch.compile(fn, backend=backend)
            c(m, x); c(m, x2)
            out["capture_s"] = time.perf_counter() - t
    else:
        if impl == "ours":
            import torch_precompile as tp
            t = time.perf_counter()
            f = tp.load(art, cache)
            out["load_s"] = time.perf_counter() - t
            want = kind == "installed"
            if f.installed is not want:
                raise SystemExit(f"{kind}: f.installed is {f.installed}, expected {want}")
        else:
            f = torch.compile(fn, backend=backend)
        y = f(m, x)
        out["fresh_process_first_output_s"] = time.monotonic() - t_spawn
        y2 = f(m, x2)
        with torch.no_grad():
            torch.testing.assert_close(y, fn(m, x), atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(y2, fn(m, x2), atol=1e-5, rtol=1e-4)
        if (y.grad_fn is not None) != (grad == "on"):
            raise SystemExit(f"grad {grad}: the output's grad_fn is {y.grad_fn}")
        for _ in range(int(warmup)):
            f(m, x)
        times = []
        pc = time.perf_counter
        for _ in range(int(calls)):
            t = pc(); f(m, x); times.append(pc() - t)
        out["per_call_us"] = sorted(times)[len(times) // 2] * 1e6
    print("RESULT " + json.dumps(out))
""")

KINDS = ("standalone", "installed")
IMPLS = ("ours", "torch")
# metric -> target on ours / torch (None: reported, no target)
METRICS = {"capture_s": 1.2, "fresh_process_first_output_s": None, "load_s": None, "per_call_us": 1.2}


def child_env(d: str, cache_dir: str, tmp: str) -> dict:
    env = dict(os.environ)
    # every cache and private temp directory inside the one TemporaryDirectory. TMPDIR
    # matters beyond the package's own temporary directories: Inductor keeps its
    # precompiled C++ headers under $TMPDIR/torchinductor_<user>, not under
    # TORCHINDUCTOR_CACHE_DIR, so whichever child ran first would pay for them.
    os.makedirs(tmp, exist_ok=True)
    env.update({"TORCHINDUCTOR_CACHE_DIR": f"{cache_dir}/inductor",
                "TRITON_CACHE_DIR": f"{cache_dir}/triton",
                "TMPDIR": tmp})
    for k in [k for k in env if k.startswith("PRECOMPILE_") or k == "TORCH_PRECOMPILE_NO_COMPILATION"]:
        del env[k]
    return env


def warm_headers(py: str, d: str, tmp: str) -> None:
    """Build Inductor's precompiled C++ headers once, in the shared TMPDIR, so that no
    child pays for them and the cold compiles compare compile work alone."""
    code = ("import torch\n"
            "torch.compile(lambda x: torch.relu(x @ x).sin() * 2, backend='inductor')(torch.randn(8, 8))\n")
    p = subprocess.run([py, "-c", code], capture_output=True, text=True,
                       env=child_env(d, f"{d}/caches/headers", tmp))
    if p.returncode != 0:
        raise SystemExit(f"warming the precompiled headers failed:\n{p.stderr[-3000:]}")


def run_child(py: str, d: str, impl: str, phase: str, kind: str, backend: str, tag: str,
              cache_dir: str, tmp: str, warmup: int, calls: int, grad: str) -> dict:
    env = child_env(d, cache_dir, tmp)
    argv = [py, f"{d}/bench_dyn_child.py", impl, phase, kind, d, backend, tag]
    t0 = time.monotonic()  # CLOCK_MONOTONIC: system-wide, so the child can subtract it
    p = subprocess.run(argv + [repr(t0), str(warmup), str(calls), grad], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"{impl} {kind} {phase} ({backend}) failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    line = next(x for x in p.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[7:])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default="inductor", help="one backend, or several comma-separated")
    ap.add_argument("--calls", type=int, default=300, help="timed calls per serve (after the warmup)")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--no-grad", action="store_true",
                    help="capture, compile and serve with grad disabled (inference graphs only). "
                         "With grad on (default) a capture lowers every backward with its forward "
                         "(it must ship them); torch.compile lowers a dynamic graph's backward "
                         "lazily, at the first .backward(), which these calls never reach")
    ap.add_argument("--cold-headers", action="store_true",
                    help="every child on its own empty TMPDIR, so each cold compile also builds "
                         "Inductor's precompiled C++ headers (default: built once up front, shared)")
    a = ap.parse_args()
    backends = [b for b in a.backend.split(",") if b]
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-dynamo-") as d:
        shared_tmp = f"{d}/tmp"
        if not a.cold_headers and "inductor" in backends:
            print("  dynamo: building Inductor's precompiled headers once", file=sys.stderr, flush=True)
            warm_headers(py, d, shared_tmp)
        with open(f"{d}/bench_dyn_model.py", "w") as f:
            f.write(MODEL)
        with open(f"{d}/bench_dyn_child.py", "w") as f:
            f.write(CHILD)
        # rows[backend][kind][impl][metric] -> samples
        rows: dict = {b: {k: {i: {} for i in IMPLS} for k in KINDS} for b in backends}
        for r in range(a.repeat):
            for b in backends:
                for kind in KINDS:
                    for impl in IMPLS:  # interleaved, so drift hits both alike
                        print(f"  dynamo: round {r + 1}/{a.repeat} {b} {kind} {impl} capture + serve",
                              file=sys.stderr, flush=True)
                        tag = f"{b}_{kind}_{impl}_{r}"
                        cold = f"{d}/caches/{tag}"            # empty: the cold compile / capture
                        # ours serves on another empty cache (a deployed host); torch on the
                        # warm cache its cold compile left
                        serve_cache = f"{d}/caches/{tag}_serve" if impl == "ours" else cold
                        for phase, cache_dir in (("capture", cold), ("serve", serve_cache)):
                            tmp = f"{cache_dir}/tmp" if a.cold_headers else shared_tmp
                            res = run_child(py, d, impl, phase, kind, b, tag, cache_dir, tmp,
                                            a.warmup, a.calls, "off" if a.no_grad else "on")
                            for k, v in res.items():
                                rows[b][kind][impl].setdefault(k, []).append(v)
    for b in backends:
        print(f"\nDynamoTracer vs torch.compile, backend={b}, 16-wide Linear models with one graph break,"
              f" two shapes captured, grad {'off' if a.no_grad else 'on'},"
              f" medians of {a.repeat} runs ({a.calls} calls each for per_call_us)")
        print(f"{'kind':11} {'metric':30} {'ours':>12} {'torch.compile':>14} {'ratio':>8}  target")
        for kind in KINDS:
            for key, target in METRICS.items():
                so, st = rows[b][kind]["ours"].get(key), rows[b][kind]["torch"].get(key)
                o = statistics.median(so) if so else None
                t = statistics.median(st) if st else None
                ratio = f"{o / t:8.2f}" if (o is not None and t) else f"{'-':>8}"
                verdict = ""
                if target is not None and o is not None and t:
                    verdict = f"<= {target} {'MET' if o / t <= target else 'MISSED'}"
                spec = ".1f" if key.endswith("_us") else ".4f"
                os_ = format(o, spec) if o is not None else "-"
                ts_ = format(t, spec) if t is not None else "-"
                print(f"{kind:11} {key:30} {os_:>12} {ts_:>14} {ratio}  {verdict}")
        print("capture_s: the with-block and its two calls / torch.compile's first two calls, each on an"
              " empty Inductor cache.\nfresh_process_first_output_s: spawn to first output; ours on an"
              " empty Inductor cache, torch.compile on the warm cache of its cold compile.\n"
              + ("precompiled C++ headers: built by each cold child (--cold-headers)." if a.cold_headers else
                 "precompiled C++ headers ($TMPDIR/torchinductor_<user>): built once up front, shared by all."))


if __name__ == "__main__":
    main()
