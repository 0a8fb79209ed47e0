"""Zero-code targets for the code users already have (docs/zero-code.md, "Zero code
changes"): a model class (a transformers model whose forward is decorated, called
by generate()) and a function of the script run as __main__. Unmodified scripts,
captured under PRECOMPILE_CAPTURE, served in a fresh locked-down process on a cold
host with the strict shim, other weights and inputs, compiler runs read from the
journal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, cold_host, read_journal, run_python, shim_path, tagged_json

TESTS = Path(__file__).resolve().parent
GPT2 = "transformers.models.gpt2.modeling_gpt2:GPT2LMHeadModel"

# Runs the unmodified script as __main__, then says what served its model calls.
HARNESS = """
import runpy, sys
sys.argv = [{script!r}, *{args!r}]
runpy.run_path({script!r}, run_name="__main__")
from transformers import GPT2LMHeadModel
print("CALL " + GPT2LMHeadModel.__call__.__qualname__, flush=True)
"""


def script(path: Path, *args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    e = clean_env(**env)
    e["LD_PRELOAD"] = str(shim_path())
    return subprocess.run([sys.executable, str(path), *args], env=e, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def tokens(stdout: str) -> list[int]:
    return tagged_json(stdout, "TOKENS")


def test_generate_served_through_its_model_class(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    code, cache = tmp_path / "gpt2.py", tmp_path / "gpt2.cache"
    # capture: every call generate() makes of the model (prefill and 3 decode steps)
    r = script(TESTS / "zc_generate.py", "0", "4", cwd=tmp_path,
               env={"PRECOMPILE_CAPTURE": GPT2, "PRECOMPILE_ARTIFACT": str(code), "PRECOMPILE_CACHE": str(cache)})
    assert r.returncode == 0, r.stderr[-4000:]
    assert "captured GPT2LMHeadModel from 4 of 4 call(s)" in r.stderr, r.stderr[-4000:]
    assert len(tokens(r.stdout)) == 5 + 4
    # eager reference: other weights and prompt (seed 3), 12 new tokens
    want = tokens(script(TESTS / "zc_generate.py", "3", "12", cwd=tmp_path, env={}).stdout)
    assert len(want) == 5 + 12 and len(set(want[5:])) > 2, want   # the tokens vary
    env, journal = cold_host(tmp_path / "serve")
    env["PRECOMPILE_SERVE"] = f"{GPT2}={code},{cache}"
    r = run_python(HARNESS.format(script=str(TESTS / "zc_generate.py"), args=["3", "12"]), preload=True,
                   env=env, cwd=tmp_path / "serve" / "cwd").check()
    assert tokens(r.stdout) == want
    assert "CALL _class_server.<locals>.served_call" in r.stdout, r.stdout   # served, not eager
    assert read_journal(journal) == []


def test_a_function_of_the_script_run_as_main(tmp_path: Path) -> None:
    code, cache = tmp_path / "step.py", tmp_path / "step.cache"
    r = script(TESTS / "zc_main.py", "0", cwd=tmp_path,
               env={"PRECOMPILE_CAPTURE": "__main__:step", "PRECOMPILE_ARTIFACT": str(code),
                    "PRECOMPILE_CACHE": str(cache)})
    assert r.returncode == 0, r.stderr[-4000:]
    assert "captured step from 2 of 2 call(s)" in r.stderr, r.stderr[-3000:]
    env, journal = cold_host(tmp_path / "serve")
    env["PRECOMPILE_SERVE"] = f"__main__:step={code},{cache}"
    r = script(TESTS / "zc_main.py", "4", cwd=tmp_path / "serve" / "cwd", env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    result = tagged_json(r.stdout, "RESULT")
    assert result == {"close": [True, True], "step": "StandaloneRunnable"}, result
    assert read_journal(journal) == []
    # another script run as __main__ is refused, naming both
    other = tmp_path / "other.py"
    other.write_text((TESTS / "zc_main.py").read_text())
    r = script(other, "4", cwd=tmp_path, env={"PRECOMPILE_SERVE": f"__main__:step={code},{cache}"})
    assert "could not be loaded" in r.stderr and "zc_main.py run as __main__" in r.stderr, r.stderr[-3000:]
    assert str(other) in r.stderr


def test_method_targets_resolve_to_their_module_class_or_are_refused() -> None:
    r = run_python("""
import functools, torch
from torch_precompile._envmodes import module_class_target
def deco(f):
    @functools.wraps(f)
    def inner(*a, **k):
        return f(*a, **k)
    return inner
class Net(torch.nn.Module):
    @deco
    def forward(self, x):
        return x
    @deco
    def other(self, x):
        return x
class Plain:
    @deco
    def run(self, x):
        return x
assert module_class_target(Net, "forward", Net.forward, "V", "m:Net.forward") is Net
assert module_class_target(None, "Net", Net, "V", "m:Net") is Net
for owner, name in ((Net, "other"), (Plain, "run")):
    try:
        module_class_target(owner, name, getattr(owner, name), "V", f"m:{owner.__name__}.{name}")
    except ValueError as e:
        print("REFUSED", e)
try:
    module_class_target(None, "Plain", Plain, "V", "m:Plain")
except ValueError as e:
    print("REFUSED", e)
""").check()
    refused = [line for line in r.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(refused) == 3, r.stdout
    assert "Net.other is a closure over ['f']" in refused[0] and "name the class (m:Net)" in refused[0]
    assert "Plain.run is a closure" in refused[1]
    assert "not an nn.Module subclass" in refused[2]
