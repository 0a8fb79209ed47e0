"""Benchmark: real models (tiny random-weight transformers GPT-2 and BERT from
tests/hf_models.py) with the default DynamoTracer and inductor, side by side
with torch.compile and eager in one run.

Rows, per model, each a median of --repeat fresh processes:

  capture        in-script seconds of the capture block (one call + the write)
  compile cold   in-script seconds of torch.compile's first call, empty caches
  load           in-script seconds of precompile.load on a cold host
  first output   spawn -> first output of a cold-host locked-down serve (shim,
                 strict, journal; empty Inductor/Triton dirs, fresh TMPDIR)
  eager first    spawn -> first output of plain eager (the floor)
  per call       median microseconds of 200 calls after 20 warm-up calls, in one
                 process: ours (loaded artifact), torch.compile warm, eager

Ratios: capture / compile cold (goal <= 1.1), first output / eager first,
ours per call / torch.compile per call. Called by scripts/bench (section "real").
Usage: bench_real.py [--repeat N] [--models gpt2 bert] [--shim PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench_common import host, print_table, timed

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

MODELS = {"gpt2": ("gpt2", "lm_logits"), "bert": ("bert", "hidden")}

CHILD = r"""
import sys, time, json
t0 = time.perf_counter()
sys.path.insert(0, {tests!r})
import torch, hf_models as hm
mode, build, step, art = {mode!r}, {build!r}, {step!r}, {art!r}
model = getattr(hm, build)()
fn = getattr(hm, step)
x = hm.tokens(2, 8)
out = {{}}
def per_call(f):
    for _ in range(20):
        f(model, x)
    ts = []
    for _ in range(200):
        a = time.perf_counter(); f(model, x); ts.append(time.perf_counter() - a)
    return sorted(ts)[len(ts) // 2] * 1e6
with torch.no_grad():
    if mode == "capture":
        import torch_precompile as tp
        a = time.perf_counter()
        with tp.capture(fn, artifact_path=art + ".py", cache_path=art + ".cache") as cap:
            cap(model, x)
        out["capture"] = time.perf_counter() - a
    elif mode == "compile":
        f = torch.compile(fn)
        a = time.perf_counter(); f(model, x); out["compile"] = time.perf_counter() - a
        print("FIRST", flush=True)
        out["per_call"] = per_call(f)
    elif mode == "serve":
        import torch_precompile as tp
        a = time.perf_counter(); f = tp.load(art + ".py", art + ".cache"); out["load"] = time.perf_counter() - a
        with tp.no_compilation():
            f(model, x)
            print("FIRST", flush=True)
            out["per_call"] = per_call(f)
    else:
        fn(model, x)
        print("FIRST", flush=True)
        out["per_call"] = per_call(fn)
print("RESULT", json.dumps(out), flush=True)
"""


def run(mode: str, model: str, art: str, shim: str | None) -> dict[str, float]:
    build, step = MODELS[model]
    env = host("bench-real-", shim=shim if mode == "serve" else None)
    code = CHILD.format(tests=str(TESTS), mode=mode, build=build, step=step, art=art)
    return timed([sys.executable, "-c", code], env, f"bench_real: {mode} {model}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--shim", default=None)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-real-art-"))
    print(f"machine: {os.cpu_count()} cores; medians of {a.repeat} fresh processes per row")
    header = ("model", "capture s", "compile cold s", "ratio", "load s", "first out s", "eager first s",
              "ratio", "ours us", "compile us", "eager us", "ratio", "journal")
    rows = []
    for model in a.models:
        samples: dict[str, list[float]] = {}
        for _ in range(a.repeat):  # interleaved, so drift hits every row alike
            art = str(work / model)
            for mode in ("capture", "compile", "serve", "eager"):
                for k, v in run(mode, model, art, a.shim).items():
                    samples.setdefault(f"{mode}.{k}", []).append(v)
        m = {k: statistics.median(v) for k, v in samples.items()}
        rows.append((model, m["capture.capture"], m["compile.compile"], m["capture.capture"] / m["compile.compile"],
                     m["serve.load"], m["serve.first"], m["eager.first"], m["serve.first"] / m["eager.first"],
                     m["serve.per_call"], m["compile.per_call"], m["eager.per_call"],
                     m["serve.per_call"] / m["compile.per_call"], int(max(samples.get("serve.journal", [0])))))
    print_table(header, rows, "capture ratio = capture / torch.compile cold (goal <= 1.1); first-output ratio = cold locked-down "
          "serve / eager; per-call ratio = ours / torch.compile warm; journal = compiler records while serving")


if __name__ == "__main__":
    main()
