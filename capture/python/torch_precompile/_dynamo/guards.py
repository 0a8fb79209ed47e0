"""The capture's guard filter and the ledger of what it kept and dropped.

Dynamo calls the filter once per frame compile with one GuardFilterEntry per
guard; its verdict applies to the runtime guards and to the serialized copy
alike. The ledger wraps the caller's filter (or the default one) and records,
per slot ``(guard_type, source)`` and per frame variant, what the summary and
the write gates need: kept and dropped slots, the rendered check of a dropped
one, the drops that are risky, and the facts compared across variants.
"""

from __future__ import annotations

import re
import sys
import types
from typing import Any, Callable, NamedTuple, Sequence

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

# Addresses and per-process counters differ run to run; scrub them so slots and
# rendered checks compare (and the artifact diffs) stably.
_ADDRESS = re.compile(r"(___check_(?:obj|type)_id\(.*?, )\d+\)")
_BUILTINS_KEY = re.compile(r"__builtins_dict___\d+")
_BY_ID = re.compile(r"_\d{9,}_c\d+\b")
_SCOPE = re.compile(r"\bL\[(['\"])(.*?)\1\]")


def normalize(text: str) -> str:
    text = _ADDRESS.sub(r"\1<id>)", text)
    text = _BUILTINS_KEY.sub("__builtins_dict__", text)
    return _BY_ID.sub("_<id>_c<n>", text)


def slot_source(name: str) -> str:
    """``L['self'].act`` -> ``self.act``; globals keep their ``G[...]`` spelling."""
    return normalize(_SCOPE.sub(r"\2", name))


def default_filter(entries: Sequence[Any]) -> list[bool]:
    """Keep every guard the serializer accepts; drop the ones it refuses.

    The refused types are the identity guards and DICT_VERSION/WEAKREF_ALIVE
    (``CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES``), directly
    or through a type the guard derives. The pre-filter build promotes the
    pytree registry's DICT_KEYS_MATCH to DICT_VERSION while the saving build
    does not, so that derived DICT_VERSION is ignored.
    """
    from torch._dynamo.guards import CheckFunctionManager

    refused = set(CheckFunctionManager.UNSUPPORTED_SERIALIZATION_GUARD_TYPES)
    keep = []
    for e in entries:
        derived = tuple(e.derived_guard_types or ())
        if e.guard_type == "DICT_KEYS_MATCH":
            derived = tuple(d for d in derived if d != "DICT_VERSION")
        keep.append(e.guard_type in _ACCEPTED_BY_TYPE
                    or (e.guard_type not in refused and not any(d in refused for d in derived)))
    return keep


FrameKey = tuple[str, str, int]  # (co_name, co_filename, co_firstlineno)


class Fact(NamedTuple):
    """One guard of one frame variant, as compared across variants."""

    guard_type: str
    source: str
    code: str
    value: str
    enforced: bool
    lint_risky: bool  # dropped, and the lint (or a caller's override) calls it risky


def pins_a_value(guard_type: str, source: str) -> bool:
    """A value-equality guard on a bare name (an argument or a ``___stackN``);
    ``self.eps`` and the like are model configuration, not inputs."""
    return bool(source) and guard_type in _PINNING and not any(c in source for c in ".[")


def frame_key(code: Any) -> FrameKey:
    return (code.co_name, code.co_filename, code.co_firstlineno)


class Ledger:
    """Wraps the guard filter and records its verdicts, per frame and variant.

    Every view takes ``skip``, the frames the artifact serves as plain Python:
    their guards are never checked, so they are left out of the report.
    """

    def __init__(self, package: Any, user_filter: Filter | None) -> None:
        self._package = package
        self._user_filter = user_filter
        # frame -> one fact set per compile (variant) of it
        self.variants: dict[FrameKey, list[frozenset[Fact]]] = {}

    def filter(self, entries: Sequence[Any]) -> list[bool]:
        decisions = [bool(k) for k in (self._user_filter or default_filter)(entries)]
        if len(decisions) != len(entries):
            raise ValueError(
                f"guard_filter_fn returned {len(decisions)} verdicts for {len(entries)} guards"
            )
        default = default_filter(entries) if self._user_filter else decisions
        current = self._package.current_entry
        module = current.python_module if current is not None else ""
        try:
            namespaces = _namespaces(entries)
        except Exception:  # noqa: BLE001 - no trusted namespace: every drop judged a slot
            namespaces = {}
        facts = set()
        for keep, by_default, e in zip(decisions, default, entries):
            # A drop the default filter would not make is the caller's choice,
            # and nothing here can tell what it gave up: risky by construction.
            risky = not keep and (by_default or _configuration_slot(e, namespaces, module))
            code = " ; ".join(normalize(p) for p in (e.code_parts or ()))
            facts.add(Fact(e.guard_type, slot_source(e.name), code, _fingerprint(e), keep, risky))
        key = frame_key(current.python_code) if current is not None else ("<unknown>", "<unknown>", 0)
        self.variants.setdefault(key, []).append(frozenset(facts))
        return decisions

    def _frames(self, skip: set[FrameKey]) -> list[list[frozenset[Fact]]]:
        return [v for k, v in self.variants.items() if k not in skip]

    def lossy(self) -> set[FrameKey]:
        """Frames some variant of which lost a guard to the filter."""
        return {k for k, vs in self.variants.items() if any(not f.enforced for fs in vs for f in fs)}

    def kept(self, skip: set[FrameKey] = frozenset()) -> set[Slot]:
        return {(f.guard_type, f.source) for vs in self._frames(skip) for fs in vs for f in fs if f.enforced}

    def dropped(self, skip: set[FrameKey] = frozenset()) -> set[Slot]:
        return {(f.guard_type, f.source) for vs in self._frames(skip) for fs in vs for f in fs if not f.enforced}

    def dropped_code(self, skip: set[FrameKey] = frozenset()) -> dict[Slot, str]:
        """One rendering per dropped slot (the first variant's that rendered one)."""
        out: dict[Slot, str] = {}
        for vs in self._frames(skip):
            for fs in vs:
                for f in sorted(fs):
                    if not f.enforced and f.code:
                        out.setdefault((f.guard_type, f.source), f.code)
        return out

    def risky(self, skip: set[FrameKey] = frozenset()) -> set[Slot]:
        """Lint findings plus every dropped slot whose value told a frame's
        variants apart (present in several variants with different values)."""
        risky: set[Slot] = set()
        for vs in self._frames(skip):
            seen: dict[Slot, set[str]] = {}
            for fs in vs:
                for f in fs:
                    if not f.enforced:
                        seen.setdefault((f.guard_type, f.source), set()).add(f.value)
                        if f.lint_risky:
                            risky.add((f.guard_type, f.source))
            risky |= {s for s, values in seen.items() if len(values) > 1}
        return risky

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
        return " ; ".join(normalize(p) for p in (e.code_parts or ()))
    value = e.value
    if isinstance(value, torch.Tensor):
        return (f"{type(value).__name__} {value.dtype} {value.device} {tuple(value.shape)} "
                f"{tuple(value.stride()) if value.layout == torch.strided else ''} "
                f"requires_grad={value.requires_grad}")
    if types_ & _IDENTITY:
        return f"{type(value).__module__}.{type(value).__qualname__}@{id(value)}"
    if e.guard_type in _PINNING:
        return f"{type(value).__name__}:{repr(value)[:200]}"
    return " ; ".join(normalize(p) for p in (e.code_parts or ()))


def _library_module(name: str | None) -> bool:
    """Owned by torch or the standard library: no configuration repoints it."""
    if not name:
        return False
    top = name.partition(".")[0]
    return top == "torch" or top in sys.stdlib_module_names


def _namespaces(entries: Sequence[Any]) -> dict[str, types.ModuleType]:
    """Guard sources that hold a module bound under its own name (or through
    Dynamo's ``__import_*`` alias, which is minted from the module name)."""
    from torch._dynamo.source import AttrSource, GlobalSource

    found: dict[str, types.ModuleType] = {}
    for e in entries:
        src = e.orig_guard.originating_source
        root = src
        while hasattr(root, "base") and root.base is not None:
            root = root.base
        if isinstance(root, GlobalSource) and root.global_name.startswith("__import_"):
            module = sys.modules.get(root.global_name[len("__import_"):].replace("_dot_", "."))
            if module is not None:
                found.setdefault(root.name, module)
        if not (e.has_value and isinstance(e.value, types.ModuleType)):
            continue
        module = e.value
        if isinstance(src, GlobalSource):
            if src.global_name == module.__name__.rpartition(".")[2] or _library_module(module.__name__) \
                    or src.global_name.startswith("__import_"):
                found[src.name] = module
        elif isinstance(src, AttrSource) and src.base.name in found:
            parent = found[src.base.name]
            if _library_module(module.__name__) or module.__name__ in (
                    src.member, f"{parent.__name__}.{src.member}"):
                found[src.name] = module
    return found


def _configuration_slot(e: Any, namespaces: dict[str, types.ModuleType], module: str) -> bool:
    try:
        return _reads_a_slot(e, namespaces, module)
    except Exception:  # noqa: BLE001 - a value that refuses attribute reads: fail closed
        return True


def _reads_a_slot(e: Any, namespaces: dict[str, types.ModuleType], module: str) -> bool:
    """Whether a dropped guard hangs off a slot configuration could fill differently
    on the serving machine (an instance attribute, a closure cell, an aliased or
    re-exported import), rather than off a fixed binding: a module namespace, a
    library function read off its own module, a builtin, or a def bound under its
    own name in the module that reads it. A lint, not a proof."""
    from torch._dynamo.source import AttrSource, DictGetItemSource, GetItemSource, GlobalSource, LocalSource

    src = e.orig_guard.originating_source
    base = src.base if isinstance(src, GetItemSource) and isinstance(src.index, int) else src
    if isinstance(base, LocalSource) and base.local_name == "__nested_resume_fns":
        return False  # Dynamo's own list of generated continuations
    if src.name in namespaces:
        return False
    if not e.has_value:
        return True
    value = e.value
    owner = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
    if isinstance(value, types.ModuleType) and _library_module(value.__name__):
        return False
    if isinstance(src, DictGetItemSource) and isinstance(src.base, GlobalSource) \
            and src.base.global_name.startswith("__builtins_dict__"):
        return not (owner == "builtins" and getattr(value, "__name__", None) == src.index)
    if isinstance(src, AttrSource) and src.base.name in namespaces:
        ns = namespaces[src.base.name]
        return not (_library_module(ns.__name__)
                    or (owner == ns.__name__ and getattr(value, "__qualname__", None) == src.member))
    if isinstance(src, GlobalSource) and getattr(value, "__name__", None) == src.global_name:
        return not (_library_module(owner) or owner == module)
    return True
