"""The accelerator check (issue #6): capture Triton + autotune models on a CUDA GPU
and serve them in a fresh, locked-down process on a cold host with zero compiler
executions. One prepared run for a machine with a GPU; CI never runs it.

  capture  (fresh process, installed layout, fresh cache dirs)
    - MakeFxTracer, backend="inductor", max-autotune (Triton + ATen GEMM choices
      benchmarked), a LayerNorm + softmax model whose Triton reductions Inductor
      autotunes on first launch;
    - DynamoTracer, backend="inductor", the same model with a graph break;
    - inside the MakeFx block, a user @triton.autotune kernel launched once (its
      tuning decision rides in Triton's cache).
  serve    (fresh process: empty TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR, other
            TMPDIR and cwd, TORCH_PRECOMPILE_NO_COMPILATION=1, PRECOMPILE_STRICT=1,
            the shim's journal)
    - load both pairs, call them, compare with eager; launch the user kernel and
      compare its chosen config with the capture's.

Prints one line per check and exits 0 only when every check holds: outputs equal
eager, the same autotune config, zero journal records while serving.
Usage: scripts/gpu_check.py [--keep DIR]
On torch before 2.12 (no standalone lowering for MakeFx + inductor) the first pair
is captured with DynamoTracer instead. Without an installed package, run it from
the build outputs (README: "The GPU check"):
  PYTHONPATH=capture/python python3 scripts/gpu_check.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

KERNELS = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl
    from torch import nn


    @triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((128, 4), (256, 4), (1024, 8))],
                     key=["n"])
    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


    def scale(x):
        out = torch.empty_like(x)
        scale_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
        return out, scale_kernel.best_config


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(256, 512)
            self.ln = nn.LayerNorm(512)
            self.fc2 = nn.Linear(512, 256)

        def forward(self, x):
            return self.fc2(torch.nn.functional.gelu(self.ln(self.fc1(x)))).softmax(-1)


    def step(model, x):
        return model(x)


    def broken(model, x):
        h = model.fc1(x)
        print("graph break")
        return model.fc2(torch.nn.functional.gelu(model.ln(h))).softmax(-1)


    def make():
        torch.manual_seed(0)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        return Net().cuda().eval(), torch.randn(64, 256, device="cuda")
''')

CAPTURE = textwrap.dedent('''
    import json, sys, time
    import torch, torch_precompile as tp
    import torch._inductor.config as cfg
    import gpu_kernels as k
    import importlib.util
    model, x = k.make()
    # torch before 2.12 has no standalone lowering, which MakeFx + inductor needs:
    # there the first pair is DynamoTracer's, with the same autotuned model and kernel.
    makefx = importlib.util.find_spec("torch._functorch._aot_autograd.to_standalone_python") is not None
    tracer = tp.MakeFxTracer() if makefx else tp.DynamoTracer()
    t = time.perf_counter()
    with torch.no_grad(), cfg.patch(max_autotune=True, max_autotune_gemm_backends="TRITON,ATEN"):
        with tp.capture(k.step, artifact_path="mfx.py", cache_path="mfx.cache",
                        tracer=tracer, backend="inductor") as cap:
            cap(model, x)
            _, best = k.scale(torch.randn(100_000, device="cuda"))
    mfx_s = time.perf_counter() - t
    t = time.perf_counter()
    with torch.no_grad():
        with tp.capture(k.broken, artifact_path="dyn.py", cache_path="dyn.cache", backend="inductor") as cap:
            cap(model, x)
    dyn_s = time.perf_counter() - t
    from torch_precompile import _native
    metas = {n: json.loads(_native.cache_read_header(open(f"{n}.cache", "rb").read())).get("meta", {})
             for n in ("mfx", "dyn")}
    print("RESULT " + json.dumps({"best": str(best), "mfx_s": mfx_s, "dyn_s": dyn_s, "meta": metas,
                                  "first_tracer": type(tracer).__name__}))
''')

SERVE = textwrap.dedent('''
    import json, sys, time
    T0 = time.perf_counter()
    art = sys.argv[1]
    import torch, torch_precompile as tp
    import gpu_kernels as k
    model, x = k.make()
    with torch.no_grad():
        f = tp.load(f"{art}/mfx.py", f"{art}/mfx.cache")
        y = f(model, x)
        torch.cuda.synchronize()
        first = time.perf_counter() - T0
        g = tp.load(f"{art}/dyn.py", f"{art}/dyn.cache")
        z = g(model, x)
        _, best = k.scale(torch.randn(100_000, device="cuda"))
        want = k.step(model, x)
    close = lambda a: bool(torch.allclose(a, want, atol=1e-3, rtol=1e-3))
    heavy = sorted(m for m in sys.modules if m.startswith(("torch._inductor", "torch._dynamo")))
    print("RESULT " + json.dumps({"first_output_s": first, "mfx_match": close(y), "dyn_match": close(z),
                                  "best": str(best), "imports_inductor": bool(heavy)}))
''')


def run(step: str, script: str, work: Path, env: dict[str, str], *args: str, timeout: float = 900) -> dict:
    p = subprocess.run([sys.executable, "-c", script, *args], cwd=work, env=env, capture_output=True,
                       text=True, timeout=timeout)
    result = next((line for line in p.stdout.splitlines() if line.startswith("RESULT ")), None)
    if p.returncode != 0 or result is None:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-8000:])
        raise SystemExit(f"gpu_check: the {step} step failed (exit {p.returncode})")
    return json.loads(result[7:])


def read_journal(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def find_shim() -> Path:
    """The shim inside the torch_precompile this interpreter imports (the installed
    wheel, or capture/python with the _prefix/ scripts/wheel staged, as carried
    to the accelerator machine), else cargo's build output."""
    from torch_precompile._bundle import LIBRARY

    for shim in (Path(LIBRARY), ROOT / "target/release/libprecompile.so"):
        if shim.is_file():
            return shim
    raise SystemExit("gpu_check: libprecompile.so is neither in the torch_precompile package nor in "
                     "target/release; run scripts/setup (or scripts/wheel), or carry "
                     "capture/python/torch_precompile/_prefix")


def package_root() -> str:
    """Where this interpreter imports torch_precompile from, made absolute for the
    children, which run in other directories (PYTHONPATH=capture/python works)."""
    import torch_precompile

    return str(Path(torch_precompile.__file__).resolve().parent.parent)


def base_env(d: Path, shim: str, kernels: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PRECOMPILE_") and k not in ("TORCH_PRECOMPILE_NO_COMPILATION", "LD_PRELOAD")}
    for sub in ("inductor", "triton", "tmp", "cwd"):
        (d / sub).mkdir(parents=True)
    env.update(LD_PRELOAD=shim, PYTHONPATH=os.pathsep.join(
        [str(kernels), package_root(), *(os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]),
               TORCHINDUCTOR_CACHE_DIR=str(d / "inductor"), TRITON_CACHE_DIR=str(d / "triton"), TMPDIR=str(d / "tmp"))
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", help="work in this directory and keep it")
    a = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA device here; nothing was run (this check needs a GPU)")
    shim = find_shim()
    work = Path(a.keep or tempfile.mkdtemp(prefix="gpu_check."))
    work.mkdir(parents=True, exist_ok=True)
    (work / "kernels").mkdir(exist_ok=True)
    (work / "kernels" / "gpu_kernels.py").write_text(KERNELS)
    print(f"gpu_check: {torch.cuda.get_device_name()} (sm_{''.join(map(str, torch.cuda.get_device_capability()))}), "
          f"torch {torch.__version__}, Python {sys.version.split()[0]}, shim {shim}; work in {work}", flush=True)
    try:
        art = work / "capture" / "cwd"
        env = base_env(work / "capture", str(shim), work / "kernels")
        env["PRECOMPILE_JOURNAL"] = str(work / "capture" / "journal.jsonl")
        t = time.perf_counter()
        cap = run("capture", CAPTURE, art, env)
        cap_journal = read_journal(work / "capture" / "journal.jsonl")
        print(f"  capture: {time.perf_counter() - t:.1f}s (first pair {cap['first_tracer']} {cap['mfx_s']:.1f}s, "
              f"dynamo with a graph break {cap['dyn_s']:.1f}s), "
              f"{sum(r.get('kind') == 'compile' for r in cap_journal)} compiler runs; frozen: "
              + json.dumps({n: {k: v for k, v in m.items() if k.startswith("frozen")} for n, m in cap["meta"].items()}),
              flush=True)
        env = base_env(work / "serve", str(shim), work / "kernels")
        journal = work / "serve" / "journal.jsonl"
        env.update(TORCH_PRECOMPILE_NO_COMPILATION="1", PRECOMPILE_STRICT="1", PRECOMPILE_JOURNAL=str(journal))
        t = time.perf_counter()
        srv = run("serve", SERVE, work / "serve" / "cwd", env, str(art))
        records = read_journal(journal)
        print(f"  serve: {time.perf_counter() - t:.1f}s process, first output {srv['first_output_s']:.2f}s, "
              f"imports Inductor: {srv['imports_inductor']}", flush=True)
        checks = {
            f"{cap['first_tracer']} output equals eager": srv["mfx_match"],
            "Dynamo output equals eager": srv["dyn_match"],
            f"user autotune config served = captured ({cap['best']})": srv["best"] == cap["best"],
            f"zero compiler executions while serving (journal: {len(records)})": not records,
        }
        for sub in ("inductor", "triton"):  # informational: sources Inductor writes, never binaries
            written = sorted(str(p.relative_to(work / "serve" / sub)) for p in (work / "serve" / sub).rglob("*") if p.is_file())
            print(f"  user's {sub} cache dir after serving: {len(written)} files {written[:5]}")
        for what, ok in checks.items():
            print(f"  {'OK  ' if ok else 'FAIL'} {what}")
        for r in records[:10]:
            print(f"    journal: {r.get('verdict')} {r.get('exe')} {' '.join(r.get('argv', [])[:6])}")
        if not all(checks.values()):
            raise SystemExit(1)
        print("gpu_check: all checks hold")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
