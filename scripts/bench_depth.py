"""Benchmark: cost against depth (issue 39's table), a tiny-width Llama (hidden 64
unless --hidden, random weights) at several layer counts, default DynamoTracer and
inductor, side by side with torch.compile and eager in one run.

Rows, per layer count, each a median of --repeat fresh processes:

  capture        in-script seconds of the capture block (one call + the write)
  compile cold   in-script seconds of torch.compile's first call, empty caches
  artifact       the python_code's lines and size, and the cache's size
  load           in-script seconds of precompile.load on a cold host
  first output   spawn -> first output: a cold-host locked-down serve (shim,
                 strict, journal), eager, torch.compile warm (the cold run's
                 Inductor cache kept)
  first 20       mean milliseconds of the 20 calls after the first: served,
                 torch.compile warm
  per call       median milliseconds of 50 calls after those: served,
                 torch.compile warm, AOTInductor (torch.export, then
                 aoti_compile_and_package and aoti_load_package in one process)
  one process    served, torch.compile warm and AOTInductor per call in one
                 process, 15 rounds alternating between them, medians: calls
                 across fresh processes vary by a quarter on a shared machine

Called by scripts/bench (section "depth"). Usage:
bench_depth.py [--repeat N] [--layers 2 8 32 80] [--hidden 64] [--shim PATH] [--cpp-wrapper]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench_common import host, print_table, timed

TESTS = Path(__file__).resolve().parent.parent / "tests"

CHILD = r"""
import sys, time, json
sys.path.insert(0, {tests!r})
import torch
import hf_models as hm
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.utils import logging
logging.set_verbosity_error()
mode, layers, hidden, art = {mode!r}, {layers!r}, {hidden!r}, {art!r}
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=128, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
model = LlamaForCausalLM(cfg).eval()
x = torch.randint(0, 128, (1, 16), generator=torch.Generator().manual_seed(1))
step = hm.lm_logits  # model(input_ids=ids, use_cache=False).logits, importable

out = {{}}


def calls(f):
    ts = []
    for _ in range(70):
        a = time.perf_counter(); f(model, x); ts.append(time.perf_counter() - a)
    out["first20_ms"] = sum(ts[:20]) / 20 * 1e3
    out["per_call_ms"] = sorted(ts[20:])[25] * 1e3


with torch.no_grad():
    if mode == "capture":
        import torch_precompile as tp
        a = time.perf_counter()
        with tp.capture(step, artifact_path=art + ".py", cache_path=art + ".cache") as cap:
            cap(model, x)
        out["capture"] = time.perf_counter() - a
    elif mode in ("cold", "warm"):
        f = torch.compile(step)
        a = time.perf_counter(); f(model, x); out["first_call"] = time.perf_counter() - a
        print("FIRST", flush=True)
        calls(f)
    elif mode == "serve":
        import torch_precompile as tp
        a = time.perf_counter(); f = tp.load(art + ".py", art + ".cache"); out["load"] = time.perf_counter() - a
        with tp.no_compilation():
            y = f(model, x)
            print("FIRST", flush=True)  # before the check's eager call, which eager's row does not make
            torch.testing.assert_close(y, step(model, x))
            calls(f)
    elif mode == "aoti":  # AOTInductor: export, compile and package, then load and call
        class Logits(torch.nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model

            def forward(self, ids):
                return step(self.model, ids)
        a = time.perf_counter()
        ep = torch.export.export(Logits(model), (x,), strict=False)
        path = torch._inductor.aoti_compile_and_package(ep, package_path=art + ".pt2")
        out["aoti_compile"] = time.perf_counter() - a
        a = time.perf_counter(); runner = torch._inductor.aoti_load_package(path)
        out["aoti_load"] = time.perf_counter() - a
        torch.testing.assert_close(runner(x), step(model, x))
        calls(lambda m, ids: runner(ids))
    elif mode == "interleaved":  # served, torch.compile warm and AOTInductor in this one process
        import statistics
        import torch_precompile as tp
        f = tp.load(art + ".py", art + ".cache")
        runner = torch._inductor.aoti_load_package(art + ".pt2")
        warm = torch.compile(step)  # the cold run's Inductor cache kept
        warm(model, x)
        sides = {{"served": lambda: f(model, x), "warm": lambda: warm(model, x), "aoti": lambda: runner(x)}}
        n = max(5, 400 // layers)
        per = {{k: [] for k in sides}}
        with tp.no_compilation():
            for g in sides.values():
                for _ in range(20):
                    g()
            for _ in range(15):
                for k, g in sides.items():
                    a = time.perf_counter()
                    for _ in range(n):
                        g()
                    per[k].append((time.perf_counter() - a) / n)
        out.update({{k + "_ms": statistics.median(v) * 1e3 for k, v in per.items()}})
    else:
        step(model, x)
        print("FIRST", flush=True)
print("RESULT", json.dumps(out), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--layers", nargs="+", type=int, default=[2, 8, 32, 80])
    ap.add_argument("--hidden", type=int, default=64,
                    help="the model's width (intermediate 2x, 4 heads, 2 KV heads)")
    ap.add_argument("--shim", default=None)
    ap.add_argument("--cpp-wrapper", action="store_true",
                    help="capture with Inductor's C++ wrapper on (TORCHINDUCTOR_CPP_WRAPPER=1): the served "
                         "programs run it too")
    ap.add_argument("--aoti", action=argparse.BooleanOptionalAction, default=True,
                    help="also AOTInductor (export + aoti_compile_and_package), per call side by side")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-depth-art-"))
    print(f"machine: {os.cpu_count()} cores; hidden {a.hidden}; medians of {a.repeat} fresh processes per row"
          + ("; captured with Inductor's C++ wrapper" if a.cpp_wrapper else ""))
    header = ("layers", "capture s", "compile cold s", "ratio", "artifact lines", "py MB", "cache MB",
              "load s", "first out: served s", "eager s", "warm s", "served - eager s",
              "first 20: served ms", "warm ms", "per call: served ms", "warm ms", "AOTI ms", "served/AOTI",
              "AOTI compile s", "journal", "one process: served ms", "warm ms", "AOTI ms", "served/warm", "served/AOTI")
    rows = []
    for layers in a.layers:
        s: dict[str, list[float]] = {}
        for _ in range(a.repeat):
            art = str(work / f"llama{layers}")

            def run(mode: str, env: dict[str, str]) -> None:
                code = CHILD.format(mode=mode, layers=layers, hidden=a.hidden, art=art, tests=str(TESTS))
                for k, v in timed([sys.executable, "-c", code], env, f"bench_depth: {mode} {layers}").items():
                    s.setdefault(f"{mode}.{k}", []).append(v)

            run("capture", {**host("bench-depth-"), **({"TORCHINDUCTOR_CPP_WRAPPER": "1"} if a.cpp_wrapper else {})})
            cold = host("bench-depth-")
            run("cold", cold)
            run("warm", host("bench-depth-", kept=cold["TORCHINDUCTOR_CACHE_DIR"]))
            run("serve", host("bench-depth-", shim=a.shim))
            run("eager", host("bench-depth-"))
            if a.aoti:
                run("aoti", host("bench-depth-"))
                run("interleaved", host("bench-depth-", kept=cold["TORCHINDUCTOR_CACHE_DIR"]))
        m = {k: statistics.median(v) for k, v in s.items()}
        nan = float("nan")
        code = Path(art + ".py").read_bytes()
        rows.append((layers, m["capture.capture"], m["cold.first_call"], m["capture.capture"] / m["cold.first_call"],
                     code.count(b"\n"), len(code) / 1e6, Path(art + ".cache").stat().st_size / 1e6,
                     m["serve.load"], m["serve.first"], m["eager.first"], m["warm.first"],
                     m["serve.first"] - m["eager.first"], m["serve.first20_ms"], m["warm.first20_ms"],
                     m["serve.per_call_ms"], m["warm.per_call_ms"], m.get("aoti.per_call_ms", nan),
                     m["serve.per_call_ms"] / m.get("aoti.per_call_ms", nan),
                     m.get("aoti.aoti_compile", nan), int(max(s.get("serve.journal", [0]))),
                     m.get("interleaved.served_ms", nan), m.get("interleaved.warm_ms", nan),
                     m.get("interleaved.aoti_ms", nan),
                     m.get("interleaved.served_ms", nan) / m.get("interleaved.warm_ms", nan),
                     m.get("interleaved.served_ms", nan) / m.get("interleaved.aoti_ms", nan)))
    print_table(header, rows, "capture ratio = capture / torch.compile cold's first call (goal <= 1.0); first output "
                "= spawn -> first output; served = cold locked-down serve; warm = torch.compile with the cold "
                "run's Inductor cache; journal = compiler records while serving; one process = per call in one process, "
                "alternating served, torch.compile warm and AOTInductor")


if __name__ == "__main__":
    main()
