"""DynamoTracer refusals: what fn may be, the require_* write gates (which write
nothing partial and leave the capture open), and the summary's digest."""

from __future__ import annotations

from pathlib import Path

from conftest import run_python
from torch_precompile import PrecompileSummary

TESTS = Path(__file__).resolve().parent

GATES = r"""
import os, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm
out = {out!r}
def paths(name):
    return dict(artifact_path=f"{{out}}/{{name}}.py", cache_path=f"{{out}}/{{name}}.cache")
from child_helpers import refused

# fn must be a module-level function of an importable module.
def main_fn(x):   # this script is __main__
    return x + 1
def make_closure():
    k = 2
    def inner(x):
        return x * k
    return inner
for what, fn in (("closure", make_closure()), ("__main__", main_fn), ("nested", dm.make_nested()),
                 ("module", dm.MLP()), ("method", dm.MLP().forward), ("lambda", dm.plus_one)):
    print("FN", what, "|", refused(lambda: tp.capture(fn, **paths("never"))))

# require_complete: a capture call that raised is a coverage gap.
with tp.capture(dm.raises, **paths("raised_ok"), backend="eager",
                tracer=tp.DynamoTracer(require_complete=False)) as cap:
    cap(torch.ones(2))
    try:
        cap(torch.ones(3))
    except ValueError:
        pass
    print("ERRORS", cap.summary().capture_errors, "|", cap.summary())
def gap():
    with tp.capture(dm.raises, **paths("raised"), backend="eager") as cap:
        cap(torch.ones(2))
        try:
            cap(torch.ones(3))
        except ValueError:
            pass
print("COMPLETE |", refused(gap), "|", os.path.exists(f"{{out}}/raised.py"))

# require_no_risky_drops: a guard_filter_fn that drops a guard the default filter
# keeps gives up a check nothing can stand in for.
from torch_precompile._dynamo.recording.guards import default_filter
def drop_mlp_type(entries):
    return [keep and not (e.guard_type == "TYPE_MATCH" and type(e.value).__name__ == "MLP")
            for keep, e in zip(default_filter(entries), entries)]
def risky():
    with tp.capture(dm.step, **paths("risky"), backend="eager",
                    tracer=tp.DynamoTracer(guard_filter_fn=drop_mlp_type)) as cap:
        cap(dm.MLP(), torch.randn(2, 8))
print("RISKY |", refused(risky), "|", os.path.exists(f"{{out}}/risky.py"))

# A module class made at run time in an instance attribute: no name reaches it, so
# Dynamo's package cannot hold the frame, and the capture refuses it.
def local_class():
    with tp.capture(dm.step, **paths("local"), backend="eager") as cap:
        cap(dm.ClassAct(dm.local_act_class(2.0)), torch.randn(2, 8))
print("LOCAL |", refused(local_class))

# A function built at run time in that slot is checked by its fingerprint (code and
# closure values): the same closure serves, another is refused by name.
with tp.capture(dm.step, **paths("closure"), backend="eager") as cap:
    cap(dm.Activation(dm.scaled_act(2.0)), torch.randn(2, 8))
f = tp.load(f"{{out}}/closure.py", f"{{out}}/closure.cache")
m, x = dm.Activation(dm.scaled_act(2.0)), torch.randn(2, 8)
torch.testing.assert_close(f(m, x), m(x))
print("CLOSURE |", refused(lambda: f(dm.Activation(dm.scaled_act(3.0)), x)))

# A refused save() writes nothing and the capture stays open; the last good
# checkpoint is left as it was.
def checkpoint():
    global before
    with tp.capture(dm.step, **paths("checkpoint"), backend="eager",
                    tracer=tp.DynamoTracer(dynamic=False, guard_filter_fn=drop_mlp_type)) as cap:
        cap(dm.Activation(torch.tanh), torch.randn(2, 8))
        cap.save()
        before = open(f"{{out}}/checkpoint.py", "rb").read()
        cap(dm.Activation(dm.my_act), torch.randn(3, 8))   # another function: a variant of its own
        cap.save()
        before = open(f"{{out}}/checkpoint.py", "rb").read()
        cap(dm.MLP(), torch.randn(3, 8))
        print("SAVE |", refused(cap.save))
        assert open(f"{{out}}/checkpoint.py", "rb").read() == before
        cap(dm.Activation(dm.other_act), torch.randn(4, 8))   # still open
        print("RISKY_SLOTS", cap.summary().risky_dropped_guards)
exit_error = refused(checkpoint)   # the gate refuses at exit too
print("EXIT |", exit_error)
assert open(f"{{out}}/checkpoint.py", "rb").read() == before
f = tp.load(f"{{out}}/checkpoint.py", f"{{out}}/checkpoint.cache")
for act in (torch.tanh, dm.my_act):   # the checkpoint serves both captured functions
    m = dm.Activation(act)
    x = torch.randn(2 if act is torch.tanh else 3, 8)
    torch.testing.assert_close(f(m, x), m(x))

# Lifecycle: a block with no call, save() outside the block, a spent capture.
def no_call():
    with tp.capture(dm.add_one, **paths("nocall"), backend="eager"):
        pass
print("NOCALL |", refused(no_call))
cap = tp.capture(dm.add_one, **paths("life"), backend="eager")
print("OUTSIDE |", refused(cap.save), "|", refused(lambda: cap(torch.ones(1))))
with cap:
    cap(torch.ones(1))
print("SPENT |", refused(lambda: cap(torch.ones(1))), "|", refused(cap.__enter__))
"""


def test_fn_refusals_and_write_gates(tmp_path) -> None:
    r = run_python(GATES.format(tests=str(TESTS), out=str(tmp_path))).check()
    lines = {}
    for line in r.stdout.splitlines():
        if " | " in line or line.startswith(("FN", "ERRORS", "RISKY_SLOTS")):
            key = line.split()[0] if not line.startswith("FN") else "FN " + line.split()[1]
            lines[key] = line
    assert "closure over ['k']" in lines["FN closure"] and "module-level function" in lines["FN closure"]
    assert "__main__ that is not a script file" in lines["FN __main__"]   # python -c: no later run
    assert "inside another function" in lines["FN nested"]
    assert "wrapper frame" in lines["FN module"]
    assert "does not take a lambda (only a MakeFxTracer capture does)" in lines["FN lambda"]
    assert "bound method" in lines["FN method"]
    assert "('ValueError: three rows are not allowed',)" in lines["ERRORS"]
    assert "1 CAPTURE ERROR: 'ValueError: three rows are not allowed'" in lines["ERRORS"]
    complete = lines["COMPLETE"]
    assert "coverage gap" in complete and "ValueError: three rows" in complete
    assert "require_complete=False" in complete and complete.endswith("| False")
    risky = lines["RISKY"]
    assert "TYPE_MATCH model" in risky and "require_no_risky_drops=False" in risky
    assert "guard_filter_fn dropped a guard the default filter keeps" in risky
    local = lines["LOCAL"]   # torch 2.15 bypasses the frame; 2.11 stops the compile
    assert ("was bypassed" in local or "could not package the frame" in local), local
    assert "local_act_class.<locals>.Scale" in local or "Guard evaluation failed" in local, local
    # said at the frame compile that dropped it, before the write refused
    assert "this capture will refuse to write its artifact" in r.stderr
    assert risky.endswith("| False")
    closure = lines["CLOSURE"]
    assert "dyn_models.scaled_act.<locals>.act (read at model.act) changed since the capture" in closure \
        or "model.act.__closure__[0].cell_contents == 2.0" in closure, closure
    assert "TYPE_MATCH model" in lines["SAVE"]
    assert "('TYPE_MATCH', 'model')" in lines["RISKY_SLOTS"]
    assert "TYPE_MATCH model" in lines["EXIT"]
    assert "nothing was captured" in lines["NOCALL"]
    assert "inside the capture's `with` block" in lines["OUTSIDE"]
    assert "inside its `with` block" in lines["OUTSIDE"]
    assert "single-use" in lines["SPENT"]


def test_importing_the_dynamo_package_does_not_import_torch() -> None:
    r = run_python("import sys, torch_precompile._dynamo; print('torch' in sys.modules)").check()
    assert r.stdout.strip() == "False"


def test_digest_of_a_clean_summary() -> None:
    s = PrecompileSummary(frames=3, resume_functions=1, guarded_codes=4, backend_graphs=1,
                          kept_guards=(("TENSOR_MATCH", "x"),))
    assert str(s) == "3 frames (1 from graph breaks), 4 guarded codes, 1 backend graph"
    assert s.complete
    assert s.kept_guard_types == {"TENSOR_MATCH": 1} and s.dropped_guard_types == {}


def test_digest_of_a_summary_with_every_clause() -> None:
    s = PrecompileSummary(
        frames=9, resume_functions=2, guarded_codes=1, backend_graphs=2,
        bypassed=("forward",),
        truncated=("step (/m.py:3)",),
        uncovered_frames=("a", "b", "c", "d", "e", "f", "g"),
        wont_generalize=("n",),
        dropped_guards=(("ID_MATCH", "self.act"), ("ID_MATCH", "self.norm"), ("MODULE_MATCH", "G['torch']")),
        kept_guards=(("CONSTANT_MATCH", "n"), ("ID_MATCH", "self.act")),
        risky_dropped_guards=(("ID_MATCH", "self.act"),),
        policy_dropped_guards=(("TYPE_MATCH", "x"),),
        dropped_guard_code=(("ID_MATCH", "self.act", "___check_obj_id(L['self'].act, <id>)"),),
        capture_errors=("RuntimeError: boom\nmore", "ValueError: x"),
    )
    assert str(s) == (
        "9 frames (2 from graph breaks), 1 guarded code, 2 backend graphs, "
        "dropped guards {'ID_MATCH': 2, 'MODULE_MATCH': 1} (2 kept), "
        "RISKY drops ['ID_MATCH self.act'], 1 policy-dropped guard, 1 value-pinned source, "
        "7 UNCOVERED: ['a', 'b', 'c', 'd', 'e'] +2 more, >=1 TRUNCATED: ['step (/m.py:3)'], "
        "1 BYPASSED: ['forward'], 2 CAPTURE ERRORS: 'RuntimeError: boom' +1 more"
    )
    assert not s.complete
    assert s.dropped_guard_types == {"ID_MATCH": 2, "MODULE_MATCH": 1}


def test_complete_needs_graphs_and_no_gap() -> None:
    assert not PrecompileSummary(frames=1, resume_functions=0, guarded_codes=1, backend_graphs=0).complete
    assert not PrecompileSummary(frames=1, resume_functions=0, guarded_codes=1, backend_graphs=1,
                                 truncated=("f (a.py:1)",)).complete
    assert not PrecompileSummary(frames=1, resume_functions=0, guarded_codes=1, backend_graphs=1,
                                 capture_errors=("E: x",)).complete
    assert PrecompileSummary(frames=1, resume_functions=0, guarded_codes=1, backend_graphs=1,
                             risky_dropped_guards=(("ID_MATCH", "a"),), wont_generalize=("n",)).complete


PARAMETRIZED = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
from torch.nn.utils import parametrize
import dyn_models as dm
out = {out!r}
model = dm.MLP()
torch.nn.utils.parametrizations.weight_norm(model.fc1)   # Wav2Vec2's positional convolution does this
try:
    with tp.capture(dm.step, artifact_path=f"{{out}}/p.py", cache_path=f"{{out}}/p.cache", backend="eager") as cap:
        cap(model, torch.randn(2, 8))
except tp.PrecompileError as e:
    print("REFUSED |", str(e).replace("\n", " "))
parametrize.remove_parametrizations(model.fc1, "weight")  # the remedy the refusal names
with tp.capture(dm.step, artifact_path=f"{{out}}/q.py", cache_path=f"{{out}}/q.cache", backend="eager") as cap:
    cap(model, torch.randn(2, 8))
print("FOLDED captured")
"""


def assert_package_refusal(refused: str, bypassed: str | None = None) -> None:
    """torch 2.15 bypasses a frame whose guard state cannot be serialized, and the
    capture refuses the bypassed entry; torch before it fails that frame's compile,
    and the capture refuses naming the torch version. Either way the line carries
    Dynamo's reason and the remedy (checked by the caller). ``bypassed``: the
    phrase the refusal has where torch bypasses."""
    import torch

    from torch._dynamo.package import CompilePackage

    if hasattr(CompilePackage, "bypass_current_compile"):
        assert bypassed is None or bypassed in refused, refused
    else:
        assert f"torch {torch.__version__} fails its compile instead of bypassing it" in refused, refused


def test_a_parametrized_module_is_refused_with_dynamos_reason_and_the_remedy(tmp_path: Path) -> None:
    r = run_python(PARAMETRIZED.format(tests=str(TESTS), out=str(tmp_path))).check()
    refused = next(line for line in r.stdout.splitlines() if line.startswith("REFUSED |"))
    assert_package_refusal(refused, "entry frame of dyn_models.step was bypassed (Dynamo could not package it)")
    assert "Serialization of parametrized modules" in refused, refused
    assert "remove_parametrizations" in refused and "MakeFxTracer()" in refused, refused
    assert "Dynamo logged why" not in refused
    assert "FOLDED captured" in r.stdout


UNSAVABLE_GUARDS = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
from torch._dynamo.exc import PackageError
from torch._dynamo.guards import CheckFunctionManager
import dyn_models as dm
def unsavable(*args, **kwargs):  # as for a guard state no package can hold
    raise PackageError("this guard state cannot be saved")
CheckFunctionManager.serialize_guards = unsavable
try:
    with tp.capture(dm.step, artifact_path={out!r} + "/u.py", cache_path={out!r} + "/u.cache",
                    backend="eager") as cap:
        cap(dm.MLP(), torch.randn(2, 8))
except tp.PrecompileError as e:
    print("REFUSED |", str(e).replace("\n", " "))
"""


def test_a_bypass_that_ends_the_frames_compile_is_refused_naming_the_frame_and_the_reason(tmp_path: Path) -> None:
    # Dynamo bypasses the package when a frame's guard state cannot be saved; on
    # a torch where that bypass ends the compile (bypass_kills_the_compile), the
    # compile's own AssertionError is told apart (killed_by_bypass) and refused
    # naming the frame and Dynamo's reason, as torch's bypass does elsewhere.
    from torch._dynamo.package import CompilePackage

    from torch_precompile._compat.dynamo import bypass_kills_the_compile

    r = run_python(UNSAVABLE_GUARDS.format(tests=str(TESTS), out=str(tmp_path))).check()
    refused = next(line for line in r.stdout.splitlines() if line.startswith("REFUSED |"))
    assert "Guard evaluation failed: this guard state cannot be saved" in refused, refused
    if bypass_kills_the_compile(CompilePackage):
        assert "cannot go on compiling a frame it stopped packaging" in refused, refused
        assert "the frame step (" in refused and "dyn_models.py" in refused, refused
    else:
        assert "the entry frame of dyn_models.step was bypassed" in refused, refused


def test_only_an_assertion_of_dynamos_compile_is_a_bypass_ending_it() -> None:
    from torch_precompile._compat.dynamo import killed_by_bypass

    def raised(e: BaseException) -> BaseException:
        try:
            raise e
        except BaseException as caught:  # noqa: BLE001
            return caught

    assert not killed_by_bypass(raised(AssertionError("check_fn.guards_state is not None")))  # raised here
    assert not killed_by_bypass(raised(RuntimeError("in convert_frame")))


def test_risky_drops_under_one_run_time_object_fold_into_its_line() -> None:
    # BART called with use_cache=True deep-copies its config: Dynamo guards the config's
    # identity and every entry's; the refusal names the config once, with a count.
    from torch_precompile._dynamo.capture import risky_lines, run_time_identity_hint

    made = "holds a builtins.int made at run time"
    risky = (("ID_MATCH", "model.config"), ("ID_MATCH", "model.config.__dict__"),
             ("ID_MATCH", "model.config.__dict__['d_model']"), ("ID_MATCH", "model.config.__dict__['dropout']"),
             ("ID_MATCH", "model.config.__dict__['vocab_size']"), ("ID_MATCH", "model.configs"),
             ("CLOSURE_MATCH", "type(model.config).__validators__['d_model'][0]"))
    reasons = {k: made if k[0] == "ID_MATCH" else "reads the registry" for k in risky}
    assert risky_lines(risky, reasons) == [
        f"ID_MATCH model.config ({made}) and 4 more under it (model.config.__dict__, "
        "model.config.__dict__['d_model'], model.config.__dict__['dropout'], ...)",
        f"ID_MATCH model.configs ({made})",
        "CLOSURE_MATCH type(model.config).__validators__['d_model'][0] (reads the registry)",
    ]
    assert "use_cache=False" in run_time_identity_hint(reasons.values())
    assert run_time_identity_hint(["reads the registry"]) == ""


SCRIPTED = r"""
import os, sys, warnings
warnings.simplefilter("ignore", FutureWarning)   # torch.jit.script is deprecated
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import jit_models as jm
out, x = {out!r}, torch.arange(4.0)
try:
    with tp.capture(jm.step, artifact_path=f"{{out}}/s.py", cache_path=f"{{out}}/s.cache", backend="eager") as cap:
        cap(x)
    if os.environ.get("PYTORCH_JIT") == "0":
        print("CAPTURED")
except tp.PrecompileError as e:
    print("REFUSED |", str(e).replace("\n", " "))
if os.environ.get("PYTORCH_JIT") != "0" and os.path.exists(f"{{out}}/s.py"):
    print("SERVED", tp.load(f"{{out}}/s.py", f"{{out}}/s.cache")(x).tolist())
"""


def test_a_torchscript_function_is_refused_naming_pytorch_jit_0(tmp_path: Path) -> None:
    code = SCRIPTED.format(tests=str(TESTS), out=str(tmp_path))
    r = run_python(code).check()
    refused = next(line for line in r.stdout.splitlines() if line.startswith("REFUSED |"))
    assert_package_refusal(refused)
    assert "ScriptFunction" in refused and "PYTORCH_JIT=0" in refused, refused
    # the remedy: capture with TorchScript off; the artifact serves with it on
    assert "CAPTURED" in run_python(code, env={"PYTORCH_JIT": "0"}).check().stdout
    assert "SERVED [1.0, 3.0, 5.0, 7.0]" in run_python(code).check().stdout
