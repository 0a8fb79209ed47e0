"""The recipes users copy from transformers' "optimizing inference" guide, served
as written (issue 37): tests/hf_recipe_app.py, an unmodified script, run under
``precompile run --capture DIR`` and then ``--serve DIR --lockdown --strict
--journal`` on a cold host with other weights, other prompts and more tokens than
the capture generated. Tokens equal eager's; 0 compiler runs; a config value the
capture did not see is refused by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import read_journal
from test_compile_sites import CLI, run
from test_multirank import cold

pytest.importorskip("transformers")
APP = str(Path(__file__).resolve().parent / "hf_recipe_app.py")


def captured(tmp: Path, *args: str) -> Path:
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    p, results = run(tmp, sys.executable, APP, *args, cli=["--capture", "sites"])
    assert p.returncode == 0 and results and all(results[0]["equal"]), p.stdout[-3000:] + p.stderr[-6000:]
    assert "captured torch.compile site LlamaForCausalLM" in p.stderr, p.stderr[-3000:]
    return tmp / "sites"


def served(tmp: Path, *args: str) -> tuple[int, dict | None, str]:
    """One locked-down serving run on a cold host: exit status, its result, stderr."""
    host = tmp / f"serve-{len(list(tmp.glob('serve-*')))}"
    host.mkdir()
    journal = host / "journal.jsonl"
    p, results = run(tmp, sys.executable, APP, *args, env=cold(host),
                     cli=["--serve", "sites", "--lockdown", "--strict", "--journal", str(journal)])
    assert read_journal(journal) == [], p.stderr[-3000:]
    return p.returncode, (results or [None])[0], p.stderr


@pytest.mark.slow
def test_the_static_cache_recipe_serves_its_compiled_bound_method_at_any_prompt_length(tmp_path: Path) -> None:
    """``model.forward = torch.compile(model.forward, mode="reduce-overhead",
    fullgraph=True)`` over a static cache, captured at two prompt lengths (8 and 12
    tokens, 6 new): the second length marks the prompt and the cache dimensions
    dynamic as torch.compile does, so prompts of 10 and 5 tokens generating 12 are
    served, tokens equal to eager's. The site is the bound method's; an RMSNorm
    epsilon the capture did not see is refused naming it."""
    sites = captured(tmp_path, "0", "8,12", "6", "method")
    assert any(p.name.startswith("LlamaForCausalLM_forward-") for p in sites.iterdir()), list(sites.iterdir())
    rc, result, err = served(tmp_path, "1", "10,5", "12", "method")
    assert rc == 0 and result == {"equal": [True, True], "tokens": [22, 17]}, (result, err[-3000:])
    rc, result, err = served(tmp_path, "1", "10", "6", "method", "--eps", "1e-3")
    assert rc != 0 and result is None, result
    assert "PrecompileError: torch.compile site LlamaForCausalLM.forward@" in err, err[-3000:]
    assert "variance_epsilon == 1e-06" in err, err[-3000:]


@pytest.mark.slow
def test_model_compile_captured_at_two_prompt_lengths_serves_every_other(tmp_path: Path) -> None:
    """``model.compile()`` with generate's default (dynamic) cache, captured at two
    prompt lengths: prompts of 10 and 20 tokens generating 9 are served."""
    captured(tmp_path, "0", "8,12", "6", "module")
    rc, result, err = served(tmp_path, "1", "10,20", "9", "module")
    assert rc == 0 and result == {"equal": [True, True], "tokens": [19, 29]}, (result, err[-3000:])


@pytest.mark.slow
def test_dynamic_true_serves_any_prompt_length_from_one_captured_length(tmp_path: Path) -> None:
    """The one-line recipe of docs/torch-compile-sites.md: ``dynamic=True`` on the compiled bound method, one
    prompt length at capture, other lengths and more tokens served."""
    captured(tmp_path, "0", "8", "6", "method", "--dynamic")
    rc, result, err = served(tmp_path, "1", "10,20", "9", "method", "--dynamic")
    assert rc == 0 and result == {"equal": [True, True], "tokens": [19, 29]}, (result, err[-3000:])
