"""A refused compile leaves nothing a later, allowed compile would use: in one
process, builds and traces refused under no_compilation() run normally once it
has ended (docs/lockdown.md). Fresh Inductor cache, so every probe really builds."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_python

SCRIPT = r"""
import json, torch, torch_precompile as tp
from torch._inductor import cpu_vec_isa
from torch._dynamo.utils import counters

# Inductor's ISA probe builds a test program; under the lockdown the build is
# refused and check_build reads that as "this ISA does not build"
with tp.no_compilation():
    locked = [str(i) for i in cpu_vec_isa.valid_vec_isa_list()]
after = [str(i) for i in cpu_vec_isa.valid_vec_isa_list()]
print("ISA", json.dumps([locked, after, torch.cpu._is_avx2_supported()]))

# Dynamo: a frame refused under the lockdown compiles once it has ended
def f(x):
    return torch.sin(x) * 2
x = torch.randn(5)
refused = False
with tp.no_compilation():
    try:
        torch.compile(f, backend="eager")(x)
    except tp.PrecompileError:
        refused = True
before = counters["frames"]["ok"]
y = torch.compile(f, backend="eager")(x)
print("DYNAMO", refused, counters["frames"]["ok"] - before, bool(torch.allclose(y, f(x))))

# Inductor: a kernel built after the lockdown, with the ISA probed again
def g(x):
    return torch.relu(x) * 3 + 1
refused = False
with tp.no_compilation():
    try:
        torch.compile(g)(x)
    except tp.PrecompileError:
        refused = True
w = torch.randn(64)
print("INDUCTOR", refused, bool(torch.allclose(torch.compile(g)(w), g(w))))
"""


def test_refused_builds_and_traces_run_once_the_lockdown_ends(tmp_path: Path) -> None:
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    r = run_python(SCRIPT, preload=True, env=env).check()
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in r.stdout.splitlines()
             if line.split(" ", 1)[0] in ("ISA", "DYNAMO", "INDUCTOR")}
    locked, after, avx2 = json.loads(lines["ISA"])
    assert locked == [], lines["ISA"]          # refused: the probe found nothing
    if avx2:
        assert after != [], lines["ISA"]       # probed again once the lockdown ended
    assert lines["DYNAMO"] == "True 1 True", lines["DYNAMO"]
    assert lines["INDUCTOR"] == "True True", lines["INDUCTOR"]
