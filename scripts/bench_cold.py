"""Benchmark (issue #6): fresh-process COLD-HOST time to first output and compiler
executions, this project vs torch 2.15's own precompile, torch.compile, the
mega-cache and AOTInductor, side by side in one run.

What is measured. For each model of tests/pc_models.py ("mlp", "convbn", "block";
weights of seed 0, eval mode, example inputs of pc_models.make, every call under
torch.no_grad(), and the MHA fast path off -- torch.compile would otherwise keep
the transformer layer's fused kernel (no codegen) where make_fx and export trace
the decomposed ops -- so every configuration computes the same graph), each
configuration serves the model's first output in a FRESH child process:

  ours           tp.load(artifact, cache) + first call (captured once beforehand)
  ref cold       torch.compiler.precompile.load + first call (torch 2.15's own)
  ref warm       the same, reusing the cache dir the "ref cold" run just filled
  compile cold   torch.compile(model) + first call
  compile warm   the same, reusing the cache dir the "compile cold" run just filled
  mega-cache     torch.compiler.load_cache_artifacts(bytes saved by a producer that
                 ran torch.compile), then torch.compile(model) + first call
  aoti           torch._inductor.aoti_load_package(.pt2) + first call
  eager          model(x): the floor (interpreter, import torch, the model)

Cold host: every serve gets an EMPTY TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR
(except the two "warm" rows, which reuse their cold run's), its own TMPDIR and its
own working directory. The producers (both captures, the AOTI package, the
mega-cache bytes) run once per model before any timing, each in its own fresh
process with its own empty cache dirs.

Numbers. "first output" is wall time seen by this (parent) process from spawning
the child until the child prints a marker right after computing its first output
(read from the child's stdout pipe): interpreter start, imports, load/compile and
the first call, but not the eager check after it nor interpreter teardown. Also
shown: the child's own perf_counter from the top of its script to the first output
("in-script", i.e. without interpreter start) and the whole process wall time
("process"). Compiler executions come from the LD_PRELOAD shim's journal
(PRECOMPILE_JOURNAL; no lockdown, so every system may compile and is counted):
records of kind "compile" and, separately, "probe" (e.g. `g++ --version`), from
every process of the serve's tree; one g++ run journals its cc1plus, as, collect2
and ld too. Ours runs under the shim as found (in the installed layout its boot/
loads torch_precompile into the interpreter); every other configuration runs under
a bare copy of the library with no boot/ beside it, i.e. on stock torch (the boot
would make torch.compiler.precompile this package). The child then compares its
output against eager (✓/✗). Each table shows medians of --repeat runs (rounds are interleaved, so
drift on a shared machine hits every configuration alike) and the ratio of each
configuration's first-output time to ours.

Children run with TORCHINDUCTOR_COMPILE_THREADS=1, as the tests do: Inductor
compiles in-process rather than starting a worker pool, whose start-up and workers
add noise on a small shared machine; it applies to every configuration alike.
Called by scripts/bench (section "cold"); never by the product or the tests. Usage:
    bench_cold.py [--repeat N] [--models mlp convbn block] [--shim PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
MODELS = {
    "mlp": "MLP 8-16-4, x (4, 8)",
    "convbn": "Conv3x3-BN-ReLU-mean-Linear, x (2, 3, 8, 8)",
    "block": "TransformerEncoderLayer d=32 h=4 ff=64, x (2, 6, 32)",
}

# One child script for every role. argv: role model artifact_dir tests_dir.
CHILD = textwrap.dedent("""
    import json, sys, time
    T0 = time.perf_counter()
    role, name, art, tests = sys.argv[1:5]
    sys.path.insert(0, tests)
    import torch
    import torch.utils._pytree as pytree
    # the decomposed transformer path everywhere: with the fast path on, eager and
    # Dynamo under no_grad run one fused kernel that needs no codegen, while make_fx
    # and export trace the decomposed ops, so the rows would not compare alike
    torch.backends.mha.set_fastpath_enabled(False)
    import pc_models

    fn, model, args = pc_models.make(name, seed=0)
    model.eval()
    x = args[1]
    out = {}
    with torch.no_grad():
        y = None
        if role in ("capture-ours", "capture-ref"):
            impl = role.split("-")[1]
            if impl == "ours":
                import torch_precompile as pc
            else:
                import torch.compiler.precompile as pc    # torch 2.15's own
            with pc.capture(fn, artifact_path=f"{art}/{impl}.py", cache_path=f"{art}/{impl}.cache",
                            tracer=pc.MakeFxTracer(), backend="inductor") as cap:
                cap(model, x)
        elif role == "aoti-package":
            ep = torch.export.export(model, (x,))
            torch._inductor.aoti_compile_and_package(ep, package_path=f"{art}/model.pt2")
        elif role == "mega-save":
            torch.compile(model)(x)
            blob, _info = torch.compiler.save_cache_artifacts()
            with open(f"{art}/mega.bin", "wb") as f:
                f.write(blob)
        elif role in ("ours", "ref"):
            if role == "ours":
                import torch_precompile as pc
            else:
                import torch.compiler.precompile as pc
            f = pc.load(f"{art}/{role}.py", f"{art}/{role}.cache")
            y = f(model, x)
        elif role == "eager":
            y = model(x)
        elif role == "compile":
            y = torch.compile(model)(x)
        elif role == "mega":
            with open(f"{art}/mega.bin", "rb") as f:
                torch.compiler.load_cache_artifacts(f.read())
            y = torch.compile(model)(x)
        elif role == "aoti":
            runner = torch._inductor.aoti_load_package(f"{art}/model.pt2")
            y = runner(x)
        else:
            raise SystemExit(f"unknown role {role}")
        if y is not None:
            out["in_script_s"] = time.perf_counter() - T0
            print("FIRST", flush=True)                  # the parent stamps this line
            got, want = pytree.tree_leaves(y), pytree.tree_leaves(model(x))
            out["match"] = len(got) == len(want) and all(
                torch.allclose(a, b, atol=1e-4, rtol=1e-4) for a, b in zip(got, want))
    print("RESULT " + json.dumps(out), flush=True)
""")

PRODUCERS = [
    ("capture-ours", "this project: capture"),
    ("capture-ref", "torch 2.15 precompile: capture"),
    ("aoti-package", "AOTInductor: export + package"),
    ("mega-save", "mega-cache: torch.compile + save_cache_artifacts"),
]
# (key, table label, child role, key of the run whose cache dirs it reuses)
CONFIGS = [
    ("ours", "ours, cold host", "ours", None),
    ("ref-cold", "torch 2.15 precompile, cold", "ref", None),
    ("ref-warm", "torch 2.15 precompile, warm", "ref", "ref-cold"),
    ("compile-cold", "torch.compile, cold cache", "compile", None),
    ("compile-warm", "torch.compile, warm cache", "compile", "compile-cold"),
    ("mega", "mega-cache load + compile", "mega", None),
    ("aoti", "AOTInductor package load", "aoti", None),
    ("eager", "eager (floor: no compiler)", "eager", None),
]


def installed_shim() -> Path | None:
    """The shim the wheel bundles in the torch_precompile this interpreter imports."""
    spec = importlib.util.find_spec("torch_precompile")
    return Path(spec.origin).parent / "_prefix/lib/precompile/libprecompile.so" if spec else None


def find_shim(given: str | None) -> str:
    cands = [given] if given else [installed_shim(), ROOT / "target/release/libprecompile.so"]
    for c in cands:
        if c and Path(c).is_file():
            return str(Path(c).resolve())
    raise SystemExit("bench_cold: libprecompile.so not found; run scripts/setup "
                     "or: cargo build --release -p interpose (or pass --shim)")


def child_env(run: Path, cache: Path, shim: str | None) -> dict[str, str]:
    """The parent's environment without precompile state, pointed at run's dirs."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PRECOMPILE_") and k not in ("TORCH_PRECOMPILE_NO_COMPILATION", "LD_PRELOAD")}
    # a shim that started this script put its boot/ on PYTHONPATH: drop it
    path = [p for p in env.pop("PYTHONPATH", "").split(os.pathsep)
            if p and not (Path(p).name == "boot" and (Path(p).parent / "libprecompile.so").exists())]
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path)
    env.update(TORCHINDUCTOR_COMPILE_THREADS="1", TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"),
               TRITON_CACHE_DIR=str(cache / "triton"), TMPDIR=str(run / "tmp"))
    if shim:
        env.update(LD_PRELOAD=shim, PRECOMPILE_JOURNAL=str(run / "journal.jsonl"))
    return env


def run_child(d: Path, role: str, name: str, run: Path, *, shim: str | None = None,
              cache: Path | None = None) -> dict:
    """Runs one child in run/ (fresh cwd, TMPDIR and, unless cache is given, cache
    dirs); returns its RESULT plus first_output_s, process_s, compiles and probes."""
    for sub in ("inductor", "triton", "tmp", "cwd"):
        (run / sub).mkdir(parents=True)
    cmd = [sys.executable, str(d / "bench_child.py"), role, name, str(d / "art" / name), str(TESTS)]
    first, lines = None, []
    with open(run / "stderr.txt", "w") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=child_env(run, cache or run, shim), cwd=run / "cwd",
                             stdout=subprocess.PIPE, stderr=err, text=True)
        assert p.stdout is not None
        for line in p.stdout:
            if first is None and line.startswith("FIRST"):
                first = time.perf_counter() - t0
            lines.append(line)
        rc = p.wait()
        wall = time.perf_counter() - t0
    result = next((x for x in lines if x.startswith("RESULT ")), None)
    if rc != 0 or result is None:
        raise SystemExit(f"bench_cold: {name} {role} failed (exit {rc}):\n"
                         f"{(run / 'stderr.txt').read_text()[-3000:]}")
    out = json.loads(result[7:])
    out.update(first_output_s=first, process_s=wall)
    j = run / "journal.jsonl"
    recs = [json.loads(x) for x in j.read_text().splitlines() if x.strip()] if j.exists() else []
    out["compiles"] = sum(r.get("kind") == "compile" for r in recs)
    out["probes"] = sum(r.get("kind") == "probe" for r in recs)
    return out


def say(msg: str) -> None:
    print(f"  cold: {msg}", file=sys.stderr, flush=True)


def counts(v: list[int]) -> str:
    return str(v[0]) if min(v) == max(v) else f"{min(v)}-{max(v)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--shim", help="libprecompile.so (default: the installed one, else target/release)")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be >= 1")
    shim = find_shim(a.shim)
    rows: dict[str, dict[str, list[dict]]] = {m: {k: [] for k, *_ in CONFIGS} for m in a.models}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_cold.") as tmp:
        d = Path(tmp)
        (d / "bench_child.py").write_text(CHILD)
        # The shim alone, with no boot/ beside it: in the installed layout the shim
        # boots torch_precompile into every Python process, which makes
        # torch.compiler.precompile this package. The other systems run on stock
        # torch, journaled by this copy; ours runs under the shim as installed.
        bare = str(d / "bare" / "libprecompile.so")
        (d / "bare").mkdir()
        shutil.copy2(shim, bare)
        for name in a.models:  # producers: once per model, before any timing
            (d / "art" / name).mkdir(parents=True)
            for role, what in PRODUCERS:
                t = time.perf_counter()
                run_child(d, role, name, d / "produce" / f"{name}-{role}")
                say(f"{name}: {what} ({time.perf_counter() - t:.1f}s)")
        for i in range(a.repeat):  # interleaved rounds, so drift hits every configuration alike
            for name in a.models:
                for key, label, role, warm_from in CONFIGS:
                    run = d / "serve" / f"{name}-{key}-{i}"
                    cache = d / "serve" / f"{name}-{warm_from}-{i}" if warm_from else None
                    r = run_child(d, role, name, run, shim=shim if key == "ours" else bare, cache=cache)
                    rows[name][key].append(r)
                    say(f"round {i + 1}/{a.repeat} {name} {label}: first output {r['first_output_s']:.2f}s, "
                        f"compiles {r['compiles']}, probes {r['probes']}, match {r['match']}")
    say(f"done in {time.perf_counter() - t_all:.0f}s")

    def med(name: str, key: str, field: str) -> float:
        return statistics.median(r[field] for r in rows[name][key])

    print(f"\nCold-host time to first output, fresh process per run; medians of {a.repeat} run(s)")
    print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; "
          f"shim {shim}")
    hdr = (f"{'config':30} {'first output':>12} {'in-script':>10} {'process':>9} "
           f"{'compiles':>9} {'probes':>7} {'x ours':>7} {'match':>5}")
    for name in a.models:
        ours = med(name, "ours", "first_output_s")
        print(f"\n{name}: {MODELS[name]} (eval, no_grad, inductor, CPU)")
        print(hdr)
        for key, label, *_ in CONFIGS:
            rs = rows[name][key]
            fo = med(name, key, "first_output_s")
            ok = "✓" if all(r["match"] for r in rs) else "✗"
            print(f"{label:30} {fo:11.3f}s {med(name, key, 'in_script_s'):9.3f}s "
                  f"{med(name, key, 'process_s'):8.3f}s {counts([r['compiles'] for r in rs]):>9} "
                  f"{counts([r['probes'] for r in rs]):>7} {fo / ours:7.2f} {ok:>5}")

    print("\nTargets (per model):")
    yes = {True: "MET", False: "MISSED"}
    checks = []
    for name in a.models:
        rs = rows[name]["ours"]
        n_comp, n_probe = max(r["compiles"] for r in rs), max(r["probes"] for r in rs)
        ours, ref = med(name, "ours", "first_output_s"), med(name, "ref-cold", "first_output_s")
        floor = med(name, "eager", "first_output_s")
        speedup, ceiling = ref / ours, ref / floor
        vs_aoti = ours / med(name, "aoti", "first_output_s")
        matched = all(r["match"] for k in rows[name] for r in rows[name][k])
        checks += [n_comp == n_probe == 0, speedup >= 10, vs_aoti <= 1.5, matched]
        print(f"  {name:7} zero compiler executions for ours: max compiles {n_comp}, probes {n_probe} "
              f"{yes[n_comp == n_probe == 0]}")
        print(f"  {name:7} ours >= 10x faster than torch 2.15 precompile cold host: {speedup:.1f}x "
              f"{yes[speedup >= 10]} (ceiling here, ref cold / eager: {ceiling:.1f}x; "
              f"ours - eager: {ours - floor:+.3f}s)")
        print(f"  {name:7} ours within 1.5x of AOTInductor load: ours/aoti {vs_aoti:.2f} {yes[vs_aoti <= 1.5]}")
        print(f"  {name:7} every configuration's output matches eager: {yes[matched]}")
    print(f"all targets: {yes[all(checks)]}")
    print("\nfirst output: spawn to the child's marker after its first output (parent-measured); in-script:\n"
          "the child's perf_counter from the top of its script; process: spawn to exit. compiles/probes: the\n"
          "shim's journal (no lockdown). Warm rows reuse the cache dirs their cold run of the same round filled.\n"
          "Ceiling: ref cold / eager, the most any configuration that starts Python and imports torch can\n"
          "reach on this machine; ours - eager: what serving adds to that floor.")

if __name__ == "__main__":
    main()
