"""MakeFx details: input mutation and aliasing like eager, mark_unbacked refusals and
shared shape ids."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import pc_models
import torch_precompile as tp
from conftest import has_standalone_lowering, run_python

TESTS = Path(__file__).resolve().parent


# MakeFx + inductor (and so mark_unbacked, which needs it) exists from 2.14; before
# it the capture is refused naming the torch version (test_torch_features)
NEEDS_LOWERING = pytest.mark.skipif(not has_standalone_lowering(), reason="MakeFx + inductor needs torch 2.14+")


@pytest.mark.parametrize("backend", ["eager", pytest.param("inductor", marks=[pytest.mark.slow, NEEDS_LOWERING])])
def test_input_mutation_and_aliasing_output_behave_like_eager(tmp_path: Path, backend: str) -> None:
    torch.manual_seed(0)
    m, x = pc_models.MLP(), torch.randn(4, 8)
    with tp.capture(pc_models.mutate_and_alias, artifact_path=tmp_path / "m.py", cache_path=tmp_path / "m.cache",
                    tracer=tp.MakeFxTracer(), backend=backend) as c:
        c(m, x.clone())
    code = f"""
import sys; sys.path.insert(0, {str(TESTS)!r})
import torch, torch_precompile as tp, pc_models
f = tp.load({str(tmp_path / 'm.py')!r}, {str(tmp_path / 'm.cache')!r})
torch.manual_seed(1)
m, x = pc_models.MLP(), torch.randn(4, 8)
x_ref = x.clone()
y, view = f(m, x)
y_ref, view_ref = pc_models.mutate_and_alias(m, x_ref)
torch.testing.assert_close(x, x_ref)                  # the input was mutated in place
torch.testing.assert_close(y, y_ref, atol=1e-4, rtol=1e-4)
torch.testing.assert_close(view, view_ref)
view.add_(1)                                          # the output aliases the input
assert torch.equal(x[:2], view), "the returned view does not alias the input"
print("OK")
"""
    assert "OK" in run_python(code).check().stdout


@pytest.mark.slow
def test_a_guard_on_a_marked_dim_fails_at_capture(tmp_path: Path) -> None:
    torch.manual_seed(0)
    m, x = pc_models.MLP(), torch.randn(5, 8)
    torch._dynamo.decorators.mark_unbacked(x, 0)
    with pytest.raises(tp.PrecompileError, match="mark_unbacked"):
        with tp.capture(pc_models.needs_guard, artifact_path=tmp_path / "m.py", cache_path=tmp_path / "m.cache",
                        tracer=tp.MakeFxTracer(), backend="inductor") as c:
            c(m, x)
    assert not (tmp_path / "m.py").exists()


def test_mark_unbacked_needs_the_inductor_backend(tmp_path: Path) -> None:
    m, x = pc_models.MLP(), torch.randn(5, 8)
    torch._dynamo.decorators.mark_unbacked(x, 0)
    with pytest.raises(tp.PrecompileError, match="need backend='inductor'"):
        with tp.capture(pc_models.step, artifact_path=tmp_path / "m.py", cache_path=tmp_path / "m.cache",
                        tracer=tp.MakeFxTracer(), backend="eager") as c:
            c(m, x)


@pytest.mark.slow
@NEEDS_LOWERING
def test_dims_sharing_a_shape_id_serve_any_equal_size(tmp_path: Path) -> None:
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    torch._dynamo.decorators.mark_unbacked(a, 0, shape_id="batch")
    torch._dynamo.decorators.mark_unbacked(b, 0, shape_id="batch")
    with tp.capture(pc_models.shared_dims, artifact_path=tmp_path / "m.py", cache_path=tmp_path / "m.cache",
                    tracer=tp.MakeFxTracer(), backend="inductor") as c:
        c(a, b)
    code = f"""
import torch, torch_precompile as tp
f = tp.load({str(tmp_path / 'm.py')!r}, {str(tmp_path / 'm.cache')!r})
for n in (1, 4, 9):
    a, b = torch.randn(n, 3), torch.randn(n, 3)
    torch.testing.assert_close(f(a, b), a + b)
print("OK")
"""
    assert "OK" in run_python(code).check().stdout
