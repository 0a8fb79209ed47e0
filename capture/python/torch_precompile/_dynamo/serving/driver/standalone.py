# --- standalone (SERVING_MODE = "standalone") ---
# Nothing is installed and no frame evaluator is involved. Each frame becomes a
# dispatcher that checks its variants' guards against the call's locals and runs
# the first variant that matches; a continuation is reached the way Dynamo emits
# it, by LOAD_GLOBAL on its resume name in the module it was compiled in, so
# binding the dispatcher under that name is all the graph-break wiring needed.
# The only names bound into a module are ones Dynamo minted while tracing (resume
# functions, compiled graphs, import aliases, the builtins dict key). A call no
# variant covers RAISES: there is no compiler behind a source artifact.

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


class _PcStandalone:
    """The artifact's frames as dispatchers. Resume names come from a per-process
    counter, so another artifact or a live compile may hold the same one; the tag
    tells this artifact's apart."""

    def __init__(self):
        _pc_check_build()
        self.frames = _pc_unpack(_FRAMES)
        self.binding = self.live_binding(next(f for f in self.frames if f["entry"]))
        self.graphs = _pc_graphs()
        graphs_text = repr(globals().get("_GRAPHS")) + globals().get("_BACKENDS", "")
        self.tag = _hashlib.sha256((_FRAMES + graphs_text).encode()).hexdigest()[:16]
        self.scopes = {}

    def live_binding(self, entry):
        """The serving process's defaults of the captured function: a call that omits
        an argument binds what this process's function says, as eager does, never
        what the capture's said. The function must be the captured code."""
        captured = _pc_unpack(_ENTRY_BINDING)
        fn = _pc_live_entry()
        if fn is None:
            if captured["defaults"] or captured["kwdefaults"]:
                _pc_fail(f"{FN_MODULE}.{FN_QUALNAME} is not a function in this process, so the "
                         "defaults of its arguments cannot be read; serve it where its module defines it")
            return {"defaults": None, "kwdefaults": None}
        if _pc_code_digest(fn.__code__) != _pc_code_digest(_pc_code(entry["code"])):
            _pc_fail(f"{FN_MODULE}.{FN_QUALNAME} changed since the capture (its code is not the "
                     "code the capture compiled); capture again")
        return {"defaults": fn.__defaults__, "kwdefaults": fn.__kwdefaults__}

    def refuse_held_names(self):
        """Refuse before seeding anything: a resume name held by anything but this
        artifact (the live compile that captured it, another artifact, a user
        binding) would be repointed under the frame that LOAD_GLOBALs it."""
        for frame in self.frames:
            module = vars(_pc_import(frame["module"]))
            for name in frame["resume_names"]:
                held = module.get(name)
                other = getattr(held, "__precompile_artifact__", None)
                if held is not None and other != self.tag:
                    _pc_fail(
                        f"{name!r} in module {frame['module']!r} is already bound "
                        + (f"by another loaded artifact ({other})" if other else
                           "(a live torch.compile of the captured function, e.g. the capture "
                           "that produced this artifact, mints the same continuation names)")
                        + "; load the artifact in a fresh process"
                    )

    def scope_of(self, frame):
        """The frame's module globals, seeded with what its bytecode loads."""
        scope = self.scopes.get(frame["module"])
        if scope is None:
            scope = self.scopes[frame["module"]] = vars(_pc_import(frame["module"]))
            _pc_seed_module(scope, frame["module"], self.graphs)
        _pc_seed_frame(frame, scope)
        return scope

    def dispatcher(self, frame):
        """What serves the frame: its code as a function (plain), a refusal (no
        variant), or a dispatcher over its variants (compiled)."""
        target = _pc_code(frame["code"])
        kind = frame["kind"]
        if kind == "plain":
            return _pc_function(target, self.scope_of(frame), target.co_name)
        if kind != "compiled":
            message = f"the captured frame {target.co_name!r} {_pc_no_variant(kind)}; capture again"
            if frame["entry"]:
                _pc_fail(message)

            def refuse(*_args, **_kwargs):
                _pc_fail(message)
            return refuse
        return _PcFrame(frame, target, self.scope_of(frame),
                        self.binding if frame["entry"] else None).dispatcher()

    def entry(self):
        """Bind every continuation under its resume names; returns the entry's
        dispatcher, which checks at its first call that the code the capture traced
        is unchanged (by then the serving process has imported and set up what it
        runs: a method rebound on its class before the first call is seen)."""
        dispatch = self.bind_frames()
        unchecked = [_pc_unpack(_TRACED)]

        def forward(*args, **kwargs):
            if unchecked:
                _pc_check_traced(unchecked[0])
                unchecked.clear()
            return dispatch(*args, **kwargs)
        forward.__name__ = getattr(dispatch, "__name__", "forward")
        return forward

    def bind_frames(self):
        self.refuse_held_names()
        entry = None
        for frame in self.frames:
            d = self.dispatcher(frame)
            if frame["entry"]:
                entry = d
                continue
            d.__precompile_artifact__ = self.tag
            scope = vars(_pc_import(frame["module"]))
            for name in frame["resume_names"]:
                _pc_seed(scope, name, d)
        return entry


class _PcFrame:
    """One compiled frame: its variants, tried in capture order against the
    call's locals; the first whose guards pass runs. A call none covers RAISES."""

    def __init__(self, frame, target, scope, binding):
        self.frame, self.target, self.scope = frame, target, scope
        self.defaults = binding["defaults"] if binding else None
        self.kwdefaults = binding["kwdefaults"] if binding else None
        self.variants = _pc_with_variant_pins(frame, _pc_variants(frame, target, scope), scope)
        # the global-state guards were built on this thread count (_pc_on_this_host)
        self.threads = _torch.get_num_threads()
        cells = tuple(_types.CellType() for _ in target.co_freevars) or None
        self.signature = _inspect.signature(self.function(target, cells))
        self.pinned = _pc_pins(frame, scope)

    def function(self, code, closure):
        f = _types.FunctionType(code, self.scope, self.target.co_name, self.defaults, closure)
        if self.kwdefaults:
            f.__kwdefaults__ = dict(self.kwdefaults)
        return f

    def bind(self, closure):
        return [(check, self.function(body, closure)) for check, _explain, body in self.variants]

    def missed(self, bound, closure, args, kwargs, f_locals):
        """No variant covered the call: rebuild the checks if the thread count
        moved since they were built for it, else refuse naming the failed guards."""
        if _torch.get_num_threads() != self.threads:
            self.threads = _torch.get_num_threads()
            self.variants = _pc_with_variant_pins(self.frame, _pc_variants(self.frame, self.target, self.scope),
                                                  self.scope)
            bound[:] = self.bind(closure)
            return self.call(bound, closure, args, kwargs)
        failed = _pc_failed_variants([explain for _check, explain, _body in self.variants], f_locals)
        _pc_fail(
            f"no captured variant of {self.target.co_name!r} covers this call "
            f"({len(bound)} captured); failed guards: {failed}. The artifact serves only what "
            "the capture exercised: capture a call like this one too"
            + (" (a dimension the capture saw at one size only is static: capture calls of two "
               "sizes, which marks it dynamic as torch.compile does, or compile with dynamic=True)"
               if "size mismatch" in failed else "") + "."
        )

    def dispatcher(self):
        # the per-call path reads locals of this closure, not attributes
        target, signature, pinned, missed = self.target, self.signature, self.pinned, self.missed
        freevars = target.co_freevars

        def call(bound, closure, args, kwargs):
            f_locals = {}
            for name, cell in zip(freevars, closure or ()):
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
            return missed(bound, closure, args, kwargs, f_locals)
        self.call = call

        if freevars:
            # Dynamo binds a continuation that closes over locals as a factory
            # taking the closure tuple; the frame ahead of it passes one.
            def factory(closure):
                bound = self.bind(closure)
                return lambda *args, **kwargs: call(bound, closure, args, kwargs)
            return factory
        bound = self.bind(None)

        def dispatch(*args, **kwargs):
            return call(bound, None, args, kwargs)
        dispatch.__name__ = target.co_name
        return dispatch


def _pc_seeded_scopes():
    return _pc_module_scopes(frame["module"] for frame in _pc_unpack(_FRAMES))


forward = _PcStandalone().entry()
