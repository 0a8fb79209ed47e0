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
  per call       median microseconds after warm-up: served, torch.compile warm

Called by scripts/bench (section "sites"). Usage:
bench_sites.py [--repeat N] [--models mlp gpt2 bert] --cli PATH
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "scripts" / "bench_sites_app.py"


def host(kept: str | None = None) -> dict[str, str]:
    d = Path(tempfile.mkdtemp(prefix="bench-sites-"))
    for sub in ("inductor", "triton", "tmp"):
        (d / sub).mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PRECOMPILE_") and k not in ("LD_PRELOAD", "TORCH_PRECOMPILE_NO_COMPILATION")}
    env.update(TORCHINDUCTOR_CACHE_DIR=kept or str(d / "inductor"), TRITON_CACHE_DIR=str(d / "triton"),
               TMPDIR=str(d / "tmp"), TORCHINDUCTOR_COMPILE_THREADS="1")
    return env


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    start = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: dict[str, float] = {}
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith("FIRST") and "first" not in out:
            out["first"] = time.perf_counter() - start
        elif line.startswith("RESULT "):
            out.update(json.loads(line[7:]))
    err = p.stderr.read() if p.stderr else ""
    if p.wait() != 0:
        raise SystemExit(f"bench_sites: {' '.join(cmd)} failed:\n{err[-3000:]}")
    out["total"] = time.perf_counter() - start
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=["mlp", "gpt2", "bert"])
    ap.add_argument("--cli", required=True)
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; medians of {a.repeat} fresh process trees per row")
    header = ("model", "capture s", "compile cold s", "compile warm s", "served s", "eager s",
              "served/warm", "served/eager", "per call: served us", "warm us", "ratio", "journal")
    rows = []
    for model in a.models:
        s: dict[str, list[float]] = {}
        for _ in range(a.repeat):
            work = Path(tempfile.mkdtemp(prefix="bench-sites-dir-"))
            app = [sys.executable, str(APP), model]
            got = {"capture": run([a.cli, "run", "--capture", str(work / "sites"), "--", *app], host(), work)}
            cold = host()
            got["cold"] = run(app, cold, work)
            got["warm"] = run(app, host(kept=cold["TORCHINDUCTOR_CACHE_DIR"]), work)
            journal = work / "journal.jsonl"
            got["served"] = run([a.cli, "run", "--serve", str(work / "sites"), "--lockdown", "--strict",
                                 "--journal", str(journal), "--", *app], host(), work)
            got["served"]["journal"] = len(journal.read_text().splitlines()) if journal.exists() else 0
            got["eager"] = run(app, {**host(), "TORCH_COMPILE_DISABLE": "1"}, work)
            for mode, values in got.items():
                for k, v in values.items():
                    s.setdefault(f"{mode}.{k}", []).append(v)
        m = {k: statistics.median(v) for k, v in s.items()}
        rows.append((model, m["capture.total"], m["cold.first"], m["warm.first"], m["served.first"],
                     m["eager.first"], m["served.first"] / m["warm.first"], m["served.first"] / m["eager.first"],
                     m["served.per_call_us"], m["warm.per_call_us"], m["served.per_call_us"] / m["warm.per_call_us"],
                     int(max(s["served.journal"]))))
    print(" | ".join(header))
    for r in rows:
        print(" | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in r))
    print("first output = spawn -> the script's first compiled call returned; served = precompile run --serve "
          "DIR --lockdown --strict on a cold host; compile warm = torch.compile with the cold run's Inductor "
          "cache; journal = compiler records while serving")


if __name__ == "__main__":
    main()
