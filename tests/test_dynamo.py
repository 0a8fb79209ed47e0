"""DynamoTracer end to end, eager backend: capture in one process, serve each
artifact in a fresh one, results equal to eager (scenario_tools.TOL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_python

TESTS = Path(__file__).resolve().parent

# One capture process for every eager scenario; each writes <name>.py/.cache and
# prints its summary as a JSON line.
CAPTURE_SCRIPT = r"""
import copy, json, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm
out = {out!r}
torch.manual_seed(0)

def summary_json(name, cap):
    s = cap.summary()
    d = {{f: getattr(s, f) for f in s.__dataclass_fields__}}
    d.update(name=name, digest=str(s), complete=s.complete)
    print("SUMMARY " + json.dumps(d), flush=True)

def capture(name, fn, calls, **kw):
    with tp.capture(fn, artifact_path=f"{{out}}/{{name}}.py", cache_path=f"{{out}}/{{name}}.cache",
                    backend="eager", **kw) as cap:
        for args, kwargs in calls:
            ref_args = copy.deepcopy((args, kwargs))
            y = cap(*args, **kwargs)
            if name != "filtered":  # the capture call runs for real
                torch.testing.assert_close(y, fn(*ref_args[0], **ref_args[1]))
        summary_json(name, cap)

m = dm.MLP()
capture("print_break", dm.print_break, [((m, torch.randn(2, 8)), {{}}), ((m, torch.randn(3, 8)), {{}})])
capture("item_branch", dm.item_branch,
        [((m, torch.rand(2, 8) * s), {{}}) for s in (1.0, -1.0, 2.0, -2.0)])
"""

# Captures with their own tracer settings or calls between capture calls; appended
# to the script above (plain source, not a format string).
CAPTURE_VARIANTS = r"""
with tp.capture(dm.with_int, artifact_path=f"{out}/ints.py", cache_path=f"{out}/ints.cache",
                backend="eager", tracer=tp.DynamoTracer(dynamic=False)) as cap:
    for n in (2, 5):
        cap(torch.randn(3), n)
    summary_json("ints", cap)
d = dm.DropMLP()
with tp.capture(dm.step, artifact_path=f"{out}/modes.py", cache_path=f"{out}/modes.cache",
                backend="eager", tracer=tp.DynamoTracer(dynamic=False)) as cap:
    cap(d, torch.randn(4, 8))                                # train, float32, 4 rows
    cap(d, torch.randn(6, 8))                                # another shape
    cap(d.double(), torch.randn(4, 8, dtype=torch.float64))  # another dtype
    d.float().eval()
    with torch.no_grad():
        cap(d, torch.randn(4, 8))                            # eval, no grad
    summary_json("modes", cap)
with tp.capture(dm.scaled, artifact_path=f"{out}/kwargs.py", cache_path=f"{out}/kwargs.cache",
                backend="eager") as cap:
    cap(m, torch.randn(2, 8))
    cap(m, torch.randn(2, 8), scale=3.0, shift=1.0)
    cap(x=torch.randn(2, 8), model=m)
    summary_json("kwargs", cap)
tm = dm.MLP()
with tp.capture(dm.train_step, artifact_path=f"{out}/train.py", cache_path=f"{out}/train.cache",
                backend="eager") as cap:
    cap(tm, torch.randn(4, 8), torch.randn(4, 4))
    summary_json("train", cap)
with tp.capture(dm.with_int, artifact_path=f"{out}/limited.py", cache_path=f"{out}/limited.cache",
                backend="eager", tracer=tp.DynamoTracer(recompile_limit=1, dynamic=False)) as cap:
    for n in (2, 5, 7):
        assert torch.equal(cap(torch.ones(3), n), torch.ones(3) * n + n)
    summary_json("limited", cap)

tagged = dm.MLP()
tagged.tag = dm.my_act
with tp.capture(dm.tagged_tail, artifact_path=f"{out}/tagged.py", cache_path=f"{out}/tagged.cache",
                backend="eager") as cap:
    assert cap(tagged, torch.randn(2, 8))[1] == "my_act"
    summary_json("tagged", cap)

import hooked_models as hm
hooked = hm.HookedBlocks()
with tp.capture(hm.hooked_step, artifact_path=f"{out}/hooked.py", cache_path=f"{out}/hooked.cache",
                backend="eager") as cap:   # no flags: a gap would refuse the write
    for rows in (2, 3):
        cap(hooked, torch.randn(rows, 8))
    summary_json("hooked", cap)

def drop_n(entries):
    return [not (e.name == "n" and e.guard_type in ("CONSTANT_MATCH", "EQUALS_MATCH"))
            for e in entries]

with tp.capture(dm.with_int, artifact_path=f"{out}/filtered.py", cache_path=f"{out}/filtered.cache",
                backend="eager", tracer=tp.DynamoTracer(guard_filter_fn=drop_n, dynamic=False,
                                                        require_no_risky_drops=False)) as cap:
    y2 = cap(torch.ones(3), 2)
    y3 = cap(torch.ones(3), 3)   # the dropped guard does not recompile: n=2's graph runs
    print("FILTERED " + json.dumps([y2.tolist(), y3.tolist()]))
    summary_json("filtered", cap)
"""

SERVE = r"""
import copy, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm
out = {out!r}
def load(name):
    f = tp.load(f"{{out}}/{{name}}.py", f"{{out}}/{{name}}.cache")
    assert f.installed is False, name
    return f
def same(got, want):
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
def uncovered(f, *args, **kwargs):
    try:
        f(*args, **kwargs)
    except tp.PrecompileError as e:
        return str(e)
    raise AssertionError("an uncovered call was served")
"""


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    out = tmp_path_factory.mktemp("dynamo")
    script = CAPTURE_SCRIPT.format(tests=str(TESTS), out=str(out)) + CAPTURE_VARIANTS
    r = run_python(script).check()
    summaries = {}
    for line in r.stdout.splitlines():
        if line.startswith("SUMMARY "):
            d = json.loads(line[len("SUMMARY "):])
            summaries[d["name"]] = d
        if line.startswith("FILTERED "):
            summaries["filtered_results"] = json.loads(line[len("FILTERED "):])
    return out, summaries


def serve(out: Path, body: str) -> str:
    r = run_python(SERVE.format(tests=str(TESTS), out=str(out)) + body).check()
    return r.stdout


def test_graph_break_on_print_is_served_standalone(captured) -> None:
    out, s = captured
    assert s["print_break"]["frames"] == 2 and s["print_break"]["resume_functions"] == 1
    assert s["print_break"]["complete"]
    text = (out / "print_break.py").read_text()
    assert "SERVING_MODE = 'standalone'" in text and "TRACER = 'dynamo'" in text
    stdout = serve(out, """
f = load("print_break")
m = dm.MLP()
for n in (2, 3, 7):          # 7 rows: the second variant is dynamic in the batch size
    x = torch.randn(n, 8)
    same(f(m, x), dm.print_break(m, x))
minted = [k for k in vars(dm) if k.startswith(("__resume_at_", "__compiled_fn_"))]
assert any(k.startswith("__resume_at_") for k in minted), minted
assert any(k.startswith("__compiled_fn_") for k in minted), minted
with f:
    pass                     # standalone: entering and unloading are no-ops
f.unload()
# The compiled graphs travel in python_code: an unreadable cache only warns, and
# python_code serves on its own when exec'd.
import warnings
open(f"{out}/garbage.cache", "wb").write(b"not a cache")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    g = tp.load(f"{out}/print_break.py", f"{out}/garbage.cache")
assert any("ignoring" in str(w.message) for w in caught), [str(w.message) for w in caught]
ns = {}
exec(compile(open(f"{out}/print_break.py").read(), "print_break.py", "exec"), ns)
x = torch.randn(4, 8)
same(g(m, x), dm.print_break(m, x))
same(ns["forward"](m, x), dm.print_break(m, x))
print("served")
""")
    assert stdout.count("between graphs") == 10  # the print runs between the graphs
    assert "served" in stdout


def test_data_dependent_item_branch_serves_both_branches_standalone(captured) -> None:
    out, s = captured
    assert s["item_branch"]["resume_functions"] >= 1
    stdout = serve(out, """
f = load("item_branch")
m = dm.MLP()
for scale in (3.0, -3.0, 0.25, -0.25):   # new values on both sides of the branch
    x = torch.rand(2, 8) * scale
    same(f(m, x), dm.item_branch(m, x))
print("served")
""")
    assert "served" in stdout


def test_shapes_dtypes_train_eval_and_ints_each_served_and_an_uncovered_call_raises(captured) -> None:
    out, s = captured
    assert s["modes"]["guarded_codes"] == 4 and s["ints"]["guarded_codes"] == 2
    assert s["ints"]["wont_generalize"] == ["n"]  # dynamic=False pins the int
    stdout = serve(out, """
f = load("modes")
d = dm.DropMLP()
for n in (4, 6):
    x = torch.randn(n, 8); ref = copy.deepcopy(d)
    same(f(d, x), dm.step(ref, x))
    same(d.bn.running_mean, ref.bn.running_mean)   # buffers update like eager
d.double(); x = torch.randn(4, 8, dtype=torch.float64); ref = copy.deepcopy(d)
same(f(d, x), dm.step(ref, x))
d.float().eval()
with torch.no_grad():
    x = torch.randn(4, 8)
    same(f(d, x), dm.step(d, x))
d.train()
msg = uncovered(f, d, torch.randn(5, 8))
assert "no captured variant of 'step'" in msg and "size mismatch" in msg, msg
assert "capture calls of two sizes" in msg and "dynamic=True" in msg, msg
g = load("ints")
for n in (2, 5):
    x = torch.randn(3)
    same(g(x, n), dm.with_int(x, n))
msg = uncovered(g, torch.randn(3), 9)
assert "L['n'] == 2" in msg and "L['n'] == 5" in msg, msg
print("served")
""")
    assert "served" in stdout


def test_keyword_arguments_and_defaults_are_served(captured) -> None:
    out, _ = captured
    stdout = serve(out, """
f = load("kwargs")
m = dm.MLP()
x = torch.randn(2, 8)
same(f(m, x), dm.scaled(m, x))                              # both defaults
same(f(m, x, scale=3.0, shift=1.0), dm.scaled(m, x, 3.0, shift=1.0))
same(f(m, x, 3.0, shift=1.0), dm.scaled(m, x, 3.0, shift=1.0))  # positional or keyword alike
same(f(x=x, model=m), dm.scaled(m, x))
same(f(m, x, scale=4.0), dm.scaled(m, x, scale=4.0))   # the float went dynamic at capture
msg = uncovered(f, m, x.double())
assert "dtype mismatch" in msg, msg
print("served")
""")
    assert "served" in stdout


def test_training_step_backward_accumulates_grads_like_eager(captured) -> None:
    out, s = captured
    assert s["train"]["resume_functions"] >= 1  # .backward() graph-breaks
    stdout = serve(out, """
f = load("train")
m = dm.MLP(); ref = copy.deepcopy(m)
for i in range(2):             # twice: .grad accumulates
    x, t = torch.randn(4, 8), torch.randn(4, 4)
    same(f(m, x, t), dm.train_step(ref, x, t))
    for p, q in zip(m.parameters(), ref.parameters()):
        same(p.grad, q.grad)
print("served")
""")
    assert "served" in stdout


def test_recompile_limit_truncation_is_in_the_summary_and_not_served(captured) -> None:
    out, s = captured
    lim = s["limited"]
    assert lim["guarded_codes"] == 1 and not lim["complete"]
    assert len(lim["truncated"]) == 1 and lim["truncated"][0].startswith("with_int (")
    assert lim["truncated"][0].endswith("dyn_models.py:" + lim["truncated"][0].rsplit(":", 1)[1])
    assert ">=1 TRUNCATED: ['with_int (" in lim["digest"]
    stdout = serve(out, """
f = load("limited")
x = torch.ones(3)
same(f(x, 2), dm.with_int(x, 2))
assert "L['n'] == 2" in uncovered(f, x, 5)   # ran eager at capture: absent here
print("served")
""")
    assert "served" in stdout


def test_a_guard_filter_drop_is_reported_and_not_checked(captured) -> None:
    out, s = captured
    f = s["filtered"]
    y2, y3 = s["filtered_results"]
    assert y2 == [4.0, 4.0, 4.0] and y3 == [4.0, 4.0, 4.0]  # no recompile for n=3
    assert f["guarded_codes"] == 1
    assert ["CONSTANT_MATCH", "n"] in f["dropped_guards"]
    assert ["CONSTANT_MATCH", "n"] in f["risky_dropped_guards"]  # the default keeps it
    assert ["CONSTANT_MATCH", "n", "L['n'] == 2"] in f["dropped_guard_code"]
    text = (out / "filtered.py").read_text()
    assert "DROPPED_GUARDS = [['CONSTANT_MATCH', 'n']]" in text
    assert "RISKY_DROPPED_GUARDS = [['CONSTANT_MATCH', 'n']]" in text
    stdout = serve(out, """
f = load("filtered")
print("SERVED", f(torch.ones(3), 7).tolist())
""")
    assert "SERVED [4.0, 4.0, 4.0]" in stdout  # n=7 is not checked: the n=2 graph serves


def test_a_graphless_frame_that_lost_a_guard_is_served_as_plain_python(captured) -> None:
    out, s = captured
    t = s["tagged"]
    # The continuation reads model.tag (an identity guard the filter drops, on a
    # configuration slot) and compiles nothing: it runs as plain Python, so its
    # guards are neither checked nor reported, and nothing risky is refused.
    assert t["frames"] == 2 and t["backend_graphs"] == 1 and t["complete"]
    assert not any("tag" in src for _, src in t["dropped_guards"] + t["kept_guards"])
    assert t["risky_dropped_guards"] == []
    text = (out / "tagged.py").read_text()
    assert "('torch_dynamo_resume_in_tagged_tail_at_" in text and "'plain', 0)" in text
    stdout = serve(out, """
f = load("tagged")
m = dm.MLP(); m.tag = dm.other_act
x = torch.randn(2, 8)
y, name = f(m, x)
same(y, m(x))
assert name == "other_act", name   # a variant would have served the captured "my_act"
print("served")
""")
    assert "served" in stdout


def test_a_frame_dynamo_left_to_eager_is_served_as_plain_python(captured) -> None:
    out, s = captured
    h = s["hooked"]
    # HookedBlocks.forward breaks the graph inside its loop (a Dynamo-disabled call,
    # as FSDP2's hooks are): Dynamo leaves the whole frame to eager, and so does the
    # artifact; the step around it is compiled and the capture is complete.
    assert h["uncovered_frames"] == [] and h["complete"] and h["backend_graphs"] >= 1, h
    assert "('forward', 'plain', 0)" in (out / "hooked.py").read_text()
    stdout = serve(out, """
import hooked_models as hm
f = load("hooked")
m = hm.HookedBlocks()
with torch.no_grad():
    for p in m.parameters():
        p.add_(torch.randn_like(p))        # other weights than the capture's
for rows in (2, 3):
    x = torch.randn(rows, 8)
    same(f(m, x), hm.hooked_step(m, x))
assert m.blocks[0].calls == 4, m.blocks[0].calls   # the disabled call ran in every call
print("served")
""")
    assert "served" in stdout


def test_summary_relations_hold_for_a_real_capture(captured) -> None:
    _, s = captured
    for name in ("print_break", "modes", "kwargs", "train", "filtered"):
        d = s[name]
        kept = {tuple(x) for x in d["kept_guards"]}
        dropped = {tuple(x) for x in d["dropped_guards"]}
        assert {tuple(x) for x in d["risky_dropped_guards"]} <= dropped, name
        policy = {tuple(x) for x in d["policy_dropped_guards"]}
        assert {(t, src) for t, src, _ in d["dropped_guard_code"]} <= dropped | policy, name
        assert not policy & kept, name
        assert {t for t, _ in policy} <= {"ID_MATCH", "FUNCTION_MATCH", "CLASS_MATCH", "MODULE_MATCH",
                                          "NN_MODULE", "CLOSURE_MATCH", "BUILTIN_MATCH"}, name
        assert set(d["wont_generalize"]) <= {src for _, src in kept}, name
        assert not any(src.startswith("L[") for _, src in kept | dropped), name
        assert d["digest"].startswith(f"{d['frames']} frame"), name
    md = s["modes"]
    assert md["digest"].startswith("1 frame (0 from graph breaks), 4 guarded codes, 4 backend graphs")
