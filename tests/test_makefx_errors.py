"""MakeFxTracer contract errors, load errors and tampered caches: each with its
message, and nothing executed from a cache that failed its checks."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
import torch

import pc_models
import torch_precompile as tp
from conftest import has_standalone_lowering, run_python

TESTS = Path(__file__).resolve().parent


def cap(tmp_path: Path, fn, backend: str = "eager", name: str = "m"):
    return tp.capture(fn, artifact_path=tmp_path / f"{name}.py", cache_path=tmp_path / f"{name}.cache",
                      tracer=tp.MakeFxTracer(), backend=backend)


@pytest.fixture
def mlp():
    torch.manual_seed(0)
    return pc_models.MLP(), torch.randn(4, 8)


def test_second_call_and_keywords_refused(tmp_path, mlp):
    m, x = mlp
    with cap(tmp_path, pc_models.step) as c:
        with pytest.raises(tp.PrecompileError, match="positional arguments only"):
            c(m, x=x)
        c(m, x)
        with pytest.raises(tp.PrecompileError, match="exactly ONE call"):
            c(m, x)
    assert (tmp_path / "m.py").exists() and (tmp_path / "m.cache").exists()


def test_partial_refused_lambda_accepted(tmp_path, mlp):
    m, x = mlp
    with pytest.raises(tp.PrecompileError, match="partial"):
        cap(tmp_path, functools.partial(pc_models.step, m))
    with cap(tmp_path, lambda model, x: model(x) * 2) as c:
        y = c(m, x)
    torch.testing.assert_close(y, m(x) * 2)


def test_lifecycle_errors(tmp_path, mlp):
    m, x = mlp
    c = cap(tmp_path, pc_models.step)
    with pytest.raises(tp.PrecompileError, match="inside the capture's `with` block"):
        c.save()
    with pytest.raises(tp.PrecompileError, match="inside its `with` block"):
        c(m, x)
    with pytest.raises(tp.PrecompileError, match="nothing was captured"):
        with c:
            pass
    assert not (tmp_path / "m.py").exists()
    with pytest.raises(tp.PrecompileError, match="single-use"):
        with c:
            pass
    with pytest.raises(tp.PrecompileError, match="single-use"):
        c.save()


def test_block_that_raises_writes_nothing_it_had_not_saved(tmp_path, mlp):
    m, x = mlp
    with pytest.raises(ValueError):
        with cap(tmp_path, pc_models.step) as c:
            c(m, x)
            raise ValueError("boom")
    assert not (tmp_path / "m.py").exists() and not (tmp_path / "m.cache").exists()
    with pytest.raises(ValueError):
        with cap(tmp_path, pc_models.step) as c:
            c(m, x)
            c.save()
            raise ValueError("boom")
    assert (tmp_path / "m.py").exists() and (tmp_path / "m.cache").exists()


SCALE = torch.tensor(2.0)


def uses_global(model, x):
    return model(x) * SCALE


class WithPlainAttr(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)
        self.offset = torch.ones(4)  # a plain attribute, not a registered buffer

    def forward(self, x):
        return self.fc(x) + self.offset


def test_baked_tensors_refused_by_name(tmp_path, mlp):
    m, x = mlp
    with pytest.raises(tp.PrecompileError, match="global 'SCALE'"):
        with cap(tmp_path, uses_global) as c:
            c(m, x)
    closed = torch.full((4,), 3.0)
    with pytest.raises(tp.PrecompileError, match="closed-over variable 'closed'"):
        with cap(tmp_path, lambda model, x: model(x) + closed) as c:
            c(m, x)
    with pytest.raises(tp.PrecompileError, match=r"plain \(unregistered\) attribute argument 0.offset"):
        with cap(tmp_path, pc_models.step) as c:
            c(WithPlainAttr(), x)
    assert not (tmp_path / "m.py").exists()


def test_nested_tensor_input_refused(tmp_path, mlp):
    m, _ = mlp
    nt = torch.nested.nested_tensor([torch.randn(2, 8), torch.randn(3, 8)])
    with pytest.raises(tp.PrecompileError, match="nested tensor"):
        with cap(tmp_path, pc_models.step) as c:
            c(m, nt)


def test_bad_arguments_to_capture(tmp_path):
    with pytest.raises(tp.PrecompileError, match="unknown backend"):
        tp.capture(pc_models.step, artifact_path=tmp_path / "a.py", cache_path=tmp_path / "a.c", backend="tvm")
    with pytest.raises(tp.PrecompileError, match="same file"):
        tp.capture(pc_models.step, artifact_path=tmp_path / "a.py", cache_path=tmp_path / "a.py")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("pair")
    torch.manual_seed(0)
    m, x = pc_models.MLP(), torch.randn(4, 8)
    for name in ("a", "b"):
        with tp.capture(pc_models.step, artifact_path=d / f"{name}.py", cache_path=d / f"{name}.cache",
                        tracer=tp.MakeFxTracer(), backend="eager") as c:
            c(m, x if name == "a" else torch.randn(2, 8))
    return d


def test_runtime_argument_checks(pair, mlp):
    m, x = mlp
    f = tp.load(pair / "a.py", pair / "a.cache")
    cases = [
        ((m, torch.randn(5, 8)), r"shape \[5, 8\]; the capture expects \[4, 8\]"),
        ((m, x.double()), "torch.float64 on cpu; the capture expects torch.float32"),
        ((m,), "takes 2 positional arguments"),
        ((torch.nn.Linear(8, 4), x), "does not match the captured structure"),
        ((m, [x]), "structure"),
    ]
    for args, msg in cases:
        with pytest.raises(tp.PrecompileError, match=msg):
            f(*args)
    with pytest.raises(tp.PrecompileError, match="positional arguments only"):
        f(m, x=x)
    bigger = pc_models.MLP()
    bigger.fc1 = torch.nn.Linear(8, 32)
    bigger.fc2 = torch.nn.Linear(32, 4)
    with pytest.raises(tp.PrecompileError, match=r"parameter 'fc1.weight' of argument 0 is \[32, 8\]"):
        f(bigger, x)


def test_generated_checks_accept_what_the_tables_accept(pair, mlp):
    """The artifact's generated per-call checks hand anything they do not accept to
    the table checks: an extra submodule with parameters is still refused by name,
    one without parameters still served, an in-place dtype change refused, and a
    model whose parameters stopped requiring grad still served."""
    import copy

    m, x = mlp
    f = tp.load(pair / "a.py", pair / "a.cache")
    want = f(m, x)
    extra = copy.deepcopy(m)
    extra.side = torch.nn.Linear(2, 2)
    with pytest.raises(tp.PrecompileError, match=r"unexpected \['side.bias', 'side.weight'\]"):
        f(extra, x)
    quiet = copy.deepcopy(m)
    quiet.act = torch.nn.ReLU()
    torch.testing.assert_close(f(quiet, x), want)
    frozen = copy.deepcopy(m).requires_grad_(False)
    torch.testing.assert_close(f(frozen, x), want)
    with pytest.raises(tp.PrecompileError, match="torch.float64 on cpu; the capture had"):
        f(copy.deepcopy(m).double(), x)
    assert f._forward.__globals__["_pc_state_fast"]((m, x)) is not None, "the generated check refused the captured model"
    # The C++ guard built from an accepted call is only a shortcut: a parameter
    # resized in place after it was built still reaches the tables' refusal.
    assert f._forward.__globals__["_pc_state_guard"][0] is not None, "no C++ state guard was built"
    torch.testing.assert_close(f(m, x), want)
    resized = copy.deepcopy(m)
    name, p = next(iter(resized.named_parameters()))
    p.data = torch.zeros(p.shape[0] + 1, *p.shape[1:])
    with pytest.raises(tp.PrecompileError, match=f"{name}.*the capture had"):
        f(resized, x)


def test_constant_leaf_is_specialized(tmp_path, mlp):
    m, x = mlp
    with cap(tmp_path, pc_models.two_outputs) as c:
        c(m, x, 3)
    f = tp.load(tmp_path / "m.py", tmp_path / "m.cache")
    assert set(f(m, x, 3)) == {"y", "n"}
    with pytest.raises(tp.PrecompileError, match="specialized it to 3"):
        f(m, x, 4)


def test_load_errors(pair, tmp_path):
    with pytest.raises(tp.PrecompileError, match="cannot read the python_code"):
        tp.load(tmp_path / "missing.py", pair / "a.cache")
    with pytest.raises(tp.PrecompileError, match="cannot read the cache"):
        tp.load(pair / "a.py", tmp_path / "missing.cache")
    other = tmp_path / "other.py"
    other.write_text("print('hello')\n")
    with pytest.raises(tp.PrecompileError, match="not a torch.compiler.precompile artifact"):
        tp.load(other, pair / "a.cache")
    with pytest.raises(tp.PrecompileError, match="different captures"):
        tp.load(pair / "a.py", pair / "b.cache")
    with pytest.raises(tp.PrecompileError, match="standalone artifact has no compiler"):
        tp.load(pair / "a.py", pair / "a.cache", allow_serve_time_compiles=True)


TAMPER_SCRIPT = r"""
import sys, warnings
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, pc_models
torch.manual_seed(0)
m, x = pc_models.MLP(), torch.randn(4, 8)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    f = tp.load({code!r}, {cache!r})
msgs = [str(x.message) for x in w]
assert len(msgs) == 1, msgs
print(msgs[0])
torch.testing.assert_close(f(m, x), m(x))
print("SERVED-FROM-PYTHON-CODE")
"""


def _tamper(src: Path, dst: Path, how: str) -> None:
    data = bytearray(src.read_bytes())
    if how == "header":
        data[30] ^= 0x01            # inside the JSON header
    elif how == "entry":
        data[-1] ^= 0x01            # the last entry byte
    elif how == "truncated":
        data = data[: len(data) // 2]
    elif how == "foreign":
        data = bytearray(b"\x89PNG\r\n\x1a\n" + bytes(64))
    elif how == "version":
        data[8] = 99                # format version field after the magic
    dst.write_bytes(bytes(data))


@pytest.mark.parametrize("how,msg", [
    ("header", "corrupt"), ("truncated", "corrupt"), ("foreign", "not a precompile cache"),
    ("version", "version 99 is not supported"),
])
def test_tampered_cache_is_ignored_with_a_warning(pair, tmp_path, how, msg):
    bad = tmp_path / f"{how}.cache"
    _tamper(pair / "a.cache", bad, how)
    r = run_python(TAMPER_SCRIPT.format(tests=str(TESTS), code=str(pair / "a.py"), cache=str(bad))).check()
    assert msg in r.stdout and "SERVED-FROM-PYTHON-CODE" in r.stdout


@pytest.mark.skipif(not has_standalone_lowering(), reason="MakeFx + inductor needs torch 2.14+ (refused before it: test_torch_features)")
def test_tampered_inductor_entry_is_detected_and_not_used(tmp_path):
    """A flipped byte in a kernel entry: the cache is refused as a whole (sha256), the
    bundle is never handed to torch, and serving falls back to python_code."""
    code = f"""
import sys, warnings
sys.path.insert(0, {str(TESTS)!r})
import torch, torch_precompile as tp, pc_models
from torch_precompile import _loader
fn, m, args = pc_models.make("mlp", seed=0)
with tp.capture(fn, artifact_path={str(tmp_path / 'i.py')!r}, cache_path={str(tmp_path / 'i.cache')!r},
                tracer=tp.MakeFxTracer(), backend="inductor") as c:
    c(*args)
data = bytearray(open({str(tmp_path / 'i.cache')!r}, "rb").read())
data[-10] ^= 0x40
open({str(tmp_path / 'bad.cache')!r}, "wb").write(bytes(data))
primed = []
_loader.prime = lambda *args, **kwargs: primed.append(args)  # the real arity: (entries, artifact)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    f = tp.load({str(tmp_path / 'i.py')!r}, {str(tmp_path / 'bad.cache')!r})
assert primed == [], "a corrupt cache must not be primed"
assert any("sha256" in str(x.message) or "corrupt" in str(x.message) for x in w), [str(x.message) for x in w]
torch.testing.assert_close(f(*args), fn(*args), atol=1e-4, rtol=1e-4)
print("ok")
"""
    assert "ok" in run_python(code).check().stdout
