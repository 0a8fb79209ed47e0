"""DynamoTracer with the inductor backend: the compiled subgraphs travel inside
python_code (AOTAutograd + Inductor bundles), so a fresh process serves them,
backward included, without a Dynamo or Inductor compile (under no_compilation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import has_standalone_lowering, run_python

TESTS = Path(__file__).resolve().parent

pytestmark = pytest.mark.slow

CAPTURE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm
out = {out!r}
torch.manual_seed(0)
m = dm.MLP()
for name, fn, calls, grad in (
    ("print_break", dm.print_break, [(m, torch.randn(2, 8)), (m, torch.randn(3, 8))], True),
    ("train", dm.train_step, [(dm.MLP(), torch.randn(4, 8), torch.randn(4, 4))], True),
    ("parent", dm.step, [(dm.Parent(), torch.randn(2, 8))], True),
    # no grad: each graph is one standalone program, lowered by compile_to_python
    ("infer", dm.print_break, [(m, torch.randn(2, 8)), (m, torch.randn(3, 8))], False),
):
    with torch.set_grad_enabled(grad), tp.capture(
            fn, artifact_path=f"{{out}}/{{name}}.py", cache_path=f"{{out}}/{{name}}.cache",
            backend="inductor") as cap:
        for args in calls:
            cap(*args)
        print("SUMMARY", name, cap.summary())
"""

SERVE = r"""
import copy, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm
from torch._dynamo.utils import counters
out = {out!r}
def same(got, want):
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
f = tp.load(f"{{out}}/print_break.py", f"{{out}}/print_break.cache")
g = tp.load(f"{{out}}/train.py", f"{{out}}/train.cache")
h = tp.load(f"{{out}}/parent.py", f"{{out}}/parent.cache")
assert (f.installed, g.installed, h.installed) == (False, False, True)
m, p = dm.MLP(), dm.Parent()
with tp.no_compilation():     # any Dynamo/Inductor compile here would raise
    for n in (2, 3, 6):
        x = torch.randn(n, 8)
        same(f(m, x), dm.print_break(m, x))
    tm = dm.MLP(); ref = copy.deepcopy(tm)
    for _ in range(2):
        x, t = torch.randn(4, 8), torch.randn(4, 4)
        same(g(tm, x, t), dm.train_step(ref, x, t))
        for a, b in zip(tm.parameters(), ref.parameters()):
            same(a.grad, b.grad)
    x = torch.randn(2, 8)
    same(h(p, x), dm.step(p, x))
    try:   # the gates are armed here (no install(), no shim): a compile raises
        torch.compile(lambda y: y + 1, backend="eager")(torch.ones(1))
        print("NOT GATED")
    except tp.PrecompileError:
        pass
assert counters["stats"]["unique_graphs"] == 0
print("served")
"""


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("dynamo_inductor")
    r = run_python(CAPTURE.format(tests=str(TESTS), out=str(out))).check()
    return out, r.stdout


def test_inductor_artifacts_serve_in_a_fresh_process_without_compiling(captured) -> None:
    out, stdout = captured
    assert "SUMMARY print_break 2 frames (1 from graph breaks)" in stdout
    assert "BACKEND = 'inductor'" in (out / "print_break.py").read_text()
    assert "SERVING_MODE = 'installed'" in (out / "parent.py").read_text()
    r = run_python(SERVE.format(tests=str(TESTS), out=str(out))).check()
    assert "NOT GATED" not in r.stdout
    assert "served" in r.stdout


IMPORTS = r"""
import sys
sys.path.insert(0, {tests!r})
import torch
if {serve!r}:
    import torch_precompile as tp, dyn_models as dm
    h = tp.load({out!r} + "/parent.py", {out!r} + "/parent.cache")
    x = torch.randn(2, 8)
    p = dm.Parent()
    torch.testing.assert_close(h(p, x), dm.step(p, x), atol=1e-4, rtol=1e-4)
else:
    import torch._dynamo
print("LOADED", sorted(m for m in sys.modules
                       if m.startswith(("torch._inductor", "torch._functorch._aot_autograd"))))
"""


@pytest.mark.skipif(not has_standalone_lowering(), reason="before torch 2.14 an installed inductor graph "
                    "keeps AOTAutograd's runtime and Inductor's loader (README: torch releases)")
def test_installed_inductor_artifact_imports_nothing_beyond_dynamo(captured) -> None:
    """This model's child calls torch._dynamo.graph_break(), so serving it imports
    Dynamo (the model reads it), and `import torch._dynamo` itself loads part of
    Inductor and AOTAutograd; serving its frozen kernels loads none of the rest
    (no codecache, graph loader or AOTAutograd runtime). Installed artifacts that
    read nothing of Dynamo import neither: test_dynamo_free."""
    import ast

    out, _ = captured

    def loaded(serve: bool) -> set[str]:
        r = run_python(IMPORTS.format(tests=str(TESTS), out=str(out), serve=serve)).check()
        line = next(s for s in r.stdout.splitlines() if s.startswith("LOADED "))
        return set(ast.literal_eval(line[len("LOADED "):]))

    dynamo, served = loaded(False), loaded(True)
    assert "torch._inductor.codecache" not in served
    assert served - dynamo == set(), sorted(served - dynamo)


SERVE_INFER = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm
out = {out!r}
f = tp.load(f"{{out}}/infer.py", f"{{out}}/infer.cache")
m = dm.MLP()
with torch.no_grad(), tp.no_compilation():
    for n in (2, 3, 6):   # 6: a batch the capture never ran, inside the dynamic variant's guards
        x = torch.randn(n, 8)
        torch.testing.assert_close(f(m, x), dm.print_break(m, x), atol=1e-4, rtol=1e-4)
print("served")
"""


def test_a_graph_dynamo_compiled_dynamic_serves_a_batch_the_capture_never_ran(captured) -> None:
    # the second call's recompile made each frame's graph dynamic in the batch; its
    # lowering must stay dynamic too (torch 2.14's compile_to_python took a Dynamo
    # graph for static and baked in the batch of 3: "expected size 6==3")
    out, stdout = captured
    assert "SUMMARY infer 2 frames (1 from graph breaks)" in stdout
    r = run_python(SERVE_INFER.format(tests=str(TESTS), out=str(out))).check()
    assert "served" in r.stdout
