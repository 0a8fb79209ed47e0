"""Benchmark: training steps (loss, backward, AdamW after the step) with the default
DynamoTracer and inductor, side by side with torch.compile and eager in one run.

Models: "mlp" (tests/train_models.py) and "bert_cls", a tiny random-weight
BertForSequenceClassification fine-tuning step (tests/lib_models.py).

Rows, per model, each a median of --repeat fresh processes, interleaved:

  capture          in-script seconds of the capture block (two steps + the write)
  compile cold     in-script seconds of torch.compile's first step, empty caches
  restart first    spawn -> first step done of a restarted job:
                   ours (cold host, locked down: shim, strict, journal),
                   torch.compile warm (the cold run's Inductor cache kept), eager
  per step         median milliseconds of 30 steps after 5 warm-up steps, in one
                   process: ours, torch.compile warm, eager

Ratios: capture / compile cold, ours' restart / torch.compile warm restart, ours'
restart / eager restart, ours per step / torch.compile per step.
Called by scripts/bench (section "training").
Usage: bench_training.py [--repeat N] [--models mlp bert_cls] [--shim PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench_common import host, print_table, timed

PREFIX = "bench-train-"

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

# model -> (module, builder, step, batch maker)
MODELS = {"mlp": ("train_models", "mlp", "step", "batches"),
          "bert_cls": ("lib_models", "bert_classifier", "classify_step", "batches")}

CHILD = r"""
import sys, time, json
sys.path.insert(0, {tests!r})
import importlib, torch
mode, art = {mode!r}, {art!r}
mod = importlib.import_module({module!r})
model = getattr(mod, {build!r})()
fn = getattr(mod, {step!r})
data = getattr(mod, {batches!r})(36, seed=3)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
out = {{}}
def train(f, batches):
    for x, y in batches:
        f(model, x, y)
        opt.step()
        opt.zero_grad(set_to_none=True)
def per_step(f):
    train(f, data[1:6])
    ts = []
    for b in data[6:]:
        a = time.perf_counter(); train(f, [b]); ts.append(time.perf_counter() - a)
    return sorted(ts)[len(ts) // 2] * 1e3
if mode == "capture":
    import torch_precompile as tp
    a = time.perf_counter()
    with tp.capture(fn, artifact_path=art + ".py", cache_path=art + ".cache") as cap:
        train(cap, data[:2])
    out["capture"] = time.perf_counter() - a
elif mode in ("compile", "restart"):
    f = torch.compile(fn)
    a = time.perf_counter(); train(f, data[:1]); out["first"] = time.perf_counter() - a
    print("FIRST", flush=True)
    out["per_step"] = per_step(f)
elif mode == "serve":
    import torch_precompile as tp
    f = tp.load(art + ".py", art + ".cache")
    with tp.no_compilation():
        train(f, data[:1])
        print("FIRST", flush=True)
        out["per_step"] = per_step(f)
else:
    train(fn, data[:1])
    print("FIRST", flush=True)
    out["per_step"] = per_step(fn)
print("RESULT", json.dumps(out), flush=True)
"""


def run(mode: str, model: str, art: str, env: dict[str, str]) -> dict[str, float]:
    module, build, step, batches = MODELS[model]
    code = CHILD.format(tests=str(TESTS), mode=mode, art=art, module=module, build=build, step=step,
                        batches=batches)
    out = timed([sys.executable, "-c", code], env, f"bench_training: {mode} {model}")
    out["spawn_first"] = out.pop("first")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--shim", default=None)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-train-art-"))
    print(f"machine: {os.cpu_count()} cores; medians of {a.repeat} fresh processes per row")
    header = ("model", "capture s", "compile cold s", "ratio", "restart: ours s", "compile warm s", "ratio",
              "eager s", "ratio", "step: ours ms", "compile ms", "eager ms", "ratio", "journal")
    rows = []
    for model in a.models:
        s: dict[str, list[float]] = {}
        for _ in range(a.repeat):  # interleaved, so drift hits every row alike
            art = str(work / model)
            runs = {"capture": host(PREFIX)}
            runs["compile"] = host(PREFIX)
            runs["restart"] = host(PREFIX, kept=runs["compile"]["TORCHINDUCTOR_CACHE_DIR"])
            runs["serve"] = host(PREFIX, shim=a.shim)
            runs["eager"] = host(PREFIX)
            for mode, env in runs.items():
                for k, v in run(mode, model, art, env).items():
                    s.setdefault(f"{mode}.{k}", []).append(v)
        m = {k: statistics.median(v) for k, v in s.items()}
        rows.append((model, m["capture.capture"], m["compile.first"], m["capture.capture"] / m["compile.first"],
                     m["serve.spawn_first"], m["restart.spawn_first"], m["serve.spawn_first"] / m["restart.spawn_first"],
                     m["eager.spawn_first"], m["serve.spawn_first"] / m["eager.spawn_first"],
                     m["serve.per_step"], m["compile.per_step"], m["eager.per_step"],
                     m["serve.per_step"] / m["compile.per_step"], int(max(s.get("serve.journal", [0])))))
    print_table(header, rows, "capture ratio = capture / torch.compile cold first step; restart = spawn -> first step done of a "
          "restarted job (ours: cold host, locked down; torch.compile warm: its Inductor cache kept; eager); "
          "per-step ratio = ours / torch.compile warm; journal = compiler records while serving")


if __name__ == "__main__":
    main()
