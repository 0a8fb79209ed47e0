"""torch's internals patched only while needed (docs/layout.md): after a capture
block exits, and after a load, every torch entry point the package wraps for a
capture is torch's own again; the ones a serving process needs (the frozen-kernel
hook on CppCodeCache.load_async) stay, documented at the patch. One fresh process,
a real Inductor capture and load."""

from __future__ import annotations

from pathlib import Path

from conftest import run_python

TESTS = Path(__file__).resolve().parent

SCRIPT = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import torch._dynamo.convert_frame as convert_frame
import torch._dynamo.guards as dg
import torch._C._dynamo.guards as cg
from torch._inductor.codecache import CppCodeCache
import torch.distributed.fsdp._fully_shard._fully_shard as fsdp
import dyn_models as dm

def entry_points():
    optimizers, stack = {{}}, [torch.optim.Optimizer]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        optimizers[cls.__qualname__] = cls.__dict__.get("__setstate__")
    return {{
        "convert_frame.exceeds_recompile_limit": convert_frame.exceeds_recompile_limit,
        "convert_frame.format_error_msg": convert_frame.format_error_msg,
        "CppCodeCache.load_async": CppCodeCache.__dict__["load_async"].__func__,
        "FSDPModule.__new__": fsdp.FSDPModule.__dict__["__new__"],
        "GuardBuilder.get": dg.GuardBuilder.__dict__["get"],
        "GuardBuilder.add_python_lambda_leaf_guard_to_root":
            dg.GuardBuilder.__dict__["add_python_lambda_leaf_guard_to_root"],
        "GuardManager.add_type_match_guard": cg.GuardManager.__dict__["add_type_match_guard"],
        "torch.optim __setstate__": optimizers,
        "torch.compile": torch.compile,
        "nn.Module.compile": torch.nn.Module.compile,
    }}

before = entry_points()
m = dm.MLP()
with tp.capture(dm.step, artifact_path={out!r} + "/s.py", cache_path={out!r} + "/s.cache") as cap:
    for rows in (2, 3):
        cap(m, torch.randn(rows, 8))
after_capture = entry_points()
changed = sorted(k for k in before if after_capture[k] is not before[k] and after_capture[k] != before[k])
print("AFTER-CAPTURE", changed)
f = tp.load({out!r} + "/s.py", {out!r} + "/s.cache")
x = torch.randn(2, 8)
torch.testing.assert_close(f(m, x), dm.step(m, x))
after_load = entry_points()
changed = sorted(k for k in before if after_load[k] is not before[k] and after_load[k] != before[k])
print("AFTER-LOAD", changed)
print("HOOK", getattr(after_load["CppCodeCache.load_async"], "__qualname__", ""))
"""


def test_a_capture_and_a_load_leave_torch_as_they_found_it(tmp_path: Path) -> None:
    r = run_python(SCRIPT.format(tests=str(TESTS), out=str(tmp_path))).check()
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line.split(" ", 1)[0] in
                 ("AFTER-CAPTURE", "AFTER-LOAD", "HOOK"))
    assert lines["AFTER-CAPTURE"] == "[]", r.stdout
    # serving keeps its frozen-kernel lookup (restore._install_hook, for the process)
    assert lines["AFTER-LOAD"] == "['CppCodeCache.load_async']", r.stdout
    assert lines["HOOK"] == "_install_hook.<locals>.load_async", r.stdout
