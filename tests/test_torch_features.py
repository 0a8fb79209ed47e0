"""A torch without a feature a capture needs gets a PrecompileError naming the
torch version and the feature, and everything else keeps working: here the
standalone AOTAutograd + Inductor lowering (absent before torch 2.14) is hidden
from a fresh process, as on such a release (on 2.11 it is absent for real).
The ``_compat`` probes of the lowerings and of make_fx's unbacked inputs are
tested for the feature: each answers what this torch has, and each caller
refuses in its own words where it is missing."""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from pathlib import Path

import pytest

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


def test_the_lowering_probes_answer_what_torch_has_and_each_caller_refuses_without(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from torch_precompile._compat import lowering
    from torch_precompile._dynamo.rendering import dynamo_free_autograd, dynamo_free_graphs
    from torch_precompile._dynamo.rendering.dynamo_free_guards import NotDynamoFree

    # the module, not torch._inductor's function of the same name
    standalone_compile = importlib.import_module("torch._inductor.standalone_compile")
    has = importlib.util.find_spec("torch._functorch._aot_autograd.to_standalone_python") is not None
    assert (lowering.compile_to_python() is not None) == has
    pieces = lowering.standalone_inductor()
    if pieces is not None:
        assert pieces.resolve_ignore_shape_env("from_example_inputs") is True
        assert pieces.resolve_ignore_shape_env("from_graph") is False

    # hidden, as on a torch without them (2.11 lacks both for real), once torch's own
    # importers of them have run
    with warnings.catch_warnings():  # 2.11's Inductor import warns of its own deprecations
        warnings.simplefilter("ignore", DeprecationWarning)
        importlib.import_module("torch._functorch.aot_autograd")
        importlib.import_module("torch._inductor.compile_fx")
    if has:
        import torch._functorch._aot_autograd.to_standalone_python as to_standalone_python

        monkeypatch.delattr(to_standalone_python, "compile_to_python")
    monkeypatch.delattr(standalone_compile, "_runnable_source", raising=False)
    assert lowering.compile_to_python() is None and lowering.standalone_inductor() is None
    gm, x = torch.fx.symbolic_trace(lambda t: t.sin()), torch.ones(3, requires_grad=True)
    with pytest.raises(NotDynamoFree, match="no standalone AOTAutograd \\+ Inductor lowering"):
        dynamo_free_graphs._inductor_program(gm, [x], "g0")
    with pytest.raises(NotDynamoFree, match="no standalone Inductor lowering"):
        dynamo_free_autograd.program(gm, [x], "g0")


def test_an_input_of_unbacked_size_traces_where_torch_takes_one() -> None:
    # make_fx's symbolic trace takes such an input on 2.15; 2.11's proxy tracer
    # asserts on it whatever fn does (_compat.makefx). Either way a refusal says
    # what is refused, and a storage read is named where the trace gets to it.
    import torch

    import torch_precompile as tp
    from torch_precompile._compat.makefx import refuses_unbacked_inputs
    from torch_precompile._makefx.trace import trace

    def marked() -> torch.Tensor:
        x = torch.ones(4, 3)
        torch._dynamo.decorators.mark_unbacked(x, 0)
        return x

    def plain(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    def reads_storage(x: torch.Tensor) -> torch.Tensor:
        x.data_ptr()
        return x * 2

    try:
        trace(plain, (marked(),), None, "inductor")
    except tp.PrecompileError as e:
        assert f"symbolic trace of torch {torch.__version__} cannot take an input with mark_unbacked dims" in str(e)
        assert refuses_unbacked_inputs(e.__context__), repr(e.__context__)
        with pytest.raises(tp.PrecompileError, match="cannot take an input with mark_unbacked dims"):
            trace(reads_storage, (marked(),), None, "inductor")
    else:
        with pytest.raises(tp.PrecompileError, match="reads a tensor's storage"):
            trace(reads_storage, (marked(),), None, "inductor")
    try:
        raise AssertionError("Expected Proxy, got [Proxy(arg0_1)]")  # not the proxy tracer's
    except AssertionError as e:
        assert not refuses_unbacked_inputs(e)
