# --- installed_dynamo_free (SERVING_MODE = "installed", DYNAMO_FREE = True) ---
# The captured entries are loaded onto the live code objects through the frame
# evaluator's own entry points in torch._C (each variant's generated checks as a
# C++ guard manager's one guard), and the evaluator serves them;
# torch_precompile.load() wraps the calls. No Dynamo is imported.

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
# holds no variant of it. Filled by _pc_install().
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


def _pc_entries(frame, scope, target):
    """Load the frame's variants onto target as precompile entries: each one's
    generated checks as the guard, its transformed bytecode as the code. Returns
    the refusal's explanation for a call none covers."""
    from torch._C._dynamo.eval_frame import _load_precompile_entry

    pinned = _pc_pins(frame, scope)
    threads = [None]
    built = []

    def rebuild():
        # the global-state guard is built on this host's thread count
        # (_pc_on_this_host); a moved count rebuilds every variant's checks
        threads[0] = _torch.get_num_threads()
        built[:] = _pc_with_variant_pins(frame, _pc_variants(frame, target, scope), scope)

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
        return _pc_failed_variants([ex for _check, ex, _code in built], f_locals)

    rebuild()
    for i, (_check, _explain, code) in enumerate(built):
        _load_precompile_entry(target, _PcGuardManager(guard(i), explain), code)
    return explain


def _pc_off_the_evaluator(graph):
    """Run a compiled graph as torch._dynamo.disable runs one: its frame and every
    frame it enters skip the frame evaluator (a serve-time compile would
    otherwise trace the graph program itself)."""
    from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy

    fn = graph.func if isinstance(graph, _functools.partial) else graph
    set_code_exec_strategy(fn.__code__, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP))


def _pc_install():
    """Install the captured entries onto the live code objects without Dynamo:
    the frame evaluator (in torch._C, which import torch loads) runs each
    variant's transformed bytecode where its generated checks pass. Returns the
    live fn; _PC_INSTALLED says what to do with a frame whose entries miss."""
    _pc_check_build()
    _pc_check_sources()
    _pc_check_traced(_pc_unpack(_TRACED))
    frames = _pc_unpack(_FRAMES)
    graphs = _pc_graphs()
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
            _pc_seed_module(scope, frame["module"], graphs)
        _pc_seed_frame(frame, scope)
        for name in frame["resume_names"]:
            _pc_seed(scope, name, _pc_function(target, scope, name))
        kind = frame["kind"]
        if kind == "compiled":
            _PC_INSTALLED[target] = _pc_entries(frame, scope, target)
        elif kind == "plain":
            _PC_INSTALLED[target] = None
        else:
            _PC_INSTALLED[target] = _pc_no_variant(kind)
    return fn


def _pc_install_targets():
    """The live code objects _pc_install() would load entries onto."""
    frames = _pc_unpack(_FRAMES)
    return [_pc_entry_function().__code__] + [_pc_live_code(f) for f in frames
                                              if not f["entry"] and f["lookup"] is not None]


def _pc_seeded_scopes():
    return _pc_module_scopes(frame["module"] for frame in _pc_unpack(_FRAMES))


forward = _pc_installed_forward(_pc_install)
