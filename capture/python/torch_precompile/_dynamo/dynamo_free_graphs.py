"""The compiled graphs of a capture as source programs, each exposing
``call(flat_inputs)`` like a MakeFx program, so serving runs them without Dynamo,
AOTAutograd or Inductor imported.

eager: the graph Dynamo handed its backend, as fx source. inductor: the same
graph lowered by AOTAutograd + Inductor into one standalone module
(``compile_to_python``), its Inductor imports pointed at the frozen-kernel
stand-ins. A graph that needs autograd at run time (grad mode on with inputs
requiring grad) is its forward and backward modules run by an autograd.Function
(``dynamo_free_autograd``).
"""

from __future__ import annotations

from typing import Any

from .._progress import step
from . import dynamo_free_autograd
from .dynamo_free_guards import NotDynamoFree


def _fx_program(gm: Any, backend_id: str) -> str:
    from .._fxsource import graph_source

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


def _inductor_program(gm: Any, example_inputs: list[Any], backend_id: str) -> str:
    import torch

    from .._compat.lowering import compile_to_python, dynamic_shapes_seen
    from .._kernels import serve_imports

    lower = compile_to_python()
    if lower is None:
        raise NotDynamoFree(f"torch {torch.__version__} has no standalone AOTAutograd + Inductor "
                      "lowering (torch._functorch._aot_autograd.to_standalone_python)")

    try:
        with dynamic_shapes_seen(gm):
            program, _bundle = lower(gm, example_inputs, options={"size_asserts": True})
    except Exception as e:  # noqa: BLE001 - any refusal keeps the graph on AOTAutograd's runtime
        raise dynamo_free_autograd.refusal(e, backend_id, "a standalone program") from None
    return serve_imports.rewrite(program)


def programs(session: Any, payloads: dict[str, Any]) -> dict[str, str]:
    """backend id -> program source, for every captured graph; NotDynamoFree names the
    first that has none."""
    import torch

    out = {}
    for backend_id, (kind, payload) in sorted(payloads.items()):
        if kind == "fx":
            out[backend_id] = _fx_program(payload, backend_id)
            continue
        if kind != "aot":
            raise NotDynamoFree(f"graph {backend_id} is served by {getattr(payload, '__qualname__', kind)}")
        graph = session.graphs.get(backend_id)
        if graph is None:
            raise NotDynamoFree(f"graph {backend_id} was not seen by the capture's backend")
        gm, example_inputs, grad = graph
        try:
            if grad and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs):
                with step("capture: lowered graph %s to standalone forward and backward programs", backend_id):
                    out[backend_id] = dynamo_free_autograd.program(gm, example_inputs, backend_id)
            else:
                with step("capture: lowered graph %s to a standalone program", backend_id):
                    out[backend_id] = _inductor_program(gm, example_inputs, backend_id)
        except dynamo_free_autograd.NoCompute:
            # nothing for Inductor to lower (views, detach, getitem): the graph itself
            # runs as eagerly as Inductor would have run it
            out[backend_id] = _fx_program(gm, backend_id)
    return out
