"""What a standalone Dynamo artifact re-creates and re-checks in the serving
process: globals Dynamo bound by id, bindings it pins by name in place of an
identity guard it cannot serialize, and the global state it checks (all of it
but the host's thread count)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_python

TESTS = Path(__file__).resolve().parent

CAPTURE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm, odict_models as om
out = {out!r}
torch.manual_seed(0)
with tp.capture(om.step, artifact_path=f"{{out}}/odict.py", cache_path=f"{{out}}/odict.cache",
                backend="eager") as cap:
    cap(om.Net(), torch.randn(2, 8))
# The scenario really binds collections by id into the step's module.
print("BY_ID", [n for n in vars(om) if n.startswith("___module_collections_")])
with tp.capture(dm.step, artifact_path=f"{{out}}/act.py", cache_path=f"{{out}}/act.cache",
                backend="eager") as cap:
    cap(dm.Activation(dm.my_act), torch.randn(2, 8))
    s = cap.summary()
print("ACT", s.risky_dropped_guards, ("CLOSURE_MATCH", "model.act") in s.dropped_guards)
"""

SERVE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm, odict_models as om
out = {out!r}
def refused(thunk):
    try:
        thunk()
    except tp.PrecompileError as e:
        return str(e)
    return "NOT REFUSED"
print("THREADS", torch.get_num_threads())
f = tp.load(f"{{out}}/odict.py", f"{{out}}/odict.cache")
m = om.Net()
x = torch.randn(2, 8)
with tp.no_compilation():
    y = f(m, x)
    assert type(y) is om.Output and list(y) == ["y"]
    torch.testing.assert_close(y["y"], om.step(m, x)["y"])
    torch.set_num_threads(2)              # the host's thread count moves while serving
    torch.testing.assert_close(f(m, x)["y"], om.step(m, x)["y"])
    torch.use_deterministic_algorithms(True)   # state a graph depends on is still checked
    print("DETERMINISTIC |", refused(lambda: f(m, x)))
    torch.use_deterministic_algorithms(False)
g = tp.load(f"{{out}}/act.py", f"{{out}}/act.cache")
with tp.no_compilation():
    a = dm.Activation(dm.my_act)
    torch.testing.assert_close(g(a, x), a(x))
    print("MOVED |", refused(lambda: g(dm.Activation(dm.other_act), x)))
print("served")
"""


def test_by_id_globals_pins_and_thread_count(tmp_path: Path) -> None:
    r = run_python(CAPTURE.format(tests=str(TESTS), out=str(tmp_path)), env={"OMP_NUM_THREADS": "2"}).check()
    assert "BY_ID ['___module_collections_" in r.stdout, r.stdout
    # model.act holds a module-level def: dropped (identity), pinned by name, not risky
    assert "ACT () True" in r.stdout, r.stdout
    assert "PINNED_BINDINGS = [[\"L['model'].act\", 'dyn_models.my_act']]" in (tmp_path / "act.py").read_text()
    r = run_python(SERVE.format(tests=str(TESTS), out=str(tmp_path)), env={"OMP_NUM_THREADS": "1"}).check()
    lines = {line.split(" | ")[0]: line for line in r.stdout.splitlines() if " | " in line}
    assert "THREADS 1" in r.stdout and "served" in r.stdout
    assert "GLOBAL_STATE changed: deterministic_algorithms" in lines["DETERMINISTIC"], lines["DETERMINISTIC"]
    moved = lines["MOVED"]
    assert "L['model'].act no longer holds dyn_models.my_act" in moved, moved
