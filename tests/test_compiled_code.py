"""python_code compiled once, at capture (issue 39): the cache holds it marshalled
for the capturing interpreter, and a load on that interpreter execs it instead of
compiling the source; without that entry (another Python, an older cache) the
source is compiled, and both serve the same. Tracebacks name the artifact where
it is loaded."""

from __future__ import annotations

from pathlib import Path

from conftest import run_python

CAPTURE = r"""
import sys, torch, torch_precompile as tp
sys.path.insert(0, {tests!r})
import pc_models as pm
with tp.capture(pm.step, artifact_path={out!r} + "/d.py", cache_path={out!r} + "/d.cache",
                tracer=tp.DynamoTracer(), backend="eager") as cap:
    cap(pm.MLP(), torch.randn(3, 8))
with tp.capture(pm.step, artifact_path={out!r} + "/m.py", cache_path={out!r} + "/m.cache",
                tracer=tp.MakeFxTracer(), backend="eager") as cap:
    cap(pm.MLP(), torch.randn(3, 8))
"""

SERVE = r"""
import builtins, json, sys, traceback, torch, torch_precompile as tp
import torch_precompile._native as n
from torch_precompile import _artifact
sys.path.insert(0, {tests!r})
import pc_models as pm
out = {out!r}
compiled = []
real = builtins.compile
def counting(source, filename, *a, **k):
    if str(filename).startswith(out):
        compiled.append(filename)
    return real(source, filename, *a, **k)
builtins.compile = counting
if {strip!r}:  # the cache re-encoded without the compiled code, or under another magic
    for name in ("d", "m"):
        code = open(f"{{out}}/{{name}}.py", "rb").read()
        header, entries = n.cache_decode(open(f"{{out}}/{{name}}.cache", "rb").read())
        h = json.loads(header)
        kept = [(k, e, bytes(d)) for k, e, d in entries if k != _artifact.COMPILED_KIND]
        if {strip!r} == "other":
            kept += [(k, "cpython-399-00000000.marshal", bytes(d)) for k, e, d in entries
                     if k == _artifact.COMPILED_KIND]
        open(f"{{out}}/{{name}}.cache", "wb").write(bytes(n.cache_encode(_artifact.header_for(
            code, backend=h["backend"], tracer=h["tracer"], meta=h.get("meta")), kept)))
result = {{"compiled": compiled}}
for name in ("d", "m"):
    f = tp.load(f"{{out}}/{{name}}.py", f"{{out}}/{{name}}.cache")
    m, x = pm.MLP(), torch.randn(3, 8)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn_like(p))
    result[name] = bool(torch.allclose(f(m, x), pm.step(m, x)))
    try:
        f(m, torch.randn(3, 8, dtype=torch.float64))
    except tp.PrecompileError as e:
        result[name + "_where"] = sorted({{fr.filename for fr in traceback.extract_tb(e.__traceback__)
                                           if fr.filename.startswith(out)}})
print("RESULT " + json.dumps(result))
"""


def _served(out: Path, strip: str) -> dict:
    tests = str(Path(__file__).resolve().parent)
    r = run_python(SERVE.format(out=str(out), tests=tests, strip=strip))
    r.check()
    import json

    return json.loads(next(line for line in r.stdout.splitlines() if line.startswith("RESULT "))[7:])


def test_a_load_execs_the_captured_code_and_compiles_the_source_only_without_it(tmp_path: Path) -> None:
    tests = str(Path(__file__).resolve().parent)
    run_python(CAPTURE.format(out=str(tmp_path), tests=tests)).check()
    got = _served(tmp_path, "")
    assert got["compiled"] == [] and got["d"] is True and got["m"] is True, got
    # the refusal's traceback names the artifact where it was loaded
    assert got["d_where"] == [str(tmp_path / "d.py")] and got["m_where"] == [str(tmp_path / "m.py")], got
    for strip in ("other", "gone"):  # another Python's entry, or none: the source is compiled
        got = _served(tmp_path, strip)
        assert sorted(got["compiled"]) == [str(tmp_path / "d.py"), str(tmp_path / "m.py")], (strip, got)
        assert got["d"] is True and got["m"] is True, (strip, got)
