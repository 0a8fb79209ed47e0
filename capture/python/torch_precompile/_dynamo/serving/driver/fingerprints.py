# --- fingerprints: what a function, builtin or value is, spelled alike in every process ---
# A pin compares what a serving call finds against what the capture compiled with
# by these keys, never by identity (no object outlives its process): a function by
# its code, defaults and closure values, a builtin by its own name. The capture
# computes the same keys from this part (captured_values.py), one implementation.


def _pc_spell(value, depth=0):
    """A spelling of a default or closure value another process reproduces: a
    literal by value, a function by its fingerprint, a module, class or builtin by
    name, anything else by its type (what the trace reads of it, Dynamo guards)."""
    kind = type(value)
    if value is None or value is Ellipsis or kind in (bool, int, float, complex, str, bytes):
        return f"{kind.__name__}:{value!r}"
    if kind in (tuple, list):
        return kind.__name__ + "(" + ",".join(_pc_spell(v, depth) for v in value) + ")"
    if kind in (frozenset, set):
        return kind.__name__ + "{" + ",".join(sorted(_pc_spell(v, depth) for v in value)) + "}"
    if isinstance(value, _types.CodeType):
        return "code:" + _pc_code_digest(value)
    if isinstance(value, _types.FunctionType):
        if depth > 3:  # a closure that holds itself: its name stands for it
            return f"function:{value.__module__}.{value.__qualname__}"
        return "function:" + _pc_fingerprint(value, depth + 1)
    if isinstance(value, _types.ModuleType):
        return "module:" + value.__name__
    if isinstance(value, type):
        return f"class:{value.__module__}.{value.__qualname__}"
    if isinstance(value, _functools.partial):
        return ("partial(" + _pc_spell(value.func, depth) + "," + _pc_spell(value.args, depth) + ","
                + _pc_spell(tuple(sorted(value.keywords.items())), depth) + ")")
    if isinstance(value, _types.MethodType):
        owner = type(value.__self__)
        return f"method:{owner.__module__}.{owner.__qualname__}:" + _pc_spell(value.__func__, depth)
    if isinstance(value, (_torch.dtype, _torch.device)):
        return f"{kind.__name__}:{value}"
    key = _pc_builtin_key(value)
    if key is not None:
        return "builtin:" + repr(key)
    return f"object:{kind.__module__}.{kind.__qualname__}"


def _pc_code_digest(code):
    """What a code object computes: bytecode, constants (nested code included),
    names, arguments and flags; not its file name or line numbers."""
    h = _hashlib.sha256()
    for part in (code.co_name, getattr(code, "co_qualname", ""),
                 repr((code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags)),
                 repr(code.co_names), repr(code.co_varnames), repr(code.co_freevars), repr(code.co_cellvars)):
        h.update(part.encode() + b"\0")
    h.update(code.co_code)
    h.update(getattr(code, "co_exceptiontable", b""))
    for const in code.co_consts:
        h.update(b"\0" + _pc_spell(const).encode())
    return h.hexdigest()[:32]


def _pc_fingerprint(fn, depth=0):
    """A Python function's portable fingerprint: its module and qualified name,
    its code, defaults and closure values (_pc_spell)."""
    cells = []
    for cell in fn.__closure__ or ():
        try:
            cells.append(_pc_spell(cell.cell_contents, depth))
        except ValueError:  # an empty cell
            cells.append("<empty>")
    text = "|".join([str(fn.__module__), fn.__qualname__, _pc_code_digest(fn.__code__),
                     _pc_spell(fn.__defaults__, depth),
                     _pc_spell(tuple(sorted((fn.__kwdefaults__ or {}).items())), depth), *cells])
    return _hashlib.sha256(text.encode()).hexdigest()[:32]


def _pc_builtin_key(value):
    """A builtin's own name (not where it was found): its type, module, qualified
    name and the class or module it belongs to; None for anything else, and for a
    builtin bound to an instance, whose instance no name reaches."""
    kind = type(value).__name__
    if kind in ("OpOverload", "OpOverloadPacket") and type(value).__module__ == "torch._ops":
        return (kind, None, repr(value), None)
    if kind not in ("builtin_function_or_method", "method_descriptor", "wrapper_descriptor",
                    "getset_descriptor", "member_descriptor", "classmethod_descriptor",
                    "method-wrapper"):
        return None
    owner = getattr(value, "__objclass__", None) or getattr(value, "__self__", None)
    if owner is None or isinstance(owner, _types.ModuleType):
        home = getattr(owner, "__name__", None)
    elif isinstance(owner, type):
        home = f"{owner.__module__}.{owner.__qualname__}"
    else:
        return None
    return (kind, getattr(value, "__module__", None), getattr(value, "__qualname__", None)
            or getattr(value, "__name__", None), home)


def _pc_builtin_name(key):
    kind, module, qualname, home = key
    if kind in ("OpOverload", "OpOverloadPacket"):
        return f"torch.ops.{qualname}"
    return f"{home or module}.{str(qualname).rsplit('.', 1)[-1]}"


def _pc_live_functions(module, qualname):
    """The functions a module's qualified name reaches in this process: through
    static and class methods, a property's accessors and functools.wraps wrappers."""
    obj = _pc_import(module)
    for part in qualname.split("."):
        obj = _inspect.getattr_static(obj, part)
    stack, out = [obj], []
    while stack and len(out) < 8:
        obj = stack.pop()
        if isinstance(obj, (staticmethod, classmethod)):
            stack.append(obj.__func__)
        elif isinstance(obj, property):
            stack.extend(f for f in (obj.fget, obj.fset, obj.fdel) if f is not None)
        elif isinstance(obj, _types.FunctionType):
            out.append(obj)
            if hasattr(obj, "__wrapped__"):
                stack.append(obj.__wrapped__)
        elif hasattr(obj, "__wrapped__"):
            stack.append(obj.__wrapped__)
        elif hasattr(obj, "_torchdynamo_inline"):  # a TorchScript function: Dynamo traces its Python
            stack.append(obj._torchdynamo_inline)
    return out


def _pc_runs_captured_main():
    """Whether this process's __main__ is the script the capture ran (MAIN_SCRIPT):
    under another script, what ``__main__`` names is not the capture's."""
    main = getattr(_sys.modules.get("__main__"), "__file__", None)
    main = _os.path.realpath(main) if isinstance(main, str) else None
    return main == globals().get("MAIN_SCRIPT")


def _pc_class_function(held):
    """The function a class attribute calls: through static and class methods, a
    property's getter and a TorchScript function's Python (the capture records
    class paths by it too)."""
    while isinstance(held, (staticmethod, classmethod)):
        held = held.__func__
    if isinstance(held, property):
        held = held.fget
    return getattr(held, "_torchdynamo_inline", held)


def _pc_check_traced(traced):
    """Refuse when code the capture traced changed since (an edited helper, a method
    rebound on its class, a library patched in place): the graphs and transformed
    bytecode encode the captured code. (module, qualname, code digest) per function."""
    other_main = not _pc_runs_captured_main()
    for module, qualname, digest in traced:
        if module == "__main__" and other_main:
            continue  # another script: what it passes arrives as a value, checked by its pin
        if (module, qualname) == (FN_MODULE, FN_QUALNAME):
            continue  # the entry: checked at load, before a zero-code mode binds the artifact there
        try:
            live = _pc_live_functions(module, qualname)
        except (AttributeError, _PrecompileError) as e:
            _pc_fail(f"{module}.{qualname}, whose code the capture traced, cannot be found here "
                     f"({type(e).__name__}: {e}); it changed since the capture: capture again")
        if not any(_pc_code_digest(fn.__code__) == digest for fn in live):
            _pc_fail(f"{module}.{qualname} changed since the capture (its code is not the code "
                     "the capture traced and compiled); capture again")


def _pc_class_paths_checker(paths, captured_with):
    """check() for (class module, class qualname, attribute, captured function's
    name, its fingerprint) paths: each attribute must still find, along the
    class's MRO, a function of that fingerprint (a method rebound on its class,
    a library class patched in one process and not the other, is refused naming
    both). A class no import reaches here is refused, but one of ``__main__``,
    which another script does not define. The fast path is one generated
    function of the class dicts, what each owner held and each function's code
    and defaults as the last call verified them."""
    fast = [None]

    def verify():
        proxies, names, lines, seen = {}, {}, [], set()

        def const(obj):
            if id(obj) not in names:
                names[id(obj)] = (f"k{len(names)}", obj)
            return names[id(obj)][0]

        for module, qualname, name, captured, fingerprint in paths:
            try:
                cls = _pc_import(module)
                for part in qualname.split("."):
                    cls = getattr(cls, part)
            except (ImportError, AttributeError):
                if module == "__main__":
                    continue
                _pc_fail(f"the class {module}.{qualname}, whose methods the capture traced, cannot be "
                         "imported here; serve with the library the capture ran")
            at = next((i for i, k in enumerate(cls.__mro__) if name in k.__dict__), None)
            held = None if at is None else cls.__mro__[at].__dict__[name]
            fn = _pc_class_function(held)
            if not isinstance(fn, _types.FunctionType) or _pc_fingerprint(fn) != fingerprint:
                found = "nothing" if at is None else (
                    f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
                    + (f" (from {cls.__mro__[at].__qualname__})" if at else ""))
                same = found.split(" (from ")[0] == captured
                _pc_fail(f"{module}.{qualname}.{name} finds {found} here, and {captured_with} "
                         f"{'another version of it' if same else captured} there (a method rebound on its "
                         "class, or a library class patched in one process and not the other): the graph "
                         "runs the captured code. Serve with the class as captured, or capture again")
            found_now = getattr(cls, name)
            if found_now is getattr(cls, name):  # what the class's own lookup finds, one read
                read = f"{const(cls)}.{name}" if name.isidentifier() else f"getattr({const(cls)}, {name!r})"
                checks = [(("found", id(cls), name), f"{read} is not {const(found_now)}")]
            else:  # a classmethod binds anew on each read: the dicts along the MRO
                for k in cls.__mro__[:at + 1]:
                    proxies.setdefault(k, k.__dict__)
                owner = proxies[cls.__mro__[at]]
                checks = [(("held", id(owner), name), f"{const(owner)}.get({name!r}) is not {const(held)}"),
                          *((("absent", id(k), name), f"{name!r} in {const(proxies[k])}")
                            for k in cls.__mro__[:at])]
            checks.append((("fn", id(fn)), f"{const(fn)}.__code__ is not {const(fn.__code__)} or "
                                           f"{const(fn)}.__defaults__ is not {const(fn.__defaults__)}"))
            for key, line in checks:
                if key not in seen:
                    seen.add(key)
                    lines.append(f"    if {line}: return False")
        ns = {n: obj for n, obj in names.values()}
        exec(compile("def fast():\n" + "\n".join(lines) + "\n    return True\n", "<class paths>", "exec"), ns)
        fast[0] = ns["fast"]

    def check():
        if fast[0] is None or not fast[0]():
            verify()
    return check
