"""scripts/demo's body: capture once, serve cold and locked down, compare.

Every serve runs in a fresh process on empty Inductor/Triton cache directories
under the shim with a journal, so compiler executions are counted, not assumed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv" / "bin" / "python")
# the shim inside the package setup installed, as a user finds it
LIB = subprocess.run([str(ROOT / ".venv" / "bin" / "precompile"), "preload-path"],
                     capture_output=True, text=True, check=True).stdout.strip()

CAPTURE = """
import sys, time
sys.path.insert(0, {examples!r})
import torch, torch_precompile as tp, demo_model
model, x = demo_model.make()
t = time.perf_counter()
with tp.capture(demo_model.step, artifact_path="block.py", cache_path="block.cache",
                backend="inductor") as cap:     # DynamoTracer, the default
    y = cap(model, x)
print("SUMMARY", cap.summary())
print(f"CAPTURED {{time.perf_counter() - t:.2f}}")
"""

SERVE = """
import sys, time
t0 = time.perf_counter()
sys.path.insert(0, {examples!r})
import torch, demo_model
model, x = demo_model.make()
with torch.no_grad():
    want = demo_model.step(model, x)
t1 = time.perf_counter()
mode = {mode!r}
if mode == "precompile":
    import torch_precompile as tp
    f = tp.load("block.py", "block.cache")
    with tp.no_compilation():
        y = f(model, x)
else:
    f = torch.compile(demo_model.step)
    y = f(model, x)
t2 = time.perf_counter()
ok = torch.allclose(y, want, atol=1e-4, rtol=1e-4)
print("RESULT", t2 - t1, ok)
"""


def progress(message: str) -> None:
    print(f"demo: {message}", file=sys.stderr, flush=True)


def run(code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


def journal_counts(path: Path) -> tuple[int, int]:
    if not path.exists():
        return 0, 0
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sum(r["kind"] == "compile" for r in recs), sum(r["kind"] == "probe" for r in recs)


def serve(mode: str, work: Path, cache_dir: Path, lockdown: bool) -> tuple[float, bool, int, int, float]:
    journal = work / f"journal-{mode}-{time.monotonic_ns()}.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRECOMPILE_")}
    env.update({
        "LD_PRELOAD": LIB,
        "PRECOMPILE_JOURNAL": str(journal),
        "TORCHINDUCTOR_CACHE_DIR": str(cache_dir / "inductor"),
        "TRITON_CACHE_DIR": str(cache_dir / "triton"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
    })
    if lockdown:
        env.update({"TORCH_PRECOMPILE_NO_COMPILATION": "1", "PRECOMPILE_STRICT": "1"})
    t = time.perf_counter()
    p = run(SERVE.format(examples=str(ROOT / "examples"), mode=mode), work, env)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"demo: the {mode} serve failed:\n{p.stderr[-3000:]}")
    line = next(x for x in p.stdout.splitlines() if x.startswith("RESULT"))
    _, first, ok = line.split()
    compiles, probes = journal_counts(journal)
    return float(first), ok == "True", compiles, probes, wall


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="precompile-demo-") as tmp:
        work = Path(tmp)
        progress("capturing the transformer block (DynamoTracer, inductor; a graph break in the step) in one process")
        env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS="1")
        p = run(CAPTURE.format(examples=str(ROOT / "examples")), work, env)
        if p.returncode != 0:
            sys.exit(f"demo: capture failed:\n{p.stderr[-3000:]}")
        capture_s = float(p.stdout.split("CAPTURED")[1].split()[0])
        summary = p.stdout.split("SUMMARY", 1)[1].splitlines()[0].strip()
        progress(f"captured in {capture_s:.1f}s: {work / 'block.py'} + block.cache ({summary})")
        rows = []
        progress("serving it in a fresh process: cold caches, TORCH_PRECOMPILE_NO_COMPILATION=1, strict shim")
        rows.append(("precompile (cold host, locked down)", *serve("precompile", work, work / "cold-pc", True)))
        progress("torch.compile in a fresh process, cold cache (compiles)")
        rows.append(("torch.compile, cold cache", *serve("compile", work, work / "tc", False)))
        progress("torch.compile in a fresh process, warm cache")
        rows.append(("torch.compile, warm cache", *serve("compile", work, work / "tc", False)))
    print()
    print(f"{'':38} {'first output':>13} {'compiler runs':>14} {'probes':>7} {'process':>9}  matches eager")
    for name, first, ok, compiles, probes, wall in rows:
        print(f"{name:38} {first:12.2f}s {compiles:14d} {probes:7d} {wall:8.2f}s  {'yes' if ok else 'NO'}")
    ours = rows[0]
    if not ours[2] or ours[3] != 0:
        sys.exit("demo: the locked-down serve did not match eager or ran a compiler")


if __name__ == "__main__":
    main()
