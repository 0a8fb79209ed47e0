"""One non-strict make_fx trace of ``fn(*args)``, which is also the call's real run.

A static capture traces in make_fx's "real" mode: every op runs on the real tensors
while it is recorded, so the call's side effects (buffer updates, gradient
accumulation) happen exactly once and its result is what the caller gets back. A
capture with ``mark_unbacked`` dims traces on fake tensors with unbacked sizes
instead, and then runs ``fn`` once more, for real, to produce the result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.utils import stateless

from .._compat.makefx import refuses_unbacked_inputs
from .._errors import PrecompileError
from . import lifting, state as _state
from .unbacked import fakeify, read_marks, refuse_unsupported_marks


@dataclasses.dataclass
class Traced:
    gm: torch.fx.GraphModule
    example_inputs: list[Any]       # graph inputs in order: lifted state, then user leaves
    lifted: lifting.Lifted
    module_positions: list[int]
    num_args: int
    in_spec: pytree.TreeSpec        # of the tuple of non-module arguments
    out_spec: pytree.TreeSpec
    grad_param_indices: list[int]   # unique-param index of each trailing grad output
    user_leaves: list[dict[str, Any]]
    result: Any
    dynamic: bool
    # position -> the module tree as the driver's fast check walks it (module_tree)
    module_trees: dict[int, list[tuple[Any, ...]]] = dataclasses.field(default_factory=dict)
    # what the trace ran that the graph cannot show (state.py): the hooks in force,
    # and the methods it found through its modules' classes
    hooks: dict[int, dict[str, dict[str, list[str]]]] = dataclasses.field(default_factory=dict)
    global_hooks: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    class_paths: list[Any] = dataclasses.field(default_factory=list)


def _leaf_paths(user_args: tuple[Any, ...], positions: list[int], count: int) -> list[str]:
    """Where each flattened user leaf sits among fn's arguments (``argument 2['kv']``);
    a pytree node registered without flatten_with_keys_fn has no key paths."""
    try:
        return [f"argument {positions[p[0].idx]}{pytree.keystr(p[1:])}"
                for p, _ in pytree.tree_flatten_with_path(user_args)[0]]
    except ValueError:
        return [f"input leaf {i}" for i in range(count)]


def _leaf_record(leaf: Any, marks: dict[int, tuple[Any, Any, Any]], where: str) -> dict[str, Any]:
    """What the driver checks a runtime leaf against."""
    if marks and isinstance(leaf, torch.Tensor) and type(leaf) not in (torch.Tensor, torch.nn.Parameter):
        kind = type(leaf)
        raise PrecompileError(
            f"capture: the input at {where} is a tensor subclass "
            f"({kind.__module__}.{kind.__qualname__}) with mark_unbacked dims; an unbacked "
            "capture builds plain fake tensors for marked inputs, which a subclass's "
            "ops cannot mix with. Drop the marks (a static capture takes the subclass), "
            "or pass a plain tensor (DTensor.to_local())"
        )
    if isinstance(leaf, torch.Tensor):
        shape: list[int | None] = [None if d in marks else int(s) for d, s in enumerate(leaf.shape)]
        if leaf.is_contiguous():
            layout = "contiguous"
        elif leaf.dim() == 4 and leaf.is_contiguous(memory_format=torch.channels_last):
            layout = "channels_last"
        else:
            layout = "strided"
        rec: dict[str, Any] = {
            "kind": "tensor",
            "shape": shape,
            "dtype": str(leaf.dtype),
            "device": str(leaf.device),
            "layout": layout,
            "requires_grad": bool(leaf.requires_grad),
        }
        bounds = {d: [lo, hi] for d, (_sid, lo, hi) in marks.items() if lo is not None or hi is not None}
        if bounds:
            rec["bounds"] = bounds
        return rec
    if leaf is None or isinstance(leaf, (bool, int, float, str)):
        # make_fx specializes plain values into the graph: the driver insists on them.
        return {"kind": "constant", "value": leaf}
    kind = type(leaf)
    raise PrecompileError(
        f"capture: an argument leaf of type {kind.__module__}.{kind.__qualname__} at {where} "
        "cannot be captured by make_fx (pytree does not flatten it); pass tensors, Python "
        "scalars, strings or None (in lists, tuples or dicts), register the type with "
        "torch.utils._pytree, or capture with DynamoTracer"
    )


def trace(fn: Callable[..., Any], args: tuple[Any, ...], decompositions: dict | None,
          backend: str) -> Traced:
    module_positions = [i for i, a in enumerate(args) if isinstance(a, torch.nn.Module)]
    user_args = tuple(a for i, a in enumerate(args) if i not in module_positions)
    lifted = lifting.lift(args)
    user_flat, in_spec = pytree.tree_flatten(user_args)
    for i, leaf in enumerate(user_flat):
        if isinstance(leaf, torch.Tensor) and leaf.is_nested:
            raise PrecompileError(
                f"capture: user input leaf {i} is a nested tensor ({leaf.layout}), which "
                "capture does not support; pass a plain dense tensor"
            )
    marks = read_marks(user_flat)
    refuse_unsupported_marks(user_flat, marks)
    if any(marks) and backend != "inductor":
        raise PrecompileError(
            "capture: mark_unbacked dims need backend='inductor' (the eager backend runs "
            "the captured graph as-is, specialized to the example shapes)"
        )
    paths = _leaf_paths(user_args, [i for i in range(len(args)) if i not in module_positions], len(user_flat))
    user_leaves = [_leaf_record(leaf, m, path) for leaf, m, path in zip(user_flat, marks, paths)]
    num_pb = len(lifted.tensors)
    n_params = lifted.num_params
    state: dict[str, Any] = {}
    codes: set[Any] = set()

    def flat_fn(*flat: Any) -> list[Any]:
        pb = flat[:num_pb]
        user = pytree.tree_unflatten(list(flat[num_pb:]), in_spec)
        with contextlib.ExitStack() as stack:
            for pos in module_positions:
                binding = {name: pb[idx] for p, name, idx in lifted.bindings if p == pos}
                stack.enter_context(stateless._reparametrize_module(args[pos], binding, tie_weights=True))
            full, ui = [], 0
            for i in range(len(args)):
                if i in module_positions:
                    full.append(args[i])
                else:
                    full.append(user[ui])
                    ui += 1
            with _state.codes_run(codes):
                result = fn(*full)
        grads = [p.grad for p in pb[:n_params]]
        given = [i for i, t in enumerate(flat[num_pb:]) if getattr(t, "grad", None) is not None]
        if given:
            raise PrecompileError(
                f"capture: user input leaves {given} received a gradient (a backward in fn "
                "reached an input that requires grad); only the gradients of the nn.Module "
                "arguments' parameters are carried, so the served call would drop it. "
                "Make it a parameter of a module argument, or detach the input"
            )
        if any(getattr(b, "grad", None) is not None for b in pb[n_params:]):
            raise PrecompileError(
                "capture: a registered buffer received a gradient; only parameter "
                "gradients are carried. Register it as an nn.Parameter instead."
            )
        result_flat, out_spec = pytree.tree_flatten(result)
        _refuse_opaque_outputs(result, result_flat)
        state["out_spec"] = out_spec
        state["result"] = result
        state["grad_idx"] = [i for i, g in enumerate(grads) if g is not None]
        return [*result_flat, *(g for g in grads if g is not None)]

    real_flat = [*lifted.tensors, *user_flat]
    saved_grads = [t.grad if isinstance(t, torch.Tensor) else None for t in real_flat]
    for t in real_flat:
        if isinstance(t, torch.Tensor) and t.grad is not None:
            t.grad = None  # else make_fx would bake the old gradient in as a constant
    dynamic = any(marks)
    try:
        if dynamic:
            from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

            if torch._guards.TracingContext.try_get() is not None:
                raise PrecompileError(
                    "capture: an UNBACKED capture (mark_unbacked dims) cannot run inside "
                    "another trace: a TracingContext is active, and the capture's symbolic "
                    "trace would nest in it. Call the capture outside that trace, or drop "
                    "the mark_unbacked marks (a static capture may run there)"
                )

            example_inputs, fake_mode = fakeify(lifted.tensors, user_flat, marks)
            try:
                with torch.enable_grad(), fake_mode:
                    gm = make_fx(flat_fn, decomposition_table=decompositions,
                                 tracing_mode="symbolic")(*example_inputs)
            except GuardOnDataDependentSymNode as e:
                raise PrecompileError(
                    "capture: the graph needs to branch on a dim marked with "
                    f"mark_unbacked, so it cannot serve every size of it ({e}). Remove "
                    "the mark on that dim, or make the computation size-agnostic."
                ) from e
            except RuntimeError as e:
                # a storage read (data_ptr(), .storage(), a C++ op) or .numpy(), which
                # refuses the trace's tensors as subclasses
                if not any(t in str(e) for t in ("with symbolic sizes", "not supported for tensor subclasses")):
                    raise
                raise PrecompileError(
                    "capture: fn reads a tensor's storage (data_ptr(), numpy(), .storage() "
                    "or a C++ op that needs concrete sizes), which the symbolic trace of "
                    "mark_unbacked dims cannot do: there is no storage of an unknown size. "
                    "Move that read out of fn, or drop the mark_unbacked marks"
                ) from None
            except AssertionError as e:
                if refuses_unbacked_inputs(e):
                    raise PrecompileError(
                        f"capture: the symbolic trace of torch {torch.__version__} cannot take an "
                        "input with mark_unbacked dims, whatever fn does (its proxy tracer fails "
                        f"binding them: {type(e).__name__}: {e}). Drop the mark_unbacked marks, "
                        "or capture on torch 2.15"
                    ) from None
                raise PrecompileError(
                    f"capture: the symbolic trace of mark_unbacked dims failed inside torch "
                    f"{torch.__version__} (AssertionError: {e}); drop the mark_unbacked marks, "
                    "or capture with DynamoTracer"
                ) from e
        else:
            example_inputs = real_flat
            with torch.enable_grad(), _data_dependence_refused():
                gm = make_fx(flat_fn, decomposition_table=decompositions,
                             tracing_mode="real")(*real_flat)
    finally:
        _restore_grads(real_flat, saved_grads, accumulate=not dynamic)
    # make_fx keeps values nothing reads (aliases of views, unused halves of
    # multi-output ops); every one would be an op call on each served call. FX keeps
    # mutating, effectful and random ops, so eager's side effects and RNG draws stay.
    if gm.graph.eliminate_dead_code():
        gm.recompile()
    _refuse_constants(gm, fn, args)
    _refuse_script_objects(gm)
    if backend == "eager":
        _refuse_subgraphs(gm)
    result = state["result"]
    if dynamic:
        # The trace ran on fakes; the caller's call runs now, for real.
        result = fn(*args)
    return Traced(
        gm=gm,
        example_inputs=list(example_inputs),
        lifted=lifted,
        module_positions=module_positions,
        num_args=len(args),
        in_spec=in_spec,
        out_spec=state["out_spec"],
        grad_param_indices=state["grad_idx"],
        user_leaves=user_leaves,
        result=result,
        dynamic=dynamic,
        module_trees={pos: module_tree(args[pos]) for pos in module_positions},
        hooks=_state.hooks(args, module_positions),
        global_hooks=_state.global_hooks(),
        class_paths=_state.class_paths(args, module_positions, codes),
    )


def module_tree(module: torch.nn.Module) -> list[tuple[Any, ...]]:
    """(path, child keys, parameter keys, buffer keys) of every module under
    ``module`` through ``_modules``, depth first; a None child is recorded with
    keys None. named_parameters() and named_buffers() walk exactly these dicts."""
    out: list[tuple[Any, ...]] = []

    def walk(m: Any, path: tuple[str, ...]) -> None:
        if m is None:
            out.append((path, None, None, None))
            return
        out.append((path, list(m._modules), list(m._parameters), list(m._buffers)))
        for key, child in m._modules.items():
            walk(child, (*path, key))
    walk(module, ())
    return out


_OUTPUT_LEAVES = (torch.Tensor, type(None), bool, int, float, str, torch.dtype, torch.device)
_TRACED_VALUE = re.compile(r"get value out of a tracing tensor with (?P<op>\S+?)(?: -|$)")


def _refuse_opaque_outputs(result: Any, leaves: list[Any]) -> None:
    """An output pytree cannot flatten reaches make_fx as one opaque leaf, which
    it cannot return from a graph; name it, where it sits, and what to do."""
    if all(isinstance(leaf, _OUTPUT_LEAVES) for leaf in leaves):
        return
    try:
        with_paths = [(pytree.keystr(p), leaf) for p, leaf in pytree.tree_flatten_with_path(result)[0]]
    except ValueError:  # a node registered without flatten_with_keys_fn: no key paths
        with_paths = [(f" leaf {i}", leaf) for i, leaf in enumerate(leaves)]
    for path, leaf in with_paths:
        if not isinstance(leaf, _OUTPUT_LEAVES):
            kind = type(leaf)
            raise PrecompileError(
                f"capture: fn's output holds a {kind.__module__}.{kind.__qualname__} at "
                f"output{path}, which pytree cannot flatten (no pytree node is "
                "registered for it), so make_fx cannot return it from the graph. Return only "
                "tensors and plain values (for a transformers model pass use_cache=False, or "
                "return out.logits), register the type with torch.utils._pytree, or capture "
                "with DynamoTracer"
            )


@contextlib.contextmanager
def _data_dependence_refused() -> Any:
    """make_fx's real mode cannot read a value out of a traced tensor (``.item()``,
    ``if t.any():``, a data-dependent size): one trace records one path only."""
    try:
        yield
    except RuntimeError as e:
        m = _TRACED_VALUE.search(str(e))
        if m is None:
            raise
        raise PrecompileError(
            f"capture: fn reads a tensor's value while it is traced ({m['op']}: .item(), a "
            "branch on a tensor, or a size that depends on data), which one MakeFx trace "
            "cannot record; capture with DynamoTracer (the default), which graph-breaks "
            "there, or make the computation data-independent"
        ) from None


def _first_user_op(node: torch.fx.Node) -> Any:
    """The op of the first node that uses ``node``, for a refusal to name."""
    user = next(iter(node.users), None)
    return getattr(user, "target", None) if user is not None else None


def _refuse_subgraphs(gm: torch.fx.GraphModule) -> None:
    """torch.cond, while_loop, map and the like carry their bodies as child graph
    modules, which the eager backend's readable source does not hold."""
    for node in gm.graph.nodes:
        if node.op == "get_attr" and isinstance(getattr(gm, node.target, None), torch.fx.GraphModule):
            op = _first_user_op(node)
            raise PrecompileError(
                f"capture: the graph calls {getattr(op, '__name__', op)} with a subgraph "
                f"({node.target}), which the eager backend's source program does not carry; "
                "capture with backend='inductor' (the default), or express the branch with "
                "torch.where"
            )


def _refuse_script_objects(gm: torch.fx.GraphModule) -> None:
    """A collective traced by make_fx (``c10d.allreduce_``) takes the live process
    group and reduce op as graph attributes, which a serving process cannot get
    back from the artifact (a group is made anew in every job)."""
    for node in gm.graph.nodes:
        held = getattr(gm, node.target, None) if node.op == "get_attr" else None
        if isinstance(held, torch._C.ScriptObject) or type(held).__name__ in ("ProcessGroup", "ReduceOp"):
            op = _first_user_op(node)
            raise PrecompileError(
                f"capture: the graph passes a {type(held).__module__}.{type(held).__qualname__} "
                f"({node.target}) to {op}: a process group (or another live C++ object) the "
                "artifact cannot re-create in a serving job; capture a step with collectives "
                "with DynamoTracer (the default), which checks the group's backend, world "
                "size and rank instead"
            )


def _restore_grads(tensors: list[Any], saved: list[Any], *, accumulate: bool) -> None:
    """Put the caller's gradients back; a real-mode trace's new gradients add to them,
    exactly as the eager ``.backward()`` would have."""
    with torch.no_grad():
        for t, old in zip(tensors, saved):
            if not isinstance(t, torch.Tensor):
                continue
            new = t.grad if accumulate else None
            if new is not None:
                new = new.detach()
            if old is None:
                t.grad = new
            elif new is None:
                t.grad = old
            else:
                old.add_(new)
                t.grad = old


def _refuse_constants(gm: torch.fx.GraphModule, fn: Any, args: tuple[Any, ...]) -> None:
    """Every tensor the graph reads must be an input: a get_attr tensor was baked."""
    baked = [getattr(gm, n.target) for n in gm.graph.nodes
             if n.op == "get_attr" and isinstance(getattr(gm, n.target, None), torch.Tensor)]
    if not baked:
        return
    candidates = lifting.closed_over_tensors(fn)
    for pos, a in enumerate(args):
        if isinstance(a, torch.nn.Module):
            candidates += [(t, f"plain (unregistered) attribute {q}")
                           for t, q in lifting.plain_tensor_attributes(a, f"argument {pos}")]
    names = []
    for t in baked:
        desc = next((d for c, d in candidates if c is t or _same_storage(c, t)),
                    "a tensor created inside fn from data (e.g. torch.tensor([...]))")
        names.append(f"{desc} (shape {tuple(t.shape)}, {t.dtype})")
    raise PrecompileError(
        "capture: fn reads tensors that are neither arguments nor registered "
        "parameters/buffers, so they would be baked into the artifact: "
        + "; ".join(names)
        + ". Pass them as arguments, or register them on the module with "
        "register_buffer / nn.Parameter."
    )


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() != 0
    except Exception:
        return False
