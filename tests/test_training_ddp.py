"""Distributed training loops under torchrun (2 gloo ranks, CPU), DDP with several
gradient buckets and FSDP2, captured per rank and served in a fresh locked-down job
(README, "Training"). Its own module, so the 2-rank jobs of test_multirank.py run as
they did before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import read_journal
from test_multirank import CLI, cold, torchrun


@pytest.mark.slow
def test_ddp_with_several_buckets_trains_served_in_a_fresh_job(tmp_path: Path) -> None:
    """DDP with 3 KB gradient buckets (4 once DDP rebuilt them): a training step
    captured over two steps on each rank, served for four steps from other weights in
    a fresh locked-down job on a cold host; every rank's losses and final parameters
    equal eager DDP's, 0 journal records. DDP's reducer runs as in eager (its hooks
    all-reduce each bucket as the compiled backward fills it)."""
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    out = tmp_path / "pairs"
    out.mkdir()
    p, results = torchrun(out, 2, "ddp_buckets_capture", str(out))
    assert p.returncode == 0 and len(results) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    for r in results:
        assert r["buckets"] >= 3 and r["risky"] == [], r
    serve = tmp_path / "serve"
    serve.mkdir()
    journal = serve / "journal.jsonl"
    p, results = torchrun(serve, 2, "ddp_buckets_serve", str(out), env=cold(serve),
                          cli=[str(CLI), "run", "--lockdown", "--strict", "--journal", str(journal), "--"])
    assert p.returncode == 0 and len(results) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    for r in results:
        assert len(r["losses"]) == 4 and r["losses"] == pytest.approx(r["want"], abs=1e-5), r
        assert r["params"] is True, r
    assert results[0]["losses"] != results[1]["losses"]   # each rank its own batches
    assert read_journal(journal) == []


@pytest.mark.slow
def test_fsdp2_trains_served_in_a_fresh_job(tmp_path: Path) -> None:
    """FSDP2 (fully_shard on each block and the root): a training step captured over
    two steps on each rank with no flags, served for four steps from other weights in
    a fresh locked-down job on a cold host; every rank's losses and parameter shards
    equal eager FSDP2's, 0 journal records. FSDP2's hooks break the graph inside the
    model's loop over its blocks, so Dynamo leaves that forward to eager (as
    torch.compile does) and the artifact serves it as plain Python; the model's
    run-time class (FSDPDeep) is checked as the class fully_shard makes here."""
    if not CLI.exists():
        pytest.skip("the precompile CLI is not installed; run scripts/setup")
    out = tmp_path / "pairs"
    out.mkdir()
    p, results = torchrun(out, 2, "fsdp_capture", str(out))
    assert p.returncode == 0 and len(results) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    for r in results:
        assert r["risky"] == [] and r["model"] == "FSDPDeep" and "UNCOVERED" not in r["summary"], r
    serve = tmp_path / "serve"
    serve.mkdir()
    journal = serve / "journal.jsonl"
    p, results = torchrun(serve, 2, "fsdp_serve", str(out), env=cold(serve),
                          cli=[str(CLI), "run", "--lockdown", "--strict", "--journal", str(journal), "--"])
    assert p.returncode == 0 and len(results) == 2, p.stdout[-3000:] + p.stderr[-6000:]
    for r in results:
        assert len(r["losses"]) == 4 and r["losses"] == pytest.approx(r["want"], abs=1e-5), r
        assert r["params"] is True, r
        assert len(set(r["losses"])) == 4, r  # the model learns: every step's loss differs
    assert results[0]["losses"] != results[1]["losses"]   # each rank its own batches
    assert read_journal(journal) == []
