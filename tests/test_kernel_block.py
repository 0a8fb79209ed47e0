"""The capture block's kernel scope: per-block cache directories (inherited by
children, restored after), only what the block compiled is carried, and an ISA the
serving CPU lacks is refused clearly without compiling anything."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import pytest

from conftest import read_journal, run_python

TESTS = Path(__file__).resolve().parent

BLOCKS = r"""
import json, os, subprocess, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, pc_models
from torch_precompile import _native

def keys(cache):
    _, entries = _native.cache_decode(open(cache, "rb").read())
    return sorted(n for k, n, _ in entries if k == "cpp_kernel")

os.environ["TORCHINDUCTOR_CACHE_DIR"] = "/tmp/user-inductor-dir"
fn, m, args = pc_models.make("mlp", seed=0)
with tp.capture(fn, artifact_path="a.py", cache_path="a.cache", tracer=tp.MakeFxTracer(), backend="inductor") as c:
    inside = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    child = subprocess.run([sys.executable, "-c", "import os; print(os.environ['TORCHINDUCTOR_CACHE_DIR'])"],
                           capture_output=True, text=True).stdout.strip()
    c(*args)
after = os.environ["TORCHINDUCTOR_CACHE_DIR"]
# The same computation again: its kernels were compiled (and loaded) before this
# block, yet the block compiles them again and carries them.
with tp.capture(fn, artifact_path="b.py", cache_path="b.cache", tracer=tp.MakeFxTracer(), backend="inductor") as c:
    c(*args)
# Another computation: the MLP's kernels, compiled only before this block, are not in it.
fn2, m2, args2 = pc_models.make("convbn", seed=0)
with tp.capture(fn2, artifact_path="c.py", cache_path="c.cache", tracer=tp.MakeFxTracer(), backend="inductor") as c:
    c(*args2)
print(json.dumps({{"inside": inside, "child": child, "after": after,
                  "a": keys("a.cache"), "b": keys("b.cache"), "c": keys("c.cache")}}))
"""


@pytest.mark.slow
def test_block_directories_and_only_what_the_block_compiled(tmp_path: Path) -> None:
    r = run_python(BLOCKS.format(tests=str(TESTS)), cwd=tmp_path).check()
    info = json.loads(r.stdout.strip().splitlines()[-1])
    assert info["inside"] != "/tmp/user-inductor-dir" and "precompile-block-" in info["inside"]
    assert info["child"] == info["inside"], "a child process started in the block inherits its directory"
    assert info["after"] == "/tmp/user-inductor-dir", "the previous directory is restored"
    assert info["a"] and info["a"] == info["b"], "a kernel used before the block is compiled again and carried"
    assert info["c"] and not set(info["a"]) & set(info["c"]), "kernels compiled only before the block are not carried"
    assert not os.path.exists(info["inside"]), "the block directory is removed once the pair is written"


ISA = r"""
import json, sys, warnings
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, pc_models
from torch_precompile import _native
fn, m, args = pc_models.make("mlp", seed=0)
with tp.capture(fn, artifact_path="m.py", cache_path="m.cache", tracer=tp.MakeFxTracer(), backend="inductor") as c:
    c(*args)
# A cache whose kernels claim an ISA this CPU lacks (re-encoded, so it is intact).
header, entries = _native.cache_decode(open("m.cache", "rb").read())
header = json.loads(header)
new = []
for kind, name, data in entries:
    if kind == "kernel_manifest":
        manifest = json.loads(data)
        manifest["isa"] = {{"vec_isa": "avx9000", "flags": ["avx9000f"]}}
        data = json.dumps(manifest).encode()
    new.append((kind, name, bytes(data)))
for key in ("format_version", "entries"):
    header.pop(key)
open("alien.cache", "wb").write(bytes(_native.cache_encode(json.dumps(header), new)))
print("READY")
"""

ISA_SERVE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
try:
    tp.load("m.py", "alien.cache")
except tp.PrecompileError as e:
    print("REFUSED", e)
"""


@pytest.mark.slow
def test_a_cpu_without_the_captured_isa_is_refused_under_lockdown(tmp_path: Path) -> None:
    run_python(ISA.format(tests=str(TESTS)), cwd=tmp_path).check()
    journal = tmp_path / "j.jsonl"
    r = run_python(ISA_SERVE.format(tests=str(TESTS)), cwd=tmp_path, preload=True,
                   env={"TORCH_PRECOMPILE_NO_COMPILATION": "1", "PRECOMPILE_JOURNAL": str(journal)}).check()
    assert "REFUSED" in r.stdout and "avx9000" in r.stdout and "lacks ['avx9000f']" in r.stdout, r.stdout
    assert not journal.exists() or journal.read_text() == "", "checking the ISA ran a compiler"


ISA_RULES = r"""
import sys
import torch
from torch_precompile._kernels import isa
cpu = torch.cpu
checks = {"avx2": cpu._is_avx2_supported(), "avx512": cpu._is_avx512_supported(),
          "amx_tile": cpu._is_amx_tile_supported()}
for flag, have in checks.items():
    got = isa.missing_flags({"vec_isa": flag, "flags": [flag], "machine": "x86_64"})
    assert got == ([] if have else [flag]), (flag, have, got)
assert isa.missing_flags({"vec_isa": "avx2", "flags": ["avx2"], "machine": "aarch64"}) == ["avx2"]
assert isa.missing_flags({"vec_isa": "", "flags": [], "machine": "aarch64"}) == []
assert "torch._inductor" not in sys.modules, "the serve-side check imported Inductor"
own = isa.decision()                     # the capture side: Inductor's own pick
assert isa.missing_flags(own) == [], own
print("ok", own)
"""


def test_isa_check_reads_cpu_flags_and_matches_inductors_pick() -> None:
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the flag table is x86's")
    assert "ok" in run_python(ISA_RULES).check().stdout


# What Inductor's own Triton autotuner leaves behind after benchmarking a kernel's
# configs: <cache dir>/<2 chars>/<source hash>.best_config, written through its
# AutotuneCache. On a GPU the generated kernels do this themselves; here the
# decision is written through the same API inside the block, and read back through
# it on the serving side exactly as a kernel's first launch would.
AUTOTUNE_DECISION = r"""
import os, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, pc_models
from torch._inductor.runtime.autotune_cache import AutotuneCache
from torch._inductor.runtime.cache_dir_utils import cache_dir
from torch._inductor.runtime.triton_compat import Config
from torch._inductor.runtime.triton_heuristics import hash_configs
CONFIGS = [Config({{"XBLOCK": 64}}, num_warps=4, num_stages=1), Config({{"XBLOCK": 256}}, num_warps=8, num_stages=1)]
META = {{"autotune_local_cache": True, "autotune_remote_cache": False}}
def lookup():
    source = os.path.join(cache_dir(), "cz", "czkernelsourcehash0123456789.py")
    return AutotuneCache.create(META, source, hash_configs(CONFIGS))
if sys.argv[1] == "capture":
    fn, m, args = pc_models.make("mlp", seed=0)
    with tp.capture(fn, artifact_path="t.py", cache_path="t.cache", tracer=tp.MakeFxTracer(), backend="eager") as cap:
        cap(*args)
        lookup().save(CONFIGS[1], 5_000_000)
else:
    tp.load("t.py", "t.cache")
    best = lookup().read_best(META, CONFIGS)
    print("BEST", None if best is None else (best.kwargs, best.num_warps))
"""


def test_inductor_autotune_decisions_ship_and_are_found_on_a_cold_host(tmp_path: Path) -> None:
    code = AUTOTUNE_DECISION.format(tests=str(TESTS))
    run_python(code, cwd=tmp_path, args=["capture"]).check()
    for sub in ("inductor", "triton"):
        (tmp_path / sub).mkdir()
    journal = tmp_path / "j.jsonl"
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TRITON_CACHE_DIR": str(tmp_path / "triton"),
           "TORCH_PRECOMPILE_NO_COMPILATION": "1", "PRECOMPILE_JOURNAL": str(journal)}
    r = run_python(code, cwd=tmp_path, args=["serve"], preload=True, env=env).check()
    assert "BEST ({'XBLOCK': 256}, 8)" in r.stdout, r.stdout
    assert not any((tmp_path / "inductor").iterdir()), "the decision was written into the user's cache"
    assert read_journal(journal) == []
    # Without the cache the same lookup finds nothing (the check can fail).
    (tmp_path / "t.cache").unlink()
    code_only = code.replace('tp.load("t.py", "t.cache")', "pass")
    r = run_python(code_only, cwd=tmp_path, args=["serve"], env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}).check()
    assert "BEST None" in r.stdout, r.stdout
