"""The torch-side lockdown gates, with real torch and Triton on CPU.

Every gate is exercised under each lock (no_compilation(), serving() on its own
thread, TORCH_PRECOMPILE_NO_COMPILATION=1 at start) in a fresh interpreter that
arms the gates with ``torch_precompile.install()``; the child reports, per
attempt, whether it was refused and the message, and the test checks both.
Where a gate sits on a path that needs a GPU to run for real (Triton's
autotuner benchmark runs are refused before touching the device), the
refusal is what is shown; unlocked runs are checked only where CPUs can do them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import Result, read_journal, run_python, shim_path

# --- the child side ---------------------------------------------------------

PRELUDE = r"""
import json, os, shutil, subprocess, sys, threading
import torch_precompile
torch_precompile.install()
import torch
from torch_precompile import PrecompileError, no_compilation, serving

def attempt(fn):
    try:
        fn()
    except PrecompileError as e:
        return ["refused", str(e)]
    except Exception as e:  # a gate that let it through and it then failed
        return ["error", f"{type(e).__name__}: {e}"]
    return ["allowed", ""]

def attempt_all(cases):
    return {label: attempt(fn) for label, fn in cases.items()}

def report(**results):
    print("RESULTS " + json.dumps(results), flush=True)
"""

# The gated operations. `f` is compiled (eager backend) at shape (3,) before
# any lockdown where the mode allows it; every other case starts cold.
CASES = r"""
import torch._inductor.compile_fx as inductor_compile_fx
import torch._inductor.select_algorithm as select_algorithm
import torch.utils.cpp_extension as cpp_extension
import triton, triton.language as tl
from functorch.compile import aot_function
from torch._inductor.codecache import CppCodeCache
from torch._inductor.runtime.benchmarking import benchmarker
from torch._inductor.runtime.coordinate_descent_tuner import CoordescTuner
from torch._inductor.runtime.triton_heuristics import CachingAutotuner
from torch.fx.experimental.proxy_tensor import make_fx
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

WORK = os.environ["GATES_WORK"]

# @triton.jit reads its source: the kernel lives in a file.
with open(os.path.join(WORK, "gate_kernels.py"), "w") as fh:
    fh.write(
        "import triton, triton.language as tl\n"
        "@triton.jit\n"
        "def add_one(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    m = i < n\n"
        "    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=m) + 1, mask=m)\n"
    )
sys.path.insert(0, WORK)
from gate_kernels import add_one

def triton_source():
    return ASTSource(add_one, signature={"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                     constexprs={"BLOCK": 64})

tuned = triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})],
                        key=["n"])(add_one)

def f(x):
    return x.sin() + 1
f = torch.compile(f, backend="eager")

def recompile():
    return f(torch.ones(3, dtype=torch.float64))  # a dtype no cache entry covers

class Lin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
    def forward(self, x):
        return self.lin(x)

def traced(x):
    return x * 3

gm = torch.fx.symbolic_trace(traced)
cpp_counter = [0]

def cpp_kernel():
    # A new source each call, so the kernel is never in the cache already.
    cpp_counter[0] += 1
    return CppCodeCache.load(f'extern "C" int k{cpp_counter[0]}() {{ return {cpp_counter[0]}; }}')

def cold_compile():
    def fresh(x):
        return x.cos() * 2
    return torch.compile(fresh, backend="eager")(torch.ones(3))

def compiler_subprocess():
    src = os.path.join(WORK, "tiny.c")
    with open(src, "w") as fh:
        fh.write("int tiny(void) { return 1; }\n")
    subprocess.run(["cc", "-c", src, "-o", src + ".o"], check=True)

def coordinate_descent():
    CoordescTuner(name="tiny_kernel").autotune(lambda cfg: 1.0, triton.Config({"XBLOCK": 8}))

REFUSED_CASES = {
    "dynamo_first_compile": cold_compile,
    "dynamo_fullgraph_capture": lambda: torch._dynamo.convert_frame.fullgraph_capture(traced, (torch.ones(2),)),
    "make_fx": lambda: make_fx(traced)(torch.ones(2)),
    "torch_export": lambda: torch.export.export(Lin(), (torch.ones(2),)),
    "aot_autograd": lambda: aot_function(traced, fw_compiler=lambda g, _: g)(torch.ones(2)),
    "compile_fx": lambda: inductor_compile_fx.compile_fx(gm, [torch.ones(2)]),
    "compile_fx_inner": lambda: inductor_compile_fx.compile_fx_inner(gm, [torch.ones(2)]),
    "standalone_compile": lambda: torch._inductor.standalone_compile(gm, [torch.ones(2)]),
    "triton_compile": lambda: triton.compile(triton_source(), target=GPUTarget("cuda", 90, 32)),
    "triton_autotune": lambda: tuned.run(torch.ones(8), 8, grid=(1,), warmup=False),
    "triton_do_bench": lambda: triton.testing.do_bench(lambda: None),
    "max_autotune_benchmark": lambda: select_algorithm.AlgorithmSelectorCache.benchmark(
        object(), [], None, None, None),
    "coordinate_descent": coordinate_descent,
    "inductor_runtime_autotune": lambda: CachingAutotuner.benchmark_all_configs(object()),
    "inductor_benchmarker": lambda: benchmarker.benchmark_cpu(lambda: None, warmup=1, rep=1),
    "inductor_cpp_build": cpp_kernel,
    "cpp_extension_load_inline": lambda: cpp_extension.load_inline(
        name="gated_ext", cpp_sources="int one() { return 1; }", functions=["one"]),
    "compiler_subprocess": compiler_subprocess,
}

# What still works once the lockdown is gone (or on a thread that is not serving).
ALLOWED_CASES = {
    "dynamo_first_compile": cold_compile,
    "dynamo_recompile": lambda: f(torch.ones(5, 5)),
    "make_fx": lambda: make_fx(traced)(torch.ones(2)),
    "triton_compile": lambda: triton.compile(triton_source(), target=GPUTarget("cuda", 90, 32)),
    "coordinate_descent": coordinate_descent,
    "inductor_benchmarker": lambda: benchmarker.benchmark_cpu(lambda: None, warmup=1, rep=1),
    "compiler_subprocess": compiler_subprocess,
}
"""

# label -> what the message must name, besides the reason and the remedy.
NAMES = {
    "dynamo_first_compile": ["torch.compile of 'cold_compile.<locals>.fresh'", "first compile, no cache entry"],
    "dynamo_recompile": ["torch.compile of 'f'", "recompile: no cache entry matches", "tensor 'x'"],
    "dynamo_fullgraph_capture": ["Dynamo full-graph capture of 'traced'"],
    "make_fx": ["make_fx tracing of 'traced'"],
    "torch_export": ["torch.export tracing of a Lin"],
    "aot_autograd": ["AOTAutograd graph trace", "no AOTAutograd cache entry"],
    "compile_fx": ["Inductor compile of an FX graph of 3 nodes", "compile_fx.compile_fx)"],
    "compile_fx_inner": ["compile_fx.compile_fx_inner)"],
    "standalone_compile": ["torch._inductor.standalone_compile of an FX graph"],
    "triton_compile": ["Triton compile of kernel 'add_one' for cuda:90", "no entry in the Triton cache"],
    "triton_autotune": ["Triton autotuning of kernel 'add_one'", "BLOCK: 64"],
    "triton_do_bench": ["triton.testing.do_bench benchmark"],
    "max_autotune_benchmark": ["Inductor max-autotune benchmark"],
    "coordinate_descent": ["Inductor coordinate descent tuning of tiny_kernel"],
    "inductor_runtime_autotune": ["Inductor runtime autotuning"],
    "inductor_benchmarker": ["Inductor benchmarking", "Benchmarker.benchmark_cpu"],
    "inductor_cpp_build": ["Inductor C++ build of", ".so (no built library in the cache)"],
    "cpp_extension_load_inline": ["C++ extension build of 'gated_ext' (torch.utils.cpp_extension.load_inline)"],
    "compiler_subprocess": ["running the compile command `cc -c"],
}

WHY = {
    "no_compilation": "refused: inside torch.compiler.precompile.no_compilation()",
    "serving": "refused: this thread is serving",
    "startup": "refused: TORCH_PRECOMPILE_NO_COMPILATION=1 was set at process start",
}


def results(r: Result) -> dict:
    r.check()
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULTS ")), None)
    assert line is not None, f"the child reported nothing\n{r.stdout}\n{r.stderr}"
    return json.loads(line[len("RESULTS "):])


def child_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Private caches, so every compile in the child starts cold."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return {
        "GATES_WORK": str(work),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
        "TRITON_CACHE_DIR": str(tmp_path / "triton"),
        "TORCH_EXTENSIONS_DIR": str(tmp_path / "extensions"),
        "TRITON_DEFAULT_FP_FUSION": "1",
        **extra,
    }


def assert_refused(outcomes: dict, lock: str, labels) -> None:
    problems = []
    for label in labels:
        verdict, message = outcomes[label]
        if verdict != "refused":
            problems.append(f"{label} under {lock}: {verdict} {message}")
            continue
        for fragment in [*NAMES[label], WHY[lock], "outside the lockdown"]:
            if fragment not in message:
                problems.append(f"{label}: {fragment!r} missing from:\n{message}")
    assert not problems, "\n".join(problems)


def assert_allowed(outcomes: dict, where: str) -> None:
    for label, (verdict, message) in outcomes.items():
        assert verdict == "allowed", f"{label} {where}: {verdict} {message}"


def test_no_compilation_refuses_every_gate_and_exit_allows_again(tmp_path: Path) -> None:
    code = PRELUDE + CASES + r"""
f(torch.ones(3))  # compiled before the lockdown
with no_compilation():
    cached = attempt(lambda: f(torch.ones(3)))
    locked = attempt_all({**REFUSED_CASES, "dynamo_recompile": recompile})
    # Process-wide: another thread is locked too.
    other = {}
    t = threading.Thread(target=lambda: other.update(attempt_all({"make_fx": REFUSED_CASES["make_fx"]})))
    t.start(); t.join()
after = attempt_all(ALLOWED_CASES)
report(cached=cached, locked=locked, other=other, after=after)
"""
    out = results(run_python(code, env=child_env(tmp_path)))
    assert out["cached"] == ["allowed", ""], "a call whose cache entry exists must keep working"
    assert_refused(out["locked"], "no_compilation", [*NAMES])
    assert_refused(out["other"], "no_compilation", ["make_fx"])
    assert_allowed(out["after"], "after no_compilation() exited")


def test_serving_refuses_on_its_thread_while_another_thread_compiles(tmp_path: Path) -> None:
    code = PRELUDE + CASES + r"""
f(torch.ones(3))
refused_done, others_done = threading.Event(), threading.Event()
out = {}

def serve():
    with serving():
        out["cached"] = attempt(lambda: f(torch.ones(3)))
        out["locked"] = attempt_all({**REFUSED_CASES, "dynamo_recompile": recompile})
        refused_done.set()
        others_done.wait()  # stay inside serving() while the main thread compiles
    out["after"] = attempt_all({"make_fx": ALLOWED_CASES["make_fx"]})

t = threading.Thread(target=serve)
t.start()
refused_done.wait()
out["other_thread"] = attempt_all(ALLOWED_CASES)
others_done.set()
t.join()
report(**out)
"""
    out = results(run_python(code, env=child_env(tmp_path)))
    assert_allowed(out["other_thread"], "on a thread that is not serving")
    assert out["cached"] == ["allowed", ""]
    assert_refused(out["locked"], "serving", [*NAMES])
    assert_allowed(out["after"], "after serving() exited")


def test_startup_variable_refuses_every_gate_for_good(tmp_path: Path) -> None:
    code = PRELUDE + CASES + r"""
locked = attempt_all(REFUSED_CASES)
with no_compilation():
    pass
# The startup lockdown cannot be exited.
still = attempt_all({"make_fx": REFUSED_CASES["make_fx"]})
report(locked=locked, still=still, env=os.environ.get("TORCH_PRECOMPILE_NO_COMPILATION"))
"""
    env = child_env(tmp_path, TORCH_PRECOMPILE_NO_COMPILATION="1")
    out = results(run_python(code, env=env))
    assert_refused(out["locked"], "startup", [n for n in NAMES if n != "dynamo_recompile"])
    assert_refused(out["still"], "startup", ["make_fx"])
    assert out["env"] == "1"


def test_suppress_errors_does_not_turn_a_refusal_into_eager_fallback(tmp_path: Path) -> None:
    code = PRELUDE + r"""
torch._dynamo.config.suppress_errors = True
def g(x):
    return x + 1
g = torch.compile(g, backend="eager")
with no_compilation():
    locked = attempt(lambda: g(torch.ones(2)))
fullgraph = torch.compile(lambda x: x - 1, backend="eager", fullgraph=True)
with no_compilation():
    locked_fullgraph = attempt(lambda: fullgraph(torch.ones(2)))
report(locked=locked, fullgraph=locked_fullgraph, after=attempt(lambda: g(torch.ones(2))))
"""
    out = results(run_python(code, env=child_env(tmp_path)))
    assert out["locked"][0] == "refused" and "torch.compile of 'g'" in out["locked"][1]
    assert out["fullgraph"][0] == "refused" and "first compile" in out["fullgraph"][1]
    assert out["after"] == ["allowed", ""]


def test_install_arms_gates_lazily_and_once(tmp_path: Path) -> None:
    code = r"""
import json, sys
import torch_precompile, torch
from torch_precompile import gates
from torch_precompile.gates import patch
torch_precompile.install(); gates.install_all()
lazy = [m for m in ("torch._dynamo", "torch._inductor", "triton", "torch.utils.cpp_extension") if m in sys.modules]
import torch._dynamo.convert_frame as cf, triton.compiler.compiler as tc
gates.install_all()
from torch.fx.experimental.proxy_tensor import _MakefxTracer
print("RESULTS " + json.dumps({
    "lazy": lazy,
    "gated": sorted({f"{getattr(p.owner, '__name__', p.owner)}.{p.name}" for p in patch.applied()}),
    "count": len(patch.applied()),
    "wraps": [hasattr(cf._compile, "__wrapped__"), patch.original(cf._compile) is not cf._compile,
              patch.original(patch.original(cf._compile)) is patch.original(cf._compile)],
    "add_untouched": torch.add is torch._C._VariableFunctions.add,
}))
"""
    out = results(run_python(code, env=child_env(tmp_path)))
    assert out["lazy"] == [], f"install imported {out['lazy']} (eager processes must not pay for them)"
    for name in ("_compile", "ConvertFrame.__call__", "_MakefxTracer.trace", "ASTSource.make_ir",
                 "Autotuner._bench", "Popen._execute_child"):
        assert any(g.endswith(name) for g in out["gated"]), f"{name} is not gated: {out['gated']}"
    assert out["count"] == len(out["gated"]), "a gate was installed twice"
    assert out["wraps"] == [True, True, True]
    assert out["add_untouched"]


@pytest.mark.slow
def test_inductor_function_serves_at_its_shape_and_refuses_recompile_and_lazy_backward(tmp_path: Path) -> None:
    code = PRELUDE + r"""
def h(x):
    return (x * 2).relu()
hc = torch.compile(h, backend="inductor")
x = torch.randn(8, requires_grad=True)
hc(x.detach())                # inference graph
y = hc(x)                     # training graph; its backward compiles lazily
with no_compilation():
    served = attempt(lambda: torch.testing.assert_close(hc(x.detach()), h(x.detach())))
    backward = attempt(lambda: y.sum().backward())
    reshape = attempt(lambda: hc(torch.randn(3, 4)))
report(served=served, backward=backward, reshape=reshape,
       after=attempt(lambda: hc(torch.randn(3, 4))))
"""
    out = results(run_python(code, env=child_env(tmp_path)))
    assert out["served"] == ["allowed", ""]
    verdict, message = out["backward"]
    assert verdict == "refused" and WHY["no_compilation"] in message, message
    assert "Inductor codegen and compile (no FX graph cache entry)" in message and "(backward)" in message
    verdict, message = out["reshape"]
    assert verdict == "refused" and "torch.compile of 'h'" in message and "recompile" in message, message
    assert out["after"] == ["allowed", ""]


def test_inductor_cpp_kernel_loads_from_cache_but_builds_are_refused(tmp_path: Path) -> None:
    build = r"""
from torch._inductor.codecache import CppCodeCache
assert CppCodeCache.load('extern "C" int answer() { return 42; }').answer() == 42
"""
    env = child_env(tmp_path)
    run_python("import torch\n" + build, env=env).check()
    serve = PRELUDE + r"""
from torch._inductor.codecache import CppCodeCache
# Same source, fresh process, startup lockdown: the library is on disk, so it loads.
cached = attempt(lambda: CppCodeCache.load('extern "C" int answer() { return 42; }').answer())
fresh = attempt(lambda: CppCodeCache.load('extern "C" int other() { return 7; }'))
report(cached=cached, fresh=fresh)
"""
    out = results(run_python(serve, env={**env, "TORCH_PRECOMPILE_NO_COMPILATION": "1"}))
    assert out["cached"] == ["allowed", ""], out["cached"]
    assert out["fresh"][0] == "refused" and "Inductor C++ build of" in out["fresh"][1]


# --- compiler subprocesses without the shim -----------------------------------

SUBPROCESS_CASES = PRELUDE + r"""
from torch_precompile import _lockdown
assert not _lockdown.shim_loaded()
src = os.path.join(os.environ["GATES_WORK"], "tiny.c")
open(src, "w").write("int tiny(void) { return 1; }\n")
obj = src + ".o"
hidden = {**os.environ, "CMD": f"cc -c {src} -o {obj}"}
cases = {
    "popen": lambda: subprocess.run(["cc", "-c", src, "-o", obj]),
    "check_output": lambda: subprocess.check_output(["g++", "-c", src, "-o", obj]),
    "shell_line": lambda: subprocess.run(f"cd /tmp && CFLAGS=-O2 gcc -c {src} -o {obj}", shell=True),
    "os_system": lambda: os.system(f"true; cc -c {src} -o {obj}"),
    "posix_spawn": lambda: os.posix_spawn(shutil.which("cc"), ["cc", "-c", src], os.environ),
    "posix_spawnp": lambda: os.posix_spawnp("cc", ["cc", "-c", src], os.environ),
    "execv": lambda: os.execv(shutil.which("cc"), ["cc", "-c", src]),
    "execlp": lambda: os.execlp("cc", "cc", "-c", src),
    "spawnvp": lambda: os.spawnvp(os.P_WAIT, "cc", ["cc", "-c", src]),
    "version_probe": lambda: subprocess.run(["cc", "--version"], capture_output=True, check=True),
    "not_a_compiler": lambda: subprocess.run(["true"], check=True),
}
"""


def test_compiler_subprocesses_refused_without_the_shim(tmp_path: Path, journal: Path) -> None:
    code = SUBPROCESS_CASES + r"""
with no_compilation():
    locked = attempt_all(cases)
    strict_env = subprocess.run(["sh", "-c", "echo $TORCH_PRECOMPILE_NO_COMPILATION"],
                                env={"PATH": os.environ["PATH"]}, capture_output=True, text=True).stdout
unlocked = attempt_all({"popen": cases["popen"]})
report(locked=locked, unlocked=unlocked, scrubbed_child_env=strict_env.strip())
"""
    out = results(run_python(code, env=child_env(tmp_path, PRECOMPILE_JOURNAL=str(journal))))
    locked = out["locked"]
    for label in ("popen", "check_output", "shell_line", "os_system", "posix_spawn", "posix_spawnp",
                  "execv", "execlp", "spawnvp"):
        verdict, message = locked[label]
        assert verdict == "refused", f"{label}: {verdict} {message}"
        assert "running the compile command `" in message and WHY["no_compilation"] in message, message
    assert "`g++ -c " in locked["check_output"][1]
    assert "`gcc -c " in locked["shell_line"][1], "the shell line's compiler is named"
    assert locked["version_probe"] == ["allowed", ""]
    assert locked["not_a_compiler"] == ["allowed", ""]
    assert out["unlocked"] == {"popen": ["allowed", ""]}
    # A child started with a scrubbed environment still inherits the lockdown.
    assert out["scrubbed_child_env"] == "1"

    records = [r for r in read_journal(journal) if r["source"] == "python"]
    refused = [r for r in records if r["verdict"] == "refused"]
    assert len(refused) == 9 and {r["reason"] for r in refused} == {"no-compilation"}
    assert {r["kind"] for r in refused} == {"compile"}
    probes = [r for r in records if r["kind"] == "probe"]
    assert probes and probes[0]["verdict"] == "allowed" and probes[0]["reason"] == "probe-allowed"
    assert any(r["verdict"] == "allowed" and r["reason"] == "unlocked" and r["kind"] == "compile" for r in records)
    assert not any(Path(r["exe"]).name == "true" for r in records), "non-compilers are not journaled"


def test_subprocess_rules_follow_strict_extra_and_allowed_names(tmp_path: Path) -> None:
    code = SUBPROCESS_CASES + r"""
tool = os.path.join(os.environ["GATES_WORK"], "mytool")
with open(tool, "w") as fh:
    fh.write("#!/bin/sh\nexit 0\n")
os.chmod(tool, 0o755)
with serving():
    out = {
        "strict_probe": attempt(cases["version_probe"]),
        "extra_compiler": attempt(lambda: subprocess.run([tool, "build"], check=True)),
    }
    # The rules are read at each execution.
    os.environ["PRECOMPILE_ALLOW"] = "mytool"
    out["allowed_name"] = attempt(lambda: subprocess.run([tool, "build"], check=True))
report(**out)
"""
    env = child_env(tmp_path, PRECOMPILE_STRICT="1", PRECOMPILE_COMPILERS="mytool")
    out = results(run_python(code, env=env))
    assert out["strict_probe"][0] == "refused" and "`cc --version`" in out["strict_probe"][1]
    assert out["extra_compiler"][0] == "refused" and "mytool build`" in out["extra_compiler"][1]
    assert out["allowed_name"] == ["allowed", ""]


# --- children -------------------------------------------------------------------


def test_python_child_inherits_the_lockdown(tmp_path: Path) -> None:
    code = PRELUDE + r"""
child = '''
import torch_precompile, torch
torch_precompile.install()
try:
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    print("compiled")
except torch_precompile.PrecompileError as e:
    print("refused:", e)
'''
with no_compilation():
    locked = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout
    shell = subprocess.run(["sh", "-c", "echo $TORCH_PRECOMPILE_NO_COMPILATION"],
                           capture_output=True, text=True).stdout
unlocked = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True).stdout
report(locked=locked.strip(), shell=shell.strip(), unlocked=unlocked.strip())
"""
    out = results(run_python(code, env=child_env(tmp_path)))
    assert out["locked"].startswith("refused:") and WHY["startup"] in out["locked"], out["locked"]
    assert out["shell"] == "1"
    assert out["unlocked"] == "compiled"


def test_shell_child_compiler_refused_by_the_shim_the_parent_hands_down(tmp_path: Path, journal: Path) -> None:
    lib = shim_path()
    code = SUBPROCESS_CASES + r"""
with no_compilation():
    # $CMD hides the compiler from the Python gate: only the shim in sh sees it.
    p = subprocess.run(["sh", "-c", "$CMD"], env=hidden, capture_output=True, text=True)
report(rc=p.returncode, stderr=p.stderr)
"""
    out = results(run_python(code, env=child_env(tmp_path, PRECOMPILE_LIB=str(lib),
                                                 PRECOMPILE_JOURNAL=str(journal))))
    assert out["rc"] != 0 and "refused" in out["stderr"], out
    shim = [r for r in read_journal(journal) if r["source"] == "shim" and r["verdict"] == "refused"]
    assert shim and Path(shim[0]["argv"][0]).name == "cc"


def test_with_the_shim_loaded_execs_are_gated_natively(tmp_path: Path, journal: Path) -> None:
    shim_path()
    code = SUBPROCESS_CASES.replace("assert not _lockdown.shim_loaded()", "assert _lockdown.shim_loaded()")
    code += r"""
from torch_precompile.gates import patch
python_gated = any(p.name == "_execute_child" for p in patch.applied())
with no_compilation():
    native = attempt(lambda: subprocess.run(["cc", "-c", src, "-o", obj]))
report(python_gated=python_gated, native=native)
"""
    out = results(run_python(code, preload=True, env=child_env(tmp_path, PRECOMPILE_JOURNAL=str(journal))))
    assert out["python_gated"] is False
    assert out["native"][0] == "error" and "PermissionError" in out["native"][1], out["native"]
    assert any(r["source"] == "shim" and r["verdict"] == "refused" for r in read_journal(journal))


def test_triton_ptxas_refused_by_the_shim_behind_the_python_gate(tmp_path: Path, journal: Path) -> None:
    shim_path()
    code = PRELUDE + CASES + r"""
from torch_precompile.gates import patch
python = attempt(REFUSED_CASES["triton_compile"])
for p in patch.applied():
    if p.name == "make_ir":
        p.undo()  # reach what lies behind the Python gate
native = attempt(REFUSED_CASES["triton_compile"])
report(python=python, native=native)
"""
    env = child_env(tmp_path, TORCH_PRECOMPILE_NO_COMPILATION="1", PRECOMPILE_JOURNAL=str(journal))
    out = results(run_python(code, preload=True, env=env))
    assert out["python"][0] == "refused" and "Triton compile of kernel 'add_one'" in out["python"][1]
    assert out["native"][0] == "error" and "Operation not permitted" in out["native"][1], out["native"]
    refused = [r for r in read_journal(journal) if r["verdict"] == "refused"]
    assert refused and Path(refused[0]["exe"]).name.startswith("ptxas"), refused
    assert refused[0]["reason"] == "startup-lockdown" and refused[0]["source"] == "shim"


@pytest.mark.gpu
def test_triton_jit_launch_and_autotuner_on_a_device(tmp_path: Path) -> None:
    if not Path("/dev/nvidiactl").exists():
        pytest.skip("no NVIDIA device on this host")
    code = PRELUDE + CASES + r"""
if not torch.cuda.is_available():
    report(skip=True)
    sys.exit(0)
x = torch.zeros(100, device="cuda")
grid = lambda meta: (triton.cdiv(100, meta["BLOCK"]),)
with no_compilation():
    jit = attempt(lambda: add_one[(2,)](x, 100, BLOCK=64))
    tune = attempt(lambda: tuned[grid](x, 100))
after = attempt_all({"jit": lambda: add_one[(2,)](x, 100, BLOCK=64), "tune": lambda: tuned[grid](x, 100)})
torch.cuda.synchronize()
with no_compilation():  # both are in Triton's in-memory caches now
    served = attempt_all({"jit": lambda: add_one[(2,)](x, 100, BLOCK=64), "tune": lambda: tuned[grid](x, 100)})
torch.cuda.synchronize()
report(jit=jit, tune=tune, after=after, served=served, x=x.sum().item())
"""
    out = results(run_python(code, env=child_env(tmp_path)))
    if out.get("skip"):
        pytest.skip("no CUDA device")
    assert out["jit"][0] == "refused" and "Triton compile of kernel 'add_one'" in out["jit"][1]
    assert out["tune"][0] == "refused" and "Triton autotuning of kernel 'add_one'" in out["tune"][1]
    assert_allowed(out["after"], "after the lockdown")
    assert_allowed(out["served"], "from Triton's caches under lockdown")
    assert out["x"] > 0
