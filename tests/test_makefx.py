"""MakeFxTracer end to end: capture in one process, load and serve in a fresh one,
results equal to eager (tolerances in scenario_tools.TOL: 1e-6 eager, 1e-4 inductor),
with weights different from the captured ones (nothing is baked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import has_standalone_lowering, run_python

TESTS = Path(__file__).resolve().parent

CAPTURES = [
    ("mlp", "eager"), ("mlp", "inductor"),
    ("convbn", "eager"), ("convbn", "inductor"),
    ("block", "eager"), ("block", "inductor"),
    ("train", "eager"), ("train", "inductor"),
    ("tied", "eager"), ("dict", "eager"),
    ("unbacked", "inductor"),
]
if not has_standalone_lowering():  # torch 2.11: MakeFx + inductor is refused (test_torch_features)
    CAPTURES = [c for c in CAPTURES if c[1] == "eager"]

CAPTURE_SCRIPT = r"""
import json, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import pc_models, scenario_tools as st
out = {out!r}
for name, backend in {captures!r}:
    fn, model, args = pc_models.make(name, seed=0)
    ref_args = st.clone_args(args)
    with tp.capture(fn, artifact_path=f"{{out}}/{{name}}_{{backend}}.py",
                    cache_path=f"{{out}}/{{name}}_{{backend}}.cache",
                    tracer=tp.MakeFxTracer(), backend=backend) as cap:
        y = cap(*args)
    # The capture call ran for real: its result and side effects are eager's.
    y_ref = fn(*ref_args)
    st.assert_close(y, y_ref, backend, f"{{name}}/{{backend}} capture result")
    st.assert_models_match(args[0], ref_args[0], backend, f"{{name}}/{{backend}} capture state")
    print(json.dumps([name, backend, str(cap.summary())]), flush=True)
"""

SERVE_SCRIPT = r"""
import sys, warnings
sys.path.insert(0, {tests!r})
warnings.simplefilter("error")  # a usable cache must load without any warning
import torch, torch_precompile as tp
import pc_models, scenario_tools as st
name, backend, out = {name!r}, {backend!r}, {out!r}
fn, model, args = pc_models.make(name, seed=1)   # other weights than the capture's
f = tp.load(f"{{out}}/{{name}}_{{backend}}.py", f"{{out}}/{{name}}_{{backend}}.cache")
assert f.installed is False
with f:
    pass  # standalone: entering and exiting are no-ops
calls = [args]
if name == "train":
    calls = [args, args]          # gradients accumulate like eager .backward()
if name == "unbacked":
    calls = [(model, torch.randn(n, 8)) for n in (3, 5, 9)]
ref_model = st.clone_args((model,))[0]
for i, call in enumerate(calls):
    ref_call = (ref_model,) + st.clone_args(call[1:])
    y = f(*call)
    y_ref = fn(*ref_call)
    st.assert_close(y, y_ref, backend, f"call {{i}}")
    st.assert_models_match(model, ref_model, backend, f"call {{i}}")
print("served", len(calls))
"""


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("makefx")
    r = run_python(CAPTURE_SCRIPT.format(tests=str(TESTS), out=str(out), captures=CAPTURES)).check()
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("[")]
    assert [tuple(x[:2]) for x in lines] == CAPTURES
    assert all(x[2].startswith("1 frame") for x in lines)
    return out


@pytest.mark.parametrize("name,backend", CAPTURES, ids=[f"{n}-{b}" for n, b in CAPTURES])
def test_fresh_process_serves_like_eager(captured: Path, name: str, backend: str) -> None:
    r = run_python(SERVE_SCRIPT.format(tests=str(TESTS), out=str(captured), name=name, backend=backend)).check()
    assert "served" in r.stdout


def test_artifact_is_readable_source_with_literal_metadata(captured: Path) -> None:
    text = (captured / "mlp_eager.py").read_text()
    head = text.split("# Program")[0]
    for line in ("BACKEND = 'eager'", "TRACER = 'make_fx'", "SERVING_MODE = 'standalone'",
                 "FN_NAME = 'pc_models.step'"):
        assert line in head
    assert "torch.ops.aten.addmm.default" in text  # the graph itself, readable
    assert "def forward(*args, **kwargs):" in text


@pytest.mark.skipif(not has_standalone_lowering(), reason="MakeFx + inductor needs torch 2.14+")
@pytest.mark.parametrize("package", ["installed", "absent"])
def test_artifact_runs_alone_without_the_cache(captured: Path, package: str) -> None:
    # Without load() nothing is frozen: the program's kernel loader hands every
    # kernel to Inductor (JIT). Without torch_precompile at all, the program falls
    # back to Inductor's own imports.
    block = "sys.modules['torch_precompile'] = None" if package == "absent" else ""
    code = f"""
import sys; sys.path.insert(0, {str(TESTS)!r})
{block}
import torch, pc_models, scenario_tools as st
fn, model, args = pc_models.make("mlp", seed=3)
ns = {{}}
exec(open({str(captured / 'mlp_inductor.py')!r}).read(), ns)
st.assert_close(ns["forward"](*args), fn(*args), "inductor", "standalone exec")
print("ok", type(ns["extern_kernels"]).__module__)
"""
    out = run_python(code).check().stdout
    module = "torch._inductor.select_algorithm" if package == "absent" else "torch_precompile._kernels.runtime"
    assert f"ok {module}" in out, out
