"""Every command README.md shows runs as written, so the page cannot drift from
the code (issue 40), and so does the guide page that repeats its recipe
(docs/torch-compile-sites.md). Each shell block's lines run one by one under bash, in a
working directory of its own that holds the scripts they name (app.py, serve.py,
train.py: small torch programs written here) and the keys the signing lines read,
with the venv's bin first on PATH; every line must exit 0 and the scripts it runs
must finish. The Python block runs as the two processes it describes, a capture
and a load "in a fresh process", with a model and an input defined before it (the
load's model with other weights, checked against eager).

The build lines (`pip install`, `scripts/wheel`, `scripts/demo`, `scripts/test`)
are what a fresh machine runs through scripts/setup and .ci/run: the test checks
that those scripts run them, instead of building a second wheel here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env, run_python

ROOT = Path(__file__).resolve().parent.parent
# the pages whose shell blocks run here, as they are
PAGES = ("README.md", "docs/torch-compile-sites.md")
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow

# the build: run by scripts/setup (the wheel) and .ci/run (the demo, the tests)
BUILD = {"pip install": "scripts/setup", "scripts/wheel": "scripts/setup",
         "scripts/demo": ".ci/run", "scripts/test": ".ci/run"}

APP = """\
import torch

@torch.compile
def f(x):
    return torch.sin(x) * 2 + 1

x = torch.randn(8)
torch.testing.assert_close(f(x), torch.sin(x) * 2 + 1)
print("APP OK")
"""

MODEL = """\
import torch
torch.manual_seed({seed})
model, x = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)), torch.randn(3, 4)
"""

SERVE = MODEL.format(seed=7) + """\
import torch_precompile as precompile
f = precompile.load("m.py", "m.cache")
with precompile.no_compilation():
    y = f(model, x)
torch.testing.assert_close(y, model(x))
print("SERVE OK")
"""

TRAIN = MODEL.format(seed=0) + """\
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(x).pow(2).sum().backward()
    opt.step()
print("TRAIN OK")
"""


def _blocks(lang: str, page: str = "README.md") -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


SHELL_BLOCKS = [(page, i) for page in PAGES for i in range(len(_blocks("sh", page)))]


def _commands(block: str) -> list[str]:
    """The block's command lines, comments (whole-line and trailing) dropped."""
    out = []
    for line in block.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def _workdir(base: Path, name: str, pair: Path) -> Path:
    d = base / name
    d.mkdir()
    (d / "app.py").write_text(APP)
    (d / "serve.py").write_text(SERVE)
    (d / "train.py").write_text(TRAIN)
    for suffix in (".py", ".cache"):
        shutil.copy(pair / f"m{suffix}", d / f"m{suffix}")
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "key.pem"],
                   cwd=d, check=True, capture_output=True)
    subprocess.run(["openssl", "ec", "-in", "key.pem", "-pubout", "-out", "pub.pem"], cwd=d, check=True,
                   capture_output=True)
    return d


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Path:
    """README's Python block, run as the two processes it describes."""
    (block,) = _blocks("python")
    capture, load = block.split("\nf = precompile.load(", 1)
    d = tmp_path_factory.mktemp("readme_api")
    run_python(MODEL.format(seed=0) + capture, cwd=d).check()
    r = run_python(MODEL.format(seed=7) + "import torch_precompile as precompile\n"
                   + "f = precompile.load(" + load
                   + "\ntorch.testing.assert_close(y, model(x))\nprint('LOADED')\n", cwd=d).check()
    assert "LOADED" in r.stdout, r.stdout
    return d


def test_the_build_lines_are_what_setup_and_ci_run() -> None:
    lines = [c for b in _blocks("sh") for c in _commands(b)]
    for prefix, script in BUILD.items():
        assert any(c.startswith(prefix) for c in lines), f"README no longer shows {prefix!r}: drop it here"
        assert prefix in (ROOT / script).read_text(encoding="utf-8"), f"{script} does not run {prefix!r}"


@pytest.mark.parametrize("page,index", SHELL_BLOCKS, ids=[f"{p}:{i}" for p, i in SHELL_BLOCKS])
def test_every_shell_line_runs_as_written(pair: Path, tmp_path: Path, page: str, index: int) -> None:
    block = _blocks("sh", page)[index]
    commands = [c for c in _commands(block) if not any(c.startswith(p) for p in BUILD)]
    if not commands:
        pytest.skip("a block of build lines only (test_the_build_lines_are_what_setup_and_ci_run)")
    d = _workdir(tmp_path, f"block{index}", pair)
    env = clean_env(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    for command in commands:
        p = subprocess.run(["bash", "-c", command], cwd=d, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, f"{page}: {command}\n--- stdout\n{p.stdout[-2000:]}\n--- stderr\n{p.stderr[-4000:]}"
        script = next((s for s in ("app.py", "serve.py", "train.py") if s in command.split()), None)
        if script is not None:
            marker = {"app.py": "APP OK", "serve.py": "SERVE OK", "train.py": "TRAIN OK"}[script]
            assert marker in p.stdout, f"{page}: {command}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
