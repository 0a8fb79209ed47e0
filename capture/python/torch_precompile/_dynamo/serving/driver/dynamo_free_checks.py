# --- dynamo_free_checks: Dynamo-free frames (DYNAMO_FREE = True) ---
# Code objects are marshal data, each variant's guards the generated checks above
# (make(K, GS, TG)), each graph a program: neither torch._dynamo nor
# torch._inductor is imported.

# The names the generated guards read besides L and G (Dynamo's closure names).
import math

utils_device = _importlib.import_module("torch.utils._device")
torch = _torch
inf = float("inf")
__math_isnan = math.isnan
if any(s["sympy"] for s in _GUARD_SPECS.values()):
    from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP as _SYMPY_INTERP

    globals().update({k: v for k, v in _SYMPY_INTERP.items() if k not in globals()})


def _pc_code(blob):
    return _marshal.loads(blob)


_pc_graphs = _pc_program_graphs


def _pc_variants(frame, target, scope):
    """(check, explain, transformed code) per captured variant of the frame."""
    out = []
    for name, body, key in frame["variants"]:
        if key:
            _pc_seed_builtins(scope, key, frame["module"])
        check, explain = _pc_dynamo_free_variant(name, scope)
        out.append((check, explain, _pc_code(body)))
    return out


def _pc_nth_key(d, i):
    # a DictGuardManager's key guard: the key at position i of the dict
    for j, k in enumerate(d):
        if j == i:
            return k
    raise KeyError(i)


def _pc_nth_value(d, i):
    return d[_pc_nth_key(d, i)]


def _pc_saved_hooks_ids():
    # the AUTOGRAD_SAVED_TENSORS_HOOKS guard: None unless inlineable hooks are active
    hooks = _torch._C._autograd._top_saved_tensors_default_hooks(True)
    if not hooks or not all(isinstance(h, _torch.fx.GraphModule) for h in hooks):
        return None
    return tuple(map(id, hooks))


def _pc_functorch_stack_empty():
    # the FUNCTORCH_STACK_MATCH guard of a graph traced outside any functorch transform
    return _torch._C._functorch.peek_interpreter_stack() is None


def _pc_stand_in(spec):
    # what a TensorGuards entry compares against: dtype, device, requires_grad, type
    dtype, device, requires_grad, parameter = spec
    t = _torch.empty(0, dtype=getattr(_torch, dtype), device=device)
    if parameter:
        return _torch.nn.Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(requires_grad)


def _pc_dynamo_free_variant(name, scope):
    """(check, explain) for a variant's generated guards, its global-state guard
    built on this host's thread count (_pc_on_this_host)."""

    from torch._C._dynamo.guards import GlobalStateGuard, TensorGuards

    spec = _GUARD_SPECS[name]
    consts = [_pc_make(r, f"a guard constant {r!r}") for r in spec["consts"]]
    gs = GlobalStateGuard()
    if spec["global_state"]:
        gs.__setstate__(_pc_on_this_host(spec["global_state"]))
    tensors = spec["tensors"]
    tg = TensorGuards(*[_pc_stand_in(t[0]) for t in tensors],
                      dynamic_dims_sizes=[t[1] for t in tensors],
                      dynamic_dims_strides=[t[2] for t in tensors]) if tensors else None
    check, explain = globals()[name](consts, gs, tg)
    # partial, not a lambda: no Python frame of its own on every call's path
    return _functools.partial(check, G=scope), _functools.partial(explain, G=scope)
