# --- pins: the bindings a frame's guards could not check, checked by name ---

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
