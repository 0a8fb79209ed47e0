"""The pin recipes: what a pin (a dropped identity guard checked on every call,
``driver/pins.py``) compares its binding against, one kind per entry of ``KINDS``.

A recipe is the tuple ``(kind, *fields)`` the artifact holds (its pins, read by
the driver's ``_PC_PIN_TESTS`` and ``_pc_pin_checks``); ``make`` is the one way
capture code builds one (it checks the kind and the fields), ``describe`` how
``PINNED_BINDINGS`` names it, and each kind names the driver check that serves it.
A kind no driver check serves (``named``) is refused at capture (render, through
``SERVED``), as no serving process could load its artifact. Adding a kind is one
entry here and one check in the driver; tests/test_driver_contract.py holds the
two to each other.

The objects GUARD_CONSTS compares against (``minted.recipe``: module, attr,
globals, device) are spelled alike but resolved at load, not checked by a pin.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

Recipe = tuple[Any, ...]


def _builtin(key: Any) -> str:
    from .captured_values import builtin_name

    return "the builtin " + builtin_name(key)


@dataclasses.dataclass(frozen=True)
class Kind:
    name: str
    fields: tuple[str, ...]
    describe: Callable[..., str]   # the fields -> how PINNED_BINDINGS names the pin
    serving_check: str | None      # the driver's check of it (pins.py); None: no serving process checks it
    by_name: bool = False          # what guards.name_pin may check a value by (its importable name)


KINDS: dict[str, Kind] = {k.name: k for k in (
    # identity.py: what the identity rule checks a dropped guard's value by
    Kind("code", ("module", "qualname", "fingerprint"), lambda m, q, _f: f"{m}.{q}", "_pc_code_test"),
    Kind("code_object", ("qualname", "digest"), lambda q, _d: f"the code of {q}", "_pc_code_object_test"),
    Kind("builtin", ("key",), _builtin, "_pc_builtin_test"),
    Kind("bound_builtin", ("name", "owner_module", "owner_qualname"),
         lambda n, m, q: f"the builtin method {n} of a {m}.{q}", "_pc_bound_builtin_test"),
    Kind("method", ("fingerprint", "owner_module", "owner_qualname", "qualname"),
         lambda _f, m, q, name: f"the method {name} of a {m}.{q}", "_pc_method_test"),
    Kind("partial", ("spelling",), lambda _s: "a functools.partial", "_pc_partial_test"),
    Kind("class", ("module", "qualname", "home_module", "home_name"),
         lambda m, q, _hm, _hn: f"the class {m}.{q}", "_pc_class_test"),
    Kind("module", ("name",), lambda n: f"the module {n}", "_pc_module_test"),
    Kind("singleton", ("name",), lambda n: n, "_pc_singleton_test"),
    # library_objects.py: library values checked by name or by value
    Kind("attr", ("module", "qualname"), lambda m, q: f"{m}.{q}", "_pc_identity_test", by_name=True),
    Kind("values", ("module", "qualname", "items"),
         lambda m, q, items: f"{m}.{q} with {len(items)} values", "_pc_values_test"),
    Kind("wrapper", ("module", "qualname", "code_name", "first_line"),
         lambda m, q, code, _line: f"a wrapper ({code}) of {m}.{q}", "_pc_wrapper_test", by_name=True),
    Kind("optimizer", ("module", "qualname", "group_sizes"),
         lambda m, q, sizes: f"{m}.{q} over parameter groups of {list(sizes)} tensors", "_pc_optimizer_test"),
    Kind("spelled", ("spelling",), lambda s: f"a value spelled {s}", "_pc_spelled_test", by_name=True),
    Kind("named", ("module", "qualname"), lambda m, q: f"a function named {m}.{q}", None, by_name=True),
    # process_groups.py: read once at the first call, checked by value
    Kind("process_group", ("backend", "world_size", "rank"),
         lambda b, w, r: f"process group backend={b} world_size={w} rank={'any' if r is None else r}",
         "_pc_group_check"),
    Kind("config", ("module", "key", "value"), lambda m, k, v: f"{m}.{k} == {v!r}", "_pc_config_check"),
    # guards.hook_pin: a module's hook dicts or the process-wide ones, by how many hooks each holds
    Kind("hooks", ("prefix", "counts"),
         lambda prefix, counts: f"{sum(counts)} {prefix.strip('_') + ' ' if prefix else ''}hook(s), as at capture",
         "_pc_hooks_test"),
    # class_paths.py: the methods the trace reached through a class, by where a call finds them
    Kind("class_paths", ("paths",), lambda paths: f"{len(paths)} method(s) found through their classes",
         "_pc_class_paths_check"),
)}

# the kinds a serving driver checks: render lets only these into an artifact
SERVED = frozenset(name for name, k in KINDS.items() if k.serving_check is not None)
# the kinds a value may be checked by through its importable name (guards.name_pin)
BY_NAME = frozenset(name for name, k in KINDS.items() if k.by_name)


def make(kind: str, *fields: Any) -> Recipe:
    """The recipe ``(kind, *fields)``; a kind KINDS lacks, or the wrong number of
    fields, is a bug in the capture code that built it."""
    k = KINDS.get(kind)
    if k is None or len(fields) != len(k.fields):
        raise ValueError(f"pin recipe {kind!r} with {len(fields)} field(s): "
                         + ("no such kind" if k is None else f"it has {k.fields}"))
    return (kind, *fields)


def describe(recipe: Recipe) -> str:
    """How PINNED_BINDINGS names a pin."""
    k = KINDS.get(recipe[0])
    if k is None or len(recipe) != len(k.fields) + 1:
        return ".".join(map(str, recipe))
    return k.describe(*recipe[1:])
