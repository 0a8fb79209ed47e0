"""A graph that needs autograd at run time (captured with grad mode on and inputs
requiring grad) as one source program: Inductor's forward and backward modules,
run by a ``torch.autograd.Function`` that does what AOTAutograd's runtime does for
such a graph, so serving it imports neither AOTAutograd nor Dynamo.

The lowering is torch.compile's own (``compile_fx`` partitions the joint graph and
Inductor compiles both halves); only the two modules' sources are kept. The
wrapper covers the plain case: no input mutations, no outputs aliasing inputs or
intermediates, no tensor subclasses, effect tokens or RNG state threaded
through. Anything else raises ``NotDynamoFree`` naming it, and the graph keeps
AOTAutograd's runtime.

Which backward input is which is read off the graphs themselves: the partitioner
names each backward placeholder after the forward output it receives, and the
incoming gradients ``tangents_<n>``.
"""

from __future__ import annotations

import copy
from typing import Any

from .dynamo_free_guards import NotDynamoFree


class NoCompute(NotDynamoFree):
    """The graph has nothing for Inductor to lower (it only returns views of its
    inputs); its fx program serves it."""


def refusal(e: BaseException, backend_id: str, lowered_to: str) -> NotDynamoFree:
    """What a failed standalone lowering means for the graph: NoCompute when
    Inductor had nothing to lower, else a NotDynamoFree naming the error."""
    if type(e).__name__ == "NoRunnableInductorModuleError":
        return NoCompute(backend_id)
    first = str(e).splitlines()[0] if str(e) else ""
    return NotDynamoFree(f"graph {backend_id} cannot be lowered to {lowered_to} ({type(e).__name__}: {first})")


def _lower(gm: Any, example_inputs: list[Any], backend_id: str) -> dict[str, Any]:
    """(forward graph, its source), (backward graph, its source) and the forward's
    metadata, from one compile_fx of the graph with grad on."""
    import torch
    import torch._functorch.config as functorch_config

    from torch._guards import TracingContext
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    from ..._compat.lowering import graph_has_dynamic_shapes, standalone_inductor

    standalone = standalone_inductor()
    if standalone is None:
        raise NotDynamoFree(f"torch {torch.__version__} has no standalone Inductor lowering "
                      "(torch._inductor.standalone_compile)")

    seen: dict[str, Any] = {}

    def inner_compile(graph: Any, inputs: Any, **kwargs: Any) -> Any:
        compiled = compile_fx_inner(graph, inputs, **kwargs)
        half = "backward" if kwargs.get("is_backward") else "forward"
        if half in seen:
            raise NotDynamoFree(f"graph {backend_id} lowers to more than one {half} graph")
        seen[half] = (graph, standalone.runnable_source(compiled))
        if half == "forward":
            seen["meta"] = TracingContext.try_get().fw_metadata
        return compiled

    shapes = "from_graph" if graph_has_dynamic_shapes(gm) else "from_example_inputs"
    try:
        with (
            torch.enable_grad(),
            standalone.standalone_context(gm, shapes, aot=False),
            # a cached AOTAutograd entry would skip the inner compiles this reads
            functorch_config.patch(enable_autograd_cache=False, force_non_lazy_backward_lowering=True),
            torch._inductor.config.patch(benchmark_harness=False, cpp_wrapper=False, size_asserts=True),
        ):
            compile_fx(copy.deepcopy(gm), example_inputs, inner_compile=inner_compile,
                       ignore_shape_env=standalone.resolve_ignore_shape_env(shapes))
    except NotDynamoFree:
        raise
    except Exception as e:  # noqa: BLE001 - any refusal keeps the graph on AOTAutograd's runtime
        raise refusal(e, backend_id, "standalone forward and backward programs") from None
    if "forward" not in seen or "backward" not in seen:
        raise NotDynamoFree(f"graph {backend_id}: the lowering produced no {'forward' if 'forward' not in seen else 'backward'}")
    return seen


def _plain(meta: Any, backend_id: str) -> None:
    """NotDynamoFree unless the metadata is the case the wrapper reproduces."""
    from torch._functorch._aot_autograd.schemas import OutputType

    why = None
    if any(i.mutates_data or i.mutates_metadata for i in meta.input_info):
        why = "mutates its inputs"
    elif any(o.output_type != OutputType.non_alias for o in meta.output_info) or meta.num_intermediate_bases:
        why = "returns views of its inputs or of its intermediates"
    elif meta.subclass_inp_meta and any(not isinstance(m, int) and type(m).__name__ != "PlainTensorMeta"
                                        for m in meta.subclass_inp_meta):
        why = "takes tensor subclasses"
    elif meta.tokens or meta.num_backward_tokens:
        why = "threads effect tokens"
    elif meta.is_rng_op_functionalized or meta.num_graphsafe_rng_states:
        why = "threads RNG state"
    elif meta.num_opaque_objects_saved_for_bw:
        why = "saves opaque objects for the backward"
    if why:
        raise NotDynamoFree(f"graph {backend_id} needs autograd and {why}, which only AOTAutograd's runtime serves")


def _memory_format(val: Any) -> str | None:
    import torch

    if val.is_contiguous():
        return "contiguous"
    if val.dim() == 4 and val.is_contiguous(memory_format=torch.channels_last):
        return "channels_last"
    return None


def _layout(fw: Any, bw: Any, meta: Any, n_args: int, backend_id: str) -> dict[str, Any]:
    """What the wrapper needs to know: which forward outputs are the user's, which
    are saved (tensors, sizes), what each backward input is, which gradient each
    tangent is and the layout the backward expects it in."""
    import torch

    n_inputs = len(fw.graph.find_nodes(op="placeholder"))
    if n_inputs != n_args:
        # AOTAutograd deduplicated aliased arguments or added synthetic bases: the
        # forward does not take the graph's arguments as they come
        raise NotDynamoFree(f"graph {backend_id}: its forward takes {n_inputs} inputs for {n_args} arguments")
    fw_outs = list(fw.graph.output_node().args[0])
    n_out = len(meta.output_info)
    where = {}
    for i, node in enumerate(fw_outs[n_out:], n_out):
        if isinstance(node, torch.fx.Node):
            where.setdefault(node.name, i)
    differentiable = [i for i, o in enumerate(meta.output_info) if o.requires_grad]
    saved_tensors: list[int] = []
    saved_sizes: list[int] = []
    backward_args: list[tuple[str, int]] = []
    tangent_formats: list[str] = []
    for node in bw.graph.find_nodes(op="placeholder"):
        if node.name.startswith("tangents_"):
            fmt = _memory_format(node.meta["val"])
            if fmt is None:
                raise NotDynamoFree(f"graph {backend_id}: its backward expects a gradient in a layout "
                              "that is neither contiguous nor channels-last")
            backward_args.append(("tangent", len(tangent_formats)))
            tangent_formats.append(fmt)
        elif node.name in where:
            i = where[node.name]
            if isinstance(fw_outs[i].meta.get("val"), torch.Tensor):
                backward_args.append(("tensor", len(saved_tensors)))
                saved_tensors.append(i)
            else:
                backward_args.append(("size", len(saved_sizes)))
                saved_sizes.append(i)
        else:
            raise NotDynamoFree(f"graph {backend_id}: its backward takes {node.name!r}, which the forward does not save")
    if len(tangent_formats) != len(differentiable):
        raise NotDynamoFree(f"graph {backend_id}: {len(tangent_formats)} gradients in, for "
                      f"{len(differentiable)} differentiable outputs")
    if len(bw.graph.output_node().args[0]) != n_inputs:
        raise NotDynamoFree(f"graph {backend_id}: its backward does not return one gradient per input")
    return {
        "n_outputs": n_out,
        "non_differentiable": [i for i in range(n_out) if i not in differentiable],
        "tangent_outputs": differentiable,
        "tangent_formats": tangent_formats,
        "saved_tensors": saved_tensors,
        "saved_sizes": saved_sizes,
        "backward_args": backward_args,
        "donates": bool(meta.bw_donated_idxs),
    }


_RUNTIME = '''
import threading as _threading

import torch as _torch


def _module(text, name):
    ns = {"__name__": name}
    exec(compile(text, f"<{name}>", "exec"), ns)
    return ns["call"]


_forward = _module(FORWARD, __name__ + ".forward")
_backward = []  # Inductor's backward module, exec'd by the first backward
_backward_lock = _threading.Lock()


def _backward_call():
    if not _backward:
        with _backward_lock:
            if not _backward:
                _backward.append(_module(BACKWARD, __name__ + ".backward"))
    return _backward[0]


_FORMATS = {"contiguous": _torch.contiguous_format, "channels_last": _torch.channels_last}
_TANGENTS = tuple(zip(LAYOUT["tangent_outputs"], (_FORMATS[f] for f in LAYOUT["tangent_formats"])))
_SAVED = LAYOUT["saved_tensors"]
_SIZES = LAYOUT["saved_sizes"]
_N_OUT = LAYOUT["n_outputs"]
_NON_DIFF = LAYOUT["non_differentiable"]
_BACKWARD_ARGS = tuple(LAYOUT["backward_args"])


class PrecompiledGraph(_torch.autograd.Function):
    """Forward: Inductor's forward module (outputs, then what the backward needs).
    Backward: Inductor's backward module on the saved values and the gradients."""

    @staticmethod
    def forward(ctx, *args):
        if _torch._C._is_any_autocast_enabled():
            with _torch._C._DisableAutocast():
                outs = _forward(list(args))
        else:
            outs = _forward(list(args))
        ctx.save_for_backward(*[outs[i] for i in _SAVED])
        ctx.pc_sizes = [outs[i] for i in _SIZES]
        user = outs[:_N_OUT]
        non_diff = [user[i] for i in _NON_DIFF if isinstance(user[i], _torch.Tensor)]
        if non_diff:
            ctx.mark_non_differentiable(*non_diff)
        return tuple(user)

    @staticmethod
    @_torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        if LAYOUT["donates"] and _torch._C._autograd._get_current_graph_task_keep_graph():
            raise RuntimeError(
                "this precompiled graph's backward reuses the buffers it saved, so it runs once "
                "per forward: call backward() with create_graph=False and retain_graph=False, as "
                "torch.compile requires of the same graph")
        tangents = [grads[i].contiguous(memory_format=f) for i, f in _TANGENTS]
        parts = {"tensor": ctx.saved_tensors, "size": ctx.pc_sizes, "tangent": tangents}
        args = [parts[kind][i] for kind, i in _BACKWARD_ARGS]
        with _torch._C._DisableAutocast():
            return tuple(_backward_call()(args))


def call(flat_inputs):
    return list(PrecompiledGraph.apply(*flat_inputs))
'''


def program(gm: Any, example_inputs: list[Any], backend_id: str) -> tuple[str, str]:
    """The graph's program, ``call(flat_inputs)`` like every other graph program:
    (as Inductor wrote its modules, with their imports pointed at the stand-ins)."""
    from ..._kernels import serve_imports
    from ..._artifact import text_literal

    seen = _lower(gm, example_inputs, backend_id)
    (fw, fw_source), (bw, bw_source), meta = seen["forward"], seen["backward"], seen["meta"]
    _plain(meta, backend_id)
    layout = _layout(fw, bw, meta, len(example_inputs), backend_id)

    def text(imports: Any) -> str:
        return (
            '"""A graph that needs autograd: Inductor\'s forward and backward modules\n'
            "(FORWARD, BACKWARD), run by an autograd.Function (PrecompiledGraph, below) the way\n"
            'AOTAutograd runs them for a graph without input mutations or aliased outputs."""\n\n'
            f"FORWARD = {text_literal(imports(fw_source))}\n\n"
            f"BACKWARD = {text_literal(imports(bw_source))}\n\n"
            f"LAYOUT = {layout!r}\n"
            + _RUNTIME
        )
    return text(lambda source: source), text(serve_imports.rewrite)
