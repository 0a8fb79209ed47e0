"""Issue 50's seven cases, in our own words: state a serving process holds that
Dynamo, inside one process, leaves unguarded on purpose (hooks under
``skip_nnmodule_hook_guards``, a class's contents once its identity matches).
Each is refused or served equal to eager, never the capture's answer; once
undone, the same call serves again. tests/hook_cases_app.py holds the cases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import read_journal
from test_multirank import CLI, cold, env_for

TESTS = Path(__file__).parent
CASES = ("hook on a submodule", "pre-hook on the compiled module", "pre-hook on a submodule",
         "global forward hook", "hook reading a late buffer", "method rebound on its class",
         "method rebound on a subclass", "library class patched at capture only")


def test_hooks_and_methods_found_through_a_class_are_checked(tmp_path: Path) -> None:
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    app = TESTS / "hook_cases_app.py"

    def run(values: str, *cli: str, env: dict[str, str]) -> dict:
        p = subprocess.run([str(CLI), "run", *cli, "--", sys.executable, str(app), "3"],
                           env={**env, "HC_VALUES": values}, cwd=tmp_path, capture_output=True,
                           text=True, timeout=900)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
        return json.loads(next(line for line in p.stdout.splitlines() if line.startswith("RESULT "))[7:])

    captured = run("A", "--capture", "sites", env=env_for(tmp_path))
    assert set(captured.values()) == {"served"}, captured
    (tmp_path / "A").mkdir()
    (tmp_path / "B").mkdir()
    journal = tmp_path / "journal.jsonl"
    serve = ("--serve", "sites", "--lockdown", "--strict", "--journal", str(journal))
    assert run("A", *serve, env=cold(tmp_path / "A")) == {k: "served" for k in captured}
    b = run("B", *serve, env=cold(tmp_path / "B"))
    assert read_journal(journal) == [], read_journal(journal)
    assert "WRONG" not in b.values(), b
    for case in CASES:  # each changes the result: refused, naming what moved
        assert b[case].startswith("refused: "), (case, b[case])
        if case in b and f"{case}, undone" in b:
            assert b[f"{case}, undone"] == "served", (case, b)
    assert "model._modules['lin']._forward_hooks holds 1 hook(s) (the function __main__.times3)" \
        in b["hook on a submodule"], b
    assert "model._forward_pre_hooks holds 1 hook(s)" in b["pre-hook on the compiled module"], b
    assert "model._modules['out']._forward_pre_hooks" in b["pre-hook on a submodule"], b
    assert "_global_forward_hooks holds 1 hook(s)" in b["global forward hook"], b
    assert "(the function __main__.by_buffer)" in b["hook reading a late buffer"], b
    assert ("__main__.Net.extra finds the function __main__.Net.extra_b" in b["method rebound on its class"]
            and "captured with __main__.Net.extra_a" in b["method rebound on its class"]), b
    assert "__main__.Rebound.extra" in b["method rebound on a subclass"], b
    assert ("LlamaRMSNorm.forward finds the function transformers.models.llama.modeling_llama."
            "LlamaRMSNorm.forward" in b["library class patched at capture only"]
            and "captured with __main__.fused_forward" in b["library class patched at capture only"]), b
    # hooks in force at capture: the same ones registered again serve; another is refused by name
    assert b["hooks kept"] == "served", b
    assert "holds the function __main__.by_buffer" in b["hook replaced"], b
