# --- pins: the bindings a frame's guards could not check, checked by a portable key ---
# An identity guard Dynamo cannot serialize (a function passed as an argument, a
# builtin, a helper read off a module, a registry entry, a process group) becomes
# a pin: (source expression, recipe). A function is checked by a fingerprint of
# its code, defaults and closure, a builtin or class by its own qualified name, a
# module by name, a configuration object by its values. Pins every variant of a
# frame shares are checked once per call, before the variants (a miss refuses
# naming the binding); a pin only some variants hold is part of those variants'
# guards (it tells them apart, as the identity guard did).


def _pc_named(value):
    """How a refusal names what a binding holds."""
    if isinstance(value, _types.FunctionType):
        return f"the function {value.__module__}.{value.__qualname__}"
    key = _pc_builtin_key(value)
    if key is not None:
        return f"the builtin {_pc_builtin_name(key)}"
    if isinstance(value, type):
        return f"the class {value.__module__}.{value.__qualname__}"
    if isinstance(value, _types.ModuleType):
        return f"the module {value.__name__}"
    if value is _PC_GONE:
        return "nothing readable"
    return f"a {type(value).__module__}.{type(value).__qualname__}"


def _pc_spelled_slot(expr):
    import re as _re

    return _re.sub(r"\bL\[(['\"])(.*?)\1\]", r"\2", expr)


# A pin's recipe kind -> (test maker, fast condition): the maker returns
# test(value) -> None (holds what the capture compiled against) or the refusal;
# the fast condition, over the value ``v`` and the last verified objects O/C/D,
# skips the test on a call that reads what the last one verified.
def _pc_code_test(frame, expr, recipe):
    """A Python function (an argument, a helper read off a module, a method read
    off a class, a lambda, a closure): the same code, defaults and closure values."""
    _kind, module, qualname, fingerprint = recipe
    slot = _pc_spelled_slot(expr)

    def test(fn):
        # a TorchScript function: Dynamo traces its Python function (captured under PYTORCH_JIT=0)
        fn = getattr(fn, "_torchdynamo_inline", fn)
        if not isinstance(fn, _types.FunctionType):
            return (f"{slot} holds {_pc_named(fn)}, and {frame['name']!r} was captured with the "
                    f"function {module}.{qualname} there; capture again with this value")
        if _pc_fingerprint(fn) == fingerprint:
            return None
        if (fn.__module__, fn.__qualname__) == (module, qualname):
            return (f"{module}.{qualname} (read at {slot}) changed since the capture: its code, "
                    f"defaults or closure differ from those {frame['name']!r} was compiled with; "
                    "capture again")
        return (f"{slot} holds {_pc_named(fn)}, and {frame['name']!r} was captured with "
                f"{module}.{qualname} there; capture again with this function")
    return test


def _pc_builtin_test(frame, expr, recipe):
    """A builtin (torch.relu passed as an argument, len in the builtins dict,
    torch.nn.functional.gelu read off its module): the same builtin, by its own
    name, whatever a module attribute now holds."""
    key = tuple(recipe[1])
    slot = _pc_spelled_slot(expr)
    why = (f"{slot} holds {{}}, and {frame['name']!r} was captured with the builtin "
           f"{_pc_builtin_name(key)} there (a patch or another argument changed it); capture "
           "again with this value")
    return lambda value: None if _pc_builtin_key(value) == key else why.format(_pc_named(value))


def _pc_class_test(frame, expr, recipe):
    """A class: its own module and qualified name, and the one they import (a
    builtin type by where the types module names it), by identity."""
    _kind, module, qualname, home, path = recipe
    slot = _pc_spelled_slot(expr)

    def test(cls):
        if (isinstance(cls, type) and (cls.__module__, cls.__qualname__) == (module, qualname)
                and cls is _pc_make(("attr", home, path), f"the class {module}.{qualname}")):
            return None
        return (f"{slot} holds {_pc_named(cls)}, and {frame['name']!r} was captured with the class "
                f"{module}.{qualname} there; capture again with this value")
    return test


def _pc_module_test(frame, expr, recipe):
    name = recipe[1]
    slot = _pc_spelled_slot(expr)

    def test(module):
        # by its name, and the one imported under it (torch.ops namespaces are
        # modules no import names: their name alone)
        if (isinstance(module, _types.ModuleType) and module.__name__ == name
                and _sys.modules.get(name, module) is module):
            return None
        return (f"{slot} holds {_pc_named(module)}, and {frame['name']!r} was captured with the "
                f"module {name} there; capture again with this value")
    return test


def _pc_code_object_test(frame, expr, recipe):
    _kind, qualname, digest = recipe
    why = (f"{_pc_spelled_slot(expr)} no longer holds the code of {qualname} that "
           f"{frame['name']!r} was captured with (it changed since the capture); capture again")
    return lambda code: None if isinstance(code, _types.CodeType) and _pc_code_digest(code) == digest else why


def _pc_singleton_test(frame, expr, recipe):
    want = {"None": None, "True": True, "False": False, "Ellipsis": Ellipsis}[recipe[1]]
    why = (f"{_pc_spelled_slot(expr)} is not {recipe[1]}, which {frame['name']!r} was captured "
           "with; capture again with this value")
    return lambda value: None if value is want else why


def _pc_bound_builtin_test(frame, expr, recipe):
    """A builtin method bound to an instance (random.random on its module's Random):
    the same method of an instance of the same class."""
    _kind, name, module, qualname = recipe
    why = (f"{_pc_spelled_slot(expr)} holds {{}}, and {frame['name']!r} was captured with the builtin "
           f"method {name} of a {module}.{qualname} there; capture again with this value")

    def test(value):
        owner = type(getattr(value, "__self__", None))
        if (type(value).__name__ == "builtin_function_or_method" and getattr(value, "__name__", None) == name
                and (owner.__module__, owner.__qualname__) == (module, qualname)):
            return None
        return why.format(_pc_named(value))
    return test


def _pc_method_test(frame, expr, recipe):
    """A bound method guarded as a whole: its function's fingerprint and the class of
    the instance it is bound to (the instance's state, the trace guards as read)."""
    _kind, fingerprint, module, qualname, name = recipe
    why = (f"{_pc_spelled_slot(expr)} holds {{}}, and {frame['name']!r} was captured with the method "
           f"{name} of a {module}.{qualname} there; capture again with this value")

    def test(value):
        owner = type(getattr(value, "__self__", None))
        if (isinstance(value, _types.MethodType) and isinstance(value.__func__, _types.FunctionType)
                and (owner.__module__, owner.__qualname__) == (module, qualname)
                and _pc_fingerprint(value.__func__) == fingerprint):
            return None
        return why.format(_pc_named(value))
    return test


def _pc_partial_test(frame, expr, recipe):
    """A functools.partial guarded as a whole: its function, arguments and keywords
    as spelled (_pc_spell)."""
    why = (f"{_pc_spelled_slot(expr)} holds another functools.partial than the one {frame['name']!r} "
           "was captured with (its function or arguments differ); capture again with this value")
    return lambda value: None if isinstance(value, _functools.partial) and _pc_spell(value) == recipe[1] else why


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


# The four hook dicts of a module (prefix "") or of torch.nn.modules.module ("_global").
_PC_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _pc_hooks_test(frame, expr, recipe):
    """A module's hook dicts, or the process-wide ones: as many hooks as the
    capture ran with, in each. The graph holds the hooks in force at capture (each
    checked by a pin of its own); Dynamo leaves an empty dict unguarded
    (skip_nnmodule_hook_guards), so a hook added since would not run at all."""
    _kind, prefix, counts = recipe
    slot = _pc_spelled_slot(expr)

    def test(owner):
        for name, count in zip(_PC_HOOK_DICTS, counts):
            try:
                hooks = getattr(owner, prefix + name)
                held = [_pc_named(h) for h in hooks.values()]
            except Exception:  # noqa: BLE001 - not a hook dict any more
                return f"{slot}.{prefix}{name} is not the hook dict {frame['name']!r} was captured with; capture again"
            if len(held) != count:
                return (f"{slot}.{prefix}{name} holds {len(held)} hook(s) ({', '.join(held) or 'none'}) and "
                        f"{frame['name']!r} was captured with {count} there: the graph runs the capture's "
                        "hooks only. Remove the hook for this call, or capture again with it registered")
        return None
    return test


def _pc_hooks_fast(recipe):
    """The fast condition of a hooks pin: its owner's four dicts read in one expression."""
    _kind, prefix, counts = recipe
    # the owner's instance dict read once (a module's attribute reads are slow)
    names = [f"(d := vars(v))[{prefix + _PC_HOOK_DICTS[0]!r}]"] + [f"d[{prefix + n!r}]" for n in _PC_HOOK_DICTS[1:]]
    if not any(counts):
        return "not (" + " or ".join(names) + ")"
    return " and ".join(f"len({n}) == {c}" for n, c in zip(names, counts))


# kind -> (test maker, fast condition or None: always tested)
_PC_PIN_TESTS = {
    "code": (_pc_code_test, "v is O[{i}] and v.__code__ is C[{i}] and v.__defaults__ is D[{i}]"),
    "builtin": (_pc_builtin_test, "v is O[{i}]"),
    "class": (_pc_class_test, "v is O[{i}]"),
    "module": (_pc_module_test, "v is O[{i}]"),
    "singleton": (_pc_singleton_test, None),
    "code_object": (_pc_code_object_test, "v is O[{i}]"),
    "bound_builtin": (_pc_bound_builtin_test, "v is O[{i}]"),
    "method": (_pc_method_test, "v.__func__ is C[{i}] and v.__self__ is D[{i}]"),
    "partial": (_pc_partial_test, "v is O[{i}]"),
    "attr": (_pc_identity_test, None),
    "values": (_pc_values_test, None),
    "wrapper": (_pc_wrapper_test, None),
    "optimizer": (_pc_optimizer_test, None),
    "spelled": (_pc_spelled_test, None),
    "hooks": (_pc_hooks_test, None),  # its fast condition: _pc_hooks_fast
}

# What a pinned binding that can no longer be read holds: it has moved.
_PC_GONE = object()


def _pc_pin_checks(frame, pins, scope):
    """(ok, why) for a list of pins: ``ok(f_locals)`` is True while every binding
    holds what the capture compiled against (checked fast against the objects the
    last call verified), ``why(f_locals)`` names the first that does not (None if
    all hold). None when there is nothing to check."""
    if not pins:
        return None
    import builtins as _builtins

    reads, tests, lines, prefixes = [], [], [], {}
    unset = object()  # what no read returns: the first call of each pin takes its test
    state = {"O": [unset] * len(pins), "C": [unset] * len(pins), "D": [unset] * len(pins)}
    for i, (expr, recipe) in enumerate(pins):
        if recipe[0] == "process_group":
            reads.append(None)
            tests.append(_pc_group_check(frame, expr, recipe))
            lines.append(f"    if S({i}, None, L, G) is not None: return False")
            continue
        if recipe[0] == "config":
            reads.append(None)
            tests.append(_pc_config_check(frame, recipe))
            lines.append(f"    if S({i}, None, L, G) is not None: return False")
            continue
        if recipe[0] == "class_paths":
            reads.append(None)
            tests.append(_pc_class_paths_check(frame, recipe))
            lines.append(f"    if S({i}, None, L, G) is not None: return False")
            continue
        if recipe[0] not in _PC_PIN_TESTS:
            _pc_fail(f"the artifact checks {expr} by a recipe this driver does not know "
                     f"({recipe[0]!r}); load it with the torch_precompile that wrote it")
        make, fast = _PC_PIN_TESTS[recipe[0]]
        reads.append(eval(compile(f"lambda G, L: {expr}", "<pin>", "eval"), {"__builtins__": _builtins}))
        tests.append(make(frame, expr, recipe))
        lines.append(f"    v = {_pc_shared_reads(expr, lines, prefixes)}")
        fast = _pc_hooks_fast(recipe) if recipe[0] == "hooks" else fast  # four dicts, one read
        held = f"not ({fast.format(i=i)}) and " if fast else ""
        lines.append(f"    if {held}S({i}, v, L, G) is not None: return False")

    def settle(i, value, f_locals, scope_):
        """The slow path of pin i: test it, remember what passed, else say why."""
        if reads[i] is None:  # a process group or config slot: its check raises
            try:
                tests[i](scope_, f_locals)
            except _PrecompileError as e:  # its reason, without _pc_fail's prefix
                return str(e).removeprefix(f"precompiled {FN_NAME}: ")
            return None
        try:
            why = tests[i](value)
        except Exception:  # noqa: BLE001 - what the test could not read has moved
            why = tests[i](_PC_GONE)
        if why is None:  # what the fast condition compares the next read against
            method = isinstance(value, _types.MethodType)
            state["O"][i] = value
            state["C"][i] = value.__func__ if method else getattr(value, "__code__", None)
            state["D"][i] = value.__self__ if method else getattr(value, "__defaults__", None)
        return why

    source = "def ok(L, G, O=O, C=C, D=D, S=S):\n" + "\n".join(lines) + "\n    return True\n"
    ns = {"S": settle, **state}
    exec(compile(source, f"<pins of {frame['name']}>", "exec"), ns)
    fast_ok = ns["ok"]

    def ok(f_locals):
        try:
            return fast_ok(f_locals, scope)
        except Exception:  # noqa: BLE001 - a binding that cannot be read: why() names it
            return False

    def why(f_locals):
        for i, read in enumerate(reads):
            if read is None:
                reason = settle(i, None, f_locals, scope)
            else:
                try:
                    value = read(scope, f_locals)
                except Exception:  # noqa: BLE001 - a binding that is gone has moved
                    value = _PC_GONE
                reason = settle(i, value, f_locals, scope)
            if reason is not None:
                return reason
        return None
    return ok, why


def _pc_shared_reads(expr, lines, prefixes):
    """``expr`` as the generated check reads it: each attribute or item step off G
    or L read once per call into a local (``G['torch'].nn`` of ten pins is one
    read, appended to ``lines``), the last step off that local."""
    import ast as _ast

    node = _ast.parse(expr, mode="eval").body
    chain = []
    while isinstance(node, (_ast.Attribute, _ast.Subscript)):
        chain.append(node)
        node = node.value
    if not (isinstance(node, _ast.Name) and node.id in ("G", "L")) or not chain:
        return expr

    def read(base, step):  # the step off its base: ".attr" or "[key]"
        if isinstance(step, _ast.Attribute) and step.attr == "_modules":
            # a module's children, from its instance dict: nn.Module's __getattr__
            # makes every attribute read take the slow path (a miss here falls to
            # the pins' explained path, which reads the attribute itself)
            return f"vars({base})['_modules']"
        return base + _ast.unparse(step)[len(_ast.unparse(step.value)):]

    base = node.id
    for step in reversed(chain[1:]):
        text = _ast.unparse(step)
        if text not in prefixes:
            prefixes[text] = f"p{len(prefixes)}"
            lines.append(f"    {prefixes[text]} = {read(base, step)}")
        base = prefixes[text]
    return read(base, chain[0])


def _pc_pins(frame, scope):
    """The checks every variant of the frame shares: None, or a callable of the
    call's locals that raises naming the first binding that moved."""
    checks = _pc_pin_checks(frame, frame.get("pins") or [], scope)
    if checks is None:
        return None
    ok, why = checks

    def check(f_locals):
        if not ok(f_locals):
            reason = why(f_locals)
            if reason is not None:
                _pc_fail(reason)
    return check


def _pc_with_variant_pins(frame, variants, scope):
    """Each variant's (check, explain, code) with the pins only that variant holds
    made part of its guards (frame["variant_pins"], in variant order)."""
    per_variant = frame.get("variant_pins") or [[] for _ in variants]
    out = []
    for (check, explain, code), pins in zip(variants, per_variant):
        checks = _pc_pin_checks(frame, pins, scope)
        if checks is None:
            out.append((check, explain, code))
            continue
        ok, why = checks
        out.append((lambda f_locals, ok=ok, check=check: ok(f_locals) and check(f_locals),
                    lambda f_locals, why=why, explain=explain: why(f_locals) or explain(f_locals),
                    code))
    return out


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


def _pc_class_paths_check(frame, recipe):
    """The methods the trace reached through a class (``self.extra``, a base's
    ``forward``): each name must still find, along the class's MRO, a function
    of the fingerprint the capture traced (fingerprints.py's
    ``_pc_class_paths_checker``). Dynamo trusts a class's contents once its
    identity matches; no identity outlives the process, so a method rebound on
    its class, or a library class patched in one process and not the other, is
    seen here."""
    paths = [tuple(p) for p in recipe[1]]
    if not _pc_runs_captured_main():  # another script: its classes are not the capture's
        paths = [p for p in paths if p[0] != "__main__"]
    check = _pc_class_paths_checker(paths, f"{frame['name']!r} was captured with")
    return lambda _scope, _f_locals: check()
