"""Conformance with the specification where the first slice fell short: an honest
summary (capture errors of a MakeFx call, recompile-limit truncation whatever the
logging configuration) and PrecompileError where torch would leak its own errors."""

from __future__ import annotations

from pathlib import Path

from conftest import run_python

TESTS = Path(__file__).resolve().parent

SUMMARY = r"""
import logging, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import dyn_models as dm
out = {out!r}
# MakeFx: the call raised, and the summary says so
cap = tp.capture(dm.raises, artifact_path=f"{{out}}/r.py", cache_path=f"{{out}}/r.cache", tracer=tp.MakeFxTracer())
try:
    with cap:
        cap(torch.ones(3))
except ValueError:
    pass
s = cap.summary()
print("MAKEFX |", s.capture_errors, "|", s.complete)
# Dynamo's warnings silenced: the truncation is still seen
torch._logging.set_logs(dynamo=logging.ERROR)
with tp.capture(dm.with_int, artifact_path=f"{{out}}/l.py", cache_path=f"{{out}}/l.cache", backend="eager",
                tracer=tp.DynamoTracer(recompile_limit=1, dynamic=False, require_complete=False)) as cap:
    for n in (1, 2, 3):
        cap(torch.ones(2), n)
    s = cap.summary()
print("LIMIT |", s.truncated, "|", s.complete)
"""


def test_the_summary_reports_what_happened(tmp_path: Path) -> None:
    r = run_python(SUMMARY.format(tests=str(TESTS), out=str(tmp_path))).check()
    lines = {line.split(" | ")[0]: line.split(" | ")[1:] for line in r.stdout.splitlines() if " | " in line}
    errors, complete = lines["MAKEFX"]
    assert "ValueError: three rows are not allowed" in errors and complete == "False", lines["MAKEFX"]
    truncated, complete = lines["LIMIT"]
    assert truncated.startswith("('with_int (") and "dyn_models.py:" in truncated, truncated
    assert complete == "False"
