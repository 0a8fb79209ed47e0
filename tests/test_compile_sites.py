"""torch.compile call sites captured and served by directory (docs/torch-compile-sites.md, "For code
that already uses torch.compile"): unmodified scripts under ``precompile run
--capture DIR`` then ``--serve DIR --lockdown``, each run a fresh process tree,
serving on other weights and inputs on a cold host, compiler runs read from the
journal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import read_journal
from test_multirank import CLI, cold, env_for

TESTS = Path(__file__).resolve().parent
APP = TESTS / "sites_app.py"


def run(tmp: Path, *cmd: str, cli: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, list[dict]]:
    p = subprocess.run([str(CLI), "run", *cli, "--", *cmd], env=env or env_for(tmp), cwd=tmp,
                       capture_output=True, text=True, timeout=600)
    results = [json.loads(line.split("RESULT ", 1)[1]) for line in p.stdout.splitlines() if "RESULT " in line]
    return p, results


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sites_app.py captured once (seed 0, 3 and 4 rows)."""
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    work = tmp_path_factory.mktemp("sites")
    p, results = run(work, sys.executable, str(APP), "0", "3", "--fullgraph", cli=["--capture", "out"])
    assert p.returncode == 0 and results, p.stdout[-3000:] + p.stderr[-6000:]
    assert results[0]["calls"] == [True, True] and results[0]["compile_patched"], results
    # fullgraph=True with a graph break: the call ran, nothing of the site is kept
    assert results[0]["fullgraph"] == [2.0, 2.0], results
    assert "fullgraph=True and the capture has a graph break" in p.stderr, p.stderr[-3000:]
    (work / "capture.stderr").write_text(p.stderr)
    return work


def test_four_sites_are_captured_and_indexed(sites: Path) -> None:
    index = json.loads((sites / "out" / "index.json").read_text())["sites"]
    # named by what each compiles and the file:line of its torch.compile call
    # (noisy, fullgraph=True with a graph break, kept nothing)
    assert sorted(s.split("@")[0] for s in index) == ["Linear", "Net", "head", "scale"], index
    assert all(re.fullmatch(re.escape(str(APP)) + r":\d+", s.split("@")[1]) for s in index), index
    what = {s.split("@")[0]: e["what"] for s, e in index.items()}
    assert what == {"Linear": "module.compile()", "Net": "module", "head": "function", "scale": "function"}
    for site, entry in index.items():
        pair = entry["ranks"]["0"]
        assert (sites / "out" / pair["artifact"]).exists() and (sites / "out" / pair["cache"]).exists()
        assert pair["calls_captured"] == 2 and "UNCOVERED" not in pair["summary"], (site, pair)
    scale = next(e for s, e in index.items() if s.startswith("scale@"))
    assert scale["options"]["dynamic"] is False and scale["options"]["backend"] == "inductor"
    # the CLI lists them, each pair's cache header checked
    p = subprocess.run([str(CLI), "inspect", str(sites / "out")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("sites            4 in ") and "compiles       module" in p.stdout
    assert p.stdout.count("backend inductor, tracer dynamo") == 4 and "UNUSABLE" not in p.stdout, p.stdout


def test_served_locked_down_on_other_weights_with_no_compiler_run(sites: Path, tmp_path: Path) -> None:
    env = cold(tmp_path)
    journal = tmp_path / "journal.jsonl"
    p, results = run(sites, sys.executable, str(APP), "5", "3", "--extra", env=env,
                     cli=["--serve", "out", "--lockdown", "--strict", "--journal", str(journal)])
    assert p.returncode == 0 and results, p.stdout[-3000:] + p.stderr[-6000:]
    r = results[0]
    # seed 5: other weights and inputs than the capture's, each call equal to eager
    assert r["calls"] == [True, True], r
    assert r["state_dict_keys"] == ["_orig_mod.fc1.bias"], r   # as torch.compile's module
    # a site the capture never reached is refused by name under the lockdown
    assert r["extra"].startswith("PrecompileError: torch.compile site shift@"), r
    assert "has no captured pair" in r["extra"] and "locked down" in r["extra"], r
    assert read_journal(journal) == []


def test_without_the_lockdown_an_unknown_site_compiles_after_one_warning(sites: Path) -> None:
    p, results = run(sites, sys.executable, "-W", "always::RuntimeWarning", str(APP), "5", "3", "--extra",
                     cli=["--serve", "out"])
    assert p.returncode == 0 and results, p.stdout[-3000:] + p.stderr[-6000:]
    assert results[0]["extra"] is True and results[0]["calls"] == [True, True], results
    assert p.stderr.count("torch.compile site shift@") == 1 and "compiles as usual" in p.stderr, p.stderr


@pytest.mark.slow
def test_torchrun_workers_sites_captured_per_rank_and_served(tmp_path: Path) -> None:
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
              str(TESTS / "sites_dist.py")]
    p, results = run(tmp_path, *launch, "0", "--rank-site", "--ddp", cli=["--capture", "out"])
    assert p.returncode == 0 and len(results) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    assert all(r["ddp"] is True for r in results), results
    index = json.loads((tmp_path / "out" / "index.json").read_text())["sites"]
    assert len(index) == 3 and all(sorted(e["ranks"]) == ["0", "1"] for e in index.values()), index
    # the MLP's and DDP's training graphs are the same on every rank; by_rank's read the rank
    independent = {s.split("@")[0]: [e["ranks"][r]["rank_independent"] for r in "01"] for s, e in index.items()}
    assert independent == {"MLP": [True, True], "DistributedDataParallel": [True, True],
                           "by_rank": [False, False]}, index
    # pairs are stored by content: each of the two ranks' equal programs is one pair,
    # named by its content, and by_rank's two programs are two; nothing else is left
    pairs = {s.split("@")[0]: {(e["ranks"][r]["artifact"], e["ranks"][r]["cache"]) for r in "01"}
             for s, e in index.items()}
    assert [len(pairs[s]) for s in ("MLP", "DistributedDataParallel", "by_rank")] == [1, 1, 2], pairs
    stored = {name for both in pairs.values() for pair in both for name in pair}
    assert all(re.fullmatch(r"(MLP|DistributedDataParallel|by_rank)-[0-9a-f]{12}-[0-9a-f]{16}\.(py|cache)", n)
               for n in stored), stored
    assert {p.name for p in (tmp_path / "out").iterdir()} - {"index.json", ".index.lock"} == stored
    before = read_only(tmp_path / "out")  # replicas mount the store read-only

    def serve(nproc: int, *args: str) -> list[dict]:
        host = tmp_path / f"serve{nproc}{''.join(args)}"
        host.mkdir()
        journal = host / "journal.jsonl"
        launched = [*launch[:-2], f"--nproc-per-node={nproc}", launch[-1]]
        p, results = run(tmp_path, *launched, "3", *args, env=cold(host),
                         cli=["--serve", "out", "--lockdown", "--strict", "--journal", str(journal)])
        assert p.returncode == 0 and len(results) == nproc, p.stdout[-3000:] + p.stderr[-6000:]
        assert all(r["close"] == [True, True] for r in results), results
        assert read_journal(journal) == []
        return sorted(results, key=lambda r: r["rank"])

    assert [r["by_rank"] for r in serve(2, "--rank-site")] == [True, True]
    # captured at 2 ranks, served at 4: ranks 2 and 3 serve the rank-independent pairs,
    # the MLP's inference and DDP's training loop alike (equal to eager DDP at 4 ranks)
    assert [r["ddp"] for r in serve(4, "--ddp")] == [True] * 4
    # a pair that read its rank serves its own rank only: ranks 2 and 3 refused by name;
    # ranks 0 and 1 refused too, since the graph baked the captured world size
    by_rank = [r["by_rank"] for r in serve(4, "--rank-site")]
    for message in by_rank[:2]:
        assert message.startswith("PrecompileError: torch.compile site by_rank@"), message
        assert "precompiled __main__.by_rank: process group mismatch: the default process group has " \
               "world size 4, the capture's had 2" in message, message
    for r, message in zip((2, 3), by_rank[2:]):
        assert message.startswith("PrecompileError: torch.compile site by_rank@"), message
        assert "has no captured pair in" in message and f"for rank {r} " in message, message
        assert "read their rank" in message, message
    assert snapshot(tmp_path / "out") == before  # nothing written there, no lock file


def snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under root: (mode, size, mtime in ns)."""
    out = {}
    for p in sorted([root, *root.rglob("*")]):
        st = p.lstat()
        out[str(p.relative_to(root))] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def read_only(root: Path) -> dict[str, tuple[int, int, int]]:
    """chmod -R a-w root, and its snapshot. The tests run as root, which the mode
    does not stop: the snapshot, taken again after serving, is what shows nothing
    was written (no lock file, no index update, no temporary file)."""
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    return snapshot(root)


def test_eight_cold_replicas_serve_concurrently_from_a_signed_read_only_store(sites: Path, tmp_path: Path) -> None:
    """The captured directory copied, signed (``precompile sign DIR``), made
    read-only, and served by 8 locked-down processes started at once under a trust
    policy, each on its own cold host: all equal to eager on other weights, 0
    compiler runs, and nothing in the directory written or locked. The same store
    with one byte of one pair changed is refused by name before that pair runs."""
    import shutil

    from test_signing import _flip, _keys, _sign

    store = tmp_path / "store"
    shutil.copytree(sites / "out", store)
    key, pub = _keys(tmp_path, "key")
    assert _sign(key, store).returncode == 0
    tampered = tmp_path / "tampered"
    shutil.copytree(store, tampered)
    before = read_only(store)
    procs = []
    for i in range(8):
        host = tmp_path / f"replica{i}"
        host.mkdir()
        cmd = [str(CLI), "run", "--serve", str(store), "--lockdown", "--strict", "--journal",
               str(host / "journal.jsonl"), "--", sys.executable, str(APP), str(10 + i), "3"]
        env = {**cold(host), "PRECOMPILE_TRUST": str(pub)}
        procs.append((host, subprocess.Popen(cmd, env=env, cwd=sites, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True)))
    for host, proc in procs:
        out, err = proc.communicate(timeout=600)
        results = [json.loads(line.split("RESULT ", 1)[1]) for line in out.splitlines() if "RESULT " in line]
        assert proc.returncode == 0 and results and results[0]["calls"] == [True, True], out[-2000:] + err[-4000:]
        assert read_journal(host / "journal.jsonl") == []
    assert snapshot(store) == before
    # one byte of the Net site's cache: that site is refused, naming the file
    index = json.loads((tampered / "index.json").read_text())["sites"]
    net = next(e["ranks"]["0"] for s, e in index.items() if s.startswith("Net@"))
    _flip(tampered / net["cache"], -1)
    host = tmp_path / "tampered_host"
    host.mkdir()
    p = subprocess.run([str(CLI), "run", "--serve", str(tampered), "--lockdown", "--", sys.executable, str(APP), "7", "3"],
                       env={**cold(host), "PRECOMPILE_TRUST": str(pub)}, cwd=sites, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode != 0 and "RESULT " not in p.stdout, p.stdout[-2000:]
    cache_name = net["cache"]
    assert f'"{cache_name}" differs from the signed file' in p.stderr and "Nothing of the pair was run" in p.stderr, p.stderr[-3000:]


PACKAGE_SITE = '''
import torch


def step(x):
    return torch.sin(x) * 2


def run(x):
    return torch.compile(step, backend="eager")(x)   # the site: inside an installed package
'''

PACKAGE_APP = r"""
import json, sys, torch
import gvsite_pkg.model as m
x = torch.randn(3)
print("RESULT " + json.dumps({"close": bool(torch.allclose(m.run(x), m.step(x))), "from": m.__file__}))
"""


def test_a_site_in_a_package_is_named_by_its_module_wherever_it_is_installed(tmp_path: Path) -> None:
    """The same package under two install roots (another venv path, /usr/local vs
    /opt/conda): the site is named by its module and served from the other root."""
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    roots = []
    for name in ("capture-root", "serve-root"):
        pkg = tmp_path / name / "lib" / "gvsite_pkg"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "model.py").write_text(PACKAGE_SITE)
        roots.append(pkg.parent)
    app = tmp_path / "app.py"
    app.write_text(PACKAGE_APP)

    def run_app(root: Path, *cli: str, env: dict[str, str]) -> dict:
        env = {**env, "PYTHONPATH": f"{root}{os.pathsep}{env.get('PYTHONPATH', '')}"}
        p = subprocess.run([str(CLI), "run", *cli, "--", sys.executable, str(app)], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
        return json.loads(next(line for line in p.stdout.splitlines() if line.startswith("RESULT "))[7:])

    captured = run_app(roots[0], "--capture", "sites", env=env_for(tmp_path))
    assert captured["close"] and captured["from"].startswith(str(roots[0])), captured
    index = json.loads((tmp_path / "sites" / "index.json").read_text())["sites"]
    assert list(index) == ["step@gvsite_pkg.model:10"], index
    import torch

    assert index["step@gvsite_pkg.model:10"]["captured_with"]["torch"] == torch.__version__, index
    (tmp_path / "serve").mkdir()
    journal = tmp_path / "journal.jsonl"
    served = run_app(roots[1], "--serve", "sites", "--lockdown", "--journal", str(journal),
                     env=cold(tmp_path / "serve"))
    assert served["close"] and served["from"].startswith(str(roots[1])), served
    assert read_journal(journal) == []


def test_the_compiled_optimizer_serves_compiled_updates(tmp_path: Path) -> None:
    """PyTorch's "Compiling the optimizer" recipe in four shapes (tests/opt_step_app.py:
    the tutorial's Adam with a tensor lr, its LR-scheduler variant, AdamW with a float
    lr a StepLR changes, SGD with momentum): each site's torch.optim update is captured
    as a pair of its own; served locked down on a cold host (other weights, more steps
    than captured) every update runs the captured graph, equal to eager torch.optim,
    0 compiler runs. SGD's first step creates its momentum state and runs eagerly. A
    serving call with another beta1 than the capture's (a constant of the graph) runs
    eager torch.optim's update, equal to eager, said on stderr. On a torch without
    MakeFxTracer's Inductor lowering (2.11) the capture says the updates serve as
    eager torch.optim, and they do."""
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    from torch_precompile._compat.lowering import compile_to_python

    app = str(TESTS / "opt_step_app.py")
    p, results = run(tmp_path, sys.executable, app, "0", "3", cli=["--capture", "sites"])
    assert p.returncode == 0 and results and all(r["close"] for r in results[0].values()), \
        p.stdout[-3000:] + p.stderr[-6000:]
    if compile_to_python() is None:
        assert p.stderr.count("its torch.optim updates serve as eager torch.optim: capturing them "
                              "needs MakeFxTracer's Inductor lowering") == 4, p.stderr[-6000:]
        (tmp_path / "serve").mkdir()
        p, results = run(tmp_path, sys.executable, app, "1", "6", env=cold(tmp_path / "serve"),
                         cli=["--serve", "sites", "--lockdown", "--strict"])
        assert p.returncode == 0 and results, p.stdout[-3000:] + p.stderr[-6000:]
        assert results[0] == {name: {"close": True} for name in results[0]} and len(results[0]) == 4, results
        return
    assert p.stderr.count("update(s) captured as pairs of their own") == 4, p.stderr[-6000:]
    index = json.loads((tmp_path / "sites" / "index.json").read_text())["sites"]
    functionals = {s.split("@")[0]: [u["functional"] for u in e["ranks"]["0"]["optimizer_steps"]]
                   for s, e in index.items()}
    assert functionals == {"step_a": ["torch.optim.adam.adam"], "step_b": ["torch.optim.adam.adam"],
                           "step_c": ["torch.optim.adam.adam"], "step_d": ["torch.optim.sgd.sgd"]}, functionals
    inspect = subprocess.run([str(CLI), "inspect", str(tmp_path / "sites")], capture_output=True, text=True)
    assert inspect.stdout.count("    update       torch.optim.") == 4 and "UNUSABLE" not in inspect.stdout

    def serve(seed: str, *beta1: str) -> tuple[dict, str]:
        (tmp_path / f"serve{seed}").mkdir()
        journal = tmp_path / f"journal{seed}.jsonl"
        p, results = run(tmp_path, sys.executable, app, seed, "6", *beta1, env=cold(tmp_path / f"serve{seed}"),
                         cli=["--serve", "sites", "--lockdown", "--strict", "--journal", str(journal)])
        assert p.returncode == 0 and results, p.stdout[-3000:] + p.stderr[-6000:]
        assert read_journal(journal) == []
        assert all(r["close"] for r in results[0].values()), results
        return {name: r["updates"] for name, r in results[0].items()}, p.stderr

    compiled, eager = {"compiled": 6, "eager": 0}, {"compiled": 0, "eager": 6}
    sgd = {"compiled": 5, "eager": 1}
    updates, _ = serve("1")
    assert updates == {"adam": compiled, "adam_sched": compiled, "adamw_float_lr": compiled,
                       "sgd_momentum": sgd}, updates
    updates, stderr = serve("2", "0.5")
    assert updates == {"adam": eager, "adam_sched": compiled, "adamw_float_lr": eager,
                       "sgd_momentum": sgd}, updates
    assert "step_a@" in stderr and "update runs as eager torch.optim (no captured update" in stderr, stderr
