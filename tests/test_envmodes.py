"""Zero-code-change capture and serving (PRECOMPILE_CAPTURE / PRECOMPILE_SERVE), and
the container entrypoint: unmodified scripts, fresh processes, the journal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env, compiler_runs, has_standalone_lowering, read_journal, run_python, shim_path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
ENTRYPOINT = ROOT / "scripts" / "entrypoint"


def job(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    e = clean_env(**env)
    e["LD_PRELOAD"] = str(shim_path())
    e["PYTHONPATH"] = str(TESTS)
    return subprocess.run([sys.executable, "-m", "envapp.job", *args], env=e, cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def capture_env(tmp: Path, **extra: str) -> dict[str, str]:
    return {"PRECOMPILE_CAPTURE": "envapp.model:step", "PRECOMPILE_ARTIFACT": str(tmp / "step.py"),
            "PRECOMPILE_CACHE": str(tmp / "step.cache"), "PRECOMPILE_TRACER": "make_fx", **extra}


SERVE_CHECK = """
import sys, torch
sys.path.insert(0, {tests!r})
import envapp.model as m
assert getattr(m.step, "installed", None) is False, m.step   # replaced by the loaded runnable
model, x = m.make()
y = m.step(model, x)
with torch.no_grad():
    want = model(x)
torch.testing.assert_close(y, want, atol=1e-4, rtol=1e-4)
print("SERVED-BY-ENV")
"""


@pytest.mark.slow
def test_capture_by_env_then_serve_by_env_locked_down(tmp_path: Path) -> None:
    # MakeFx + inductor needs the standalone lowering (2.14+; refused before it, see
    # test_torch_features): there the inductor capture goes through Dynamo
    tracer = "make_fx" if has_standalone_lowering() else "dynamo"
    r = job([str(tmp_path / "out.pt"), "--calls", "3"],
            capture_env(tmp_path, PRECOMPILE_BACKEND="inductor", PRECOMPILE_TRACER=tracer), tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "JOB DONE 3" in r.stdout
    # MakeFx records one trace; Dynamo records every call (they share one variant)
    assert f"captured step from {1 if tracer == 'make_fx' else 3} of 3 call(s)" in r.stderr, r.stderr[-3000:]
    assert (tmp_path / "step.py").exists() and (tmp_path / "step.cache").exists()
    cold = tmp_path / "cold"
    cold.mkdir()
    journal = tmp_path / "serve.jsonl"
    env = {"PRECOMPILE_SERVE": f"envapp.model:step={tmp_path / 'step.py'},{tmp_path / 'step.cache'}",
           "TORCH_PRECOMPILE_NO_COMPILATION": "1", "PRECOMPILE_STRICT": "1", "PRECOMPILE_JOURNAL": str(journal),
           "TORCHINDUCTOR_CACHE_DIR": str(cold / "inductor"), "TRITON_CACHE_DIR": str(cold / "triton")}
    r = run_python(SERVE_CHECK.format(tests=str(TESTS)), preload=True, env=env, cwd=cold).check()
    assert "SERVED-BY-ENV" in r.stdout
    assert read_journal(journal) == []


def test_checkpoint_survives_sigkill(tmp_path: Path) -> None:
    r = job([str(tmp_path / "out.pt"), "--calls", "5", "--die-after", "2"],
            capture_env(tmp_path, PRECOMPILE_BACKEND="eager"), tmp_path)
    assert r.returncode == -signal.SIGKILL
    assert (tmp_path / "step.py").exists() and (tmp_path / "step.cache").exists()
    r = run_python(f"""
import sys, torch
sys.path.insert(0, {str(TESTS)!r})
import torch_precompile as tp, envapp.model as m
f = tp.load({str(tmp_path / 'step.py')!r}, {str(tmp_path / 'step.cache')!r})
model, x = m.make()
torch.testing.assert_close(f(model, x), m.step(model, x))
print("CHECKPOINT-LOADS")
""").check()
    assert "CHECKPOINT-LOADS" in r.stdout


@pytest.mark.parametrize("env,expected", [
    ({"PRECOMPILE_CAPTURE": "envapp.model.step"}, "expected 'pkg.module:function'"),
    ({"PRECOMPILE_CAPTURE": "envapp.model:step"}, "needs PRECOMPILE_ARTIFACT and PRECOMPILE_CACHE"),
    ({"PRECOMPILE_CAPTURE": "envapp.never:step", "PRECOMPILE_ARTIFACT": "a.py", "PRECOMPILE_CACHE": "a.c"},
     "module envapp.never was never imported"),
    ({"PRECOMPILE_CAPTURE": "envapp.model:nothing", "PRECOMPILE_ARTIFACT": "a.py", "PRECOMPILE_CACHE": "a.c"},
     "has no attribute nothing"),
    ({"PRECOMPILE_CAPTURE": "envapp.model:step", "PRECOMPILE_ARTIFACT": "a.py", "PRECOMPILE_CACHE": "a.c",
      "PRECOMPILE_TRACER": "jit"}, "PRECOMPILE_TRACER='jit'"),
    ({"PRECOMPILE_SERVE": "envapp.model:step"}, "expected 'pkg.module:function=M.py,M.cache'"),
])
def test_bad_configuration_is_one_clear_line_and_the_job_still_runs(tmp_path: Path, env, expected) -> None:
    r = job([str(tmp_path / "out.pt"), "--calls", "1"], env, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "JOB DONE 1" in r.stdout
    lines = [line for line in r.stderr.splitlines() if line.startswith("torch_precompile:")]
    assert len(lines) == 1 and expected in lines[0], r.stderr[-2000:]


def test_unloadable_pair_fails_loudly_at_the_point_of_use(tmp_path: Path) -> None:
    env = {"PRECOMPILE_SERVE": f"envapp.model:step={tmp_path / 'missing.py'},{tmp_path / 'missing.cache'}"}
    r = job([str(tmp_path / "out.pt"), "--calls", "1"], env, tmp_path)
    assert r.returncode != 0
    assert "PRECOMPILE_SERVE: envapp.model:step could not be loaded" in r.stderr
    assert "PrecompileError" in r.stderr and "cannot read the python_code" in r.stderr


def entrypoint(cmd: list[str], env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
    e = clean_env(PRECOMPILE_LIB=str(shim_path()), **(env or {}))
    return subprocess.Popen(["sh", str(ENTRYPOINT), *cmd], env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_entrypoint_preloads_locks_down_and_passes_the_exit_status() -> None:
    p = entrypoint(["sh", "-c", 'echo "$LD_PRELOAD|${TORCH_PRECOMPILE_NO_COMPILATION:-}"; exit 7'])
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 7
    assert out.strip() == f"{shim_path()}|"
    p = entrypoint(["sh", "-c", 'echo "${TORCH_PRECOMPILE_NO_COMPILATION:-}"; g++ --version >/dev/null 2>&1; '
                                'echo "int main(){}" > /tmp/pc_ep.c; g++ -c /tmp/pc_ep.c -o /tmp/pc_ep.o; echo rc=$?'],
                   {"PRECOMPILE_SERVE": "x:y=a.py,b.cache"})
    out, err = p.communicate(timeout=60)
    assert out.splitlines()[0] == "1"
    assert "rc=126" in out or "rc=1" in out
    assert "refused to run compiler" in err


def test_entrypoint_passes_signals_through(tmp_path: Path) -> None:
    marker = tmp_path / "got-term"
    code = (f"import signal, sys, time, pathlib\n"
            f"signal.signal(signal.SIGTERM, lambda *a: (pathlib.Path({str(marker)!r}).write_text('TERM'), sys.exit(3)))\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    p = entrypoint([sys.executable, "-c", code])
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGTERM)     # the entrypoint exec'd: this pid is python itself
    p.communicate(timeout=30)
    assert p.returncode == 3 and marker.read_text() == "TERM"
