"""The compiled graphs of a capture as source programs, each exposing
``call(flat_inputs)`` like a MakeFx program, so serving runs them without Dynamo,
AOTAutograd or Inductor imported.

eager: the graph Dynamo handed its backend, as fx source. inductor: the same
graph lowered by AOTAutograd + Inductor into one standalone module
(``compile_to_python``), its Inductor imports pointed at the frozen-kernel
stand-ins. A graph that needs autograd at run time (grad mode on with inputs
requiring grad) is its forward and backward modules run by an autograd.Function
(``dynamo_free_autograd``).

With Inductor's C++ wrapper on at capture (``torch._inductor.config.cpp_wrapper``,
TORCHINDUCTOR_CPP_WRAPPER=1), a CPU inference graph lowered by the capture's
backend gets it too (the wrapper and all its kernels one frozen library, served
through the ``CppWrapperCodeCache`` stand-in), which runs a call without a
Python statement per kernel and buffer; where that lowering or its build fails,
and for a graph lowered only when the artifact is written (its C++ wrapper was
never built, so nothing froze it), the program keeps Inductor's Python wrapper.
It is not the default: building the wrapper costs capture time (scripts/bench
depth, docs/benchmarks.md).

An Inductor graph is lowered once: the capture's backend lowers it (``lower``)
and runs the program it got for the capture's own calls (``runnable``), so the
program is what the capture's outputs came from. Only a graph that lowering
refused is compiled by torch.compile's own Inductor backend, for the artifacts
served through Dynamo's state.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ..._progress import log, step
from . import dynamo_free_autograd
from .dynamo_free_guards import NotDynamoFree

# What a graph is called before Dynamo files it under its backend id: a refusal
# raised while the backend lowers it names it so, and is renamed when filed.
UNFILED = "<unfiled>"


class Program(NamedTuple):
    """One graph's program, as Inductor wrote it and as the artifact serves it."""

    raw: str     # Inductor's own imports: what the capturing process runs
    served: str  # its Inductor imports pointed at the frozen-kernel stand-ins


def _fx_program(gm: Any, backend_id: str) -> str:
    from ..._fxsource import graph_source

    for node in gm.graph.nodes:
        if node.op in ("get_attr", "call_module"):
            raise NotDynamoFree(f"graph {backend_id} holds {node.op} {node.target!r}, which has no source form")
    imports, body, unknown = graph_source(gm)
    if unknown:
        raise NotDynamoFree(f"graph {backend_id} refers to {unknown}, which have no source form")
    return (
        f"{imports}\n{body}\n\n"
        "def call(flat_inputs):\n"
        "    return _graph(None, *flat_inputs)\n"
        "\n\n"
        "CALL_POSITIONAL = _graph  # the driver binds _graph(None, *args) directly: one frame, not three\n"
    )


def _inductor_program(gm: Any, example_inputs: list[Any], backend_id: str, cpp_wrapper: bool = False) -> str:
    import contextlib

    import torch

    from ..._compat.lowering import compile_to_python, cpp_wrapper_lowering, dynamic_shapes_seen

    lower = compile_to_python()
    if lower is None:
        raise NotDynamoFree(f"torch {torch.__version__} has no standalone AOTAutograd + Inductor "
                      "lowering (torch._functorch._aot_autograd.to_standalone_python)")

    try:
        with dynamic_shapes_seen(gm), cpp_wrapper_lowering() if cpp_wrapper else contextlib.nullcontext():
            program, _bundle = lower(gm, example_inputs, options={"size_asserts": True})
    except Exception as e:  # noqa: BLE001 - any refusal keeps the graph on AOTAutograd's runtime
        raise dynamo_free_autograd.refusal(e, backend_id, "a standalone program") from None
    return program


def lower(gm: Any, example_inputs: list[Any], grad: bool, backend_id: str = UNFILED,
          cpp_wrapper: bool = False) -> Program:
    """The graph's standalone program; NotDynamoFree names why it has none
    (NoCompute: nothing for Inductor to lower). ``cpp_wrapper``: with Inductor's C++
    wrapper if the graph is a CPU inference graph and the lowering succeeds that
    way; Inductor builds the wrapper while it lowers (inside the capture's kernel
    block, which freezes it), so a wrapper that does not build falls back here."""
    import torch

    from ..._kernels import serve_imports

    if grad and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs):
        with step("capture: lowered graph %s (%d nodes) to standalone forward and backward programs",
                  backend_id, len(gm.graph.nodes)):
            return Program(*dynamo_free_autograd.program(gm, example_inputs, backend_id))
    if cpp_wrapper and _on_cpu_only(gm, example_inputs):
        try:
            with step("capture: lowered graph %s (%d nodes) to a standalone program with a C++ wrapper",
                      backend_id, len(gm.graph.nodes)):
                raw = _inductor_program(gm, example_inputs, backend_id, cpp_wrapper=True)
        except dynamo_free_autograd.NoCompute:
            raise
        except NotDynamoFree as e:
            log.info("capture: graph %s keeps Python's wrapper (%s)", backend_id, e)
        else:
            return Program(raw, serve_imports.rewrite(raw))
    with step("capture: lowered graph %s (%d nodes) to a standalone program", backend_id, len(gm.graph.nodes)):
        raw = _inductor_program(gm, example_inputs, backend_id, cpp_wrapper=False)
    return Program(raw, serve_imports.rewrite(raw))


def _on_cpu_only(gm: Any, example_inputs: list[Any]) -> bool:
    """Whether every tensor the graph takes or makes is on the CPU (the C++ wrapper
    of a GPU graph would launch its Triton kernels from C++: not served here)."""
    import torch

    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type != "cpu":
            return False
    for node in gm.graph.nodes:
        val = node.meta.get("val", node.meta.get("example_value"))
        for v in val if isinstance(val, (list, tuple)) else (val,):
            if isinstance(v, torch.Tensor) and v.device.type != "cpu":
                return False
    return True


def runs_as_called(gm: Any) -> bool:
    """Whether the graph's program runs on the arguments Dynamo calls the graph
    with. Not when the graph holds parameters or buffers as attributes (Dynamo's
    static addresses, an optimizer's step in a frame the package bypasses):
    AOTAutograd's runtime passes those from its closure, the program would take
    them as inputs. Such a graph is compiled by Inductor as torch.compile does
    and lowered when the artifact is written, as before."""
    return next(gm.parameters(), None) is None and next(gm.buffers(), None) is None


def filed(refused: NotDynamoFree, backend_id: str) -> NotDynamoFree:
    """A refusal raised before the graph had its backend id, naming it by that id."""
    if isinstance(refused, dynamo_free_autograd.NoCompute):
        return dynamo_free_autograd.NoCompute(backend_id)
    return NotDynamoFree(str(refused).replace(UNFILED, backend_id))


def runnable(program: str, name: str) -> Callable[..., Any]:
    """The program as Dynamo calls a compiled graph in the capturing process:
    positionally."""
    import torch

    ns: dict[str, Any] = {"__name__": name}
    try:
        exec(compile(program, f"<precompile graph {name}>", "exec"), ns)
    except Exception as e:  # noqa: BLE001 - served, it would fail the same way: refused
        first = str(e).splitlines()[0] if str(e) else ""
        raise NotDynamoFree(f"graph {UNFILED}: its program does not run ({type(e).__name__}: {first})") from None
    graph = ns.get("PrecompiledGraph")
    if graph is not None:
        # Autograd's engine runs its backward outside the compiled graph, where the
        # capture's Dynamo would trace it as a user frame (AOTAutograd's own
        # backward is torch's code, which Dynamo skips).
        graph.backward = staticmethod(torch._dynamo.disable(graph.backward))
    call = ns["call"]

    def compiled(*args: Any) -> Any:
        return call(list(args))
    return compiled


def programs(session: Any, payloads: dict[str, Any]) -> dict[str, str]:
    """backend id -> program source, for every captured graph; NotDynamoFree names the
    first that has none."""
    out = {}
    for backend_id, (kind, payload) in sorted(payloads.items()):
        if kind == "fx":
            out[backend_id] = _fx_program(payload, backend_id)
            continue
        if kind == "program":  # lowered by the capture's backend
            out[backend_id] = payload
            continue
        if kind != "aot":
            raise NotDynamoFree(f"graph {backend_id} is served by {getattr(payload, '__qualname__', kind)}")
        graph = session.graphs.get(backend_id)
        if graph is None:
            raise NotDynamoFree(f"graph {backend_id} was not seen by the capture's backend")
        gm, example_inputs, grad = graph
        try:
            refused = session.refused_lowerings.get(backend_id)
            if refused is not None:  # the backend tried: not lowered a second time
                raise refused
            # Python's wrapper: a C++ one lowered now was never built, so nothing froze it
            out[backend_id] = lower(gm, example_inputs, grad, backend_id).served
        except dynamo_free_autograd.NoCompute:
            # nothing for Inductor to lower (views, detach, getitem): the graph itself
            # runs as eagerly as Inductor would have run it
            out[backend_id] = _fx_program(gm, backend_id)
    return out
