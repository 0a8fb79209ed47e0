"""The script scripts/bench_sites.py times: ``bench_sites_app.py MODEL`` builds a
tiny model of tests/hf_models.py (or a small MLP), compiles it
with ``torch.compile(model)`` as its users write it, and prints FIRST after its
first output, then RESULT with the median per call. ``llama-recipe``: transformers'
static-cache recipe (a compiled bound method), first token and per token.
``optimizer``: PyTorch's "Compiling the optimizer" recipe (``@torch.compile def
opt_step(): opt.step()``, Adam with a tensor learning rate) over a 6-layer MLP of
width 256: first step and per step. Knows nothing of precompile."""

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import torch  # noqa: E402


def build(name):
    import hf_models as hm

    if name == "vit":
        return hm.vit(), (hm.pixels(2),)
    return getattr(hm, name)(), (hm.tokens(2, 8),)


def recipe():
    """transformers' static-cache recipe as its guide writes it: FIRST after the first
    token of a 12-token prompt; per_call_us = per token of a 32-token generation."""
    import hf_models as hm

    model = hm.llama()
    model.generation_config.cache_implementation = "static"
    if os.environ.get("TORCH_COMPILE_DISABLE") != "1":  # fullgraph=True refuses a disabled compile
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    with torch.no_grad():
        model.generate(hm.tokens(1, 12), max_new_tokens=1, do_sample=False)
        print("FIRST", flush=True)
        model.generate(hm.tokens(1, 8, seed=2), max_new_tokens=4, do_sample=False)  # a second length
        ts = []
        for _ in range(5):
            a = time.perf_counter()
            model.generate(hm.tokens(1, 10, seed=3), max_new_tokens=32, min_new_tokens=32, do_sample=False)
            ts.append((time.perf_counter() - a) / 32)
    print("RESULT " + json.dumps({"per_call_us": sorted(ts)[len(ts) // 2] * 1e6}), flush=True)
    sys.exit(0)


def time_steps(model, opt_step):
    model(torch.randn(32, 256)).sum().backward()
    opt_step()
    print("FIRST", flush=True)
    ts = []
    for _ in range(5):
        a = time.perf_counter()
        for _ in range(20):
            opt_step()
        ts.append((time.perf_counter() - a) / 20)
    print("RESULT " + json.dumps({"per_call_us": sorted(ts)[len(ts) // 2] * 1e6}), flush=True)
    sys.exit(0)


name = sys.argv[1]
if name == "llama-recipe":
    recipe()
if name == "optimizer":  # the recipe's shape: module-level optimizer and step
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(6)])
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))

    @torch.compile(fullgraph=False)
    def opt_step():
        opt.step()

    time_steps(model, opt_step)
model, args = build(name) if name != "mlp" else (None, None)
if name == "mlp":
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    args = (torch.randn(3, 8),)
compiled = torch.compile(model)
with torch.no_grad():
    compiled(*args)
    print("FIRST", flush=True)
    for _ in range(20):
        compiled(*args)
    ts = []
    for _ in range(100):
        a = time.perf_counter()
        compiled(*args)
        ts.append(time.perf_counter() - a)
print("RESULT " + json.dumps({"per_call_us": sorted(ts)[len(ts) // 2] * 1e6}), flush=True)
