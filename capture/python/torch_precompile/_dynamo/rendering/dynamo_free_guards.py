"""A frame variant's guards as Python source, so serving checks them without Dynamo.

Dynamo builds a variant's guards by calling the C++ guard-tree API
(``torch._C._dynamo.guards``): accessors (``L['x']``, ``._modules['fc1']``)
and leaf guards on each (type, identity, value, tensor metadata). That API
cannot be driven without importing ``torch._dynamo`` (the C++ side imports it
for its manager enum), so the capture records those calls while it builds the
tree from the serialized guard state -- exactly as a serving process would --
and writes them out as straight-line Python: each accessor a local, each leaf
guard an ``if``, every tensor of the variant checked by one C++ ``TensorGuards``
(dispatch keys, dtype, device, requires_grad, sizes, strides), the global state
by a C++ ``GlobalStateGuard``. Both come from ``torch._C``, which ``import
torch`` already loaded.

Anything the recorder cannot write as source raises ``NotDynamoFree`` naming it; the
artifact then serves through Dynamo's own guard manager instead.
"""

from __future__ import annotations

import contextlib
import ctypes
import keyword
import math
import re
import types
from typing import Any, Iterator

from .. import minted
from ..spelling import normalize


class NotDynamoFree(Exception):
    """This variant's guards have a part with no source form here."""


# Recorder ----------------------------------------------------------------

_IGNORED = {"set_local_state", "set_compile_on_one_rank", "attach_compile_id", "clone_manager",
            "mark_tag_safe", "mark_tag_safe_root"}
_RELATIONAL = ("install_no_tensor_aliasing_guard", "install_object_aliasing_guard",
               "install_storage_overlapping_guard", "install_symbolic_shape_guard")


class Recording:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, str, tuple[Any, ...], dict[str, Any], Any]] = []
        self.keep: list[Any] = []   # keeps every manager alive so ids stay unique
        self.muted = 0


@contextlib.contextmanager
def _recording() -> Iterator[Recording]:
    import torch
    import torch._C._dynamo.guards as cg
    import torch._dynamo.guards as dg

    rec = Recording()
    undo: list[tuple[Any, str, Any]] = []

    def wrap_method(cls: Any, name: str, fn: Any) -> None:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = fn(self, *args, **kwargs)
            if not rec.muted:
                rec.keep += [self, out]
                rec.calls.append((self, name, args, kwargs, out))
            return out
        undo.append((cls, name, fn))
        setattr(cls, name, method)

    for cls in (cg.GuardManager, cg.RootGuardManager, cg.DictGuardManager):
        for name, fn in list(vars(cls).items()):
            if name.startswith("_") or not callable(fn):
                continue
            if name.startswith(("add_", "mark_")) or name.endswith("_manager") or name in _IGNORED:
                wrap_method(cls, name, fn)

    def wrap_function(name: str) -> None:
        fn = getattr(dg, name)

        def function(*args: Any, **kwargs: Any) -> Any:
            rec.keep.append(args)
            rec.calls.append((None, name, args, kwargs, None))
            return fn(*args, **kwargs)
        undo.append((dg, name, fn))
        setattr(dg, name, function)

    for name in _RELATIONAL:
        wrap_function(name)

    py_lambda = dg.GuardBuilder.add_python_lambda_leaf_guard_to_root

    def add_python_lambda(self: Any, code_parts: Any, verbose_code_parts: Any,
                          closure_vars: Any = None, is_epilogue: bool = True) -> Any:
        rec.calls.append((None, "python_lambda", (list(code_parts), list(verbose_code_parts)), {}, None))
        rec.muted += 1
        try:
            return py_lambda(self, code_parts, verbose_code_parts, closure_vars, is_epilogue)
        finally:
            rec.muted -= 1
    undo.append((dg.GuardBuilder, "add_python_lambda_leaf_guard_to_root", py_lambda))
    dg.GuardBuilder.add_python_lambda_leaf_guard_to_root = add_python_lambda
    try:
        # Shape guards as Python expressions, not a C++ function compiled per variant.
        with torch._dynamo.config.patch(enable_cpp_symbolic_shape_guards=False):
            yield rec
    finally:
        for owner, name, fn in reversed(undo):
            setattr(owner, name, fn)


def record(state: Any, code: Any, scope: dict[str, Any]) -> Recording:
    """Build the variant's guard manager as serving would, recording every call."""
    from torch._dynamo.package import load_guard_manager

    with _recording() as rec:
        manager = load_guard_manager(state, code, scope)
    rec.keep.append(manager)
    return rec


# Renderer ----------------------------------------------------------------

class Consts:
    """Objects the generated checks compare against, as recipes the driver
    resolves once at load (``K[i]``)."""

    def __init__(self) -> None:
        self.recipes: list[tuple[Any, ...]] = []
        self._index: dict[tuple[Any, ...], int] = {}

    def ref(self, recipe: tuple[Any, ...]) -> str:
        if recipe not in self._index:
            self._index[recipe] = len(self.recipes)
            self.recipes.append(recipe)
        return f"k{self._index[recipe]}"

    def obj(self, value: Any, what: str) -> str:
        import torch

        if isinstance(value, torch.dtype):
            return self.ref(("attr", "torch", str(value).split(".", 1)[1]))
        if isinstance(value, torch.device):
            return self.ref(("device", str(value)))
        r = minted.recipe(value) or builtin_recipe(value)
        if r is None:
            raise NotDynamoFree(f"{what} is {type(value).__module__}.{type(value).__qualname__} "
                          f"{_short(value)}, which has no importable name")
        return self.ref(r)


# Where a builtin function without a usable __module__ is found by name.
_BUILTIN_HOMES = ("torch", "torch.nn.functional", "torch._C._nn", "torch._C._VariableFunctions",
                  "torch.functional", "math", "operator", "builtins", "torch._C")


def builtin_recipe(value: Any) -> tuple[str, ...] | None:
    import importlib

    name = getattr(value, "__name__", None)
    if not isinstance(name, str):
        return None
    for home in _BUILTIN_HOMES:
        try:
            if getattr(importlib.import_module(home), name, None) is value:
                return ("attr", home, name)
        except ImportError:
            continue
    # the interpreter's own types (method, function, ...) are named in types, not by __name__
    for attr, held in vars(types).items():
        if held is value and not attr.startswith("_"):
            return ("attr", "types", attr)
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


def _literal(value: Any, consts: Consts, what: str) -> str:
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return repr(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return repr(value)
        return f"float({str(value)!r})"
    if type(value) in (tuple, list, frozenset, set):
        inner = ", ".join(_literal(v, consts, what) for v in value)
        if type(value) is tuple:
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if type(value) is list:
            return f"[{inner}]"
        return f"{type(value).__name__}([{inner}])"
    return consts.obj(value, what)


def _deref(object_id: int) -> Any:
    # The id was taken by the guard builder moments ago from an object the
    # recording still holds (the unpickled guard state), so it is alive.
    return ctypes.cast(object_id, ctypes.py_object).value


def _attr(parent: str, name: Any) -> str:
    if isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__"):
        return f"{parent}.{name}"
    return f"getattr({parent}, {name!r})"


class _Tensor:
    def __init__(self, var: str, value: Any, sizes: Any, strides: Any, name: str, pytype: Any, keys: Any) -> None:
        import torch

        if pytype not in (torch.Tensor, torch.nn.Parameter):
            raise NotDynamoFree(f"{name} is a {pytype.__qualname__}, not a plain tensor or parameter")
        self.var, self.name = var, name
        self.spec = (str(value.dtype).split(".", 1)[1], str(value.device), bool(value.requires_grad),
                     pytype is torch.nn.Parameter)
        self.sizes = [None if s is None else int(s) for s in sizes]
        self.strides = [None if s is None else int(s) for s in strides]
        from ..captured_values import stand_in

        probe = stand_in(self.spec)
        if torch._C._dispatch_keys(probe) != keys:
            raise NotDynamoFree(f"{name} has dispatch keys {keys}, not those of a plain "
                          f"{self.spec[1]} tensor ({torch._C._dispatch_keys(probe)})")


# The names a shape guard may read besides sympy's (SYMPY_INTERP): the driver's
# dynamo_free_checks part binds them, and sympy's only where a variant reads one.
SHAPE_NAMES = {"L", "G", "torch", "inf", "math", "__math_isnan", "___check_type_id", "___check_obj_id",
                "utils_device", "device", "int", "float", "bool", "len", "abs", "min", "max", "round"}


class Program:
    """The rendered checks of one variant: ``source`` defines ``make(K, GS, TG)``
    returning ``(check, explain)``; ``tensors`` and ``global_state`` say how the
    driver builds TG and GS."""

    def __init__(self, source: str, consts: Consts, tensors: list[tuple[Any, ...]],
                 global_state: str | None, shape_names: set[str]) -> None:
        self.source, self.consts, self.tensors = source, consts, tensors
        self.global_state, self.shape_names = global_state, shape_names


def render(rec: Recording, scope: dict[str, Any]) -> Program:
    consts = Consts()
    roots = [c[0] for c in rec.calls if c[0] is not None and type(c[0]).__name__ == "RootGuardManager"]
    if not roots:
        raise NotDynamoFree("the guard manager recorded no root")
    root = roots[0]
    var: dict[int, str] = {id(root): "R"}
    source: dict[int, str] = {}
    children: dict[int, list[tuple[Any, str]]] = {id(root): []}
    leaves: dict[int, list[tuple[str, str]]] = {id(root): []}
    tensors: list[_Tensor] = []
    # Dynamo's own modules the guards reach through the frame's globals (a polyfill's
    # import alias): what is read off one becomes a constant, so serving imports none
    folded: dict[int, Any] = {}
    frame_globals: set[int] = set()
    tail: list[tuple[str, str]] = []   # relational and epilogue guards, after the tree
    global_state: str | None = None
    shape_names: set[str] = set()

    def leaf(node: Any, cond: str, verbose: Any) -> None:
        text = (verbose[0] if isinstance(verbose, (list, tuple)) and verbose else str(verbose)).split("#")[0].strip()
        leaves[id(node)].append((cond, text))

    for owner, method, args, kwargs, out in rec.calls:
        if method in _IGNORED or method == "python_lambda":
            continue  # python_lambda: the shape guards, written after the tree below
        if owner is not None and id(owner) not in var:
            continue  # a call on a clone of the root (the diff manager)
        if method.endswith("_manager"):
            if id(out) in var:
                continue
            parent = var[id(owner)]
            a = list(args) + [kwargs[k] for k in ("key", "attr", "idx", "index", "f_globals", "global_name",
                                                  "python_lambda") if k in kwargs]
            held = _dynamo_module_read(method, id(owner) in frame_globals, a, scope, folded.get(id(owner)))
            if held is not None and _is_heavy(held):
                folded[id(out)] = held  # not read at serve time: what is read off it is a constant
                expr = ""
            elif held is not None:
                expr = consts.obj(held, f"{source_of(kwargs, args)} (read off Dynamo's own module)")
            else:
                expr = _access(method, parent, a, scope, consts)
                if expr == "G":
                    frame_globals.add(id(out))
            v = f"n{len(var)}"
            var[id(out)] = v
            source[id(out)] = source_of(kwargs, args)
            children[id(owner)].append((out, expr))
            children[id(out)], leaves[id(out)] = [], []
            continue
        if owner is None:
            tail.append(_relational(method, args, var))
            continue
        if id(owner) in folded:
            raise NotDynamoFree(f"a guard on Dynamo's own module {folded[id(owner)].__name__} ({method})")
        v = var[id(owner)]
        if method == "add_tensor_match_guard":
            value, sizes, strides, name = args[0], args[1], args[2], args[3]
            tensors.append(_Tensor(v, value, sizes, strides, name, args[6], args[7]))
        elif method == "add_global_state_guard":
            fields = args[0].__getstate__()
            global_state = fields
            leaf(owner, "GS.check()", args[1])
        elif method == "add_lambda_guard" or method == "add_epilogue_lambda_guard":
            qual = getattr(args[0], "__qualname__", "")
            if qual.startswith("GuardBuilder.AUTOGRAD_SAVED_TENSORS_HOOKS") and "ids == None" in str(args[1]):
                leaf(owner, "_pc_saved_hooks_ids() is None", args[1])
            elif qual.startswith("GuardBuilder.FUNCTORCH_STACK_MATCH") and "compare_functorch_state([])" in str(args[1]):
                # a graph traced with no functorch transform active (torch.vmap inside fn,
                # Mamba): compare_functorch_state([]) holds exactly when the stack is empty
                leaf(owner, "_pc_functorch_stack_empty()", args[1])
            else:
                raise NotDynamoFree(f"a Python guard {qual or args[0]!r} ({_short(args[1])})")
        else:
            leaf(owner, _leaf(method, v, args, consts), args[-2] if method != "add_torch_function_mode_stack_guard" else args[1])
    for _owner, method, args, _kwargs, _out in rec.calls:
        if method == "python_lambda":
            code_parts, verbose = args
            for part, text in zip(code_parts, verbose):
                shape_names |= _names(part)
                tail.append((f"({part})", text.split("#")[0].strip()))
    unknown = shape_names - SHAPE_NAMES - _sympy_names()
    if unknown:
        raise NotDynamoFree(f"shape guards use {sorted(unknown)}")

    lines: list[tuple[str, ...]] = []

    def emit(node: Any) -> None:
        # as the C++ tree runs: a manager's own guards, then its children in order
        for cond, text in leaves[id(node)]:
            lines.append(("guard", cond, text))
        for child, expr in children[id(node)]:
            if id(child) not in folded:
                lines.append(("node", var[id(child)], expr, source[id(child)]))
            emit(child)
    emit(root)
    lines, rename = _distinct(lines)
    tensors_vars = [rename(t.var) for t in tensors]
    tail = [(rename(cond), text) for cond, text in tail]
    verbose_table: list[str] = []
    fast, slow = [], []
    keyed: set[str] = set()  # dicts whose keys the fast check has read into a tuple
    for item in lines:
        if item[0] == "node":
            _, v, expr, where = item
            fast.append(f"        {v} = {_positional(expr, keyed, fast)}")
            slow.append(f"        at = {where!r}")
            slow.append(f"        {v} = {expr}")
        else:
            _, cond, text = item
            verbose_table.append(normalize(text))
            fast.append(f"        if not ({cond}): return False")
            if cond == "GS.check()":  # say which field, as Dynamo's manager does
                slow.append(f"        if not ({cond}): return 'GLOBAL_STATE changed: ' + GS.reason()")
            else:
                slow.append(f"        if not ({cond}): return V[{len(verbose_table) - 1}]")
    tensor_args = ", ".join(tensors_vars)
    names = [t.name for t in tensors]
    post_fast = []
    post_slow = []
    if tensors:
        post_fast.append(f"        if not TG.check({tensor_args}): return False")
        post_slow.append(f"        why = TG.check_verbose({tensor_args}, tensor_check_names={names!r})")
        post_slow.append("        if why is not True: return why")
    for cond, text in tail:
        verbose_table.append(normalize(text))
        post_fast.append(f"        if not ({cond}): return False")
        post_slow.append(f"        if not ({cond}): return V[{len(verbose_table) - 1}]")
    body_fast = "\n".join(_local_builtins(line) for line in fast + post_fast) or "        pass"
    body_slow = "\n".join(slow + post_slow) or "        pass"
    source = (
        "def make(K, GS, TG):\n"
        f"    V = {verbose_table!r}\n"
        + (f"    {', '.join(f'k{i}' for i in range(len(consts.recipes)))}, = K\n" if consts.recipes else "")
        + 
        "    def check(L, G, _type=type, _len=len, _hasattr=hasattr, _ga=object.__getattribute__):\n"
        "        try:\n"
        + _indent(body_fast) + "\n"
        "        except Exception:\n"
        "            return False\n"
        "        return True\n"
        "    def explain(L, G):\n"
        "        at = None\n"
        "        try:\n"
        + _indent(body_slow) + "\n"
        "        except Exception as e:\n"
        "            return f'cannot read {at} ({type(e).__name__}: {e})'\n"
        "        return None\n"
        "    return check, explain\n"
    )
    return Program(source, consts, [(t.spec, t.sizes, t.strides) for t in tensors], global_state, shape_names)


_NTH = re.compile(r"_pc_nth_(key|value)\((\w+), (\d+)\)")


def _positional(expr: str, keyed: set[str], fast: list[str]) -> str:
    """A key or value read by position, as the fast check writes it: the dict's
    keys read into a tuple once, before its first such read, and indexed (one
    walk of the dict, as Dynamo's DictGuardManager makes one pass, where a walk
    per read made a ModuleList of n layers cost n*n/2 steps per call)."""
    m = _NTH.fullmatch(expr)
    if m is None:
        return expr
    kind, parent, index = m.groups()
    keys = f"{parent}_keys"
    if parent not in keyed:
        keyed.add(parent)
        fast.append(f"        {keys} = tuple({parent})")
    return f"{keys}[{index}]" if kind == "key" else f"{parent}[{keys}[{index}]]"


def _distinct(lines: list[tuple[str, ...]]) -> tuple[list[tuple[str, ...]], Any]:
    """Each distinct fact once: an accessor that reads what an earlier one read
    (the same expression over the same parent) becomes that one, and a leaf guard
    already checked (the same condition on the same value) is not checked again.
    Returns the lines and the renaming of accessor variables it applied."""
    alias: dict[str, str] = {}

    def rename(text: str) -> str:
        return _renamed_names(text, alias) if alias else text

    out: list[tuple[str, ...]] = []
    exprs: dict[str, str] = {}
    conds: set[str] = set()
    for item in lines:
        if item[0] == "node":
            _, v, expr, where = item
            expr = rename(expr)
            if expr and expr in exprs:
                alias[v] = exprs[expr]
                continue
            if expr:
                exprs[expr] = v
            out.append(("node", v, expr, where))
        else:
            cond = rename(item[1])
            if cond in conds:
                continue
            conds.add(cond)
            out.append(("guard", cond, item[2]))
    return out, rename


def _renamed_names(text: str, alias: dict[str, str]) -> str:
    """``text`` with its NAME tokens in ``alias`` replaced (strings left alone)."""
    import io
    import tokenize

    toks = tokenize.generate_tokens(io.StringIO(text).readline)
    edits = [(t.start[1], t.end[1], alias[t.string]) for t in toks
             if t.type == tokenize.NAME and t.string in alias and t.start[0] == 1]
    for a, b, name in reversed(edits):
        text = text[:a] + name + text[b:]
    return text


_FAST_NAMES = {"type": "_type", "len": "_len", "hasattr": "_hasattr"}


def _local_builtins(line: str) -> str:
    """The hot check reads its builtins from default arguments (a local load, not
    a global and a builtins lookup per guard); by tokens, so no string is touched."""
    import io
    import tokenize

    toks = [t for t in tokenize.generate_tokens(io.StringIO(line + "\n").readline)
            if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT)]
    edits = []  # (start column, end column, replacement), left to right
    for i, t in enumerate(toks):
        nxt = toks[i + 1].string if i + 1 < len(toks) else ""
        if t.type == tokenize.NAME and t.string in _FAST_NAMES and nxt == "(":
            edits.append((t.start[1], t.end[1], _FAST_NAMES[t.string]))
        elif (t.type == tokenize.NAME and t.string == "object" and nxt == "."
              and i + 2 < len(toks) and toks[i + 2].string == "__getattribute__"):
            edits.append((t.start[1], toks[i + 2].end[1], "_ga"))
    for a, b, text in reversed(edits):
        line = line[:a] + text + line[b:]
    return line


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _names(expr: str) -> set[str]:
    import ast

    return {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}


def _sympy_names() -> set[str]:
    from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

    return set(SYMPY_INTERP)


HEAVY = ("torch._dynamo", "torch._inductor")


def _is_heavy(value: Any) -> bool:
    return isinstance(value, types.ModuleType) and value.__name__.startswith(HEAVY)


def source_of(kwargs: dict[str, Any], args: Any) -> str:
    return kwargs.get("source", next((x for x in args if isinstance(x, str)), "a guarded value"))


def _dynamo_module_read(method: str, on_globals: bool, a: list[Any], scope: dict[str, Any], folded: Any) -> Any:
    """The value of this access when it reads Dynamo's own module or what is read
    off one (a polyfill's import alias in the frame's globals), else None."""
    if folded is not None:
        if method != "getattr_manager" or not isinstance(a[0], str):
            raise NotDynamoFree(f"a guard reads {method} of Dynamo's own module {folded.__name__}")
        return getattr(folded, a[0])
    if method == "dict_getitem_manager" and on_globals and isinstance(a[0], str) and _is_heavy(scope.get(a[0])):
        return scope[a[0]]
    return None


def _access(method: str, parent: str, a: list[Any], scope: dict[str, Any], consts: Consts) -> str:
    if method == "framelocals_manager":
        key = a[0][0] if isinstance(a[0], tuple) else a[0]
        return f"L[{key!r}]"
    if method == "globals_dict_manager":
        f_globals = a[0]
        if f_globals is scope:
            return "G"
        return consts.obj(_module_of_globals(f_globals), "a module's globals")
    if method in ("dict_getitem_manager", "getitem_manager", "list_getitem_manager", "tuple_getitem_manager"):
        key = a[0]
        if not (key is None or isinstance(key, (str, int, bool))):
            raise NotDynamoFree(f"an item access with key {_short(key)}")
        return f"{parent}[{key!r}]"
    if method == "getattr_manager":
        return _attr(parent, a[0])
    if method == "generic_getattr_manager":
        return f"object.__getattribute__({parent}, {a[0]!r})"
    if method == "get_generic_dict_manager":
        return f"object.__getattribute__({parent}, '__dict__')"
    if method == "type_manager":
        return f"type({parent})"
    if method == "type_dict_manager":
        return f"{parent}.__dict__"
    if method == "type_mro_manager":
        return f"{parent}.__mro__"
    if method == "func_defaults_manager":
        return f"{parent}.__defaults__"
    if method == "func_kwdefaults_manager":
        return f"{parent}.__kwdefaults__"
    if method == "code_manager":
        return f"{parent}.__code__"
    if method == "closure_manager":
        return f"{parent}.__closure__"
    if method in ("weakref_call_manager", "call_function_no_args_manager"):
        return f"{parent}()"
    if method == "tensor_property_size_manager":
        return f"{parent}.size({int(a[0])})"
    if method == "tensor_property_stride_manager":
        return f"{parent}.stride({int(a[0])})"
    if method == "tensor_property_storage_offset_manager":
        return f"{parent}.storage_offset()"
    if method == "get_key_manager":
        return f"_pc_nth_key({parent}, {int(a[0])})"
    if method == "get_value_manager":
        return f"_pc_nth_value({parent}, {int(a[0])})"
    if method == "lambda_manager":
        return _context_var_get(parent, a[0], consts)
    raise NotDynamoFree(f"a guard accessor {method}")


def _context_var_get(parent: str, fn: Any, consts: Consts) -> str:
    """The lambda accessors with a source form: Dynamo's ImportSource, ``lambda _,
    m=module: m`` (``__import__('torch')`` in a source: the module, by name), and its
    ContextVarGetSource, ``lambda x: x.get()`` or ``lambda x, d=default: x.get(d)``
    (a config entry's user override, e.g. ``compile_on_one_rank``)."""
    code = getattr(fn, "__code__", None)
    if (code is not None and code.co_argcount == 2 and not code.co_names and not code.co_freevars
            and len(fn.__defaults__ or ()) == 1 and isinstance(fn.__defaults__[0], types.ModuleType)):
        module = fn.__defaults__[0]
        if module.__name__.startswith(HEAVY):
            raise NotDynamoFree(f"a guard reads Dynamo's own module {module.__name__} through an import")
        return consts.obj(module, f"the imported module {module.__name__}")
    if code is not None and code.co_names == ("get",) and not code.co_freevars:
        if code.co_argcount == 1:
            return f"{parent}.get()"
        if code.co_argcount == 2 and len(fn.__defaults__ or ()) == 1:
            return f"{parent}.get({_literal(fn.__defaults__[0], consts, 'a context variable default')})"
    raise NotDynamoFree(f"a guard accessor lambda_manager ({getattr(fn, '__qualname__', fn)!r})")


def _module_of_globals(f_globals: dict[str, Any]) -> Any:
    import sys

    for module in list(sys.modules.values()):
        if getattr(module, "__dict__", None) is f_globals:
            return module
    raise NotDynamoFree("guards read the globals of an object that is not a module")


def _leaf(method: str, v: str, args: tuple[Any, ...], consts: Consts) -> str:
    import torch

    if method == "add_type_match_guard":
        return f"type({v}) is {consts.obj(_deref(args[0]), 'a guarded type')}"
    if method == "add_fake_script_type_match_guard":
        # a type match that unwraps a FakeScriptObject, which only exists while tracing
        return f"type({v}) is {consts.obj(_deref(args[1]), 'a guarded opaque type')}"
    if method == "add_id_match_guard":
        obj = _deref(args[0])
        if obj is None or obj is True or obj is False or obj is Ellipsis:
            return f"{v} is {obj!r}"
        return f"{v} is {consts.obj(obj, 'an identity-guarded object')}"
    if method == "add_none_match_guard":
        return f"{v} is None"
    if method == "add_true_match_guard":
        return f"{v} is True"
    if method == "add_false_match_guard":
        return f"{v} is False"
    if method == "add_not_none_guard":
        return f"{v} is not None"
    if method == "add_equals_match_guard":
        value = args[0]
        return f"type({v}) is {consts.obj(type(value), 'a guarded type')} and {v} == {_literal(value, consts, 'a guarded value')}"
    if method in ("add_length_check_guard", "add_dict_length_check_guard"):
        return f"len({v}) == {int(args[0])}"
    if method in ("add_dict_contains_guard", "add_set_contains_guard"):
        key = _literal(args[1], consts, "a guarded key")
        return f"{key} {'in' if args[0] else 'not in'} {v}"
    if method == "add_no_hasattr_guard":
        return f"not hasattr({v}, {args[0]!r})"
    if method == "add_float_is_nan_guard":
        return f"__math_isnan({v})"
    if method == "add_mapping_keys_guard":
        return f"list({v}.keys()) == {_literal(list(args[0]), consts, 'guarded keys')}"
    if method == "add_default_device_guard":
        current = torch.utils._device.CURRENT_DEVICE
        return ("utils_device.CURRENT_DEVICE is None" if current is None else
                f"utils_device.CURRENT_DEVICE == {_literal(current, consts, 'the default device')}")
    if method == "add_torch_function_mode_stack_guard":
        if list(args[0]):
            raise NotDynamoFree(f"a torch function mode stack of {list(args[0])}")
        return "torch._C._len_torch_function_stack() == 0"
    if method == "add_dimension_marking_guard":
        expected, absent, dependent = args[0], args[1], args[2]
        # The markers are instance attributes of a tensor, set by mark_dynamic and
        # friends: one disjointness test of its __dict__ replaces a hasattr each,
        # and an empty __dict__ (nearly every tensor's) answers before the test.
        parts = ([f"(not {v}.__dict__ or {v}.__dict__.keys().isdisjoint({tuple(absent)!r}))"]
                 if absent else [])
        for attr, value in expected.items():
            parts.append(f"(getattr({v}, {attr!r}, set()).issubset({_literal(value, consts, 'a dimension marking')}) "
                         f"if hasattr({v}, {attr!r}) else True)")
        for attr, (value, gate) in dependent.items():
            parts.append(f"((getattr({v}, {attr!r}, None) == {_literal(value, consts, 'a dimension marking')}) "
                         f"if hasattr({v}, {gate!r}) else True)")
        return " and ".join(parts) or "True"
    raise NotDynamoFree(f"a guard {method}")


def _relational(method: str, args: tuple[Any, ...], var: dict[int, str]) -> tuple[str, str]:
    def ref(manager: Any) -> str:
        if id(manager) not in var:
            raise NotDynamoFree(f"{method} on a manager outside the tree")
        return var[id(manager)]

    if method == "install_object_aliasing_guard":
        return f"{ref(args[0])} is {ref(args[1])}", str(args[2][0]).split("#")[0].strip()
    if method == "install_no_tensor_aliasing_guard":
        refs = [ref(m) for m in args[0]]
        return (f"len({{{', '.join(f'id({r})' for r in refs)}}}) == {len(refs)}",
                str(args[2][0]).split("#")[0].strip())
    raise NotDynamoFree(f"a relational guard {method}")
