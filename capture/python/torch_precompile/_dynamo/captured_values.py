"""The driver's definitions the capture runs too: captured value guards, FSDP2
classes read back, tensor stand-ins, policy slots dropped, the fingerprints and
names pins compare.

Dynamo's serialized guards keep no expected value for a value guard: a build
reads it again through the pickled scope, whose modules (``os``, a config
module) are the building process's own. The driver rebuilds such guards against
the values the capture rendered (``_pc_captured_values`` in driver/dynamo_state.py); the
Dynamo-free capture builds each variant's guards the same way, at the end of the
capture, when ``os.environ`` or a module constant may hold another value than
when that variant compiled. The driver's parts are templates joined into
artifacts, not importable modules, so these definitions are taken from their
source: one implementation, whichever process builds the guards.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import sys
from typing import Any, Iterator

from .serving.driver import part_path

# the driver parts holding them
_PARTS = tuple(part_path(name) for name in ("dynamo_state", "dynamo_free_checks", "fingerprints"))
_NAMES = ("_PC_VALUE_GUARDS", "_PC_CAPTURED", "_pc_register_captured", "_pc_captured_value",
          "_pc_captured_values", "_pc_unaddressed", "_pc_fsdp_modules_kept", "_pc_fsdp_class", "_pc_stand_in",
          "_pc_without_policy_slots", "_pc_spell", "_pc_code_digest", "_pc_fingerprint",
          "_pc_builtin_key", "_pc_builtin_name", "_pc_live_functions", "_pc_class_function")


@functools.lru_cache(maxsize=1)
def _driver_part() -> dict[str, Any]:
    import torch

    from .._errors import PrecompileError

    def fail(message: str) -> None:
        raise PrecompileError(f"capture: {message}")

    import functools as _functools
    import hashlib
    import importlib
    import inspect
    import types

    ns: dict[str, Any] = {"_torch": torch, "_sys": sys, "_pc_fail": fail, "__name__": __name__,
                          "_types": types, "_hashlib": hashlib, "_functools": _functools,
                          "_inspect": inspect, "_pc_import": importlib.import_module}
    for part in _PARTS:
        tree = ast.parse(part.read_text(encoding="utf-8"))
        body = [n for n in tree.body
                if (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in _NAMES)
                or (isinstance(n, ast.Assign) and any(getattr(t, "id", None) in _NAMES for t in n.targets))]
        exec(compile(ast.Module(body, []), str(part), "exec"), ns)
    missing = set(_NAMES) - set(ns)
    if missing:
        raise AssertionError(f"the driver's parts no longer define {sorted(missing)}")
    return ns


def captured_value(guard: Any) -> tuple[str, Any]:
    """The driver's ``_pc_captured_value``: how a value guard's build gets the value
    its capture rendered."""
    return _driver_part()["_pc_captured_value"](guard)


@contextlib.contextmanager
def built_with_captured_values(state: Any) -> Iterator[Any]:
    """While a guard build from ``state`` runs: its value guards compare against
    the values the capture rendered, not the ones this process holds now."""
    ns = _driver_part()
    with ns["_pc_captured_values"]():
        ns["_pc_register_captured"](state)
        yield state


def fsdp_modules_kept() -> Any:
    """The driver's ``_pc_fsdp_modules_kept``: a guard state read at capture holds
    FSDP2 modules of their own class, as the serving process reads it."""
    return _driver_part()["_pc_fsdp_modules_kept"]()


def stand_in(spec: tuple[str, str, bool, bool]) -> Any:
    """The driver's ``_pc_stand_in``: the empty tensor a TensorGuards entry compares
    against, as the serving process builds it (dynamo_free_guards checks at capture that
    its dispatch keys are the captured tensor's)."""
    return _driver_part()["_pc_stand_in"](spec)


def fingerprint(fn: Any) -> str:
    """The driver's ``_pc_fingerprint``: a function's code, defaults and closure
    values as a digest the serving process computes alike."""
    return _driver_part()["_pc_fingerprint"](fn)


def class_function(held: Any) -> Any:
    """The driver's ``_pc_class_function``: the function a class attribute calls."""
    return _driver_part()["_pc_class_function"](held)


def spell(value: Any) -> str:
    """The driver's ``_pc_spell``: a value as another process spells it alike."""
    return _driver_part()["_pc_spell"](value)


def code_digest(code: Any) -> str:
    """The driver's ``_pc_code_digest``: what a code object computes."""
    return _driver_part()["_pc_code_digest"](code)


def builtin_key(value: Any) -> tuple[Any, ...] | None:
    """The driver's ``_pc_builtin_key``: a builtin's own name, or None."""
    return _driver_part()["_pc_builtin_key"](value)


def builtin_name(key: tuple[Any, ...]) -> str:
    """The driver's ``_pc_builtin_name``: torch.relu, builtins.len, ..."""
    return _driver_part()["_pc_builtin_name"](key)


def live_functions(module: str, qualname: str) -> list[Any]:
    """The driver's ``_pc_live_functions``: what a qualified name reaches."""
    return _driver_part()["_pc_live_functions"](module, qualname)


def without_policy_slots(graph: Any, policy: set[tuple[str, str]]) -> None:
    """The driver's ``_pc_without_policy_slots`` with the capture's slot spelling."""
    from .spelling import SLOT_SPELLING

    _driver_part()["_pc_without_policy_slots"](graph, policy, SLOT_SPELLING)
