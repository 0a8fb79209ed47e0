"""With Inductor's C++ wrapper on at capture (``torch._inductor.config.cpp_wrapper``,
as TORCHINDUCTOR_CPP_WRAPPER=1 sets it), a CPU inference graph captured with
DynamoTracer + inductor is served through that wrapper: the capture lowers it
with ``cpp_wrapper`` on, builds the wrapper (which holds every kernel of the
graph) for the capture's own call, and freezes that one library. Served cold
and locked down (strict shim, journal), the artifact loads the frozen wrapper
through the ``CppWrapperCodeCache`` stand-in without importing Dynamo or
Inductor, runs no compiler, and equals eager on other weights and inputs; a
call its guards do not cover (another batch) is still refused. Without the
switch, and where the wrapper does not build at capture, the graph keeps
Inductor's Python wrapper and serves the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cold_host, has_standalone_lowering, read_journal, run_python

TESTS = Path(__file__).resolve().parent

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not has_standalone_lowering(),
                                 reason="inductor graphs as programs need torch 2.14+")]

CAPTURE = r"""
import json, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, dyn_models as m
from torch._inductor import codecache

def capture(name, fn, cpp_wrapper):
    torch._inductor.config.cpp_wrapper = cpp_wrapper  # as TORCHINDUCTOR_CPP_WRAPPER=1 sets it
    torch.manual_seed(0)
    model = m.MLP().eval()
    with torch.no_grad():
        with tp.capture(fn, artifact_path=f"{{name}}.py", cache_path=f"{{name}}.cache",
                        tracer=tp.DynamoTracer(), backend="inductor") as cap:
            cap(model, torch.randn(4, 8))
    text = open(f"{{name}}.py").read()
    print(json.dumps([name, "CppWrapperCodeCache.load_pybinding(" in text, "async_compile.cpp_pybinding(" in text]))

# a transformers model: a tiny Llama, its logits
import hf_models as hm
torch._inductor.config.cpp_wrapper = True
llama = hm.llama()
with torch.no_grad():
    with tp.capture(hm.lm_logits, artifact_path="llama.py", cache_path="llama.cache",
                    tracer=tp.DynamoTracer(), backend="inductor") as cap:
        cap(llama, hm.tokens(1, 8))
print(json.dumps(["llama", "CppWrapperCodeCache.load_pybinding(" in open("llama.py").read(), False]))

capture("wrapped", m.step, True)
capture("wrapped_break", m.print_break, True)
capture("default", m.step, False)

# a host whose C++ wrapper does not build: the graph keeps Python's wrapper
real = codecache.CppWrapperCodeCache.load_pybinding
def no_build(*args, **kwargs):
    raise RuntimeError("the C++ wrapper does not build here")
codecache.CppWrapperCodeCache.load_pybinding = no_build
capture("python_wrapper", m.step, True)
codecache.CppWrapperCodeCache.load_pybinding = real
"""

# Counts the graphs served through a frozen C++ wrapper (True) or not (False).
COUNTING = """
from torch_precompile._kernels import restore
served = []
frozen = restore.frozen_cpp_wrapper
def counted(*args, **kwargs):
    entry = frozen(*args, **kwargs)
    served.append(entry is not None)
    return entry
restore.frozen_cpp_wrapper = counted
"""

SERVE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, dyn_models as m
{counting}
torch.manual_seed(7)  # other weights than the capture's
model = m.MLP().eval()
with torch.no_grad():
    for p in model.parameters():
        p.add_(torch.randn_like(p))
f = tp.load({code!r}, {cache!r})
with torch.no_grad(), tp.no_compilation():
    for _ in range(2):  # other inputs than the capture's, twice
        x = torch.randn(4, 8)
        y, ref = f(model, x), getattr(m, {fn!r})(model, x)
        assert torch.allclose(y, ref, atol=1e-5), (y, ref)
    print("HEAVY", sorted(n for n in ("torch._dynamo", "torch._inductor") if n in sys.modules))
    try:
        f(model, torch.randn(5, 8))
    except tp.PrecompileError as e:
        assert "failed guards" in str(e), str(e)
        print("REFUSED")
print("WRAPPERS", served)
"""


LLAMA = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, hf_models as hm
{counting}
model = hm.llama()
torch.manual_seed(7)
with torch.no_grad():
    for p in model.parameters():  # other weights than the capture's
        p.add_(0.1 * torch.randn_like(p))
f = tp.load({code!r}, {cache!r})
with torch.no_grad(), tp.no_compilation():
    for seed in (2, 3):  # other tokens than the capture's
        ids = hm.tokens(1, 8, seed=seed)
        torch.testing.assert_close(f(model, ids), hm.lm_logits(model, ids))
    print("EQUAL")
    model.config.output_hidden_states = True  # a config entry the capture saw False
    ids = hm.tokens(1, 8, seed=4)
    try:
        y = f(model, ids)
    except tp.PrecompileError as e:
        assert "failed guards" in str(e), str(e)
        print("CONFIG REFUSED")
    else:
        torch.testing.assert_close(y, hm.lm_logits(model, ids))
        print("CONFIG EQUAL")
    model.config.output_hidden_states = False
    torch.testing.assert_close(f(model, ids), hm.lm_logits(model, ids))
    try:
        f(model, hm.tokens(2, 8))
    except tp.PrecompileError as e:
        assert "failed guards" in str(e), str(e)
        print("BATCH REFUSED")
print("WRAPPERS", served)
"""


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> tuple[Path, dict[str, list[bool]]]:
    d = tmp_path_factory.mktemp("cpp_wrapper")
    r = run_python(CAPTURE.format(tests=str(TESTS)), cwd=d).check()
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("[")]
    return d, {row[0]: row[1:] for row in rows}


@pytest.mark.parametrize("name,fn,wrapped", [
    ("wrapped", "step", True),
    ("wrapped_break", "print_break", True),
    ("default", "step", False),
    ("python_wrapper", "step", False),
])
def test_a_cpu_inference_graph_serves_through_its_frozen_cpp_wrapper(pairs, tmp_path: Path, name: str,
                                                                    fn: str, wrapped: bool) -> None:
    d, rows = pairs
    has_wrapper, has_python_kernels = rows[name]
    assert has_wrapper is wrapped and has_python_kernels is not wrapped, rows[name]
    env, journal = cold_host(tmp_path)
    code = SERVE.format(tests=str(TESTS), code=str(d / f"{name}.py"), cache=str(d / f"{name}.cache"), fn=fn,
                        counting=COUNTING)
    r = run_python(code, preload=True, env=env, cwd=tmp_path / "cwd").check()
    assert "REFUSED" in r.stdout, r.stdout
    assert read_journal(journal) == [], "the cold serve ran (or tried to run) a compiler"
    assert "HEAVY []" in r.stdout, "serving imported Dynamo or Inductor: " + r.stdout
    graphs = 2 if fn == "print_break" else 1
    expected = f"WRAPPERS {[True] * graphs}" if wrapped else "WRAPPERS []"
    assert expected in r.stdout, r.stdout


def test_a_transformers_model_serves_through_its_frozen_cpp_wrapper(pairs, tmp_path: Path) -> None:
    """A tiny Llama's logits through the frozen wrapper, cold and locked down, on
    other weights and tokens: equal to eager; a config entry the capture saw
    otherwise is refused or equal to eager, and serves again once restored."""
    d, rows = pairs
    assert rows["llama"][0] is True, rows["llama"]
    env, journal = cold_host(tmp_path)
    code = LLAMA.format(tests=str(TESTS), code=str(d / "llama.py"), cache=str(d / "llama.cache"),
                        counting=COUNTING)
    r = run_python(code, preload=True, env=env, cwd=tmp_path / "cwd").check()
    lines = r.stdout.splitlines()
    assert "EQUAL" in lines and "BATCH REFUSED" in lines, r.stdout
    assert "CONFIG REFUSED" in lines or "CONFIG EQUAL" in lines, r.stdout
    assert read_journal(journal) == [], "the cold serve ran (or tried to run) a compiler"
    assert "WRAPPERS [True" in r.stdout and "False" not in r.stdout.split("WRAPPERS", 1)[1], r.stdout
