"""Frozen kernels: a fresh process on a cold host (empty Inductor and Triton cache
directories, another temp and working directory) serves an inductor artifact under
the lockdown and the strict shim with ZERO compiler executions, read from the
journal. Withholding the cache makes the same serve fail, which proves the check
can fail."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import cold_host, read_journal, run_python, shim_path

TESTS = Path(__file__).resolve().parent
MODELS = ["mlp", "convbn", "block"]

CAPTURE = r"""
import json, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, pc_models
from torch_precompile import _native
for name in {models!r}:
    fn, model, args = pc_models.make(name, seed=0)
    with tp.capture(fn, artifact_path=f"{{name}}.py", cache_path=f"{{name}}.cache",
                    tracer=tp.MakeFxTracer(), backend="inductor") as cap:
        cap(*args)
    header = json.loads(_native.cache_read_header(open(f"{{name}}.cache", "rb").read()))
    print(json.dumps([name, header["meta"]]))
"""

SERVE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, pc_models, scenario_tools as st
fn, model, args = pc_models.make({name!r}, seed=1)
ref = st.clone_args(args)
f = tp.load({code!r}, {cache!r})
with tp.no_compilation():
    y = f(*args)
# Serving frozen kernels needs none of Inductor (nor Dynamo, which it imports).
print("HEAVY", sorted(m for m in sys.modules if m.startswith(("torch._inductor", "torch._dynamo"))))
st.assert_close(y, fn(*ref), "inductor", "cold serve")
st.assert_models_match(args[0], ref[0], "inductor", "cold serve state")
print("SERVED")
"""


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("frozen")
    r = run_python(CAPTURE.format(tests=str(TESTS), models=MODELS), cwd=d).check()
    metas = dict(json.loads(line) for line in r.stdout.splitlines() if line.startswith("["))
    for name in MODELS:
        assert metas[name]["frozen_cpp_kernels"] >= 1, metas[name]
        assert metas[name]["vec_isa"] is not None
    return d


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_cold_host_serves_with_zero_compiler_runs(pairs: Path, tmp_path: Path, name: str) -> None:
    env, journal = cold_host(tmp_path)
    code = SERVE.format(tests=str(TESTS), name=name, code=str(pairs / f"{name}.py"), cache=str(pairs / f"{name}.cache"))
    r = run_python(code, preload=True, env=env, cwd=tmp_path / "cwd").check()
    assert "SERVED" in r.stdout
    assert read_journal(journal) == [], "the cold serve ran (or tried to run) a compiler"
    assert "HEAVY []" in r.stdout, "serving imported Inductor or Dynamo: " + r.stdout
    assert not any((tmp_path / "inductor").iterdir()), "nothing is written to the user's cache"


@pytest.mark.slow
def test_withheld_cache_fails_under_lockdown(pairs: Path, tmp_path: Path) -> None:
    env, journal = cold_host(tmp_path)
    empty = tmp_path / "withheld.cache"
    empty.write_bytes(b"not a cache")
    code = SERVE.format(tests=str(TESTS), name="mlp", code=str(pairs / "mlp.py"), cache=str(empty))
    r = run_python(code, preload=True, env=env, cwd=tmp_path / "cwd")
    assert r.returncode != 0 and "SERVED" not in r.stdout
    records = read_journal(journal)
    assert records and all(rec["verdict"] == "refused" for rec in records), records
    assert "PrecompileError" in r.stderr or "Operation not permitted" in r.stderr, r.stderr[-2000:]


TRITON_CAPTURE = r"""
import hashlib, json, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, pc_models, tri_kernels
from torch_precompile import _native
fn, model, args = pc_models.make("mlp", seed=0)
with tp.capture(fn, artifact_path="t.py", cache_path="t.cache", tracer=tp.MakeFxTracer(), backend="eager") as cap:
    cap(*args)
    kernel = tri_kernels.compile_for_h100()       # ptxas runs here, inside the block
header = json.loads(_native.cache_read_header(open("t.cache", "rb").read()))
print(json.dumps({{"meta": header["meta"], "cubin": hashlib.sha256(kernel.asm["cubin"]).hexdigest()}}))
"""

TRITON_SERVE = r"""
import hashlib, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, tri_kernels
torch_precompile_loaded = tp.load({code!r}, {cache!r})
with tp.no_compilation():
    kernel = tri_kernels.compile_for_h100()       # must be found, not compiled
print("CUBIN", hashlib.sha256(kernel.asm["cubin"]).hexdigest())
"""


@pytest.mark.slow
def test_triton_kernel_frozen_and_found_without_ptxas(tmp_path: Path) -> None:
    cap_dir = tmp_path / "capture"
    cap_dir.mkdir()
    r = run_python(TRITON_CAPTURE.format(tests=str(TESTS)), cwd=cap_dir).check()
    info = json.loads(r.stdout.strip().splitlines()[-1])
    assert info["meta"]["frozen_triton_files"] >= 2, info
    serve_dir = tmp_path / "serve"
    serve_dir.mkdir()
    env, journal = cold_host(serve_dir)
    r = run_python(TRITON_SERVE.format(tests=str(TESTS), code=str(cap_dir / "t.py"), cache=str(cap_dir / "t.cache")),
                   preload=True, env=env, cwd=serve_dir / "cwd").check()
    assert f"CUBIN {info['cubin']}" in r.stdout
    assert read_journal(journal) == [], "ptxas (or another compiler) ran while serving"


AUTOTUNE_CAPTURE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, pc_models
import torch._inductor.config as cfg
from torch._inductor import select_algorithm as sa
benchmarked = []
original = sa.AlgorithmSelectorCache.__call__
def spy(self, name, choices, *a, **k):
    benchmarked.append((name, len(choices)))
    return original(self, name, choices, *a, **k)
sa.AlgorithmSelectorCache.__call__ = spy
torch.manual_seed(0)
a, b = torch.randn(4, 32, 64), torch.randn(4, 64, 48)
with cfg.patch(max_autotune=True, max_autotune_gemm_backends="CPP,ATEN"):
    with tp.capture(pc_models.bmm_step, artifact_path="bmm.py", cache_path="bmm.cache",
                    tracer=tp.MakeFxTracer(), backend="inductor") as cap:
        cap(a, b)
print("BENCHMARKED", benchmarked)
"""

AUTOTUNE_SERVE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, pc_models
torch_precompile_install = tp.install()   # the gates: a benchmark under lockdown would raise
import torch._inductor.config as cfg
a, b = torch.randn(4, 32, 64), torch.randn(4, 64, 48)
with cfg.patch(max_autotune=True, max_autotune_gemm_backends="CPP,ATEN"):
    f = tp.load({code!r}, {cache!r})
    y = f(a, b)
torch.testing.assert_close(y, pc_models.bmm_step(a, b), atol=1e-4, rtol=1e-4)
print("SERVED")
"""


@pytest.mark.slow
def test_cpu_autotune_choice_is_captured_and_not_rerun(tmp_path: Path) -> None:
    cap_dir = tmp_path / "capture"
    cap_dir.mkdir()
    r = run_python(AUTOTUNE_CAPTURE.format(tests=str(TESTS)), cwd=cap_dir).check()
    assert "BENCHMARKED [('bmm', 2)]" in r.stdout, r.stdout   # real choices were benchmarked
    source = (cap_dir / "bmm.py").read_text()
    # The winner (the CPU GEMM template or ATen's bmm, whichever measured faster) is
    # baked into the artifact: serving has nothing left to choose.
    assert ("cpp_fused_bmm" in source) != ("extern_kernels.bmm" in source)
    serve_dir = tmp_path / "serve"
    serve_dir.mkdir()
    env, journal = cold_host(serve_dir)
    r = run_python(AUTOTUNE_SERVE.format(tests=str(TESTS), code=str(cap_dir / "bmm.py"), cache=str(cap_dir / "bmm.cache")),
                   preload=True, env=env, cwd=serve_dir / "cwd").check()
    assert "SERVED" in r.stdout and "AUTOTUNE" not in r.stderr
    assert read_journal(journal) == []


DYNAMO_CAPTURE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm
torch.manual_seed(0)
m = dm.MLP()
for name, fn, calls in (
    ("print_break", dm.print_break, [(m, torch.randn(2, 8)), (m, torch.randn(3, 8))]),
    ("parent", dm.step, [(dm.Parent(), torch.randn(2, 8))]),
):
    with tp.capture(fn, artifact_path=f"{{name}}.py", cache_path=f"{{name}}.cache", backend="inductor") as cap:
        for args in calls:
            cap(*args)
print("CAPTURED")
"""

DYNAMO_SERVE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm
d = {d!r}
f = tp.load(f"{{d}}/print_break.py", f"{{d}}/print_break.cache")
h = tp.load(f"{{d}}/parent.py", f"{{d}}/parent.cache")
m, p = dm.MLP(), dm.Parent()
for n in (2, 3, 5):
    x = torch.randn(n, 8)
    torch.testing.assert_close(f(m, x), dm.print_break(m, x), atol=1e-4, rtol=1e-4)
x = torch.randn(2, 8)
with torch.no_grad():
    want = p(x)
torch.testing.assert_close(h(p, x), want, atol=1e-4, rtol=1e-4)
print("SERVED")
"""


@pytest.mark.slow
def test_dynamo_artifacts_serve_cold_with_zero_compiler_runs(tmp_path: Path) -> None:
    cap_dir = tmp_path / "capture"
    cap_dir.mkdir()
    run_python(DYNAMO_CAPTURE.format(tests=str(TESTS)), cwd=cap_dir).check()
    serve_dir = tmp_path / "serve"
    serve_dir.mkdir()
    env, journal = cold_host(serve_dir)
    r = run_python(DYNAMO_SERVE.format(tests=str(TESTS), d=str(cap_dir)), preload=True, env=env,
                   cwd=serve_dir / "cwd").check()
    assert "SERVED" in r.stdout
    assert read_journal(journal) == [], "the cold Dynamo serve ran a compiler"
    # Inductor's loader writes the Python wrapper sources of Dynamo's compiled graphs
    # into the cache directory; no kernel library ever lands there.
    assert not list((serve_dir / "inductor").rglob("*.so")), "a kernel library landed in the user's cache"
