# ---------------------------------------------------------------------------
# Driver: rebuild the captured frames and serve them. Inlined verbatim from
# torch_precompile/_dynamo/driver.py; it reads the metadata constants and the
# opaque sections above.
#
# Standalone (SERVING_MODE = "standalone"): nothing is installed and no frame
# evaluator is involved. Each frame becomes a dispatcher that checks its
# variants' guards against the call's locals and runs the first variant that
# matches; a continuation is reached the way Dynamo emits it, by LOAD_GLOBAL
# on its resume name in the module it was compiled in, so binding the
# dispatcher under that name is all the graph-break wiring needed. The only
# names bound into a module are ones Dynamo minted while tracing (resume
# functions, compiled graphs, import aliases, the builtins dict key). A call
# no variant covers RAISES: there is no compiler behind a source artifact.
#
# Dynamo-free (DYNAMO_FREE = True): code objects are marshal data, each
# variant's guards the generated checks above (make(K, GS, TG)), each graph a
# program exposing call(flat_inputs); neither torch._dynamo nor torch._inductor
# is imported. Otherwise the frames hold Dynamo's serialized guard state and
# the graphs Dynamo's backend payloads.
#
# Installed (SERVING_MODE = "installed"): the captured entries are loaded onto
# the live code objects and the frame evaluator serves them;
# torch_precompile.load() wraps the calls. Dynamo-free, _pc_lean_install() loads
# them through the evaluator's own entry points in torch._C (each variant's
# checks as a C++ guard manager's one guard); otherwise _pc_install() loads them
# through torch._dynamo.package.
# ---------------------------------------------------------------------------
import base64 as _base64
import functools as _functools
import hashlib as _hashlib
import importlib as _importlib
import inspect as _inspect
import marshal as _marshal
import os as _os
import pickle as _pickle
import sys as _sys
import types as _types
import zlib as _zlib

import torch as _torch

try:  # the shared error type when torch_precompile is installed; a local one otherwise
    from torch_precompile import PrecompileError as _PrecompileError
except ImportError:  # pragma: no cover - the artifact run on its own
    class _PrecompileError(RuntimeError):
        pass


def _pc_fail(message):
    raise _PrecompileError(f"precompiled {FN_NAME}: {message}")


def _pc_unpack(blob):
    return _pickle.loads(_zlib.decompress(_base64.b64decode(blob)))


_PC_LEAN = globals().get("DYNAMO_FREE", False)
# The graphs are programs (_GRAPHS) rather than Dynamo's backend payloads
# (_BACKENDS): always when Dynamo-free, and for installed artifacts whose graphs
# all have one, so installing loads no Inductor or AOTAutograd runtime.
_PC_PROGRAMS = _PC_LEAN or globals().get("GRAPHS_AS_PROGRAMS", False)

if _PC_LEAN:
    # The names the generated guards read besides L and G (Dynamo's closure names).
    import math

    utils_device = _importlib.import_module("torch.utils._device")
    torch = _torch
    inf = float("inf")
    __math_isnan = math.isnan
    if any(set(s["shape_names"]) - {"L", "G", "torch", "inf", "math"} for s in _GUARD_SPECS.values()):
        from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP as _SYMPY_INTERP

        globals().update({k: v for k, v in _SYMPY_INTERP.items() if k not in globals()})

# Unpacked once; every frame and variant reads them.
_PC_MINTED = _pc_unpack(_MINTED)
_PC_POLICY_DROPPED = {tuple(slot) for slot in _pc_unpack(_POLICY_DROPPED)}


def _pc_check_build():
    # Serialized code objects are Python-version-locked and the guard state
    # torch-build-locked: refuse rather than run foreign bytecode.
    here = "%d.%d" % _sys.version_info[:2]
    if PYTHON_VERSION.rsplit(".", 1)[0] != here:
        _pc_fail(f"captured on Python {PYTHON_VERSION}, this is {here}; its code objects "
                 "are version-locked: capture again under this Python")
    if TORCH_VERSION != _torch.__version__:
        _pc_fail(f"captured with torch {TORCH_VERSION}, this is {_torch.__version__}; its "
                 "guard state is build-locked: capture again under this torch")


def _pc_import(name):
    if name == "__main__":
        main, script = _sys.modules.get("__main__"), globals().get("MAIN_SCRIPT")
        here = getattr(main, "__file__", None)
        here = _os.path.realpath(here) if isinstance(here, str) else None
        if script is None or here != script:
            _pc_fail(f"captured from a function defined in the script {script or '(none)'} "
                     f"run as __main__, and this process's __main__ is "
                     f"{here or 'not a script'}; serve it from a run of that script")
        return main
    try:
        return _importlib.import_module(name)
    except ImportError as e:
        _pc_fail(f"the captured module {name!r} is not importable here ({e}); serve with "
                 "the captured code on sys.path")


def _pc_code(blob):
    return _marshal.loads(blob) if _PC_LEAN else _pc_dynamo_code(blob)


def _pc_dynamo_code(blob):
    from torch._dynamo.package import SerializedCode

    return SerializedCode.to_code_object(blob)


def _pc_program_graphs():
    """The compiled graphs from their programs (_GRAPHS), called as Dynamo's
    transformed bytecode calls a compiled graph: positionally."""
    out = {}
    for backend_id, text in _GRAPHS.items():
        ns = {"__name__": f"{__name__}.{backend_id}"}
        exec(compile(text, f"<precompiled graph {backend_id}>", "exec"), ns)
        if "CALL_POSITIONAL" in ns:  # an fx program: its graph takes the args as they come
            out[backend_id] = _functools.partial(ns["CALL_POSITIONAL"], None)
            continue
        call = ns["call"]

        def compiled(*args, _call=call):
            return _call(list(args))
        compiled.__name__ = backend_id
        out[backend_id] = compiled
    return out


def _pc_compiled_graphs():
    if _PC_LEAN:
        return _pc_program_graphs()
    out = {}
    for backend_id, (kind, payload) in _pc_unpack(_BACKENDS).items():
        fn = payload.after_deserialization() if kind == "aot" else payload
        out[backend_id] = _torch._dynamo.disable(fn)
    return out


def _pc_seed(scope, name, value):
    # A compile of this module collected later must not delete our binding
    # (only Dynamo, if this process has imported it, installs such hooks; torch
    # before 2.14 has no disown, and its hooks delete by name).
    if "torch._dynamo.utils" in _sys.modules:
        disown = getattr(_sys.modules["torch._dynamo.utils"].CleanupHook, "disown", None)
        if disown is not None:
            disown(scope, name)
    scope[name] = value


def _pc_minted(module_name, scope):
    # Values Dynamo bound by id (e.g. ___module_collections_<id>_c0): the
    # package does not record them, so the capture wrote a recipe for each.
    for name, recipe in _PC_MINTED.get(module_name, {}).items():
        _pc_seed(scope, name, _pc_make(recipe, f"the global {name!r} of module {module_name!r}"))


def _pc_make(recipe, what):
    """The object a capture-time recipe names: ("module", name), ("globals",
    module), ("attr", module, qualname) or ("device", str)."""
    try:
        if recipe[0] == "device":
            return _torch.device(recipe[1])
        value = _importlib.import_module(recipe[1])
        if recipe[0] == "globals":
            value = vars(value)
        elif recipe[0] == "attr":
            for part in recipe[2].split("."):
                value = getattr(value, part)
    except (ImportError, AttributeError) as e:
        _pc_fail(f"cannot re-create {what} from {recipe!r} ({e}); serve with the captured "
                 "packages installed")
    return value


def _pc_pins(frame, scope):
    """The frame's pinned bindings: dropped identity guards the artifact checks by
    name (a registry entry must still hold the function it held at capture), by
    the process group's shape (backend, world size, rank: the group itself is made
    anew in every job) or by a config slot's value. Returns None or a callable
    that raises naming the first binding that moved."""
    pins = frame.get("pins") or []
    if not pins:
        return None
    import builtins as _builtins

    checks = []
    for expr, recipe, *partial in pins:
        if recipe[0] == "process_group":
            checks.append(_pc_group_check(frame, expr, recipe))
            continue
        if recipe[0] == "config":
            checks.append(_pc_config_check(frame, recipe))
            continue
        read = eval(compile(f"lambda G, L: {expr}", "<pin>", "eval"), {"__builtins__": _builtins})
        if partial and partial[0]:  # only some variants read it: unreadable here, not checked
            read = _pc_partial(read)
        test = _PC_PIN_TESTS.get(recipe[0], _pc_identity_test)(frame, expr, recipe)
        checks.append(_pc_read_check(read, test))

    def check(f_locals):
        for one in checks:
            one(scope, f_locals)
    return check


class _PcUnread(Exception):
    """A partial pin's source is not there on this call: nothing to check."""


# What a pinned binding that can no longer be read holds: it has moved.
_PC_GONE = object()


def _pc_partial(read):
    def partial(scope, f_locals):
        try:
            return read(scope, f_locals)
        except Exception as e:  # noqa: BLE001 - the call takes a variant that never read it
            raise _PcUnread() from e
    return partial


def _pc_read_check(read, test):
    """One pin's check: ``test(value)`` is None while the binding holds what the
    capture compiled against, else the refusal. A binding that cannot be read (or
    whose test fails on it) has moved; one a partial pin's variant never read is
    not checked."""
    def check(scope, f_locals):
        try:
            value = read(scope, f_locals)
        except _PcUnread:
            return
        except Exception:  # noqa: BLE001 - a binding that is gone has moved
            value = _PC_GONE
        try:
            why = test(value)
        except Exception:  # noqa: BLE001 - what the test could not read has moved
            why = test(_PC_GONE)
        if why:
            _pc_fail(why)
    return check


def _pc_identity_test(frame, expr, recipe):
    obj = _pc_make(recipe, f"the binding {expr}")
    why = (f"{expr} no longer holds {'.'.join(recipe[1:])}, the object the capture compiled "
           f"{frame['name']!r} against (a registration or setting changed it); capture again "
           "with this configuration")
    return lambda value: None if value is obj else why


def _pc_values_test(frame, expr, recipe):
    """A configuration object Dynamo guarded by identity (it deep-copied it):
    checked by its class and the values of its entries at capture."""
    import ast as _ast

    _kind, module, qualname, items = recipe
    cls = _pc_make(("attr", module, qualname), f"the class of {expr}")
    wanted = [(key, _ast.literal_eval(text) if literal else text, literal, text) for key, text, literal in items]

    def entries(config):
        out = dict(vars(config)) if hasattr(config, "__dict__") else {}
        if hasattr(config, "items") and hasattr(config, "keys"):
            out.update({f"[{k!r}]": v for k, v in config.items()})
        return out

    def test(config):
        if type(config) is not cls:
            return (f"{expr} is not a {module}.{qualname}, the configuration class the capture "
                    f"compiled {frame['name']!r} against; capture again with this model")
        have = entries(config)
        for key, want, literal, text in wanted:
            got = have.get(key, _PC_GONE)
            if got is _PC_GONE or (got != want if literal else repr(got) != text):
                shown = "missing" if got is _PC_GONE else repr(got)[:80]
                return (f"{expr} has {key} = {shown}, the capture of {frame['name']!r} read "
                        f"{text[:80]} (the graph depends on the configuration's values); "
                        "capture again with this configuration")
        return None
    return test


def _pc_named_test(frame, expr, recipe):
    """A function made inside another (a factory's product): the slot must hold one
    with the captured module and qualified name."""
    _kind, module, qualname = recipe
    why = (f"{expr} no longer holds a function named {module}.{qualname}, what the capture "
           f"compiled {frame['name']!r} against (a registration or setting changed it); capture "
           "again with this configuration")
    return lambda fn: None if (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)) \
        == (module, qualname) else why


def _pc_wrapper_test(frame, expr, recipe):
    """A functools.wraps wrapper made at run time (an LR scheduler's opt.step): the
    same wrapper code around the same importable function."""
    _kind, module, qualname, code_name, first_line = recipe
    _pc_make(("attr", module, qualname), f"the function {expr} wraps")  # importable, or refuse now
    why = (f"{expr} no longer holds the {code_name} wrapper of {module}.{qualname} the capture "
           f"compiled {frame['name']!r} against; capture again with this setup")

    def test(fn):
        code = getattr(fn, "__code__", None)
        # read now, not at load: torch.optim patches a class's step when the first
        # optimizer of that class is made
        inner = _pc_make(("attr", module, qualname), f"the function {expr} wraps")
        ok = (getattr(fn, "__wrapped__", None) is inner and code is not None
              and (code.co_name, code.co_firstlineno) == (code_name, first_line))
        return None if ok else why
    return test


def _pc_optimizer_test(frame, expr, recipe):
    """An optimizer Dynamo guarded by identity: its class and parameter groups."""
    _kind, module, qualname, sizes = recipe
    cls = _pc_make(("attr", module, qualname), f"the class of {expr}")

    def test(opt):
        if type(opt) is not cls:
            return (f"{expr} is not a {module}.{qualname}, the optimizer the capture compiled "
                    f"{frame['name']!r} against; capture again with this optimizer")
        got = tuple(len(g["params"]) for g in opt.param_groups)
        if got != tuple(sizes):
            return (f"{expr} has parameter groups of {list(got)} tensors, the capture's had "
                    f"{list(sizes)}; capture again with this optimizer")
        return None
    return test


def _pc_spelled_test(frame, expr, recipe):
    """A value Dynamo guarded by identity that equal values can stand for (a type
    annotation such as ``int | None``): compared by its spelling."""
    _kind, text = recipe
    why = (f"{expr} no longer holds {text}, what the capture compiled {frame['name']!r} "
           "against; capture again with this configuration")
    return lambda value: None if value is not _PC_GONE and repr(value) == text else why


# A pin's recipe kind -> the test of its binding (anything else: by identity)
_PC_PIN_TESTS = {"values": _pc_values_test, "named": _pc_named_test, "wrapper": _pc_wrapper_test,
                 "optimizer": _pc_optimizer_test, "spelled": _pc_spelled_test}


def _pc_group_check(frame, expr, recipe):
    """The group the frame reads must have the captured backend, world size and,
    when the trace read it (recipe rank not None), rank: Dynamo baked them into
    the graph. Checked once per group object."""
    import builtins as _builtins

    _kind, backend, size, rank = recipe
    if expr == "<default process group>":
        expr = "the default process group"

        def read(_scope, _f_locals):
            return _torch.distributed.distributed_c10d.GroupMember.WORLD
    else:
        read = eval(compile(f"lambda G, L: {expr}", "<pin>", "eval"), {"__builtins__": _builtins})
    verified = []

    def check(scope, f_locals):
        try:
            group = read(scope, f_locals)
        except Exception:  # noqa: BLE001 - a group that cannot be read is missing
            group = None
        if verified and verified[0] is group:
            return
        captured = f"backend {backend}, world size {size}, " + (
            "any rank" if rank is None else f"rank {rank}")
        if group is None or not _torch.distributed.is_initialized():
            _pc_fail(f"{frame['name']!r} was captured in a torch.distributed job ({captured}) "
                     f"and reads the process group {expr}, but this process has none: call "
                     "torch.distributed.init_process_group() first (torchrun) in a job of that shape")
        here = (str(_torch.distributed.get_backend(group)), group.size(), group.rank())
        for field, want, got in zip(("backend", "world size"), (backend, size), here):
            if want != got:
                _pc_fail(f"process group mismatch: {expr} has {field} {got}, the capture's had "
                         f"{want} ({captured}); Dynamo baked the group into the graph of "
                         f"{frame['name']!r}. Serve it in a job of the captured shape, or capture "
                         "again in this one")
        if rank is not None and here[2] != rank:
            _pc_fail(f"process group mismatch: this process is rank {here[2]} of {expr}, and the "
                     f"graph of {frame['name']!r} was captured on rank {rank} and read its rank "
                     "(torch.distributed.get_rank() or group.rank(), baked into the graph), so it "
                     f"serves rank {rank} only. Serve each rank its own pair (m.{{rank}}.py)")
        verified[:] = [group]
    return check


def _pc_config_check(frame, recipe):
    _kind, module, key, want = recipe
    config = _pc_make(("module", module), f"the config module {module}")

    def check(_scope, _f_locals):
        got = getattr(config, key)
        if got != want:
            _pc_fail(f"{module}.{key} is {got!r}, the capture of {frame['name']!r} ran with "
                     f"{want!r}; set it back or capture again with this setting")
    return check


def _pc_verbose(manager):
    def explain(f_locals):
        info = manager.check_verbose(f_locals)
        parts = [p for p in info.verbose_code_parts if p] or ["<guard failed>"]
        return "; ".join(" ".join(p.split()) for p in parts[:3])
    return explain


def _pc_builtins(scope):
    b = scope["__builtins__"]
    return b if isinstance(b, dict) else b.__dict__


def _pc_on_this_host(global_state):
    """A GLOBAL_STATE guard's recorded state (JSON) with this host's thread count:
    the count describes the host (a torchrun worker gets 1), not the computation."""
    import json as _json

    fields = _json.loads(global_state)
    if "num_threads" in fields:
        fields["num_threads"] = _torch.get_num_threads()
    return _json.dumps(fields)


def _pc_without_policy_slots(graph, policy, spelling):
    """The output graph's guards without the invariance policy's slots (``policy``:
    (guard type, slot) pairs, a slot spelled by ``spelling``'s (pattern, replacement)
    rules, guards.slot_source's): kept guards that held one value in every
    captured variant, of an identity type. The capture's Dynamo-free build drops
    them the same way (lean.serving_state)."""
    if not policy or getattr(graph, "_guards", None) is None:
        return
    import re as _re

    from torch.utils._ordered_set import OrderedSet

    def slot(g):
        name = g.name
        for pattern, replacement in spelling:
            name = _re.sub(pattern, replacement, name)
        return (g.create_fn_name(), name)

    graph._guards = type(graph._guards)(OrderedSet(g for g in graph._guards.inner if slot(g) not in policy))


def _pc_serving_state(state):
    """The serialized guards as this artifact serves them:

    - on this host's thread count: Dynamo's GLOBAL_STATE guard records
      torch.get_num_threads() with grad mode, autocast, default dtype and the
      determinism/precision flags, but the thread count describes the host (a
      torchrun worker gets 1), not the computation; every other field stays
      checked;
    - without the invariance policy's slots (_POLICY_DROPPED): kept guards that
      held one value in every captured variant, of an identity type;
    - its value guards comparing against the captured values (_pc_captured_values)."""
    graph = state.output_graph
    guard = getattr(graph, "global_state_guard", None)
    if guard is not None:
        guard.__setstate__(_pc_on_this_host(guard.__getstate__()))
    _pc_without_policy_slots(graph, _PC_POLICY_DROPPED, _pc_unpack(_SLOT_SPELLING))
    _pc_register_captured(state)
    return state


def _pc_register_captured(state):
    """Note the state's value guards for the next build (see _pc_captured_values)."""
    for g in getattr(getattr(state.output_graph, "_guards", None), "inner", ()):
        if g.create_fn_name() in _PC_VALUE_GUARDS and g.code_list:
            entry = (g, " ; ".join(dict.fromkeys(g.code_list)), *_pc_captured_value(g))
            _PC_CAPTURED[id(g)] = _PC_CAPTURED[id(g.originating_source)] = entry


# Guards that compare a value by equality: CONSTANT_MATCH and the ones it picks.
_PC_VALUE_GUARDS = frozenset({"CONSTANT_MATCH", "EQUALS_MATCH", "BOOL_MATCH", "NONE_MATCH"})
# id(guard) and id(its source) -> (guard, its captured check, *_pc_captured_value),
# for the build running now (the build resets guard.code_list).
_PC_CAPTURED = {}


def _pc_captured_value(guard):
    """How a value guard's build gets the value it compared against at capture,
    read back from the check it rendered then (``ref == repr(value)``,
    ``ref is None``, the nan form): ("value", the value) when the rendering
    rebuilds it exactly (its repr gives the rendering back); ("rendering", the
    rendered value) when it does not, so the live value is taken and must render
    alike; ("live", None) for a check of another form, built as Dynamo builds it."""
    import ast as _ast

    parts = list(dict.fromkeys(guard.code_list))  # before 2.15 a build's parts may repeat
    if len(parts) != 1:
        return "live", None
    text = parts[0]
    if "__math_isnan(" in text:
        return "value", float("nan")
    try:
        node = _ast.parse(text, mode="eval").body
    except SyntaxError:
        return "live", None
    if not (isinstance(node, _ast.Compare) and len(node.ops) == 1):
        return "live", None
    rhs = node.comparators[0]
    if isinstance(node.ops[0], _ast.Is) and isinstance(rhs, _ast.Constant) and rhs.value is None:
        return "value", None
    if not isinstance(node.ops[0], _ast.Eq):
        return "live", None
    rendered = _ast.get_source_segment(text, rhs)
    try:
        value = _ast.literal_eval(rhs)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        try:  # torch.float32, torch.Size([2, 3]), inf: what a repr names through torch
            value = eval(compile(_ast.Expression(rhs), "<guard>", "eval"),
                         {"__builtins__": {}, "torch": _torch, "inf": float("inf")})
        except Exception:  # noqa: BLE001 - not rebuildable: checked against the live value
            return "rendering", rendered
    return ("value", value) if repr(value) == rendered else ("rendering", rendered)


class _pc_captured_values:
    """While a guard manager is built from serialized guards: a value guard
    compares against the value the capture saw, not the one the serving process
    holds. Dynamo's serialized guards keep no expected value; the builder reads it
    again from the pickled scope, and what that scope holds by reference (a module
    such as ``os``, a class, a function) is the serving process's own object, so
    ``os.environ["SCALE"]`` or a module constant would be guarded on its new value
    and could never fail. The capture's rendered check still names the old one. A
    value that rendering cannot rebuild is taken live, and the load refuses when it
    renders otherwise than at capture."""

    def __enter__(self):
        from torch._dynamo.guards import GuardBuilder

        _PC_CAPTURED.clear()
        self._get = get = GuardBuilder.__dict__["get"]

        def captured_get(builder, guard_or_source, *args, **kwargs):
            hit = _PC_CAPTURED.get(id(guard_or_source))
            if hit is None or not (guard_or_source is hit[0] or guard_or_source is hit[0].originating_source):
                return get(builder, guard_or_source, *args, **kwargs)
            _guard, check, how, value = hit
            if how == "value":
                # the guard's value, and its source's example value, which picks the
                # guard manager (so an entry gone since capture builds, and fails per call)
                return value
            live = get(builder, guard_or_source, *args, **kwargs)
            if how == "live" or guard_or_source is not _guard:
                return live
            if _pc_unaddressed(repr(live)) != _pc_unaddressed(value):
                _pc_fail(f"the guard {check} held at capture, and here the value is {live!r} "
                         "(checked at load: the artifact cannot rebuild the captured value); set "
                         "it back or capture again with this value")
            return live

        GuardBuilder.get = captured_get
        return self

    def __exit__(self, *exc):
        from torch._dynamo.guards import GuardBuilder

        GuardBuilder.get = self._get
        _PC_CAPTURED.clear()
        return False


class _pc_fsdp_modules_kept:
    """While a guard state is read: an FSDP2 module's class (``FSDPDeep``, made by
    ``fully_shard``) builds an instance of the original class (``FSDPModule.__new__``),
    so the state read back would hold a ``Deep`` where the capture saw an
    ``FSDPDeep``, and the type guards rebuilt from it would refuse every FSDP2
    module. They build their own class while the read lasts."""

    def __enter__(self):
        fsdp = _sys.modules.get("torch.distributed.fsdp._fully_shard._fully_shard")
        self._cls = getattr(fsdp, "FSDPModule", None)
        self._new = getattr(self._cls, "__dict__", {}).get("__new__")
        if self._new is None:
            self._cls = None
        if self._cls is not None:

            def __new__(cls, *args, **kwargs):
                return cls.__mro__[getattr(cls, "_orig_cls_mro_index", 2)].__new__(cls)

            self._cls.__new__ = staticmethod(__new__)
        return self

    def __exit__(self, *exc):
        if self._cls is not None:
            self._cls.__new__ = self._new
        return False


def _pc_unaddressed(text):
    import re as _re

    return _re.sub(r"0x[0-9a-fA-F]+", "0x?", text)


def _pc_bind(signature, code, args, kwargs):
    """The frame's locals as Python would bind this call (defaults applied)."""
    if (not kwargs and len(args) == code.co_argcount and not code.co_kwonlyargcount
            and not code.co_flags & 0x0C):  # CO_VARARGS | CO_VARKEYWORDS
        # Every parameter passed by position and nothing to default: Python's own
        # binding is the zip, and inspect's would cost more than the guards.
        return dict(zip(code.co_varnames, args))
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:
        _pc_fail(f"{code.co_name}() cannot take these arguments: {e}")
    bound.apply_defaults()
    f_locals = dict(bound.arguments)
    # inspect spells a comprehension's ".0" as "implicit0"; guards use the bytecode name
    for name in code.co_varnames[: code.co_argcount]:
        if name.startswith("."):
            f_locals[name] = f_locals.pop("implicit" + name[1:])
    return f_locals


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


def _pc_lean_variant(name, scope):
    """(check, explain) for a variant's generated guards, built against this host's
    thread count (see _pc_serving_state)."""

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


class _PcLazyModule:
    """An import alias of one of Dynamo's own modules: the transformed bytecode
    loads it around each graph call but reads it only while a profiler runs, so
    the import waits for that first attribute read."""

    def __init__(self, name):
        self._pc_name = name

    def __getattr__(self, attr):
        return getattr(_importlib.import_module(self._pc_name), attr)


def _pc_standalone():
    _pc_check_build()
    frames = _pc_unpack(_FRAMES)
    binding = _pc_unpack(_ENTRY_BINDING)
    graphs = _pc_compiled_graphs()
    # Resume names come from a per-process counter, so another artifact or a
    # live compile may hold the same one; the tag tells this artifact's apart.
    tag = _hashlib.sha256((_FRAMES + (repr(sorted(_GRAPHS.items())) if _PC_LEAN else _BACKENDS))
                          .encode()).hexdigest()[:16]
    scopes = {}

    def scope_of(frame):
        scope = scopes.get(frame["module"])
        if scope is None:
            scope = scopes[frame["module"]] = vars(_pc_import(frame["module"]))
            for backend_id, fn in graphs.items():
                _pc_seed(scope, backend_id, fn)
            _pc_minted(frame["module"], scope)
        for alias, module_name in frame["imports"].items():
            lazy = _PC_LEAN and alias.startswith("_pc_lazy")
            _pc_seed(scope, alias, _PcLazyModule(module_name) if lazy else _pc_import(module_name))
        return scope

    # Refuse before seeding anything: a resume name held by anything but this
    # artifact (the live compile that captured it, another artifact, a user
    # binding) would be repointed under the frame that LOAD_GLOBALs it.
    for frame in frames:
        module = vars(_pc_import(frame["module"]))
        for name in frame["resume_names"]:
            held = module.get(name)
            other = getattr(held, "__precompile_artifact__", None)
            if held is not None and other != tag:
                _pc_fail(
                    f"{name!r} in module {frame['module']!r} is already bound "
                    + (f"by another loaded artifact ({other})" if other else
                       "(a live torch.compile of the captured function, e.g. the capture "
                       "that produced this artifact, mints the same continuation names)")
                    + "; load the artifact in a fresh process"
                )

    def dispatcher(frame):
        target = _pc_code(frame["code"])
        kind = frame["kind"]
        if kind == "plain":
            scope = scope_of(frame)
            if target.co_freevars:
                return lambda closure: _types.FunctionType(target, scope, target.co_name, None, closure)
            return _types.FunctionType(target, scope, target.co_name)
        if kind != "compiled":
            why = ("was bypassed at capture (its guards could not be serialized or a "
                   "backend was missing), so the artifact holds no variant of it"
                   if kind == "bypassed" else
                   "ended with no guarded code at capture (Dynamo gave up on it), so the "
                   "artifact holds no variant of it")
            message = f"the captured frame {target.co_name!r} {why}; capture again"
            if frame["entry"]:
                _pc_fail(message)

            def refuse(*_args, **_kwargs):
                _pc_fail(message)
            return refuse
        scope = scope_of(frame)
        defaults = binding["defaults"] if frame["entry"] else None
        kwdefaults = binding["kwdefaults"] if frame["entry"] else None

        def function(code, closure):
            f = _types.FunctionType(code, scope, target.co_name, defaults, closure)
            if kwdefaults:
                f.__kwdefaults__ = dict(kwdefaults)
            return f

        def load_variants():
            if _PC_LEAN:
                out = []
                for name, body, key in frame["variants"]:
                    if key:
                        seed_builtins(key)
                    check, explain = _pc_lean_variant(name, scope)
                    out.append((check, explain, _marshal.loads(body)))
                return out
            from torch._dynamo.package import load_guard_manager, load_guards_state

            out = []
            for guards_blob, body in frame["variants"]:
                with _pc_captured_values():
                    with _pc_fsdp_modules_kept():
                        state = _pc_serving_state(load_guards_state(guards_blob))
                    key = state.output_graph.name_of_builtins_dict_key_in_fglobals
                    if key:
                        seed_builtins(key)
                    manager = load_guard_manager(state, target, scope)
                out.append((manager.check, _pc_verbose(manager), _pc_dynamo_code(body)))
            return out

        def seed_builtins(key):
            if scope.get(key, _pc_builtins(scope)) is not _pc_builtins(scope):
                _pc_fail(f"{key!r} in module {frame['module']!r} is bound to something "
                         "other than the builtins dict the guards read through")
            _pc_seed(scope, key, _pc_builtins(scope))

        variants = load_variants()
        threads = [_torch.get_num_threads()]
        signature = _inspect.signature(function(target, tuple(_types.CellType() for _ in target.co_freevars) or None))
        pinned = _pc_pins(frame, scope)

        def call(bound, closure, args, kwargs):
            f_locals = {}
            for name, cell in zip(target.co_freevars, closure or ()):
                try:
                    f_locals[name] = cell.cell_contents
                except ValueError:
                    pass  # unbound at the break, as in a real frame's locals
            f_locals.update(_pc_bind(signature, target, args, kwargs))
            if pinned is not None:
                pinned(f_locals)
            # A tag-safe root's fast path can refuse once without running its
            # tree and disarm itself, so a miss is checked a second time.
            for _ in range(2):
                for check, fn in bound:
                    if check(f_locals):
                        return fn(*args, **kwargs)
            if _torch.get_num_threads() != threads[0]:
                # The thread count moved since the guards were built for it.
                threads[0] = _torch.get_num_threads()
                variants[:] = load_variants()
                bound[:] = bind(closure)
                return call(bound, closure, args, kwargs)
            failures = []
            for i, (_check, explain, _body) in enumerate(variants):
                failures.append(f"variant {i}: " + " ".join(str(explain(f_locals) or "<guard failed>").split()))
            _pc_fail(
                f"no captured variant of {target.co_name!r} covers this call "
                f"({len(bound)} captured); failed guards: " + " | ".join(failures)
                + ". The artifact serves only what the capture exercised: capture a call "
                "like this one too."
            )

        def bind(closure):
            return [(check, function(body, closure)) for check, _explain, body in variants]

        if target.co_freevars:
            # Dynamo binds a continuation that closes over locals as a factory
            # taking the closure tuple; the frame ahead of it passes one.
            def factory(closure):
                bound = bind(closure)
                return lambda *args, **kwargs: call(bound, closure, args, kwargs)
            return factory
        bound = bind(None)

        def dispatch(*args, **kwargs):
            return call(bound, None, args, kwargs)
        dispatch.__name__ = target.co_name
        return dispatch

    entry = None
    for frame in frames:
        d = dispatcher(frame)
        if frame["entry"]:
            entry = d
            continue
        d.__precompile_artifact__ = tag
        scope = vars(_pc_import(frame["module"]))
        for name in frame["resume_names"]:
            _pc_seed(scope, name, d)
    return entry


class _PcBackend:
    """What torch._dynamo.package.CompilePackage.install wants of a backend."""

    def __init__(self, kind, payload):
        self._kind, self._payload = kind, payload

    def after_deserialization(self):
        return self._payload.after_deserialization() if self._kind == "aot" else self._payload


def _pc_entry_function():
    fn = _pc_import(FN_MODULE)
    for part in FN_QUALNAME.split("."):
        fn = getattr(fn, part, None)
    while getattr(fn, "__precompile_site__", False):  # @torch.compile's wrapper under fn's name
        fn = fn.__wrapped__
    if not isinstance(fn, _types.FunctionType):
        _pc_fail(f"{FN_MODULE}.{FN_QUALNAME} is not a function in the serving process")
    return fn


def _pc_install():
    """Install the captured entries onto the live code objects; returns the live fn
    and the code objects installed onto."""
    from torch._dynamo.package import CompilePackage

    _pc_check_build()
    fn = _pc_entry_function()
    cache_entry = _pc_unpack(_PACKAGE)
    if _PC_PROGRAMS:
        backends = {bid: _PcBackend("fn", fn) for bid, fn in _pc_program_graphs().items()}
    else:
        backends = {bid: _PcBackend(*payload) for bid, payload in _pc_unpack(_BACKENDS).items()}
    try:
        for module_name in _PC_MINTED:
            _pc_minted(module_name, vars(_pc_import(module_name)))
        package = CompilePackage(fn, cache_entry)
        import torch._dynamo.package as _package_module

        load_state = _package_module.load_guards_state
        def read_state(blob):
            with _pc_fsdp_modules_kept():
                return _pc_serving_state(load_state(blob))

        _package_module.load_guards_state = read_state
        try:
            with _pc_captured_values():
                package.install(backends)
        finally:
            _package_module.load_guards_state = load_state
    except _PrecompileError:
        raise
    except Exception as e:
        _pc_fail(f"cannot install onto this process: {type(e).__name__}: {e}. A captured "
                 "source may have changed since capture; capture again")
    return fn, package


def _pc_install_targets():
    """The live code objects _pc_install() would load entries onto."""
    if _PC_LEAN:
        frames = _pc_unpack(_FRAMES)
        return [_pc_entry_function().__code__] + [_pc_live_code(f) for f in frames
                                                  if not f["entry"] and f["lookup"] is not None]
    from torch._dynamo.package import _lookup_code

    fn = _pc_entry_function()
    codes = [fn.__code__]
    for code in _pc_unpack(_PACKAGE).codes[1:]:
        if not code.install_to_global and not code.bypassed:
            try:
                codes.append(_lookup_code(code))
            except Exception as e:
                _pc_fail(f"cannot find the captured frame {code.python_code.co_name!r} in "
                         f"module {code.python_module!r} ({e}); capture again")
    return codes



class _PcGuardManager:
    """What the frame evaluator reads of an entry's guard manager: a C++ root,
    whose one guard is the variant's generated check over the frame's locals."""

    def __init__(self, check, explain):
        from torch._C._dynamo.guards import RootGuardManager

        self.root = RootGuardManager()
        self.root.add_lambda_guard(check, ["the artifact's generated guards"], None)
        self._explain = explain

    def check_verbose(self, f_locals):
        """What Dynamo's fail_on_recompile message prints of a precompiled entry."""
        return _types.SimpleNamespace(result=False, verbose_code_parts=[self._explain(f_locals)])

    def __repr__(self):
        return "<precompiled guards>"


# Live code object -> what serving it needs when its entries miss: a function of
# the frame's locals naming the failed guards (raising first if a pinned binding
# moved), None for a frame served as plain Python, or a str saying why the artifact
# holds no variant of it. Filled by _pc_lean_install().
_PC_INSTALLED = {}


def _pc_check_sources():
    """Refuse when a source Dynamo traced changed since capture (as Dynamo's
    package does): the transformed bytecode and graphs encode the old one."""
    for module, first, last, checksum in _pc_unpack(_SOURCES):
        try:
            lines = _inspect.getsourcelines(_pc_import(module))[0][first - 1:last - 1]
        except (OSError, TypeError) as e:
            _pc_fail(f"cannot read the source of module {module!r} ({e}); serve with the captured "
                     "sources installed")
        if _hashlib.sha256("".join(lines).encode()).hexdigest() != checksum:
            _pc_fail(f"cannot install onto this process: the source of {module} (lines {first}-{last}) "
                     "changed since capture; capture again")


def _pc_live_code(frame):
    """The live code object of an ordinary-call frame (a child module's forward),
    found as Dynamo's package finds it."""
    import ast as _ast

    name, source = frame["lookup"]
    obj = _pc_import(frame["module"])
    try:
        for part in name.split("."):
            obj = getattr(obj, part)
        for part in source.split("."):
            if part.endswith("]"):
                i = part.rfind("[")
                obj = getattr(obj, part[:i])[_ast.literal_eval(part[i + 1:-1])]
            else:
                obj = getattr(obj, part)
    except Exception as e:  # noqa: BLE001 - any failure to find it is the same refusal
        _pc_fail(f"cannot find the captured frame {frame['name']!r} in module {frame['module']!r} "
                 f"({type(e).__name__}: {e}); capture again")
    if not isinstance(obj, _types.CodeType):
        _pc_fail(f"{frame['module']}.{name}.{source} is not a code object in this process; capture again")
    return obj


def _pc_same_code(frame, live):
    captured = _pc_code(frame["code"])
    if live != captured:  # bytecode, constants, names, line table: not the file name
        _pc_fail(f"cannot install onto this process: {frame['name']!r} "
                 f"({live.co_filename}:{live.co_firstlineno}) changed since capture; capture again")
    return live


def _pc_lean_entries(frame, scope, target):
    """Load the frame's variants onto target as precompile entries: each one's
    generated checks as the guard, its transformed bytecode as the code. Returns
    the refusal's explanation for a call none covers."""
    from torch._C._dynamo.eval_frame import _load_precompile_entry

    pinned = _pc_pins(frame, scope)
    threads = [None]
    built = []

    def rebuild():
        # the global-state guard is built on this host's thread count (see
        # _pc_serving_state); a moved count rebuilds every variant's checks
        threads[0] = _torch.get_num_threads()
        built[:] = [_pc_lean_variant(name, scope) for name, _body, _key in frame["variants"]]

    def guard(i):
        def check(f_locals):
            try:
                if pinned is not None:
                    pinned(f_locals)
                if built[i][0](f_locals):
                    return True
                if _torch.get_num_threads() != threads[0]:
                    rebuild()
                    return bool(built[i][0](f_locals))
            except Exception:  # noqa: BLE001 - a miss: explain() raises or names it
                pass
            return False
        return check

    def explain(f_locals):
        if pinned is not None:
            pinned(f_locals)  # raises naming the binding that moved
        return " | ".join(f"variant {i}: " + " ".join(str(ex(f_locals) or "<guard failed>").split())
                          for i, (_check, ex) in enumerate(built))

    rebuild()
    for i, (_name, body, key) in enumerate(frame["variants"]):
        if key:
            if scope.get(key, _pc_builtins(scope)) is not _pc_builtins(scope):
                _pc_fail(f"{key!r} in module {frame['module']!r} is bound to something "
                         "other than the builtins dict the guards read through")
            _pc_seed(scope, key, _pc_builtins(scope))
        _load_precompile_entry(target, _PcGuardManager(guard(i), explain), _marshal.loads(body))
    return explain


def _pc_off_the_evaluator(graph):
    """Run a compiled graph as torch._dynamo.disable runs one: its frame and every
    frame it enters skip the frame evaluator (a serve-time compile would
    otherwise trace the graph program itself)."""
    from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy

    fn = graph.func if isinstance(graph, _functools.partial) else graph
    set_code_exec_strategy(fn.__code__, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP))


def _pc_resume_function(code, scope, name):
    """A continuation bound as Dynamo binds it: a function, or a factory taking
    the closure tuple when it closes over locals."""
    if code.co_freevars:
        def factory(closure):
            return _types.FunctionType(code, scope, name, None, closure)
        return factory
    return _types.FunctionType(code, scope, name)


def _pc_lean_install():
    """Install the captured entries onto the live code objects without Dynamo:
    the frame evaluator (in torch._C, which import torch loads) runs each
    variant's transformed bytecode where its generated checks pass. Returns the
    live fn; _PC_INSTALLED says what to do with a frame whose entries miss."""
    _pc_check_build()
    _pc_check_sources()
    frames = _pc_unpack(_FRAMES)
    graphs = _pc_program_graphs()
    for graph in graphs.values():
        _pc_off_the_evaluator(graph)
    fn = _pc_entry_function()
    targets = []
    for frame in frames:  # find every live code object before binding anything
        if frame["resume_names"]:
            targets.append(_pc_code(frame["code"]))
        elif frame["entry"]:
            targets.append(_pc_same_code(frame, fn.__code__))
        elif frame["lookup"] is not None:
            targets.append(_pc_same_code(frame, _pc_live_code(frame)))
        else:  # nothing names it: like Dynamo's package, load onto the captured code
            targets.append(_pc_code(frame["code"]))
    for frame in frames:
        module = vars(_pc_import(frame["module"]))
        for name in frame["resume_names"]:
            if module.get(name) is not None:
                _pc_fail(f"{name!r} in module {frame['module']!r} is already bound (a live "
                         "torch.compile of the captured function, or another loaded artifact, "
                         "mints the same continuation names); load the artifact in a fresh process")
    seeded = set()
    for frame, target in zip(frames, targets):
        scope = vars(_pc_import(frame["module"]))
        if frame["module"] not in seeded:
            seeded.add(frame["module"])
            for backend_id, graph in graphs.items():
                _pc_seed(scope, backend_id, graph)
            _pc_minted(frame["module"], scope)
        for alias, module_name in frame["imports"].items():
            lazy = alias.startswith("_pc_lazy")
            _pc_seed(scope, alias, _PcLazyModule(module_name) if lazy else _pc_import(module_name))
        for name in frame["resume_names"]:
            _pc_seed(scope, name, _pc_resume_function(target, scope, name))
        kind = frame["kind"]
        if kind == "compiled":
            _PC_INSTALLED[target] = _pc_lean_entries(frame, scope, target)
        elif kind == "plain":
            _PC_INSTALLED[target] = None
        else:
            _PC_INSTALLED[target] = (
                "was bypassed at capture (its guards could not be serialized or a backend was "
                "missing), so the artifact holds no variant of it" if kind == "bypassed" else
                "ended with no guarded code at capture (Dynamo gave up on it), so the artifact "
                "holds no variant of it")
    return fn


def _pc_seeded_scopes():
    """The module dicts this artifact seeds Dynamo-minted names into, once loaded
    (torch_precompile.load() keeps later compiles in the process off those names)."""
    if SERVING_MODE == "standalone" or _PC_LEAN:
        names = {frame["module"] for frame in _pc_unpack(_FRAMES)}
    else:
        names = {FN_MODULE, *(code.python_module for code in _pc_unpack(_PACKAGE).codes)}
    return [vars(_pc_import(name)) for name in sorted(names | set(_PC_MINTED))]


if SERVING_MODE == "standalone":
    forward = _pc_standalone()
else:
    _pc_served = None

    def forward(*args, **kwargs):
        # Run alone, an installed artifact installs on first call, serves its
        # entries and runs any other call eagerly; torch_precompile.load()
        # refuses such calls instead.
        global _pc_served
        if _pc_served is None:
            _pc_served = _pc_lean_install() if _PC_LEAN else _pc_install()[0]
        if not _PC_LEAN:
            return _torch._dynamo.run(_pc_served)(*args, **kwargs)
        from torch._C._dynamo.eval_frame import set_eval_frame

        prior = set_eval_frame(False)  # run only: entries serve, anything else runs as is
        try:
            return _pc_served(*args, **kwargs)
        finally:
            set_eval_frame(prior)
