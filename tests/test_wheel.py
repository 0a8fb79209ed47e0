"""The wheel as a user gets it: pip-installed into a scratch venv that already
has torch, it needs nothing else from this checkout. `precompile` is on the
venv's PATH and finds the shim inside the installed package, `precompile run
--lockdown` refuses a compiler in the tree it starts, and a capture/load round
trip runs from the installed package in fresh processes.

The wheel is the one scripts/setup built (target/wheels/), else scripts/wheel
builds it. The scratch venv sees this venv's torch through a .pth file: site
appends a .pth's entries after the venv's own site-packages, so the wheel's
copy of torch_precompile is the one imported (checked, not assumed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from conftest import ROOT, clean_env, read_journal


def built_wheel() -> Path:
    found = sorted((ROOT / "target" / "wheels").glob("torch_precompile-*.whl"), key=lambda p: p.stat().st_mtime)
    if found:
        return found[-1]
    if shutil.which("cargo") is None:
        pytest.skip("no wheel in target/wheels and no cargo to build one; run scripts/setup")
    maturin = Path(sys.executable).parent / "maturin"
    env = dict(os.environ, MATURIN=str(maturin)) if maturin.exists() else None
    p = subprocess.run([str(ROOT / "scripts" / "wheel")], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"scripts/wheel failed:\n{p.stderr[-3000:]}"
    return Path(p.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    wheel = built_wheel()
    root = tmp_path_factory.mktemp("wheel") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    py = root / "bin" / "python"
    # This venv's pip installs into the scratch one (--python): no pip download,
    # and no torch_precompile of this venv in sight while it installs.
    # --no-deps: torch arrives through the .pth below.
    p = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                        "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    torch_site = Path(importlib.util.find_spec("torch").origin).parents[1]
    (Path(site) / "zz_torch_from_dev_venv.pth").write_text(f"{torch_site}\n")
    return root


def scratch_env(venv: Path, **extra: str) -> dict[str, str]:
    """A user's shell with the scratch venv activated; nothing of this checkout."""
    env = clean_env()
    env.pop("PYTHONPATH", None)
    env.update(extra)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def run(venv: Path, argv: list[str], cwd: Path | None = None, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=scratch_env(venv, **extra), cwd=cwd, capture_output=True, text=True, timeout=300)


def inside(path: str | Path, venv: Path) -> bool:
    return Path(path).resolve().is_relative_to(venv.resolve())


def test_the_scratch_venv_imports_the_wheels_package_which_requires_torch(venv: Path) -> None:
    code = ("import json, importlib.metadata as md, torch_precompile, torch\n"
            "d = md.distribution('torch_precompile')\n"
            "print(json.dumps([torch_precompile.__file__, str(d.locate_file('')), d.requires, torch.__file__]))")
    p = run(venv, ["python", "-c", code])
    assert p.returncode == 0, p.stderr
    package, dist, requires, torch_file = json.loads(p.stdout.splitlines()[-1])
    assert inside(package, venv), package
    assert inside(dist, venv), dist
    assert not inside(torch_file, venv), torch_file          # the torch of the .pth: the setup is what it claims
    pyproject = tomllib.loads((ROOT / "capture" / "pyproject.toml").read_text())
    assert requires == pyproject["project"]["dependencies"]


def test_preload_path_finds_the_shim_inside_the_installed_package(venv: Path) -> None:
    exe = shutil.which("precompile", path=str(venv / "bin"))
    assert exe is not None, "the wheel put no `precompile` on the venv's PATH"
    p = run(venv, ["precompile", "preload-path"])
    assert p.returncode == 0, p.stderr
    lib = Path(p.stdout.strip())
    assert lib.is_file() and lib.name == "libprecompile.so"
    assert inside(lib, venv) and "torch_precompile" in lib.parts, lib
    assert (lib.parent / "boot" / "sitecustomize.py").is_file()


def test_run_lockdown_refuses_a_compiler_in_the_tree(venv: Path, tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    (tmp_path / "x.c").write_text("int main(void) { return 0; }\n")
    code = textwrap.dedent("""
        import subprocess, sys
        # the shim's boot imported the package at start-up, from the installed wheel
        print("BOOTED", getattr(sys.modules.get("torch_precompile"), "__file__", None))
        try:
            rc = subprocess.run(["g++", "-c", "x.c", "-o", "x.o"]).returncode
            print("RAN", rc)
        except PermissionError:
            print("REFUSED")
    """)
    p = run(venv, ["precompile", "run", "--lockdown", "--journal", str(journal), "--", "python", "-c", code],
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    booted = next(ln for ln in p.stdout.splitlines() if ln.startswith("BOOTED "))[len("BOOTED "):]
    assert inside(booted, venv), p.stdout
    assert "REFUSED" in p.stdout.splitlines(), p.stdout + p.stderr
    assert "refused to run compiler" in p.stderr
    assert not (tmp_path / "x.o").exists()
    refused = [r for r in read_journal(journal) if r["kind"] == "compile"]
    assert refused and all(r["verdict"] == "refused" and r["argv"][0] == "g++" for r in refused), refused


MODEL = """
import torch

def make(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return model, torch.randn(3, 8)

def step(model, x):
    return model(x).softmax(-1)
"""

CAPTURE = """
import torch, torch_precompile as tp, tiny
model, x = tiny.make(0)
with tp.capture(tiny.step, artifact_path="tiny_artifact.py", cache_path="tiny.cache",
                tracer=tp.MakeFxTracer(), backend="eager") as cap:
    y = cap(model, x)
torch.testing.assert_close(y, tiny.step(model, x), rtol=0, atol=0)
print("CAPTURED", tp.__file__)
"""

SERVE = """
import torch, torch_precompile as tp, tiny
model, x = tiny.make(1)                      # other weights and inputs than the capture's
f = tp.load("tiny_artifact.py", "tiny.cache")
with tp.no_compilation():
    y = f(model, x)
torch.testing.assert_close(y, tiny.step(model, x), rtol=1e-6, atol=1e-6)
print("SERVED", tp.__file__, y.shape[0])
"""


def test_capture_and_load_round_trip_from_the_installed_package(venv: Path, tmp_path: Path) -> None:
    (tmp_path / "tiny.py").write_text(MODEL)
    extra = {"PYTHONPATH": str(tmp_path)}
    p = run(venv, ["python", "-c", CAPTURE], cwd=tmp_path, **extra)
    assert p.returncode == 0, p.stderr[-3000:]
    captured = next(ln for ln in p.stdout.splitlines() if ln.startswith("CAPTURED "))
    assert inside(captured.split(" ", 1)[1], venv)
    journal = tmp_path / "serve.jsonl"
    p = run(venv, ["precompile", "run", "--lockdown", "--journal", str(journal), "--", "python", "-c", SERVE],
            cwd=tmp_path, **extra)
    assert p.returncode == 0, p.stderr[-3000:]
    served = next(ln for ln in p.stdout.splitlines() if ln.startswith("SERVED "))
    _, package, rows = served.split(" ")
    assert inside(package, venv) and rows == "3"
    assert read_journal(journal) == []      # nothing tried to compile while serving
