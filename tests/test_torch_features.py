"""A torch without a feature a capture needs gets a PrecompileError naming the
torch version and the feature, and everything else keeps working: here the
standalone AOTAutograd + Inductor lowering (absent before torch 2.14) is hidden
from a fresh process, as on such a release (on 2.11 it is absent for real)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_python

TESTS = Path(__file__).resolve().parent

NO_LOWERING = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, dyn_models as m
import torch._functorch.aot_autograd, torch._dynamo.backends.registry as registry
registry._lazy_import()  # torch's own importers of the lowering first
try:
    import torch._functorch._aot_autograd.to_standalone_python as lowering
    del lowering.compile_to_python  # then `from ... import compile_to_python` fails, as before 2.14
except ModuleNotFoundError:
    pass  # a torch before 2.14: it has none
from torch_precompile._artifact import read_metadata
model, x = m.MLP(), torch.randn(4, 8)
try:
    with tp.capture(m.step, artifact_path="mf.py", cache_path="mf.cache", tracer=tp.MakeFxTracer(),
                    backend="inductor") as cap:
        cap(model, x)
except tp.PrecompileError as e:
    print("MAKEFX |", e)
with torch.no_grad():
    with tp.capture(m.step, artifact_path="d.py", cache_path="d.cache", backend="inductor") as cap:
        cap(model, x)
meta = read_metadata(open("d.py").read())
print("DYNAMO |", meta["DYNAMO_FREE"], "|", meta["DYNAMO_FREE_REFUSED"])
"""

SERVE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, dyn_models as m
model, x = m.MLP(), torch.randn(4, 8)
f = tp.load("d.py", "d.cache")
with torch.no_grad(), tp.no_compilation():
    torch.testing.assert_close(f(model, x), m.step(model, x))
print("served")
"""


def test_a_missing_lowering_is_named_and_dynamo_keeps_its_graphs(tmp_path: Path) -> None:
    r = run_python(NO_LOWERING.format(tests=str(TESTS)), cwd=tmp_path).check()
    lines = {line.split(" | ")[0]: line.split(" | ")[1:] for line in r.stdout.splitlines() if " | " in line}
    import torch

    makefx = lines["MAKEFX"][0]
    assert f"torch {torch.__version__} does not have" in makefx and "backend='eager'" in makefx, makefx
    assert lines["DYNAMO"][0] == "False" and "no standalone AOTAutograd + Inductor lowering" in lines["DYNAMO"][1], lines
    assert "served" in run_python(SERVE.format(tests=str(TESTS)), cwd=tmp_path).check().stdout
