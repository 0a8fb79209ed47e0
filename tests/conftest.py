"""Shared fixtures: every behaviour that needs a fresh interpreter gets one.

Tests drive real torch in child processes and read compile counts from the
journal the shim (or the Python layer) writes; nothing is assumed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the shim the wheel bundles in the installed package (torch_precompile/_bundle.py);
# found without importing the package, which the tests start in fresh processes
PACKAGE_LIB = (Path(importlib.util.find_spec("torch_precompile").origin).parent
               / "_prefix" / "lib" / "precompile" / "libprecompile.so")
TARGET_LIB = ROOT / "target" / "release" / "libprecompile.so"


def has_standalone_lowering() -> bool:
    """Whether this torch has the standalone AOTAutograd + Inductor lowering
    (2.14 and later) that MakeFx + inductor and Dynamo-free inductor graphs need;
    tests of those features run only where it exists, the rest everywhere."""
    import importlib.util

    return importlib.util.find_spec("torch._functorch._aot_autograd.to_standalone_python") is not None


def shim_path() -> Path:
    for p in (PACKAGE_LIB, TARGET_LIB):
        if p.exists():
            return p
    pytest.skip("libprecompile.so is not built; run scripts/setup")


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> "Result":
        assert self.returncode == 0, f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        return self


def clean_env(**extra: str) -> dict[str, str]:
    """The parent's environment without any precompile state, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PRECOMPILE_") and k not in ("TORCH_PRECOMPILE_NO_COMPILATION", "LD_PRELOAD")
    }
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env.update(extra)
    return env


def run_python(code: str, *, preload: bool = False, env: dict[str, str] | None = None,
               cwd: str | Path | None = None, timeout: float = 600, args: list[str] | None = None) -> Result:
    """Run ``code`` in a fresh interpreter of this venv (optionally under the shim)."""
    e = clean_env(**(env or {}))
    if preload:
        e["LD_PRELOAD"] = str(shim_path())
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *(args or [])],
        env=e, cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )
    return Result(p.returncode, p.stdout, p.stderr)


def tagged(stdout: str, tag: str) -> str:
    """The rest of the first line a child process printed as ``TAG rest``."""
    for line in stdout.splitlines():
        if line.startswith(tag + " "):
            return line[len(tag) + 1:]
    raise AssertionError(f"no {tag!r} line in the output:\n{stdout[-3000:]}")


def tagged_json(stdout: str, tag: str) -> Any:
    """The JSON a child process printed as ``TAG <json>``."""
    return json.loads(tagged(stdout, tag))


def read_journal(path: str | Path) -> list[dict]:
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def compiler_runs(path: str | Path, verdict: str | None = None) -> list[dict]:
    """Journal records of compiles (not probes), optionally of one verdict."""
    return [r for r in read_journal(path) if r["kind"] == "compile" and (verdict is None or r["verdict"] == verdict)]


def cold_host(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A serving host with nothing warm: empty Inductor and Triton caches, its own
    TMPDIR and working directory (``tmp_path/cwd``), locked down from the start,
    the shim strict (run with ``preload=True``), and a journal."""
    for sub in ("inductor", "triton", "tmp", "cwd"):
        (tmp_path / sub).mkdir(parents=True)
    journal = tmp_path / "journal.jsonl"
    env = {
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
        "TRITON_CACHE_DIR": str(tmp_path / "triton"),
        "TMPDIR": str(tmp_path / "tmp"),
        "TORCH_PRECOMPILE_NO_COMPILATION": "1",
        "PRECOMPILE_STRICT": "1",
        "PRECOMPILE_JOURNAL": str(journal),
    }
    return env, journal


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "journal.jsonl"


# The longest files first (about a minute of captures or more each, measured on 2
# cores): scripts/test hands whole files to its workers in collection order, so a
# long file started last would finish alone.
_LONGEST_FIRST = ("test_real_models.py", "test_library_objects.py", "test_training.py", "test_hf_recipes.py",
                  "test_guard_rule.py", "test_compile_sites.py", "test_upstream_cases.py",
                  "test_zero_code_targets.py", "test_frozen.py", "test_gates.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
