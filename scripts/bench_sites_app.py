"""The script scripts/bench_sites.py times: ``bench_sites_app.py MODEL`` builds a
tiny model of tests/hf_models.py (or a small MLP), compiles it
with ``torch.compile(model)`` as its users write it, and prints FIRST after its
first output, then RESULT with the median per call. Knows nothing of precompile."""

import json
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


name = sys.argv[1]
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
