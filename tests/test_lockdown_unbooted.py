"""The lockdown holds in a process the shim did not boot and that never called
install(): no_compilation(), serving() and TORCH_PRECOMPILE_NO_COMPILATION=1
arm the torch-side gates themselves, whether torch is imported before or after
torch_precompile, and PrecompileError keeps one identity through pickle."""

from __future__ import annotations

import pytest

from conftest import run_python

PROBE = r"""
import sys, threading
order = sys.argv[1]
if order == "torch-first":
    import torch
import torch_precompile as P
import torch
from torch.fx.experimental.proxy_tensor import make_fx
def f(x):
    return x.sin() + 1
def attempt(what, thunk):
    try:
        thunk()
        print(what, "| COMPILED")
    except P.PrecompileError as e:
        print(what, "| REFUSED", str(e)[:80])
x = torch.ones(3)
with P.no_compilation():
    attempt("compile", lambda: torch.compile(f, backend="eager")(x))
    attempt("make_fx", lambda: make_fx(f)(x))
    out = []
    t = threading.Thread(target=lambda: attempt("thread", lambda: torch.compile(f, backend="eager")(x + 1)))
    t.start(); t.join()
with P.serving():
    attempt("serving", lambda: torch.compile(lambda y: y * 2, backend="eager")(x))
attempt("unlocked", lambda: torch.compile(lambda y: y * 3, backend="eager")(x))
"""


@pytest.mark.parametrize("order", ["torch-first", "package-first"])
def test_no_compilation_and_serving_arm_the_gates_without_install(order: str) -> None:
    r = run_python(PROBE, args=[order]).check()
    lines = dict(line.split(" | ", 1) for line in r.stdout.splitlines() if " | " in line)
    for what in ("compile", "make_fx", "thread", "serving"):
        assert lines[what].startswith("REFUSED"), (what, r.stdout)
    assert lines["unlocked"] == "COMPILED"


STARTUP = r"""
import sys
if sys.argv[1] == "torch-first":
    import torch
import torch_precompile as P
import torch
try:
    torch.compile(lambda y: y * 2, backend="eager")(torch.ones(2))
    print("COMPILED")
except P.PrecompileError as e:
    print("REFUSED", e)
"""


@pytest.mark.parametrize("order", ["torch-first", "package-first"])
def test_the_startup_variable_arms_the_gates_without_the_shim(order: str) -> None:
    r = run_python(STARTUP, args=[order], env={"TORCH_PRECOMPILE_NO_COMPILATION": "1"}).check()
    assert r.stdout.startswith("REFUSED") and "TORCH_PRECOMPILE_NO_COMPILATION=1" in r.stdout, r.stdout


PICKLE = r"""
import pickle
import torch_precompile as P
e = pickle.loads(pickle.dumps(P.PrecompileError("boom")))
assert type(e) is P.PrecompileError and str(e) == "boom", type(e)
import torch
assert getattr(torch.compiler, "PrecompileError", None) is not P.PrecompileError   # not installed: torch's own (2.15)
e = pickle.loads(pickle.dumps(P.PrecompileError("boom")))
assert type(e) is P.PrecompileError
print("ok")
"""


def test_precompile_error_round_trips_through_pickle_without_install() -> None:
    assert "ok" in run_python(PICKLE).check().stdout
