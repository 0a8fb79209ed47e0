"""Multi-rank jobs: a 2-rank torchrun (gloo, CPU) captures steps with a collective
inside fn and training steps over DDP, each rank its own pair (``NAME.{rank}.py``);
a fresh 2-rank job on a cold host serves them under ``precompile run --lockdown
--strict --journal``, equal to eager (and to DDP's gradients) with no compiler run
anywhere in the tree, rank 0's pair serving every rank where the graphs read no
rank; a job of another shape, or another rank's pair of a step that read its
rank, is refused naming the mismatch. Every subprocess has a timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PACKAGE_LIB, ROOT, clean_env, read_journal, shim_path

TESTS = Path(__file__).resolve().parent
# the CLI the package bundles (beside its shim), else cargo's
CLI = next((p for p in (PACKAGE_LIB.parents[2] / "bin" / "precompile", ROOT / "target" / "release" / "precompile")
            if p.exists()), PACKAGE_LIB.parents[2] / "bin" / "precompile")
ENTRYPOINT = TESTS.parent / "scripts" / "entrypoint"
TIMEOUT = 300


def env_for(tmp: Path, **extra: str) -> dict[str, str]:
    e = clean_env(**extra)
    # the workers import the steps and the job script from here; keep the caller's path
    e["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH")) if p)
    e["OMP_NUM_THREADS"] = "1"
    return e


def torchrun(tmp: Path, nproc: int, verb: str, *args: str, cli: list[str] | None = None,
             env: dict[str, str] | None = None, script: bool = False) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """``python -m torch.distributed.run``, or (``script``) the ``torchrun`` console
    script itself where the venv has one (a ``#!`` exec under the shim)."""
    launcher = [sys.executable, "-m", "torch.distributed.run"]
    if script and (Path(sys.executable).parent / "torchrun").exists():
        launcher = [str(Path(sys.executable).parent / "torchrun")]
    cmd = [*launcher, "--standalone", f"--nproc-per-node={nproc}", str(TESTS / "dist_jobs.py"), verb, *args]
    p = subprocess.run([*(cli or []), *cmd], env=env or env_for(tmp), cwd=tmp, capture_output=True,
                       text=True, timeout=TIMEOUT)
    results = [json.loads(line.split("RESULT ", 1)[1]) for line in p.stdout.splitlines() if "RESULT " in line]
    return p, sorted(results, key=lambda r: r["rank"])


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both ranks' pairs of step_ar (inductor), step_rank and step_env (eager), captured once."""
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    out = tmp_path_factory.mktemp("pairs")
    # Dynamo's log lines are prefixed [rankN]: the capture must not take the
    # formatter's get_rank() for a read of the traced program (step_grads breaks)
    p, results = torchrun(out, 2, "capture", str(out), env=env_for(out, TORCH_LOGS="graph_breaks"))
    assert p.returncode == 0 and len(results) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    for r in results:
        assert r["equal"] == {"step_ar": True, "step_rank": True, "step_env": True}, r
        assert "c10d.allreduce_" in r["makefx"] and "DynamoTracer" in r["makefx"], r
        assert not (out / f"makefx.{r['rank']}.py").exists()
        assert r["installed"] == "captured", r   # its pins check the process group
        assert "argument 0 is a DistributedDataParallel-wrapped module" in r["ddp"], r
        assert "DynamoTracer" in r["ddp"] and "ddp.module" in r["ddp"], r
        assert not (out / f"ddp_makefx.{r['rank']}.py").exists()
    for name in ("step_ar", "step_rank", "installed"):
        for rank in (0, 1):
            assert (out / f"{name}.{rank}.py").exists() and (out / f"{name}.{rank}.cache").exists()
    from torch_precompile._artifact import read_metadata

    ns = read_metadata((out / "installed.1.py").read_text())
    assert ns["SERVING_MODE"] == "installed" and ns["RISKY_DROPPED_GUARDS"] == [], ns
    assert "process group backend=gloo world_size=2 rank=any" in dict(map(tuple, ns["PINNED_BINDINGS"])).values()
    return out


def cold(tmp: Path) -> dict[str, str]:
    for sub in ("inductor", "triton", "tmp"):
        (tmp / sub).mkdir()
    return env_for(tmp, TORCHINDUCTOR_CACHE_DIR=str(tmp / "inductor"), TRITON_CACHE_DIR=str(tmp / "triton"),
                   TMPDIR=str(tmp / "tmp"))


@pytest.mark.slow
def test_capture_writes_checked_process_group_recipes(pairs: Path) -> None:
    from torch_precompile._artifact import read_metadata

    ns = read_metadata((pairs / "step_ar.1.py").read_text())
    assert ns["RISKY_DROPPED_GUARDS"] == []
    assert ns["DYNAMO_FREE"] is True, ns.get("DYNAMO_FREE_REFUSED")
    pinned = dict(map(tuple, ns["PINNED_BINDINGS"]))
    # the graph of step_ar read the world size, not the rank: any rank serves it
    assert pinned["G['dist'].group.WORLD"] == "process group backend=gloo world_size=2 rank=any"
    assert pinned["torch.compiler.config.compile_on_one_rank"] == \
        "torch.compiler.config.compile_on_one_rank == False"
    # step_rank's graph read the rank (get_rank()): it serves the capturing rank only
    pinned = dict(map(tuple, read_metadata((pairs / "step_rank.1.py").read_text())["PINNED_BINDINGS"]))
    assert pinned["<default process group>"] == "process group backend=gloo world_size=2 rank=1", pinned
    # and so did the trace's group.rank() call under get_rank(), seen by the watch
    assert pinned["G['dist'].group.WORLD"] == "process group backend=gloo world_size=2 rank=1", pinned
    # a training step over DDP: its forward runs eagerly around the wrapped module's,
    # whose frame is compiled and installed; nothing in it reads the rank or a group
    ns = read_metadata((pairs / "step_ddp.1.py").read_text())
    assert ns["SERVING_MODE"] == "installed" and ("forward", "compiled", 1) in ns["FRAMES"], ns["FRAMES"]
    assert ns["RISKY_DROPPED_GUARDS"] == [], ns
    assert not any("process group" in what for _expr, what in ns["PINNED_BINDINGS"]), ns["PINNED_BINDINGS"]
    # os.environ['RANK'] is a read of the rank too, with no group guard to carry it
    pinned = dict(map(tuple, read_metadata((pairs / "step_env.1.py").read_text())["PINNED_BINDINGS"]))
    groups = {expr: what for expr, what in pinned.items() if "process group" in what}
    assert groups == {"<default process group>": "process group backend=gloo world_size=2 rank=1"}, pinned


@pytest.mark.slow
def test_fresh_two_rank_job_serves_locked_down(pairs: Path, tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    p, results = torchrun(tmp_path, 2, "serve", str(pairs), env=cold(tmp_path), script=True,
                          cli=[str(CLI), "run", "--lockdown", "--strict", "--journal", str(journal), "--"])
    assert p.returncode == 0 and len(results) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    for r in results:
        assert r["lean"] is True, r  # served without importing Dynamo
        assert r["close"] == {"step_ar": True, "step_rank": True}, r
        assert r["equal"]["step_rank"] is True, r  # the eager backend: bit for bit
        assert r["shared"] is True, r  # rank 0's pair of step_ar, served on every rank
        assert r["ddp_grads"] is True, r  # rank 0's training step: DDP's loss and gradients
        # rank 0's pair of the step over DDP: served from the installed forward, equal to DDP
        assert r["ddp"] == {"installed": True, "forward_entries": 1, "loss": True, "grads": True}, r
        assert r["installed"] is True, r   # this rank's installed pair, its group pinned
        other = r["refusals"]["other_rank"]
        assert f"this process is rank {r['rank']} " in other and f"captured on rank {1 - r['rank']}" in other, r
        assert f"captured on rank {1 - r['rank']}" in r["refusals"]["env_rank"], r
        assert "compile_on_one_rank is True" in r["refusals"]["config"], r
    # after the all_reduce every rank holds the same mean
    assert results[0]["sums"]["step_ar"] == pytest.approx(results[1]["sums"]["step_ar"], abs=1e-5)
    # ... and the same all-reduced gradients (the inputs differ by rank)
    assert results[0]["grad_sum"] == pytest.approx(results[1]["grad_sum"], abs=1e-4)
    assert read_journal(journal) == []


@pytest.mark.slow
def test_job_of_another_world_size_is_refused(pairs: Path, tmp_path: Path) -> None:
    p, results = torchrun(tmp_path, 1, "serve_wrong_world", str(pairs), env=cold(tmp_path))
    assert p.returncode == 0 and len(results) == 1, p.stdout[-3000:] + p.stderr[-6000:]
    (none, wrong) = results[0]["errors"]
    assert "this process has none" in none and "init_process_group" in none, none
    assert "process group mismatch" in wrong and "world size 1, the capture's had 2" in wrong, wrong


def test_journal_names_each_rank(tmp_path: Path) -> None:
    """Every worker's refused probe lands in the one journal with its pid/ppid and
    rank, and ``precompile journal`` says which rank tried what."""
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    journal = tmp_path / "j.jsonl"
    p, results = torchrun(tmp_path, 2, "probe",
                          cli=[str(CLI), "run", "--lockdown", "--strict", "--journal", str(journal), "--"])
    assert p.returncode == 0 and len(results) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    assert [r["rc"] for r in results] == ["EPERM", "EPERM"], results
    records = read_journal(journal)
    assert len(records) == 2 and all(r["verdict"] == "refused" for r in records), records
    workers = {r["pid"] for r in results}
    # the exec is journaled from the worker or from its fork child about to exec
    assert {r["pid"] if r["pid"] in workers else r["ppid"] for r in records} == workers, (records, results)
    agent = {r["ppid"] for r in results}
    assert len(agent) == 1, results  # both workers are children of the one torchrun agent
    assert sorted(r["rank"] for r in records) == [0, 1], records
    by_pid = {r["pid"]: r["rank"] for r in results}
    for rec in records:  # each record carries the rank of the worker it came from
        assert by_pid.get(rec["pid"], by_pid.get(rec["ppid"])) == rec["rank"], (records, results)
    text = subprocess.run([str(CLI), "journal", str(journal)], capture_output=True, text=True, timeout=60)
    assert text.returncode == 0, text.stderr
    for rec in records:
        assert f"pid {rec['pid']} ppid {rec['ppid']} rank {rec['rank']}: " in text.stdout, text.stdout
    assert "    rank 0          refused 1\n" in text.stdout and "    rank 1          refused 1\n" in text.stdout, \
        text.stdout


@pytest.mark.slow
def test_zero_code_capture_and_serve_per_rank(tmp_path: Path) -> None:
    """PRECOMPILE_CAPTURE in a torchrun job: {rank} gives each rank its own pair;
    PRECOMPILE_SERVE through scripts/entrypoint serves them locked down."""
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    shared = env_for(tmp_path, PRECOMPILE_CAPTURE="dist_models:step_ar", PRECOMPILE_BACKEND="eager",
                     PRECOMPILE_ARTIFACT=str(tmp_path / "ar.py"), PRECOMPILE_CACHE=str(tmp_path / "ar.cache"))
    p, results = torchrun(tmp_path, 2, "unmodified", env=shared, cli=[str(CLI), "run", "--"])
    assert p.returncode == 0 and len(results) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    assert p.stderr.count("every rank would write this one path; put {rank} in it") == 2, p.stderr[-3000:]
    assert not (tmp_path / "ar.py").exists()

    env = dict(shared, PRECOMPILE_ARTIFACT=str(tmp_path / "ar.{rank}.py"),
               PRECOMPILE_CACHE=str(tmp_path / "ar.{rank}.cache"))
    p, results = torchrun(tmp_path, 2, "unmodified", env=env, cli=[str(CLI), "run", "--"])
    assert p.returncode == 0 and len(results) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    for rank in (0, 1):
        assert (tmp_path / f"ar.{rank}.py").exists() and (tmp_path / f"ar.{rank}.cache").exists()
        assert f"into {tmp_path / f'ar.{rank}.py'}" in p.stderr, p.stderr[-3000:]

    serve_dir = tmp_path / "serve"
    serve_dir.mkdir()
    journal = tmp_path / "serve.jsonl"
    env = dict(cold(serve_dir), PRECOMPILE_LIB=str(shim_path()),
               PRECOMPILE_SERVE=f"dist_models:step_ar={tmp_path}/ar.{{rank}}.py,{tmp_path}/ar.{{rank}}.cache",
               PRECOMPILE_STRICT="1", PRECOMPILE_JOURNAL=str(journal))
    p, results = torchrun(serve_dir, 2, "unmodified", env=env, cli=[str(ENTRYPOINT)])
    assert p.returncode == 0 and len(results) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    for r in results:
        assert r["served"] and r["lean"] and r["close"], r
    assert read_journal(journal) == []


def test_only_process_groups_and_the_config_slot_become_checked() -> None:
    """The lint stays honest: a run-time object that is not a process group, or
    another config slot's override, is not turned into a checked recipe."""
    from types import SimpleNamespace as NS

    import torch  # noqa: F401 - loads torch.compiler.config and torch.distributed

    from torch_precompile._dynamo.recording import process_groups

    def entry(value: object, name: str) -> NS:
        return NS(has_value=True, value=value, orig_guard=NS(originating_source=NS(name=name)))

    assert process_groups.judge(entry(object(), "G['dist'].group.WORLD")) is None
    assert process_groups.judge(entry(object(), "G['torch'].compiler.config._config['other'].user_override")) is None
    assert process_groups.judge(entry(object(), "G['cfg']._config['compile_on_one_rank'].user_override")) is None
    why, (expr, recipe) = process_groups.judge(
        entry(object(), "G['torch'].compiler.config._config['compile_on_one_rank'].user_override.get()"))
    assert recipe == ("config", "torch.compiler.config", "compile_on_one_rank", False), recipe
    assert "compile_on_one_rank" in why
