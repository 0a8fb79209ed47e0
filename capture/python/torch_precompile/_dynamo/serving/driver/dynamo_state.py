# --- dynamo_state: frames through Dynamo's serialized state ---
# Each variant's guards are Dynamo's serialized guard state, built into a guard
# manager by Dynamo; code objects are Dynamo's SerializedCode; the graphs are
# Dynamo's backend payloads (_BACKENDS: an AOTAutograd bundle, an fx graph or a
# program) unless the artifact holds programs.

def _pc_code(blob):
    from torch._dynamo.package import SerializedCode

    return SerializedCode.to_code_object(blob)


def _pc_payload(backend_id, kind, payload):
    """The compiled graph a _BACKENDS payload holds."""
    if kind == "aot":
        return payload.after_deserialization()
    if kind == "program":
        return _pc_program(backend_id, payload)
    return payload


def _pc_graphs():
    """The compiled graphs, run as Dynamo runs a backend's: off the evaluator."""
    out = {}
    for backend_id, (kind, payload) in _pc_unpack(_BACKENDS).items():
        fn = _pc_payload(backend_id, kind, payload)
        out[backend_id] = _torch._dynamo.disable(fn)
    return out


def _pc_variants(frame, target, scope):
    """(check, explain, transformed code) per captured variant of the frame: each
    one's guard manager built from its serialized state as this artifact serves it.
    A state whose guards read what this process does not hold yet (a registry a
    library fills when its model is built, with load() before the model) is built
    at the first call that reaches it instead."""
    out = []
    for guards_blob, body in frame["variants"]:
        try:
            check, explain = _pc_guard_manager(frame, guards_blob, target, scope)
        except _PrecompileError:
            raise
        except Exception:  # noqa: BLE001 - tried again when a call needs it
            check, explain = _pc_deferred_guards(frame, guards_blob, target, scope)
        out.append((check, explain, _pc_code(body)))
    return out


def _pc_guard_manager(frame, guards_blob, target, scope):
    from torch._dynamo.package import load_guard_manager, load_guards_state

    with _pc_captured_values():
        state = _pc_read_state(guards_blob, load_guards_state)
        key = state.output_graph.name_of_builtins_dict_key_in_fglobals
        if key:
            _pc_seed_builtins(scope, key, frame["module"])
        manager = load_guard_manager(state, target, scope)
    return manager.check, _pc_verbose(manager)


def _pc_deferred_guards(frame, guards_blob, target, scope):
    built = []

    def built_now():
        if not built:
            try:
                built.append(_pc_guard_manager(frame, guards_blob, target, scope))
            except _PrecompileError:
                raise
            except Exception as e:  # noqa: BLE001 - named in the refusal
                _pc_fail(f"the guards of a variant of {frame['name']!r} cannot be rebuilt in this "
                         f"process ({type(e).__name__}: {e}): they read something this process "
                         "does not hold (build the model, or import what the capture read, before "
                         "the call), or capture again")
        return built[0]

    return (lambda f_locals: built_now()[0](f_locals)), (lambda f_locals: built_now()[1](f_locals))


def _pc_read_state(blob, load_guards_state):
    """A variant's guard state, read back by Dynamo's ``load_guards_state`` as this
    artifact serves it."""
    with _pc_fsdp_modules_kept():
        return _pc_serving_state(load_guards_state(blob))


# Unpacked once; every variant's state reads them.
_PC_POLICY_DROPPED = {tuple(slot) for slot in _pc_unpack(_POLICY_DROPPED)}
_PC_SLOT_SPELLING = _pc_unpack(_SLOT_SPELLING)


def _pc_verbose(manager):
    def explain(f_locals):
        info = manager.check_verbose(f_locals)
        parts = [p for p in info.verbose_code_parts if p] or ["<guard failed>"]
        return "; ".join(" ".join(p.split()) for p in parts[:3])
    return explain


def _pc_without_policy_slots(graph, policy, spelling):
    """The output graph's guards without the invariance policy's slots (``policy``:
    (guard type, slot) pairs, a slot spelled by ``spelling``'s (pattern, replacement)
    rules, guards.slot_source's): kept guards that held one value in every
    captured variant, of an identity type. The capture's Dynamo-free build drops
    them the same way (dynamo_free.serving_state)."""
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
    _pc_without_policy_slots(graph, _PC_POLICY_DROPPED, _PC_SLOT_SPELLING)
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

    parts = list(dict.fromkeys(guard.code_list))  # a build on 2.11 may repeat its parts
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
    module. They build their own class while the read lasts. And a state read
    before anything in this process was sharded (``load`` before the model is
    built) finds the class fully_shard will make in its registry
    (``_pc_fsdp_class``), not a KeyError."""

    def __enter__(self):
        from torch._dynamo.guards import GuardsStatePickler

        self._pickler = GuardsStatePickler
        self._unpickle = GuardsStatePickler.__dict__.get("_unpickle_fsdp_module_type")
        if self._unpickle is not None:
            GuardsStatePickler._unpickle_fsdp_module_type = classmethod(_pc_fsdp_class)
        fsdp = _sys.modules.get("torch.distributed.fsdp._fully_shard._fully_shard")
        self._cls = getattr(fsdp, "FSDPModule", None)
        self._new = getattr(self._cls, "__dict__", {}).get("__new__")
        if self._new is None:
            self._cls = None
        if self._cls is not None:

            def __new__(cls, *args, **kwargs):
                return cls.__mro__[cls._orig_cls_mro_index].__new__(cls)

            self._cls.__new__ = staticmethod(__new__)
        return self

    def __exit__(self, *exc):
        if self._cls is not None:
            self._cls.__new__ = self._new
        if self._unpickle is not None:
            self._pickler._unpickle_fsdp_module_type = self._unpickle
        return False


def _pc_fsdp_class(_pickler, original):
    """fully_shard's class for ``original`` (``FSDPDeep`` for ``Deep``), made as
    fully_shard makes it and kept in its registry, where the first fully_shard of a
    ``Deep`` takes it: one class, whichever of load and sharding comes first."""
    fsdp = _pc_import("torch.distributed.fsdp._fully_shard._fully_shard")
    registry = fsdp.get_cls_to_fsdp_cls()
    if original not in registry:
        deepcopy = getattr(fsdp, "_unimplemented_deepcopy", None)
        registry[original] = type(f"FSDP{original.__name__}", (fsdp.FSDPModule, original),
                                  {"__deepcopy__": deepcopy} if deepcopy is not None else {})
    return registry[original]


def _pc_unaddressed(text):
    import re as _re

    return _re.sub(r"0x[0-9a-fA-F]+", "0x?", text)
