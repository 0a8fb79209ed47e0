"""The capture's guard filter and the ledger of what it kept and dropped.

Dynamo calls the filter once per frame compile with one GuardFilterEntry per
guard; its verdict applies to the runtime guards and to the serialized copy
alike. The ledger wraps the caller's filter (or the default one) and records,
per slot ``(guard_type, source)`` and per frame variant, what the summary and
the write gates need: kept and dropped slots, the rendered check of a dropped
one, the drops that are risky, and the facts compared across variants.
"""

from __future__ import annotations

import inspect
import types
import warnings
from typing import Any, Callable, NamedTuple, Sequence

from ..._compat import dynamo as _compat
from . import identity, library_objects
from .identity import CLASS_LEVEL as _CLASS_LEVEL
from .identity import chain
from ..pin_recipes import BY_NAME
from ..spelling import FrameKey, frame_key, normalize, plain_expression, slot_source

Filter = Callable[[Sequence[Any]], Sequence[bool]]
Slot = tuple[str, str]

# Guard types the serializer checks before anything else (a literal in
# CheckFunctionManager.serialize_guards): it accepts them whatever they derive.
_ACCEPTED_BY_TYPE = ("TYPE_MATCH", "BUILTIN_MATCH")

# Guards that pin a Python value by equality (CONSTANT_MATCH delegates to them).
_PINNING = frozenset({"CONSTANT_MATCH", "CONSTANT_SUBCLASS_MATCH", "EQUALS_MATCH",
                      "COUNT_ITERATOR_MATCH", "RANGE_ITERATOR_MATCH"})

# Guards whose value is an object identity: compared by id within the capture.
_IDENTITY = frozenset({"ID_MATCH", "FUNCTION_MATCH", "CLASS_MATCH", "MODULE_MATCH",
                       "NN_MODULE", "CLOSURE_MATCH", "WEAKREF_ALIVE", "BUILTIN_MATCH"})

# The only guard types the invariance policy may drop from the serialized copy,
# and only when invariant across every captured variant: the identity guards
# (the default filter drops them anyway) and BUILTIN_MATCH, an identity match on
# a builtin that the serializer accepts; not WEAKREF_ALIVE, which guards that an
# object still exists. Everything that pins a shape, value or kind is outside it.
POLICY_TYPES = _IDENTITY - {"WEAKREF_ALIVE"}

# How guard sources and slots are spelled across processes: spelling.py.


def default_filter(entries: Sequence[Any]) -> list[bool]:
    """Keep every guard the serializer accepts; drop the ones it refuses.

    The refused types are the identity guards and DICT_VERSION/WEAKREF_ALIVE
    (``CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES``), directly
    or through a type the guard derives. The pre-filter build promotes the
    pytree registry's DICT_KEYS_MATCH to DICT_VERSION while the saving build
    does not, so that derived DICT_VERSION is ignored. Guards on what a checked
    config slot's user override holds are dropped too: that tells which
    compiles ran in the process, and the artifact checks the slot's value.
    """
    from torch._dynamo.guards import CheckFunctionManager

    from .process_groups import overridden_slot

    refused = set(CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES)
    keep = []
    for e in entries:
        derived = tuple(e.derived_guard_types or ())
        if e.guard_type == "DICT_KEYS_MATCH":
            derived = tuple(d for d in derived if d != "DICT_VERSION")
        keep.append((e.guard_type in _ACCEPTED_BY_TYPE
                     or (e.guard_type not in refused and not any(d in refused for d in derived)))
                    and overridden_slot(e.name) is None)  # checked by value (process_groups)
    return keep




class Fact(NamedTuple):
    """One guard of one frame variant, as compared across variants."""

    guard_type: str
    source: str
    code: str
    value: str
    enforced: bool
    risk: str  # dropped with no check left, and why that is risky (refused); "" if not
    pin: tuple[str, tuple[Any, ...]] | None  # how the artifact checks it by a portable key
    proof: str = ""  # why it is the same in every serving process (identity.INVARIANT)


def pins_a_value(guard_type: str, source: str) -> bool:
    """A value-equality guard on a bare name (an argument or a ``___stackN``);
    ``self.eps`` and the like are model configuration, not inputs."""
    return bool(source) and guard_type in _PINNING and not any(c in source for c in ".[")


class Ledger:
    """Wraps the guard filter and records its verdicts, per frame and variant.

    Every view takes ``skip``, the frames the artifact serves as plain Python:
    their guards are never checked, so they are left out of the report.
    """

    def __init__(self, package: Any, user_filter: Filter | None, *, warn_risky: bool = False,
                 bypassed: set[FrameKey] = frozenset()) -> None:
        self._package = package
        self._user_filter = user_filter
        self._warn_risky = warn_risky
        self._bypassed = bypassed  # frames Dynamo bypassed: the early warning passes them over
        self._warned: set[str] = set()
        # frame -> one fact set per compile (variant) of it
        self.variants: dict[FrameKey, list[frozenset[Fact]]] = {}
        # a variant's serialized guard state -> its facts (bind)
        self.by_state: dict[bytes, frozenset[Fact]] = {}
        self._pending: dict[FrameKey, frozenset[Fact]] = {}
        self._runtime: list[Any] = []
        # the classes of what the guards read (render.class_paths: the methods
        # the trace found through them)
        self.classes: dict[type, None] = {}

    def filter(self, entries: Sequence[Any]) -> list[bool]:
        decisions = [bool(k) for k in (self._user_filter or default_filter)(entries)]
        if len(decisions) != len(entries):
            raise ValueError(
                f"guard_filter_fn returned {len(decisions)} verdicts for {len(entries)} guards"
            )
        default = default_filter(entries) if self._user_filter else decisions
        current = _compat.current_entry(self._package)
        from . import process_groups

        # by the trace these guards are for, through a process group or os.environ
        rank_read = process_groups.take_rank_reads() | process_groups.reads_environ(e.name for e in entries)
        configs = library_objects.config_roots(entries, [not k for k in default])
        hooks = hook_counts(entries)
        arguments = _keyword_arguments(current.python_code if current is not None else None)
        facts = set()
        runtime = []
        for keep, by_default, e in zip(decisions, default, entries):
            why, pin, proof = "", None, ""
            if not keep:
                # A drop the default filter would not make is the caller's choice,
                # and nothing here can tell what it gave up: risky by construction.
                if by_default:
                    why = "guard_filter_fn dropped a guard the default filter keeps"
                else:
                    why, pin, proof = _judge(e, rank_read, configs, arguments)
                    if e.guard_type in identity.IDENTITY and e.has_value:
                        runtime.append(e)
            elif e.guard_type in POLICY_TYPES and identity.covers(e):
                # kept, and a candidate for the invariance policy: it may leave the
                # serialized guards only as invariant or checked by its pin
                verdict = identity.judge(e)
                pin, proof = verdict.pin, verdict.why if verdict.kind == identity.INVARIANT else ""
            pin = pin or hook_pin(e, hooks)
            self._note_class(e)
            code = " ; ".join(normalize(p) for p in _compat.code_parts(e))
            facts.add(Fact(e.guard_type, slot_source(e.name), code, _fingerprint(e), keep, why, pin, proof))
        if rank_read and not any(f.pin and f.pin[1][0] == "process_group" and f.pin[1][3] is not None
                                 for f in facts):
            checked = process_groups.rank_pin()  # a rank read no guard stands for
            if checked is not None:
                facts.add(Fact("RANK_READ", checked[1][0], "", "", False, *checked))
        key = frame_key(current.python_code) if current is not None else ("<unknown>", "<unknown>", 0)
        self.variants.setdefault(key, []).append(frozenset(facts))
        self._pending[key] = frozenset(facts)
        self._runtime = runtime
        if self._warn_risky and key not in self._bypassed:  # a bypassed frame's guards are never checked
            self._warn_early(facts)
        return decisions

    def runtime_guards(self) -> list[Any]:
        """The identity guards the default filter dropped from the compile whose
        guards were filtered last, taken once: the capture puts them back into its
        own runtime guards (session.Session), so a capture call with another
        function or builtin compiles a variant of its own, as torch.compile would."""
        out, self._runtime = self._runtime, []
        return out

    def bind(self, guards_state: bytes) -> None:
        """File the facts of the compile just filtered under its serialized guard
        state, as the package records the variant (add_guarded_code)."""
        current = _compat.current_entry(self._package)
        key = frame_key(current.python_code) if current is not None else ("<unknown>", "<unknown>", 0)
        facts = self._pending.pop(key, None)
        if facts is not None:
            self.by_state[guards_state] = facts

    def variant_pins(self, guards_state: bytes, policy: set[Slot]) -> list[tuple[str, tuple[Any, ...]]] | None:
        """The pins one variant's checks need: its dropped slots checked by a
        portable key, and its kept slots the invariance policy drops. None when
        the ledger never saw the variant's guards."""
        facts = self.by_state.get(guards_state)
        if facts is None:
            return None
        out = {f.pin for f in facts if f.pin is not None
               and (not f.enforced or (f.guard_type, f.source) in policy or f.pin[1][0] == "hooks")}
        return sorted(out, key=repr)

    def _note_class(self, e: Any) -> None:
        try:
            if e.has_value:
                cls = e.value if isinstance(e.value, type) else type(e.value)
                if cls.__module__ != "builtins":
                    self.classes.setdefault(cls, None)
        except Exception:  # noqa: BLE001 - inside Dynamo's compile: a value that refuses to be read
            pass

    def _warn_early(self, facts: set[Fact]) -> None:
        """Say now, not after every remaining compile, that the write will refuse."""
        new = {f"{f.guard_type} {f.source}: {f.risk}" for f in facts if f.risk and f.pin is None} - self._warned
        if new:
            self._warned |= new
            warnings.warn(
                "DynamoTracer(require_no_risky_drops=True): this capture will refuse to write its "
                f"artifact, it dropped risky guards the artifact cannot check: {sorted(new)}",
                RuntimeWarning, stacklevel=2,
            )

    def _frames(self, skip: set[FrameKey]) -> list[list[frozenset[Fact]]]:
        return [v for k, v in self.variants.items() if k not in skip]

    def lossy(self) -> set[FrameKey]:
        """Frames some variant of which lost a guard to the filter."""
        return {k for k, vs in self.variants.items() if any(not f.enforced for fs in vs for f in fs)}

    def kept(self, skip: set[FrameKey] = frozenset()) -> set[Slot]:
        return {(f.guard_type, f.source) for vs in self._frames(skip) for fs in vs for f in fs if f.enforced}

    def dropped(self, skip: set[FrameKey] = frozenset()) -> set[Slot]:
        return {(f.guard_type, f.source) for vs in self._frames(skip) for fs in vs for f in fs if not f.enforced}

    def dropped_code(self, skip: set[FrameKey] = frozenset(), kept: set[Slot] = frozenset()) -> dict[Slot, str]:
        """One rendering per dropped slot, and per kept slot among ``kept`` (the
        invariance policy's drops): the first variant's that rendered one."""
        out: dict[Slot, str] = {}
        for vs in self._frames(skip):
            for fs in vs:
                for f in sorted(fs):
                    slot = (f.guard_type, f.source)
                    if f.code and (not f.enforced or slot in kept):
                        out.setdefault(slot, f.code)
        return out

    def risky(self, skip: set[FrameKey] = frozenset()) -> dict[Slot, str]:
        """Risky slot -> why: dropped slots with no check left (no pin, no proof of
        invariance), plus every such slot whose value told a frame's variants apart."""
        risky: dict[Slot, str] = {}
        for key, vs in self.variants.items():
            if key in skip:
                continue
            seen: dict[Slot, set[str]] = {}
            for fs in vs:
                for f in fs:
                    if f.enforced or f.pin is not None or f.proof:
                        continue
                    slot = (f.guard_type, f.source)
                    seen.setdefault(slot, set()).add(f.value)
                    if f.risk:
                        risky.setdefault(slot, f.risk)
            for slot, values in seen.items():
                if len(values) > 1:
                    risky[slot] = "its value told captured variants apart"
        return risky

    def invariant(self, skip: set[FrameKey] = frozenset()) -> dict[Slot, str]:
        """Dropped or policy slot -> why it is the same object in every serving process."""
        return {(f.guard_type, f.source): f.proof for vs in self._frames(skip) for fs in vs for f in fs
                if f.proof and f.pin is None}

    def policy(self, skip: set[FrameKey] = frozenset()) -> set[Slot]:
        """The invariance policy: kept slots of a type in ``POLICY_TYPES`` that held
        one value in every variant of every frame that guards them, and that the
        identity rule proves invariant or checks by a pin in each (identity.py).
        The driver takes them out of the serialized guards; their pins stand in."""
        values: dict[Slot, set[str]] = {}
        everywhere: dict[Slot, bool] = {}
        for vs in self._frames(skip):
            present = [{(f.guard_type, f.source): f for f in fs if f.guard_type in POLICY_TYPES} for fs in vs]
            for slot in set().union(*present) if present else ():
                facts = [p.get(slot) for p in present]
                everywhere[slot] = everywhere.get(slot, True) and all(
                    f is not None and f.enforced and (f.pin is not None or bool(f.proof)) for f in facts)
                values.setdefault(slot, set()).update(f.value for f in facts if f is not None)
        return {slot for slot, ok in everywhere.items() if ok and len(values[slot]) == 1}

    def wont_generalize(self, skip: set[FrameKey] = frozenset()) -> tuple[str, ...]:
        """Sources some variant pins by value while no variant of the same frame
        reaches them without pinning (so no captured variant serves another value)."""
        survivors: set[str] = set()
        for vs in self._frames(skip):
            pins: set[str] = set()
            generic: set[str] = set()
            for fs in vs:
                here = {f.source for f in fs if f.enforced and pins_a_value(f.guard_type, f.source)}
                pins |= here
                generic |= {f.source for f in fs if f.source} - here
            survivors |= pins - generic
        return tuple(sorted(survivors))


def _keyword_arguments(code: Any) -> str | None:
    """The name of a frame's ``**kwargs`` parameter, if it has one."""
    if code is None or not code.co_flags & inspect.CO_VARKEYWORDS:
        return None
    at = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS)
    return code.co_varnames[at]


def _judge(e: Any, rank_read: bool, configs: dict[str, Any], arguments: str | None = None
           ) -> tuple[str, Any, str]:
    """(why risky or "", pin, proof of invariance or "") for a guard the default
    filter drops; ``configs``: the frame's dropped configuration objects
    (library_objects.config_roots); ``arguments``: the frame's ``**kwargs``
    parameter, whose entries are arguments. A function, builtin, class or module
    is judged by the identity rule (identity.py); an instance by what it is."""
    from . import process_groups

    try:
        checked = process_groups.judge(e, rank_read)  # a process group or distributed config slot
        if checked is not None:
            return (*checked, "")
        checked = _judge_config(e, configs)
        if checked is not None:
            return (*checked, "")
        optimizer = library_objects.optimizer_recipe(e.value) if e.has_value else None
        if optimizer is not None:
            expr = e.orig_guard.originating_source.name
            return ("holds an optimizer made at run time, checked by its class and parameter groups "
                    "instead of its identity", (expr, optimizer) if plain_expression(expr) else None, "")
        if identity.covers(e):
            verdict = identity.judge(e)
            if verdict.kind == identity.INVARIANT:
                return "", None, verdict.why
            if verdict.kind == identity.CHECKED:
                return "", verdict.pin, ""
            return verdict.why, None, ""
        why = risk(e, arguments)
        return (why, pin_of(e), "") if why else ("", None, proof_of(e))
    except Exception as err:  # noqa: BLE001 - a source that refuses to be read: fail closed
        return f"its source could not be judged ({type(err).__name__})", None, ""


def _judge_config(e: Any, configs: dict[str, Any]) -> tuple[str, Any] | None:
    """A guard on a configuration object or on what hangs off it: the object is
    checked by class and values (its pin), which covers the guards under it."""
    name = e.orig_guard.originating_source.name
    root = library_objects.under(name, configs)
    if root is None:
        return None
    recipe, why_not = configs[root]
    if recipe is None:
        return (f"hangs off the configuration object {slot_source(root)}, whose identity no serving "
                f"process can match and which cannot be checked by value: {why_not}", None)
    if name != root:
        return "", None  # covered by the root's value check
    if not plain_expression(name):
        return (f"holds the configuration object {slot_source(root)}, read through an expression the "
                "artifact cannot evaluate", None)
    return (f"holds a configuration object made at run time, checked by its class and values instead "
            "of its identity", (name, recipe))


def _fingerprint(e: Any) -> str:
    """What a guard checked, comparable across variants of one capture. Runs
    inside Dynamo's compile, so a value that refuses to be read is not an error."""
    try:
        return _read_fingerprint(e)
    except Exception as err:  # noqa: BLE001
        return f"<unreadable {type(err).__name__}>"


def _read_fingerprint(e: Any) -> str:
    import torch

    types_ = {e.guard_type, *(e.derived_guard_types or ())}
    if e.guard_type in ("GRAD_MODE", "GLOBAL_STATE"):
        return f"grad={torch.is_grad_enabled()} autocast={torch.is_autocast_enabled()}"
    if not e.has_value:
        return " ; ".join(normalize(p) for p in _compat.code_parts(e))
    value = e.value
    if isinstance(value, torch.Tensor):
        return (f"{type(value).__name__} {value.dtype} {value.device} {tuple(value.shape)} "
                f"{tuple(value.stride()) if value.layout == torch.strided else ''} "
                f"requires_grad={value.requires_grad}")
    if types_ & _IDENTITY:
        return f"{type(value).__module__}.{type(value).__qualname__}@{id(value)}"
    if e.guard_type in _PINNING:
        return f"{type(value).__name__}:{repr(value)[:200]}"
    return " ; ".join(normalize(p) for p in _compat.code_parts(e))


_DICT_READS = ("DictGetItemSource", "DictSubclassGetItemSource", "GetItemSource")
# Containers whose items are fixed where they are defined: a class dict, a
# class's MRO, a function's closure or defaults, a module's structure dicts.
_FIXED_CONTAINERS = ("TypeDictSource", "TypeMROSource", "ClosureSource", "DefaultsSource")
_STRUCTURE = frozenset({"_modules", "_parameters", "_buffers", "__dict__"})


def _fixed_container(parent: Any) -> bool:
    kind = type(parent).__name__
    if kind in _FIXED_CONTAINERS:
        return True
    if kind == "GlobalSource":
        return parent.global_name.startswith("__builtins_dict__")
    if kind in _DICT_READS:  # x.__dict__['_modules']: the same structure dict, read as an entry
        return parent.index in _STRUCTURE
    return kind in ("AttrSource", "GenericAttrSource") and parent.member in _STRUCTURE


def risk(e: Any, arguments: str | None = None) -> str | None:
    """Why a guard the default filter drops hangs off a slot the serving process
    can fill differently (a registry or configuration read), or None when it
    guards a binding fixed once its module and classes are imported: a module
    attribute holding a module, class or function (re-exports included),
    Dynamo's by-id globals and import aliases, anything read off a class
    (``model.__class__``, ``type(m).__dict__[...]``, an MRO entry, a method's
    closure cell or code). An entry of the frame's ``**kwargs`` (``arguments``) is an
    argument of the call, as a positional one is. A lint, not a proof."""
    steps = chain(e.orig_guard.originating_source)
    root = steps[0]
    if type(root).__name__ == "LocalSource" and root.local_name == "__nested_resume_fns":
        return None  # Dynamo's own list of generated continuations
    class_level = False
    for parent, step in zip(steps, steps[1:]):
        kind = type(step).__name__
        if kind in _CLASS_LEVEL:
            class_level = True
        if kind in _DICT_READS and not _fixed_container(parent) and not (
                kind == "GetItemSource" and isinstance(step.index, int)) and not (
                parent is root and arguments is not None
                and type(root).__name__ == "LocalSource" and root.local_name == arguments):
            return (f"reads the registry or configuration dict entry {slot_source(step.name)}, "
                    "which a registration or setting in the serving process can change")
    if not class_level and e.has_value and not isinstance(e.value, (types.ModuleType, type, types.CodeType)):
        kind = type(e.value)
        return (f"holds a {kind.__module__}.{kind.__qualname__} made at run time (a process group, "
                "a configuration object), whose identity no serving process can match")
    leaf = steps[-1]
    if (type(root).__name__ == "LocalSource" and type(leaf).__name__ == "AttrSource" and not class_level
            and not (leaf.member.startswith("__") and leaf.member.endswith("__"))):
        return (f"reads the instance attribute {slot_source(leaf.name)}, which configuration "
                "chooses per instance")
    return None


def proof_of(e: Any) -> str:
    """Why a dropped guard ``risk`` finds no slot of the serving process behind is
    the same in every serving process: Dynamo's own bookkeeping, or a binding
    read off a class (fixed when the class was made; the class itself is a kept
    TYPE_MATCH, checked against the class its qualified name imports)."""
    steps = chain(e.orig_guard.originating_source)
    root = steps[0]
    if type(root).__name__ == "LocalSource" and root.local_name == "__nested_resume_fns":
        return "Dynamo's own list of the continuations it generated"
    if any(type(s).__name__ in _CLASS_LEVEL for s in steps):
        return "read off a class, fixed when the class was made (the class is checked by name)"
    if not e.has_value:
        return "a guard with no value of its own, on a source its companion guards check"
    return "a module, class or code object fixed once its module is imported"




# The hook dicts a call of a module reads, its own and the process-wide ones
# (torch.nn.modules.module): every hook lands in one of these four; the
# with_kwargs / always_called companions hold entries only beside them.
HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_HOOK_OWNERS = {**{d: "" for d in HOOK_DICTS}, **{"_global" + d: "_global" for d in HOOK_DICTS}}


def hook_counts(entries: Sequence[Any]) -> dict[str, tuple[str, dict[str, int]]]:
    """owner expression -> (dict prefix, dict name -> hooks held) for every hook
    dict the frame's guards read (a module's, or torch.nn.modules.module's)."""
    out: dict[str, tuple[str, dict[str, int]]] = {}
    for e in entries:
        src = e.orig_guard.originating_source
        if (type(src).__name__ == "AttrSource" and src.member in _HOOK_OWNERS and e.has_value
                and isinstance(e.value, dict) and src.base is not None):
            prefix = _HOOK_OWNERS[src.member]
            out.setdefault(src.base.name, (prefix, {}))[1][src.member[len(prefix):]] = len(e.value)
    return out


def hook_pin(e: Any, counts: dict[str, tuple[str, dict[str, int]]]) -> tuple[str, tuple[Any, ...]] | None:
    """A pin on the owner of a hook dict the trace read: how many hooks each of
    its four dicts holds. Dynamo guards an empty one with
    EMPTY_NN_MODULE_HOOKS_DICT, which emits no check under its default
    ``skip_nnmodule_hook_guards`` (and the process-wide dicts by their type
    alone); the hooks a non-empty one holds are traced into the graph and checked
    by their own pins. So a hook added, or removed, in the serving process is
    refused instead of silently not run. One pin per module: its four dicts read
    in one expression."""
    from ..pin_recipes import make

    src = e.orig_guard.originating_source
    if type(src).__name__ != "AttrSource" or src.member not in _HOOK_OWNERS or src.base is None:
        return None
    owner = src.base.name
    if owner not in counts or not plain_expression(owner):
        return None
    prefix, held = counts[owner]
    return (owner, make("hooks", prefix, tuple(held.get(d, 0) for d in HOOK_DICTS)))


def pin_of(e: Any) -> tuple[str, tuple[str, ...]] | None:
    """(source expression, recipe) that lets the artifact check a dropped identity
    guard by name: the source must still hold the object importable under the
    name it held at capture. None when the value has no importable name or the
    source is not a plain expression over the frame's globals and locals."""
    from ..minted import recipe

    if not e.has_value or isinstance(e.value, types.ModuleType):
        return None
    r = recipe(e.value)
    if r is None and any(type(s).__name__ in _CLASS_LEVEL for s in chain(e.orig_guard.originating_source)):
        # made when its class was (a config class's field validators and their
        # annotations): told apart by name or spelling. Not a function an instance
        # slot holds, whose maker's arguments its name does not show.
        r = library_objects.named_recipe(e.value) or library_objects.spelled_recipe(e.value)
    r = r or library_objects.wrapper_recipe(e.value)
    if r is None or r[0] not in BY_NAME:
        return None
    expr = e.orig_guard.originating_source.name  # L['model'].act (the entry's name drops L[...])
    return (expr, r) if plain_expression(expr) else None
