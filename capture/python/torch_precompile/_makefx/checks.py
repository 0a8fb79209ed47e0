"""The per-call checks of a MakeFx artifact as straight-line source.

The driver's table checks (``_pc_module_state``, ``_pc_user_leaves``) rebuild
each model's ``named_parameters()``/``named_buffers()`` dicts, sort and compare
names and stringify dtypes and devices on every call: most of a small model's
call. The capture writes the same checks out for its own structure instead:
every module of the captured tree reached by its key with its child, parameter
and buffer counts compared (so the names match exactly, extras included), every
tensor's shape, dtype and device compared against constants. A call they do not
accept goes to the table checks, which either accept it or raise the error
naming what differs, so the two paths accept exactly the same calls.
"""

from __future__ import annotations

import math
from typing import Any

from .trace import Traced


class _Consts:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self._names: dict[tuple[str, str], str] = {}

    def dtype(self, text: str) -> str:
        return self._get("dtype", text, lambda n: f"{n} = _torch.{text.split('.', 1)[1]}")

    def device(self, text: str) -> str:
        return self._get("device", text, lambda n: f"{n} = _torch.device({text!r})")

    def _get(self, kind: str, text: str, line: Any) -> str:
        key = (kind, text)
        if key not in self._names:
            name = f"_PC_{kind.upper()}_{len(self._names)}"
            self._names[key] = name
            self.lines.append(line(name))
        return self._names[key]


def _meta(var: str, shape: list[Any], dtype: str, device: str, consts: _Consts) -> list[str]:
    if all(s is not None for s in shape):
        dims = [f"{var}.shape == {tuple(shape)!r}"]
    else:
        dims = [f"{var}.dim() == {len(shape)}"] + [f"{var}.shape[{i}] == {s}" for i, s in enumerate(shape) if s is not None]
    return dims + [f"{var}.dtype is {consts.dtype(dtype)}", f"{var}.device == {consts.device(device)}"]


# the hook dicts the fast check reads (the others hold entries only beside these)
_HOOKS_READ = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _hook_lines(var: str, pos: int, path: str, held: dict[str, list[str]]) -> list[str]:
    """A module's hook dicts as the capture ran them: empty, or holding the hooks
    the last accepted call held (the table check, _pc_check_hooks, compares their
    spellings and records them)."""
    if not held:
        return [f"        if {' or '.join(f'{var}.{a}' for a in _HOOKS_READ)}: return None"]
    out = []
    for attr in (*_HOOKS_READ, "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs"):
        if attr in held:
            out.append(f"        if tuple({var}.{attr}.values()) != _PC_HOOKS_SEEN.get(({pos}, {path!r}, "
                       f"{attr!r})): return None")
        else:
            out.append(f"        if {var}.{attr}: return None")
    return out


def _state(t: Traced, params: list[Any], buffers: list[Any], state_names: dict[int, list[str]],
           consts: _Consts) -> list[str]:
    lines = ["def _pc_state_fast(args):",
             '    """The models\' tensors in the program\'s order, or None (see _pc_module_state)."""',
             "    try:"]
    where: dict[tuple[int, tuple[str, ...]], str] = {}
    for pos, tree in sorted(t.module_trees.items()):
        root = f"m{pos}"
        lines.append(f"        {root} = args[{pos}]")
        lines.append(f"        if not isinstance({root}, _torch.nn.Module): return None")
        where[(pos, ())] = root
        for path, children, pkeys, bkeys in tree:
            var = where[(pos, path)]
            if children is None:
                lines.append(f"        if {var} is not None: return None")
                continue
            lines.append(f"        if len({var}._modules) != {len(children)} or len({var}._parameters) != "
                         f"{len(pkeys)} or len({var}._buffers) != {len(bkeys)}: return None")
            lines += _hook_lines(var, pos, ".".join(path), t.hooks.get(pos, {}).get(".".join(path), {}))
            for key in children:
                child = f"m{len(where)}"
                where[(pos, (*path, key))] = child
                lines.append(f"        {child} = {var}._modules[{key!r}]")
    tensors, checks, shapes = [], [], []
    rows = [(tuple(r), "_parameters") for r in params] + [(tuple(r), "_buffers") for r in buffers]
    for (pos, name, shape, dtype, device), table in rows:
        *path, key = name.split(".")
        var = f"t{len(tensors)}"
        lines.append(f"        {var} = {where[(pos, tuple(path))]}.{table}[{key!r}]")
        tensors.append(var)
        shapes.append(list(shape))
        checks += [f"{var} is not None"] + _meta(var, shape, dtype, device, consts)
    # Every other key: a name the capture saw (a tied parameter's second name) must
    # still hold a tensor, and a None entry (named_* skip it) must still be None.
    seen = {(r[0][0], r[0][1], r[1]) for r in rows}
    for pos, tree in sorted(t.module_trees.items()):
        named = set(state_names.get(pos, ()))
        for path, children, pkeys, bkeys in tree:
            if children is None:
                continue
            for table, keys in (("_parameters", pkeys), ("_buffers", bkeys)):
                for key in keys:
                    dotted = ".".join((*path, key))
                    if (pos, dotted, table) not in seen:
                        test = "is None" if dotted in named else "is not None"
                        lines.append(f"        if {where[(pos, path)]}.{table}[{key!r}] {test}: return None")
    if lines[-1] == "    try:":
        lines.append("        pass  # fn takes no model")
    lines += ["    except (AttributeError, KeyError, IndexError, TypeError):", "        return None"]
    listed = f"[{', '.join(tensors)}]"
    if tensors:
        # One C++ check of every tensor, built from the last call the checks below
        # accepted (so it takes that call's requires_grad and tensor types as given)
        lines.append("    guard = _pc_state_guard[0]")
        lines.append(f"    if guard is not None and guard.check({', '.join(tensors)}): return {listed}")
    for i in range(0, len(checks), 4):
        lines.append(f"    if not ({' and '.join(checks[i:i + 4])}): return None")
    if tensors:
        lines.append(f"    _pc_state_guard[0] = _pc_tensor_guard({listed}, {shapes!r})")
    lines.append(f"    return {listed}")
    return lines


_GUARD_HELPER = '''
_pc_state_guard = [None]


def _pc_tensor_guard(tensors, sizes):
    """One torch._C TensorGuards over these tensors: dtype, device, type,
    requires_grad, dispatch keys and the captured sizes (None: any), not strides.
    None where this torch cannot build one; the generated checks then run."""
    try:
        from torch._C._dynamo.guards import TensorGuards
        return TensorGuards(*tensors, dynamic_dims_sizes=sizes,
                            dynamic_dims_strides=[[None] * len(s) for s in sizes])
    except Exception:  # noqa: BLE001 - the generated checks still decide every call
        return None
'''


def _literal(value: Any) -> str | None:
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return None


def _leaves(t: Traced, backend: str, consts: _Consts) -> list[str]:
    user = [i for i in range(t.num_args) if i not in t.module_trees]
    spec = t.in_spec
    kids = spec.children()
    flat = (spec.type is tuple and spec.num_children == len(user)
            and all(c.is_leaf() for c in kids) and len(t.user_leaves) == len(user))
    if not flat:
        return ["_pc_leaves_fast = None  # the inputs are nested: the table checks flatten them"]
    lines = ["def _pc_leaves_fast(args):",
             '    """The user inputs as the program\'s leaves, or None (see _pc_user_leaves)."""']
    out = []
    for i, (pos, rec) in enumerate(zip(user, t.user_leaves)):
        var = f"x{i}"
        out.append(var)
        lines.append(f"    {var} = args[{pos}]")
        if rec["kind"] == "constant":
            value = _literal(rec["value"])
            if value is None:
                return ["_pc_leaves_fast = None  # a constant input with no literal form"]
            lines.append(f"    if type({var}) is not {type(rec['value']).__name__} or {var} != {value}: return None")
            continue
        conds = [f"isinstance({var}, _torch.Tensor)"] + _meta(var, rec["shape"], rec["dtype"], rec["device"], consts)
        for dim, (lo, hi) in rec.get("bounds", {}).items():
            if lo is not None:
                conds.append(f"{var}.shape[{int(dim)}] >= {lo}")
            if hi is not None:
                conds.append(f"{var}.shape[{int(dim)}] <= {hi}")
        if backend == "inductor" and rec["layout"] == "contiguous":
            conds.append(f"{var}.is_contiguous()")
        elif backend == "inductor" and rec["layout"] != "strided":
            conds.append(f"{var}.is_contiguous(memory_format=_torch.channels_last)")
        lines.append(f"    if not ({' and '.join(conds)}): return None")
    lines.append(f"    return [{', '.join(out)}]")
    return lines


def source(t: Traced, backend: str, params: list[Any], buffers: list[Any],
           state_names: dict[int, list[str]]) -> str:
    """``_pc_state_fast`` and ``_pc_leaves_fast`` for the trace; params and buffers
    are the metadata's PARAMS and BUFFERS rows, in the program's order, and
    state_names its STATE_NAMES (every name the tables compare)."""
    consts = _Consts()
    state = _state(t, params, buffers, state_names, consts)
    leaves = _leaves(t, backend, consts)
    return "\n".join(["import torch as _torch", *consts.lines, _GUARD_HELPER, "", *state, "", "", *leaves, ""]) + "\n"
