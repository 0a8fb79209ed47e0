"""The lockdown's state machine as the gates see it: depth counting across
threads, the exported variable, thread-local serving. Each case runs in a fresh
interpreter, once with the Python layer's own state and once with the shim's
(when it is built), since either may hold the one state of a process."""

from __future__ import annotations

import json

import pytest

from conftest import run_python, shim_path

BACKENDS = [
    pytest.param(False, id="native-state"),
    pytest.param(True, id="shim-state"),
]

PRELUDE = r"""
import json, os, threading
import torch_precompile, torch
torch_precompile.install()
from torch.fx.experimental.proxy_tensor import make_fx
from torch_precompile import PrecompileError, _lockdown, no_compilation, serving

VAR = "TORCH_PRECOMPILE_NO_COMPILATION"

def traces():
    # One real gate: a make_fx trace, refused under any lock.
    try:
        make_fx(lambda x: x + 1)(torch.ones(2))
        return True
    except PrecompileError:
        return False

def state():
    return {"traces": traces(), "env": os.environ.get(VAR), "why": _lockdown.current()}
"""


def results(code: str, preload: bool, **env: str) -> dict:
    if preload:
        shim_path()
    r = run_python(PRELUDE + code, preload=preload, env=env).check()
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULTS "))
    return json.loads(line[len("RESULTS "):])


@pytest.mark.parametrize("preload", BACKENDS)
def test_overlapping_threads_are_depth_counted(preload: bool) -> None:
    code = r"""
steps = {}
a_in, b_in, a_go, a_out, b_go, b_out = (threading.Event() for _ in range(6))

def thread_a():
    with no_compilation():
        a_in.set(); a_go.wait()
    a_out.set()

def thread_b():
    with no_compilation():
        b_in.set(); b_go.wait()
    b_out.set()

# The main thread orders every step and checks from outside both blocks.
steps["before"] = state()
threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
threads[0].start(); a_in.wait()
threads[1].start(); b_in.wait()
steps["both_inside"] = state()
a_go.set(); a_out.wait()
steps["a_left"] = state()
b_go.set(); b_out.wait()
for t in threads: t.join()
steps["both_left"] = state()
print("RESULTS " + json.dumps(steps))
"""
    s = results(code, preload)
    unlocked = {"traces": True, "env": None, "why": None}
    locked = {"traces": False, "env": "1", "why": "no_compilation"}
    assert s["before"] == unlocked
    assert s["both_inside"] == locked
    assert s["a_left"] == locked, "A's exit must not end B's lockdown"
    assert s["both_left"] == unlocked


@pytest.mark.parametrize("preload", BACKENDS)
def test_exported_variable_is_restored_exactly(preload: bool) -> None:
    code = r"""
steps = {"before": state()}
with no_compilation():
    steps["outer"] = state()
    with no_compilation():
        steps["inner"] = state()
    steps["after_inner"] = state()
steps["after"] = state()
print("RESULTS " + json.dumps(steps))
"""
    # A previous value other than "1" does not lock at start, and comes back after.
    s = results(code, preload, TORCH_PRECOMPILE_NO_COMPILATION="0")
    assert s["before"] == {"traces": True, "env": "0", "why": None}
    for step in ("outer", "inner", "after_inner"):
        assert s[step] == {"traces": False, "env": "1", "why": "no_compilation"}, step
    assert s["after"] == {"traces": True, "env": "0", "why": None}


@pytest.mark.parametrize("preload", BACKENDS)
def test_serving_is_thread_local_and_exports_nothing(preload: bool) -> None:
    code = r"""
steps = {}
inside, checked = threading.Event(), threading.Event()

def serve():
    with serving():
        with serving():
            pass
        steps["serving_after_nested_exit"] = state()
        inside.set(); checked.wait()
    steps["serving_after_exit"] = state()

t = threading.Thread(target=serve)
t.start()
inside.wait()
steps["other_thread"] = state()
checked.set()
t.join()
print("RESULTS " + json.dumps(steps))
"""
    s = results(code, preload)
    assert s["serving_after_nested_exit"] == {"traces": False, "env": None, "why": "serving"}
    assert s["other_thread"] == {"traces": True, "env": None, "why": None}
    assert s["serving_after_exit"] == {"traces": True, "env": None, "why": None}
