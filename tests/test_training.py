"""Training loops served from a capture (docs/training.md): a step captured over two
calls with the default DynamoTracer and inductor in one process, served in a fresh
cold-host process locked down (strict shim, journal) for more steps than were
captured, from other weights than the capture's: every loss and the final parameters
equal to eager's run of the same loop (1e-4; 2e-2 for bf16 autocast, whose rounding
differs between Inductor's fused kernels and eager's), 0 journal records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cold_host, read_journal, run_python, tagged_json

TESTS = Path(__file__).resolve().parent

pytestmark = pytest.mark.slow

PRELUDE = r"""
import copy, json, sys, warnings
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import train_models as tm
out = {out!r}
warnings.simplefilter("error", RuntimeWarning)   # the early "will refuse" warning fails the capture
"""

CAPTURE = PRELUDE + r"""
model = tm.mlp()
with tp.capture(tm.{step}, artifact_path=f"{{out}}/s.py", cache_path=f"{{out}}/s.cache") as cap:
    tm.train(model, cap, tm.batches(2 * {micro}, seed=1), {optimizer!r}, micro={micro}, inside={inside},
             schedule={schedule})
s = cap.summary()
print("SUMMARY", json.dumps({{"risky": s.risky_dropped_guards, "complete": s.complete}}))
"""

SERVE = PRELUDE + r"""
model = tm.mlp(seed=5)                     # other weights than the capture's
ref = copy.deepcopy(model)
data = tm.batches({steps}, seed=3)
f = tp.load(f"{{out}}/s.py", f"{{out}}/s.cache")
kw = dict(micro={micro}, inside={inside}, schedule={schedule})
with tp.no_compilation():
    got = tm.train(model, f, data, {optimizer!r}, **kw)
want = tm.train(ref, tm.{step}, data, {optimizer!r}, **kw)
tol = dict(atol={tol}, rtol={tol})
torch.testing.assert_close(torch.tensor(got), torch.tensor(want), **tol)
for (n, a), b in zip(model.named_parameters(), ref.parameters()):
    torch.testing.assert_close(a, b, **tol, msg=lambda m: f"parameter {{n}}: {{m}}")
print("LOSSES", json.dumps([got, want]))
"""

# name -> (step, optimizer, micro-batches per optimizer step, optimizer inside, LR schedule, tolerance)
CASES = {
    "adamw_after": ("step", "adamw", 1, False, False, 1e-4),
    "sgd_momentum_after": ("step", "sgd", 1, False, False, 1e-4),
    "accumulate_two_micro_batches": ("step_half", "adamw", 2, False, False, 1e-4),
    "clip_grad_norm_inside": ("step_clip", "sgd", 1, False, False, 1e-4),
    "autocast_bf16": ("step_bf16", "adamw", 1, False, False, 2e-2),
    "adamw_inside_lr_schedule": ("step_opt", "adamw", 1, True, True, 1e-4),
    "adam_inside": ("step_opt", "adam", 1, True, False, 1e-4),
    "sgd_momentum_inside": ("step_opt", "sgd", 1, True, False, 1e-4),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_captured_step_serves_a_training_loop(tmp_path: Path, case: str) -> None:
    step, optimizer, micro, inside, schedule, tol = CASES[case]
    fields = dict(tests=str(TESTS), out=str(tmp_path), step=step, optimizer=optimizer, micro=micro,
                  inside=inside, schedule=schedule)
    r = run_python(CAPTURE.format(**fields)).check()
    summary = tagged_json(r.stdout, "SUMMARY")
    assert summary == {"risky": [], "complete": True}, summary
    env, journal = cold_host(tmp_path / "host")
    steps = 6 * micro
    r = run_python(SERVE.format(**fields, steps=steps, tol=tol), preload=True, env=env,
                   cwd=tmp_path / "host" / "cwd").check()
    got, want = tagged_json(r.stdout, "LOSSES")
    assert len(got) == steps and got != [got[0]] * steps, got   # a loop that trained
    assert read_journal(journal) == [], "the cold serve ran (or tried to run) a compiler"


def test_a_restarted_job_trains_on_without_compiling(tmp_path: Path) -> None:
    """train_job.py, unmodified: run under `precompile run` with PRECOMPILE_CAPTURE it
    captures its step for 3 steps and checkpoints; restarted from the checkpoint
    under `precompile run --lockdown` with PRECOMPILE_SERVE on a cold host, it trains
    3 more steps with 0 compiler runs; the 6 losses equal an uninterrupted eager run's."""
    import subprocess
    import sys

    from conftest import PACKAGE_LIB, clean_env

    cli = next((p for p in (Path(sys.prefix) / "bin" / "precompile", PACKAGE_LIB.parents[2] / "bin" / "precompile")
                if p.exists()), Path(sys.prefix) / "bin" / "precompile")
    script = str(TESTS / "train_job.py")

    def run(args: list[str], env: dict[str, str], cwd: Path) -> str:
        p = subprocess.run(args, env=clean_env(**env), cwd=cwd, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"{args}\n{p.stdout}\n{p.stderr[-4000:]}"
        return p.stdout

    run([sys.executable, script, str(tmp_path / "eager.json"), "--steps", "6"], {}, tmp_path)
    pair = {"PRECOMPILE_ARTIFACT": str(tmp_path / "step.py"), "PRECOMPILE_CACHE": str(tmp_path / "step.cache")}
    run([str(cli), "run", "--", sys.executable, script, str(tmp_path / "first.json"), "--steps", "3",
         "--save", str(tmp_path / "ckpt.pt")],
        {"PRECOMPILE_CAPTURE": "train_models:step", "PRECOMPILE_TRACER": "dynamo",
         "PRECOMPILE_BACKEND": "inductor", **pair}, tmp_path)
    assert (tmp_path / "step.py").exists()
    env, journal = cold_host(tmp_path / "host")
    del env["TORCH_PRECOMPILE_NO_COMPILATION"], env["PRECOMPILE_STRICT"], env["PRECOMPILE_JOURNAL"]
    out = run([str(cli), "run", "--lockdown", "--strict", "--journal", str(journal), "--", sys.executable, script,
         str(tmp_path / "second.json"), "--steps", "3", "--resume", str(tmp_path / "ckpt.pt")],
        {**env, "PRECOMPILE_SERVE": f"train_models:step={tmp_path / 'step.py'},{tmp_path / 'step.cache'}"},
        tmp_path / "host" / "cwd")
    assert read_journal(journal) == [], "the restarted job ran (or tried to run) a compiler"
    assert "TRAINED 6 with StandaloneRunnable" in out, out   # the loaded artifact, not the function
    eager = json.loads((tmp_path / "eager.json").read_text())
    resumed = json.loads((tmp_path / "first.json").read_text()) + json.loads((tmp_path / "second.json").read_text())
    assert len(resumed) == 6 and resumed == pytest.approx(eager, abs=1e-4), (resumed, eager)
