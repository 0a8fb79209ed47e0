"""What the benchmark drivers share: a fresh host for each measured process, and
one timed child run (spawn -> its FIRST line, its RESULT json, its journal)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path


def host(prefix: str, *, kept: str | None = None, shim: str | None = None) -> dict[str, str]:
    """A fresh host's environment: empty Inductor/Triton caches, its own TMPDIR and
    working directory (``_CWD``, popped by ``timed``), none of this project's
    variables. ``kept``: an Inductor cache directory from an earlier run (a
    torch.compile warm restart). ``shim``: served locked down under it, strict,
    with a journal."""
    d = Path(tempfile.mkdtemp(prefix=prefix))
    for sub in ("inductor", "triton", "tmp", "cwd"):
        (d / sub).mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PRECOMPILE_") and k not in ("LD_PRELOAD", "TORCH_PRECOMPILE_NO_COMPILATION")}
    env.update(TORCHINDUCTOR_CACHE_DIR=kept or str(d / "inductor"), TRITON_CACHE_DIR=str(d / "triton"),
               TMPDIR=str(d / "tmp"), TORCHINDUCTOR_COMPILE_THREADS="1", _CWD=str(d / "cwd"))
    if shim:
        env.update(LD_PRELOAD=shim, TORCH_PRECOMPILE_NO_COMPILATION="1", PRECOMPILE_STRICT="1",
                   PRECOMPILE_JOURNAL=str(d / "journal.jsonl"))
    return env


def timed(cmd: list[str], env: dict[str, str], what: str) -> dict[str, float]:
    """Run ``cmd`` on the host ``env``: ``first`` = spawn -> its first ``FIRST`` line,
    ``total`` = spawn -> exit, the keys of its ``RESULT <json>`` line, and ``journal``
    = the records in the host's journal, if it has one. Exits naming ``what`` when
    the child fails."""
    env = dict(env)
    cwd = env.pop("_CWD", None)
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
        raise SystemExit(f"{what} failed:\n{err[-3000:]}")
    out["total"] = time.perf_counter() - start
    journal = Path(env.get("PRECOMPILE_JOURNAL", "/nonexistent"))
    if journal.exists():
        out["journal"] = len([line for line in journal.read_text().splitlines() if line.strip()])
    return out


def print_table(header: tuple[str, ...], rows: list[tuple[object, ...]], legend: str) -> None:
    """The rows as ``a | b | ...`` lines under the header (floats to two places),
    then the legend."""
    print(" | ".join(header))
    for r in rows:
        print(" | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in r))
    print(legend)
