# ---------------------------------------------------------------------------
# Driver: the calling convention. Inlined verbatim from
# torch_precompile/_makefx/driver.py; it reads the metadata constants above and
# the program's ``call(flat_inputs)``.
# ---------------------------------------------------------------------------
import functools as _functools
import hashlib as _hashlib
import importlib as _importlib
import inspect as _inspect
import os as _os
import sys as _sys
import types as _types

import torch as _torch
import torch.utils._pytree as _pytree

_pc_import = _importlib.import_module  # what the fingerprints part (joined below) imports by

try:  # the shared error type when torch_precompile is installed; a local one otherwise
    from torch_precompile import PrecompileError as _PrecompileError
except ImportError:  # pragma: no cover - the artifact run on its own
    class _PrecompileError(RuntimeError):
        pass

_IN_SPEC = None if IN_SPEC is None else _pytree.treespec_loads(IN_SPEC)
_OUT_SPEC = _pytree.treespec_loads(OUT_SPEC)
_OUT_LEAF = _OUT_SPEC.is_leaf()  # a single tensor out: no unflatten


def _pc_fail(message):
    raise _PrecompileError(f"precompiled {FN_NAME}: {message}")


# A module's hook dicts and the process-wide ones (_makefx/state.py spells them too).
_PC_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
                  "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")
_PC_GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                         "_global_backward_pre_hooks", "_global_forward_hooks_with_kwargs",
                         "_global_forward_hooks_always_called")
_PC_GLOBAL_HOOKS = [getattr(_torch.nn.modules.module, a, {}) for a in _PC_GLOBAL_HOOK_DICTS]
# (position, module path, dict) -> the hooks the last accepted call found there
_PC_HOOKS_SEEN = {}


def _pc_same_hooks(where, hooks, want):
    """Refuse unless the hook dict at ``where`` holds the hooks the trace ran
    (their spellings, in order), naming the ones it holds."""
    if [_pc_spell(h) for h in hooks.values()] == want:
        return
    names = ", ".join(f"{getattr(h, '__module__', None) or type(h).__module__}."
                      f"{getattr(h, '__qualname__', None) or type(h).__qualname__}" for h in hooks.values())
    _pc_fail(f"{where} holds {len(hooks)} hook(s) ({names or 'none'}) and the capture ran {len(want)} "
             "other or different one(s) there: the graph runs the capture's hooks only. Remove the hook "
             "for this call, or capture again with it registered")


def _pc_check_hooks(args):
    """Every hook dict of every module against the hooks the trace ran (HOOKS; a
    dict it lacks was empty): make_fx baked those into the graph, so a hook added,
    removed or replaced since would not run, or run twice. Refuses naming it."""
    for pos in STATE_NAMES:
        held = HOOKS.get(pos, {})
        if not isinstance(args[pos], _torch.nn.Module):
            continue  # refused by the structure check, naming what it is
        for path, m in args[pos].named_modules(remove_duplicate=False):
            for attr in _PC_HOOK_DICTS:
                hooks = getattr(m, attr, None) or {}
                want = held.get(path, {}).get(attr, [])
                _pc_same_hooks(f"argument {pos}" + (f".{path}" if path else "") + f".{attr}", hooks, want)
                if hooks:
                    _PC_HOOKS_SEEN[(pos, path, attr)] = tuple(hooks.values())


def _pc_check_global_hooks():
    """The process-wide hook dicts (register_module_forward_hook and its siblings)."""
    module = _torch.nn.modules.module
    for attr in _PC_GLOBAL_HOOK_DICTS:
        hooks = getattr(module, attr, None) or {}
        want = GLOBAL_HOOKS.get(attr, [])
        _pc_same_hooks(f"torch.nn.modules.module.{attr}", hooks, want)


_PC_CLASS_PATHS = []  # the check, made at the first call (fingerprints' _pc_class_paths_checker)


def _pc_class_paths():
    """Each name along the MRO of a class of the traced modules that found a
    function the trace ran must still find that function (_dynamo/class_paths.py):
    a method rebound on its class, or a library class patched at capture and not
    here, is refused naming both."""
    if not _PC_CLASS_PATHS:
        _PC_CLASS_PATHS.append(_pc_class_paths_checker([tuple(p) for p in CLASS_PATHS], "the capture traced"))
    _PC_CLASS_PATHS[0]()


def _pc_module_state(args):
    """The runtime models' params/buffers, in the captured order, checked leaf by leaf."""
    _pc_check_hooks(args)
    tables = {}
    for pos, names in STATE_NAMES.items():
        m = args[pos]
        if not isinstance(m, _torch.nn.Module):
            _pc_fail(f"argument {pos} must be an nn.Module (as at capture), got {type(m).__name__}")
        params = dict(m.named_parameters(remove_duplicate=False))
        buffers = {n: b for n, b in m.named_buffers(remove_duplicate=False) if b is not None}
        found = sorted([*params, *buffers])
        if found != sorted(names):
            missing = sorted(set(names) - set(found))
            extra = sorted(set(found) - set(names))
            _pc_fail(
                f"the model at argument {pos} does not match the captured structure: "
                f"missing {missing[:5]}, unexpected {extra[:5]}; pass a model of the "
                "captured architecture"
            )
        tables[pos] = (params, buffers)
    out = []
    for kind, meta in (("parameter", PARAMS), ("buffer", BUFFERS)):
        for pos, name, shape, dtype, device in meta:
            params, buffers = tables[pos]
            t = (params if kind == "parameter" else buffers)[name]
            if list(t.shape) != shape or str(t.dtype) != dtype or str(t.device) != device:
                _pc_fail(
                    f"{kind} {name!r} of argument {pos} is {list(t.shape)} {t.dtype} on "
                    f"{t.device}; the capture had {shape} {dtype} on {device}"
                )
            out.append(t)
    return out


def _pc_user_leaves(args):
    user = tuple(a for i, a in enumerate(args) if i not in STATE_NAMES)
    leaves, spec = _pytree.tree_flatten(user)
    if _IN_SPEC is None:  # the capture could not write its input structure down
        if len(leaves) != len(USER_LEAVES):
            _pc_fail(f"the inputs flattened to {len(leaves)} leaves; the capture had "
                     f"{len(USER_LEAVES)} (its input structure could not be recorded, so only "
                     "the leaf count and each leaf are checked)")
    elif spec != _IN_SPEC:
        _pc_fail(f"the inputs have structure {spec}; the capture had {_IN_SPEC}")
    for i, (leaf, rec) in enumerate(zip(leaves, USER_LEAVES)):
        if rec["kind"] == "constant":
            if leaf != rec["value"] or type(leaf) is not type(rec["value"]):
                _pc_fail(
                    f"input leaf {i} is {leaf!r}; the capture specialized it to "
                    f"{rec['value']!r} (make_fx bakes Python values): capture again with "
                    "this value"
                )
            continue
        if not isinstance(leaf, _torch.Tensor):
            _pc_fail(f"input leaf {i} must be a tensor, got {type(leaf).__name__}")
        shape = list(leaf.shape)
        want = rec["shape"]
        if len(shape) != len(want) or any(w is not None and w != s for s, w in zip(shape, want)):
            _pc_fail(f"input leaf {i} has shape {shape}; the capture expects {want} (None = any size)")
        for dim, (lo, hi) in rec.get("bounds", {}).items():
            size = shape[int(dim)]
            if (lo is not None and size < lo) or (hi is not None and size > hi):
                _pc_fail(f"input leaf {i} dim {dim} is {size}, outside the marked range [{lo}, {hi}]")
        if str(leaf.dtype) != rec["dtype"] or str(leaf.device) != rec["device"]:
            _pc_fail(
                f"input leaf {i} is {leaf.dtype} on {leaf.device}; the capture expects "
                f"{rec['dtype']} on {rec['device']}"
            )
        if BACKEND == "inductor" and rec["layout"] != "strided":
            ok = (leaf.is_contiguous() if rec["layout"] == "contiguous"
                  else leaf.is_contiguous(memory_format=_torch.channels_last))
            if not ok:
                _pc_fail(
                    f"input leaf {i} is not {rec['layout']}; the inductor capture is "
                    f"specialized to that memory format: pass .contiguous() (or the "
                    "captured layout)"
                )
    return leaves


class _PcNoAutocast:
    """The program already holds every cast the capture made: an autocast region
    around the served call must not cast its ops again (it would change the
    result, or trip the inductor program's dtype checks)."""

    def __enter__(self):
        self._off = [_torch.autocast(d, enabled=False) for d in ("cpu", "cuda")
                     if _torch.is_autocast_enabled(d)]
        for region in self._off:
            region.__enter__()

    def __exit__(self, *exc):
        for region in reversed(self._off):
            region.__exit__(*exc)


def _pc_call(flat):
    try:
        return list(call(flat))
    except AssertionError as e:
        # Inductor's assert_size_stride / dtype checks: the one place a layout the
        # checks above let through (a strided input, a parameter's strides, dims
        # that must be equal) is caught.
        if "expected size" not in str(e) and "expected dtype" not in str(e):
            raise
        _pc_fail(f"an input or parameter does not have the size, stride or dtype the "
                 f"inductor program was compiled for ({e}); pass tensors laid out as at "
                 "capture (.contiguous()), or capture again with this layout")


def forward(*args, **kwargs):
    if kwargs:
        _pc_fail(f"a MakeFxTracer artifact takes positional arguments only, got {sorted(kwargs)}")
    if len(args) != NUM_ARGS:
        _pc_fail(f"takes {NUM_ARGS} positional arguments as at capture, got {len(args)}")
    if GLOBAL_HOOKS or any(_PC_GLOBAL_HOOKS):
        _pc_check_global_hooks()
    _pc_class_paths()
    # The generated checks first; the tables refuse (naming why) or accept the rest.
    state = _pc_state_fast(args)
    if state is None:
        state = _pc_module_state(args)
    leaves = _pc_leaves_fast(args) if _pc_leaves_fast is not None else None
    if leaves is None:
        leaves = _pc_user_leaves(args)
    grad = _torch.is_grad_enabled()
    grad_mode = grad and BACKEND == "eager" and not GRAD_PARAM_INDICES
    if _torch._C._is_any_autocast_enabled():
        with _torch.set_grad_enabled(grad_mode), _PcNoAutocast():
            outs = _pc_call([*state, *leaves])
    elif grad != grad_mode:
        with _torch.set_grad_enabled(grad_mode):
            outs = _pc_call([*state, *leaves])
    else:
        outs = _pc_call([*state, *leaves])
    if not GRAD_PARAM_INDICES and _OUT_LEAF:
        return outs[0]
    n_result = len(outs) - len(GRAD_PARAM_INDICES)
    if GRAD_PARAM_INDICES:
        with _torch.no_grad():
            for idx, g in zip(GRAD_PARAM_INDICES, outs[n_result:]):
                p = state[idx]
                if p.grad is None:
                    p.grad = g.detach()
                else:
                    p.grad.add_(g)
    return _pytree.tree_unflatten(outs[:n_result], _OUT_SPEC)
