"""DynamoTracer installed serving: a graph break inside a child module's forward.
Its calls refuse to compile under every stance that would compile, follow
force_eager / eager_on_recompile, compile on a miss only when loaded with
allow_serve_time_compiles=True, and loading refuses where it cannot serve; a
torch.compile of the function after load serves the calls the artifact misses.
Compile counts are read from Dynamo's counters, not assumed."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_python

TESTS = Path(__file__).resolve().parent

CAPTURE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm
out = {out!r}
torch.manual_seed(0)
p = dm.Parent()
with tp.capture(dm.step, artifact_path=f"{{out}}/parent.py", cache_path=f"{{out}}/parent.cache",
                backend="eager", tracer=tp.DynamoTracer(dynamic=False)) as cap:
    cap(p, torch.randn(2, 8))
    cap(p, torch.randn(3, 8))
    print("SUMMARY", cap.summary())
m = dm.MLP()
with tp.capture(dm.print_break, artifact_path=f"{{out}}/standalone.py",
                cache_path=f"{{out}}/standalone.cache", backend="eager") as cap:
    cap(m, torch.randn(2, 8))
# Beside the live compiles that captured them, both artifacts refuse to load.
for name in ("parent", "standalone"):
    try:
        tp.load(f"{{out}}/{{name}}.py", f"{{out}}/{{name}}.cache")
        print("LOADED", name)
    except tp.PrecompileError as e:
        print("REFUSED", name, e)
"""

SERVE = r"""
import copy, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm
from torch._dynamo.utils import counters
out = {out!r}
def graphs():
    return counters["stats"]["unique_graphs"]
def same(got, want):
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
torch.manual_seed(1)
p = dm.Parent()
"""


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("installed")
    r = run_python(CAPTURE.format(tests=str(TESTS), out=str(out))).check()
    return out, r.stdout


def serve(out: Path, body: str, **kw) -> str:
    return run_python(SERVE.format(tests=str(TESTS), out=str(out)) + body, **kw).check().stdout


def test_graph_break_in_a_child_forward_is_served_installed(captured) -> None:
    out, stdout = captured
    assert "SERVING_MODE = 'installed'" in (out / "parent.py").read_text()
    assert "SUMMARY 5 frames (2 from graph breaks)" in stdout  # step, 2 forwards, 2 continuations
    assert "SERVE_TIME_COMPILES = True" in (out / "parent.py").read_text()
    stdout = serve(out, """
f = tp.load(f"{out}/parent.py", f"{out}/parent.cache")
assert f.installed is True
for n in (2, 3):
    x = torch.randn(n, 8)
    same(f(p, x), dm.step(p, x))
try:
    f(p, torch.randn(4, 8))
    raise AssertionError("an uncovered call was served")
except tp.PrecompileError as e:
    assert "size mismatch" in str(e) and "does not compile" in str(e), e
f.unload()                     # documented as not removing the entries
x = torch.randn(2, 8)
same(f(p, x), dm.step(p, x))
assert graphs() == 0, graphs()
print("served")
""")
    assert "served" in stdout


def test_stances_that_would_compile_refuse_and_the_eager_ones_serve(captured) -> None:
    out, _ = captured
    stdout = serve(out, """
f = tp.load(f"{out}/parent.py", f"{out}/parent.cache")
miss = torch.randn(5, 8)
for stance, kw in (("default", {}), ("fail_on_recompile", {}), ("eager_then_compile", {}),
                   ("default", {"force_backend": "eager"})):
    torch.compiler.set_stance(stance, **kw)
    for _ in range(2):         # eager_then_compile would compile on the second call
        try:
            f(p, miss)
            raise AssertionError(f"{stance} {kw}: a miss was served")
        except tp.PrecompileError as e:
            assert "does not compile" in str(e), e
    torch.compiler.set_stance("default")
assert graphs() == 0, graphs()
# Count calls into the installed graphs (bound in the module under their ids).
calls = []
for name, fn in list(vars(dm).items()):
    if name.startswith("__compiled_fn_"):
        setattr(dm, name, torch._dynamo.disable(lambda *a, _fn=fn, _n=name: calls.append(_n) or _fn(*a)))
x = torch.randn(2, 8)
same(f(p, x), dm.step(p, x))
assert len(calls) == 4, calls                      # step, both forwards, a continuation
for stance, served in (("force_eager", 0), ("eager_on_recompile", 4)):
    calls.clear()
    with torch.compiler.set_stance(stance):
        same(f(p, x), dm.step(p, x))       # a captured shape
        assert len(calls) == served, (stance, calls)
        same(f(p, miss), dm.step(p, miss))  # a miss runs eagerly
        assert len(calls) == served, (stance, calls)
assert graphs() == 0, graphs()
print("served")
""")
    assert "served" in stdout


def test_allow_serve_time_compiles_compiles_a_miss_beside_the_captured_variants(captured) -> None:
    out, _ = captured
    stdout = serve(out, """
torch._dynamo.config.recompile_limit = 1
f = tp.load(f"{out}/parent.py", f"{out}/parent.cache", allow_serve_time_compiles=True)
for n in (2, 3):                   # the captured variants serve without compiling
    x = torch.randn(n, 8)
    same(f(p, x), dm.step(p, x))
assert graphs() == 0, graphs()
with torch.compiler.set_stance("fail_on_recompile"):
    try:                           # serve-time compiles follow the process stance
        f(p, torch.randn(6, 8))
        raise AssertionError("fail_on_recompile did not refuse")
    except RuntimeError as e:
        assert "fail_on_recompile" in str(e), e
assert graphs() == 0, graphs()
x = torch.randn(4, 8)
same(f(p, x), dm.step(p, x))       # a miss compiles: captured variants do not count
first = graphs()
assert first > 0
x = torch.randn(5, 8)
same(f(p, x), dm.step(p, x))       # past recompile_limit=1 a miss runs eagerly
assert graphs() == first, (first, graphs())
print("served")
""")
    assert "served" in stdout


def test_loading_beside_the_live_compile_that_captured_it_is_refused(captured) -> None:
    _, stdout = captured
    refused = {line.split()[1]: line for line in stdout.splitlines() if line.startswith("REFUSED")}
    assert "already has live Dynamo cache entries" in refused["parent"]
    assert "__resume_at_" in refused["standalone"] and "fresh process" in refused["standalone"]


def test_installed_refusals_compiled_autograd_and_flag_on_standalone(captured) -> None:
    out, _ = captured
    stdout = serve(out, """
try:
    tp.load(f"{out}/standalone.py", f"{out}/standalone.cache", allow_serve_time_compiles=True)
    raise AssertionError("standalone took the flag")
except tp.PrecompileError as e:
    assert "standalone" in str(e), e
torch._dynamo.config.compiled_autograd = True
for allow in (False, True):       # the flag does not lift this refusal
    try:
        tp.load(f"{out}/parent.py", f"{out}/parent.cache", allow_serve_time_compiles=allow)
        raise AssertionError("loaded under compiled_autograd")
    except tp.PrecompileError as e:
        assert "compiled_autograd" in str(e), e
torch._dynamo.config.compiled_autograd = False
f = tp.load(f"{out}/parent.py", f"{out}/parent.cache")   # nothing was installed before
x = torch.randn(2, 8)
same(f(p, x), dm.step(p, x))
print("refused")
""")
    assert "refused" in stdout


def test_installed_artifact_refuses_to_load_with_dynamo_disabled(captured) -> None:
    out, _ = captured
    stdout = serve(out, """
try:
    tp.load(f"{out}/parent.py", f"{out}/parent.cache")
    raise AssertionError("loaded with TORCHDYNAMO_DISABLE=1")
except tp.PrecompileError as e:
    assert "TORCHDYNAMO_DISABLE" in str(e), e
f = tp.load(f"{out}/standalone.py", f"{out}/standalone.cache")  # standalone needs no Dynamo
x = torch.randn(2, 8)
m = dm.MLP()
same(f(m, x), dm.print_break(m, x))
print("refused")
""", env={"TORCHDYNAMO_DISABLE": "1"})
    assert "refused" in stdout


def test_installed_artifact_refuses_a_captured_source_changed_since_capture(tmp_path) -> None:
    src = (TESTS / "dyn_models.py").read_text()
    (tmp_path / "edited_models.py").write_text(src)
    run_python(f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
import torch, torch_precompile as tp
import edited_models as em
with tp.capture(em.step, artifact_path={str(tmp_path / 'a.py')!r},
                cache_path={str(tmp_path / 'a.cache')!r}, backend="eager") as cap:
    cap(em.Parent(), torch.randn(2, 8))
""").check()
    edited = src.replace("        return h * 2\n", "        return h * 3\n")
    assert edited != src
    (tmp_path / "edited_models.py").write_text(edited)
    r = run_python(f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
import torch, torch_precompile as tp
try:
    tp.load({str(tmp_path / 'a.py')!r}, {str(tmp_path / 'a.cache')!r})
    print("LOADED")
except tp.PrecompileError as e:
    print("REFUSED", e)
""").check()
    assert "REFUSED" in r.stdout and "cannot install" in r.stdout and "changed" in r.stdout, r.stdout


# A compile of the captured function after load adds live cache entries, which
# serve the calls the installed entries miss; a call both miss is still refused.
# In place of the capture's weights, perturbed ones: the served results are
# compared to eager on these.
LIVE_AFTER_LOAD = """
f = tp.load({artifact!r}, {cache!r})
assert f.installed is True and f.metadata["DYNAMO_FREE"] is {lean}, f.metadata
model = {model}
with torch.no_grad():
    for prm in model.parameters():
        prm.add_(torch.randn_like(prm))
def refused(x):
    try:
        f(model, x)
    except tp.PrecompileError as e:
        assert "does not compile" in str(e), e
        return True
    return False
x_new, x_other = torch.randn(7, 8), torch.randn(9, 8)
assert refused(x_new)
assert graphs() == 0, graphs()
before = {{name for name in vars(mod) if name.startswith("__compiled_fn_")}}
same(torch.compile(mod.step, backend="eager")(model, x_new), mod.step(model, x_new))
compiled = graphs()
assert compiled > 0
# Count calls into the live compile's graphs (bound in the module under their ids).
calls = []
live = [name for name in vars(mod) if name.startswith("__compiled_fn_") and name not in before]
assert live
for name in live:
    setattr(mod, name, torch._dynamo.disable(lambda *a, _fn=getattr(mod, name), _n=name: calls.append(_n) or _fn(*a)))
for _ in range(2):
    same(f(model, x_new), mod.step(model, x_new))   # served by the live entries
    assert calls, "x_new was not served by the live compile's graphs"
    calls.clear()
x = torch.randn(2, 8)
same(f(model, x), mod.step(model, x))                # a captured call: the installed entries
assert calls == [], calls
assert graphs() == compiled, (compiled, graphs())    # serving compiled nothing
assert refused(x_other)                              # covered by neither
assert graphs() == compiled, (compiled, graphs())
print("served")
"""


def test_a_compile_after_load_serves_the_calls_the_installed_entries_miss(captured) -> None:
    out, _ = captured
    stdout = serve(out, "mod = dm\n" + LIVE_AFTER_LOAD.format(
        artifact=str(out / "parent.py"), cache=str(out / "parent.cache"), lean=True, model="p"))
    assert "served" in stdout


# A graph break inside a child's forward, then a read of the environment: its
# installed artifact needs Dynamo to serve (not Dynamo-free).
ENV_MODELS = '''
import os
import torch
from torch import nn


class Child(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.sin(self.inner(x))
        torch._dynamo.graph_break()
        return h * int(os.environ["SCALE"])


class Parent(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Linear(8, 8)
        self.child = Child()

    def forward(self, x):
        return self.child(torch.relu(self.pre(x)))


def step(model, x):
    return model(x)
'''


def test_a_compile_after_load_serves_the_misses_of_an_artifact_that_needs_dynamo(tmp_path) -> None:
    (tmp_path / "env_live_models.py").write_text(ENV_MODELS)
    artifact, cache = str(tmp_path / "env.py"), str(tmp_path / "env.cache")
    run_python(f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
import torch, torch_precompile as tp
import env_live_models as em
torch.manual_seed(0)
with tp.capture(em.step, artifact_path={artifact!r}, cache_path={cache!r}, backend="eager",
                tracer=tp.DynamoTracer(dynamic=False)) as cap:
    cap(em.Parent(), torch.randn(2, 8))
""", env={"SCALE": "2"}).check()
    text = (tmp_path / "env.py").read_text()
    assert "SERVING_MODE = 'installed'" in text and "DYNAMO_FREE = False" in text
    stdout = serve(tmp_path, f"sys.path.insert(0, {str(tmp_path)!r})\nimport env_live_models as mod\n"
                   + LIVE_AFTER_LOAD.format(artifact=artifact, cache=cache, lean=False, model="mod.Parent()"),
                   env={"SCALE": "2"})
    assert "served" in stdout
