"""Benchmark: torch.compile call sites served (``precompile run --serve DIR
--lockdown``) against torch.compile warm on the same unmodified script
(scripts/bench_sites_app.py: ``torch.compile(model)``), side by side in one run.

Rows, per model, each a median of --repeat fresh process trees:

  capture        spawn -> exit of ``precompile run --capture DIR`` (one call site)
  compile cold   spawn -> first output, torch.compile with empty caches
  compile warm   spawn -> first output, torch.compile with the cold run's Inductor
                 cache kept (FX graph and AOTAutograd cache hits: what a restart
                 with torch.compile's caches finds)
  served         spawn -> first output under ``precompile run --serve DIR
                 --lockdown --strict`` on a cold host (empty Inductor/Triton dirs)
  eager          spawn -> first output with TORCH_COMPILE_DISABLE=1 (the floor)
  verified       served, with DIR signed (``precompile sign``) and a trust policy
                 (PRECOMPILE_TRUST) set: every pair checked before it runs
  verify ms      one pair's signature check in process (the largest pair of the
                 DIR, median of 20), and that pair's size
  per call       median microseconds after warm-up: served, torch.compile warm, eager

Called by scripts/bench (section "sites"). Usage:
bench_sites.py [--repeat N] [--models mlp gpt2 bert llama-recipe optimizer] --cli PATH
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import tempfile
from pathlib import Path

from bench_common import host, print_table, timed

PREFIX = "bench-sites-"

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "scripts" / "bench_sites_app.py"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=["mlp", "gpt2", "bert", "llama-recipe", "optimizer"])
    ap.add_argument("--cli", required=True)
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; medians of {a.repeat} fresh process trees per row")
    header = ("model", "capture s", "compile cold s", "compile warm s", "served s", "eager s",
              "served/warm", "served/eager", "per call: served us", "warm us", "ratio", "eager us", "journal",
              "verified s", "verify ms", "pair MB")
    rows = []
    for model in a.models:
        s: dict[str, list[float]] = {}
        for _ in range(a.repeat):
            work = Path(tempfile.mkdtemp(prefix="bench-sites-dir-"))
            app = [sys.executable, str(APP), model]
            sites = str(work / "sites")
            got = {"capture": timed([a.cli, "run", "--capture", sites, "--", *app], host(PREFIX), model)}
            cold = host(PREFIX)
            got["cold"] = timed(app, cold, model)
            got["warm"] = timed(app, host(PREFIX, kept=cold["TORCHINDUCTOR_CACHE_DIR"]), model)
            served = host(PREFIX)
            journal = Path(served["_CWD"]) / "journal.jsonl"
            got["served"] = timed([a.cli, "run", "--serve", sites, "--lockdown", "--strict", "--journal",
                                   str(journal), "--", *app], served, model)
            got["served"]["journal"] = len(journal.read_text().splitlines()) if journal.exists() else 0
            got["eager"] = timed(app, {**host(PREFIX), "TORCH_COMPILE_DISABLE": "1"}, model)
            pub = _sign(a.cli, work, sites)
            got["verified"] = timed([a.cli, "run", "--serve", sites, "--lockdown", "--", *app],
                                    {**host(PREFIX), "PRECOMPILE_TRUST": pub}, model)
            got["verify"] = _verify_cost(sites, pub)
            for mode, values in got.items():
                for k, v in values.items():
                    s.setdefault(f"{mode}.{k}", []).append(v)
        m = {k: statistics.median(v) for k, v in s.items()}
        rows.append((model, m["capture.total"], m["cold.first"], m["warm.first"], m["served.first"],
                     m["eager.first"], m["served.first"] / m["warm.first"], m["served.first"] / m["eager.first"],
                     m["served.per_call_us"], m["warm.per_call_us"], m["served.per_call_us"] / m["warm.per_call_us"],
                     m["eager.per_call_us"],
                     int(max(s["served.journal"])), m["verified.first"], m["verify.ms"], m["verify.mb"]))
    print_table(header, rows, "first output = spawn -> the script's first compiled call returned; served = precompile run --serve "
          "DIR --lockdown --strict on a cold host; compile warm = torch.compile with the cold run's Inductor "
          "cache; journal = compiler records while serving")


def _sign(cli: str, work: Path, sites: str) -> str:
    """Signs DIR with a fresh P-256 key; returns the public key's path."""
    key, pub = work / "key.pem", work / "key.pub"
    subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(key)], check=True)
    subprocess.run(["openssl", "ec", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True)
    subprocess.run([cli, "sign", "--key", str(key), sites], check=True, capture_output=True)
    return str(pub)


def _verify_cost(sites: str, pub: str) -> dict[str, float]:
    """Median ms of checking the largest pair of DIR against its signature."""
    from torch_precompile import _native

    pairs = [(p, p.with_suffix(".cache")) for p in Path(sites).glob("*.py") if p.with_suffix(".cache").exists()]
    art, cache = max(pairs, key=lambda pc: pc[0].stat().st_size + pc[1].stat().st_size)
    code, data = art.read_bytes(), cache.read_bytes()
    times = []
    for _ in range(20):
        t = time.perf_counter()
        _native.verify_pair(pub, str(art), code, str(cache), data)
        times.append((time.perf_counter() - t) * 1e3)
    return {"ms": statistics.median(times), "mb": (len(code) + len(data)) / 1e6}


if __name__ == "__main__":
    main()
