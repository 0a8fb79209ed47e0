"""A standalone DynamoTracer artifact serves without Dynamo or Inductor: on a cold
host, locked down under the strict shim, the served process never imports
``torch._dynamo`` or ``torch._inductor``, runs no compiler (journal), returns
eager's outputs, and still refuses a call its guards do not cover with a
PrecompileError naming the failed guard. So does an installed one (a break
inside a child module's forward), served by the frame evaluator that
``import torch`` already loads. A graph captured with grad on serves its
Inductor forward and backward, gradients equal to eager's; one that mutates its
inputs under autograd keeps Dynamo's runtime and says why in the artifact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cold_host, has_standalone_lowering, read_journal, run_python

TESTS = Path(__file__).resolve().parent

# (name, captured fn, model, backend, grad at capture)
CASES = [
    ("mlp_eager", "step", "MLP", "eager", False),
    ("mlp_inductor", "step", "MLP", "inductor", False),
    ("break_eager", "print_break", "MLP", "eager", False),
    ("break_inductor", "print_break", "MLP", "inductor", False),
    ("train_inductor", "step", "MLP", "inductor", True),
    ("train_break_inductor", "print_break", "MLP", "inductor", True),
    # batch norm in train mode updates its running statistics: an input mutation
    ("bn_train_inductor", "step", "DropMLP", "inductor", True),
    # a break inside a child's forward: installed, served by the frame evaluator in torch._C
    ("installed_eager", "step", "PrintParent", "eager", False),
    ("installed_inductor", "step", "PrintParent", "inductor", False),
    ("installed_train_inductor", "step", "PrintParent", "inductor", True),
    ("stack_inductor", "step", "Stack", "inductor", False),
    # DynamoTracer(dynamic=True): the transformed bytecode reads the batch size
    # through Dynamo's helpers, which serving stands in for
    ("dynamic_inductor", "step", "MLP", "inductor", False),
]
NOT_FREE = {"bn_train_inductor": "mutates its inputs"}
if not has_standalone_lowering():  # torch 2.11: inductor graphs keep AOTAutograd's runtime
    NOT_FREE = {c[0]: "has no standalone" for c in CASES if c[3] == "inductor"}

CAPTURE = r"""
import json, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, dyn_models as m
from torch_precompile._artifact import read_metadata
from torch._inductor.graph import GraphLowering
lowerings = []  # one per Inductor lowering of a graph (a forward, a backward)
init = GraphLowering.__init__
def counted(self, *args, **kwargs):
    lowerings.append(1)
    init(self, *args, **kwargs)
GraphLowering.__init__ = counted
for name, fn, model, backend, grad in {cases!r}:
    torch.manual_seed(0)
    model = getattr(m, model)().train()
    lowerings.clear()
    with torch.set_grad_enabled(grad):
        with tp.capture(getattr(m, fn), artifact_path=f"{{name}}.py", cache_path=f"{{name}}.cache",
                        tracer=tp.DynamoTracer(**({{"dynamic": True}} if "dynamic" in name else {{}})),
                        backend=backend) as cap:
            cap(model, torch.randn(4, 8))
    text = open(f"{{name}}.py").read()
    meta = read_metadata(text)
    # the modules the programs hold: one per inference graph, two per graph served with autograd
    modules = text.count("\n_GRAPHS[") + text.count("class PrecompiledGraph(")
    print(json.dumps([name, meta["DYNAMO_FREE"], meta.get("DYNAMO_FREE_REFUSED"), len(lowerings), modules]))
"""

SERVE = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, dyn_models as m
torch.manual_seed(0)
model, twin = getattr(m, {model!r})().train(), getattr(m, {model!r})().train()
twin.load_state_dict(model.state_dict())
x = torch.randn(4, 8)
f = tp.load({code!r}, {cache!r})
assert f.installed is {name!r}.startswith("installed"), f
dynamic = "dynamic" in {name!r}
with torch.set_grad_enabled({grad!r}):
    with tp.no_compilation():
        y = f(model, x)
        ref = getattr(m, {fn!r})(twin, x)
        assert torch.allclose(y, ref, atol=1e-5), (y, ref)
        if dynamic:  # another batch size serves from the same graph
            x7 = torch.randn(7, 8)
            assert torch.allclose(f(model, x7), getattr(m, {fn!r})(twin, x7), atol=1e-5)
            print("OTHER BATCH")
        if {grad!r}:
            w = torch.linspace(-1, 1, y.numel()).view_as(y)  # a gradient that is not all ones
            (y * w).sum().backward()
            (ref * w).sum().backward()
            for (n, p), q in zip(model.named_parameters(), twin.parameters()):
                assert torch.allclose(p.grad, q.grad, atol=1e-5), (n, p.grad, q.grad)
            print("GRADS", len(list(model.parameters())))
    print("HEAVY", sorted(n for n in ("torch._dynamo", "torch._inductor") if n in sys.modules))
    bad_inputs = [(torch.randn(4, 8, dtype=torch.float64), "dtype")]
    if not dynamic:
        bad_inputs.append((torch.randn(5, 8), "size"))
    for bad, what in bad_inputs:
        try:
            f(model, bad)
        except tp.PrecompileError as e:
            assert "failed guards" in str(e) and what in str(e), str(e)
            print("REFUSED", what)
        else:
            raise SystemExit(f"a {{what}} its guards do not cover was served")
print("SERVED")
"""


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> tuple[Path, dict[str, tuple[bool, str | None]]]:
    d = tmp_path_factory.mktemp("lean")
    r = run_python(CAPTURE.format(tests=str(TESTS), cases=CASES), cwd=d).check()
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("[")]
    return d, {row[0]: tuple(row[1:]) for row in rows}


@pytest.mark.slow
@pytest.mark.parametrize("name,fn,model,backend,grad", CASES, ids=[c[0] for c in CASES])
def test_cold_serve_imports_neither_dynamo_nor_inductor(pairs, tmp_path: Path, name: str, fn: str, model: str,
                                                        backend: str, grad: bool) -> None:
    d, metas = pairs
    free, why, _lowerings, _modules = metas[name]
    if name in NOT_FREE:
        # AOTAutograd's runtime serves it: not Dynamo-free, and the artifact says why
        assert free is False and NOT_FREE[name] in why, metas[name]
    else:
        assert free is True, metas[name]
    env, journal = cold_host(tmp_path)
    code = SERVE.format(tests=str(TESTS), code=str(d / f"{name}.py"), cache=str(d / f"{name}.cache"),
                        fn=fn, model=model, grad=grad, name=name)
    r = run_python(code, preload=True, env=env, cwd=tmp_path / "cwd").check()
    dynamic = "dynamic" in name
    assert "SERVED" in r.stdout and r.stdout.count("REFUSED") == (1 if dynamic else 2), r.stdout
    assert ("OTHER BATCH" in r.stdout) == dynamic, r.stdout
    assert read_journal(journal) == [], "the cold serve ran (or tried to run) a compiler"
    assert ("GRADS" in r.stdout) == grad, r.stdout
    if free:
        assert "HEAVY []" in r.stdout, "a Dynamo-free artifact imported Dynamo or Inductor: " + r.stdout


STACK = r"""
import sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp, dyn_models as m
torch.manual_seed(1)
model = m.Stack()
with torch.no_grad():
    for p in model.parameters():  # other weights than the capture's
        p.add_(0.1 * torch.randn_like(p))
x = torch.randn(4, 8)
f = tp.load({code!r}, {cache!r})

def served_or_refused(what):
    ref = m.step(model, x)
    try:
        y = f(model, x)
    except tp.PrecompileError as e:
        assert "failed guards" in str(e), str(e)
        print(what, e, file=sys.stderr)
        print(what, "REFUSED")
    else:
        assert torch.allclose(y, ref, atol=1e-5), (what, y, ref)
        print(what, "EQUAL")

with tp.no_compilation(), torch.no_grad():  # captured with grad off
    served_or_refused("captured")
    model.layers[1] = torch.nn.Linear(8, 8)  # another layer of the same type, in place
    served_or_refused("replaced")
    mods = model.layers._modules
    items = list(mods.items())
    mods.clear()
    mods.update(reversed(items))  # the same keys in another order: run in that order
    served_or_refused("reordered")
    mods.clear()
    mods.update(items)
    served_or_refused("restored")
    model.layers.append(torch.nn.Linear(8, 8))
    served_or_refused("appended")
"""


@pytest.mark.slow
def test_module_list_order_is_guarded(pairs, tmp_path: Path) -> None:
    """A ModuleList runs in its keys' order and the graph reads its layers by key,
    so the guards check each key at its position (read in one pass over the dict):
    the same keys reordered, or a layer more, is refused; a layer replaced by one of
    the same type serves with its weights; each served call equals eager."""
    d, _ = pairs
    code = STACK.format(tests=str(TESTS), code=str(d / "stack_inductor.py"), cache=str(d / "stack_inductor.cache"))
    r = run_python(code, cwd=tmp_path).check()
    assert r.stdout.split() == ["captured", "EQUAL", "replaced", "EQUAL", "reordered", "REFUSED",
                                "restored", "EQUAL", "appended", "REFUSED"], r.stdout


@pytest.mark.slow
@pytest.mark.skipif(not has_standalone_lowering(), reason="inductor graphs as programs need torch 2.14+")
def test_guards_and_graphs_are_source(pairs) -> None:
    """The artifact a reader opens: every variant's guards as checks and every graph
    as a program, with only code objects left opaque."""
    d, _ = pairs
    text = (d / "break_inductor.py").read_text()
    assert "def _pc_guards_0_0(K, GS, TG):" in text
    assert "type(n" in text and "TG.check(" in text
    assert text.count("_GRAPHS[") == 2 and "def call(" in text
    assert "_BACKENDS = " not in text


@pytest.mark.slow
@pytest.mark.skipif(not has_standalone_lowering(), reason="inductor graphs as programs need torch 2.14+")
def test_each_graph_is_lowered_once_at_capture(pairs) -> None:
    """The capture's backend lowers each graph to its program and runs it: Inductor
    lowers every module a Dynamo-free artifact's programs hold once (torch.compile's
    own compile is not run beside it, nor the lowering repeated when the pair is
    written). Counted from Inductor's GraphLowering in the capturing process."""
    _, metas = pairs
    for name, (free, why, lowerings, modules) in metas.items():
        if name.endswith("_inductor") and free:
            assert 1 <= lowerings <= modules, (name, lowerings, modules)


def test_a_program_that_does_not_run_is_refused_and_named_when_filed() -> None:
    """The capture's backend runs each graph's program; one that fails to load is
    refused (its graph falls back to torch.compile's Inductor), named by its
    backend id once Dynamo files it."""
    from torch_precompile._dynamo.rendering import dynamo_free_graphs as graphs

    with pytest.raises(graphs.NotDynamoFree) as refused:
        graphs.runnable("raise ValueError('no kernel')\n", "m.<graph>")
    assert graphs.UNFILED in str(refused.value)
    named = graphs.filed(refused.value, "__compiled_fn_1")
    assert str(named) == "graph __compiled_fn_1: its program does not run (ValueError: no kernel)"
    run = graphs.runnable("def call(flat_inputs):\n    return [sum(flat_inputs)]\n", "m.<graph>")
    assert run(1, 2, 3) == [6]
