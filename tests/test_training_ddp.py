"""Distributed training loops under torchrun (2 gloo ranks, CPU), DDP with several
gradient buckets and FSDP2, captured per rank and served in a fresh locked-down job
(docs/training.md). Its own module, so the 2-rank jobs of test_multirank.py run as
they did before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import read_journal
from test_multirank import CLI, cold, torchrun


def captured_then_served(tmp_path: Path, verb: str) -> tuple[list[dict], list[dict]]:
    """``VERB_capture`` under torchrun, then ``VERB_serve`` in a fresh locked-down job
    on a cold host (strict shim, journal): each job's per-rank results; the serving
    job ran no compiler."""
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    out = tmp_path / "pairs"
    out.mkdir()
    p, captured = torchrun(out, 2, f"{verb}_capture", str(out))
    assert p.returncode == 0 and len(captured) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    serve = tmp_path / "serve"
    serve.mkdir()
    journal = serve / "journal.jsonl"
    p, served = torchrun(serve, 2, f"{verb}_serve", str(out), env=cold(serve),
                         cli=[str(CLI), "run", "--lockdown", "--strict", "--journal", str(journal), "--"])
    assert p.returncode == 0 and len(served) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    for r in served:
        assert len(r["losses"]) == 4 and r["losses"] == pytest.approx(r["want"], abs=1e-5), r
        assert r["params"] is True, r
    assert served[0]["losses"] != served[1]["losses"]   # each rank its own batches
    assert read_journal(journal) == []
    return captured, served


@pytest.mark.slow
def test_ddp_with_several_buckets_trains_served_in_a_fresh_job(tmp_path: Path) -> None:
    """DDP with 3 KB gradient buckets (4 once DDP rebuilt them): a training step
    captured over two steps on each rank, served for four steps from other weights in
    a fresh locked-down job on a cold host; every rank's losses and final parameters
    equal eager DDP's, 0 journal records. DDP's reducer runs as in eager (its hooks
    all-reduce each bucket as the compiled backward fills it)."""
    captured, _served = captured_then_served(tmp_path, "ddp_buckets")
    for r in captured:
        assert r["buckets"] >= 3 and r["risky"] == [], r


@pytest.mark.slow
def test_fsdp2_trains_served_in_a_fresh_job(tmp_path: Path) -> None:
    """FSDP2 (fully_shard on each block and the root): a training step captured over
    two steps on each rank with no flags, served for four steps from other weights in
    a fresh locked-down job on a cold host; every rank's losses and parameter shards
    equal eager FSDP2's, 0 journal records. FSDP2's hooks break the graph inside the
    model's loop over its blocks, so Dynamo leaves that forward to eager (as
    torch.compile does) and the artifact serves it as plain Python; the model's
    run-time class (FSDPDeep) is checked as the class fully_shard makes here."""
    captured, served = captured_then_served(tmp_path, "fsdp")
    for r in captured:
        assert r["risky"] == [] and r["model"] == "FSDPDeep" and "UNCOVERED" not in r["summary"], r
    for r in served:
        assert len(set(r["losses"])) == 4, r  # the model learns: every step's loss differs
