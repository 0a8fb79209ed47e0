"""The globals Dynamo mints into a module while it compiles, and how a serving
process gets each one back.

Transformed bytecode LOAD_GLOBALs names Dynamo bound into the frame's module:
continuations (``__resume_at_*``), compiled graphs (``__compiled_fn_*``),
import aliases (``__import_*``, in the package's ``import_sources``), the
builtins dict key, and values bound by id (``OutputGraph.install_global_by_id``:
``<prefix>_<id(value)>_c<n>``, e.g. ``___module_collections_<id>_c0`` when a
frame rebuilds an ``OrderedDict`` in a module that never imported
``collections``). The package records none of the last family, so each is
turned into a recipe here, at capture, from the value it holds in the
capturing process; one that has no recipe is refused by name, since the
artifact would die of a NameError on it at serve time.
"""

from __future__ import annotations

import dis
import importlib
import re
import sys
import types
from typing import Any, Iterable

from .._errors import PrecompileError

BY_ID = re.compile(r"^\w*_\d{9,}_c\d+$")
_BUILTINS_KEY = "__builtins_dict__"

Recipe = tuple[str, ...]  # ("module", name) | ("attr", module, qualname) | ("globals", module)


def loaded_globals(codes: Iterable[types.CodeType]) -> set[str]:
    """Every name the code objects (and the code nested in them) load as a global."""
    out: set[str] = set()
    stack = list(codes)
    while stack:
        code = stack.pop()
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                out.add(str(ins.argval))
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return out


def _resolve(module: str, qualname: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def recipe(value: Any) -> Recipe | None:
    """How to get ``value`` back in another process, or None."""
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    if isinstance(value, dict):
        for name, mod in list(sys.modules.items()):
            if getattr(mod, "__dict__", None) is value:
                return ("globals", name)
        return None
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<locals>" not in qualname:
        try:
            if _resolve(module, qualname) is value:
                return ("attr", module, qualname)
        except Exception:  # noqa: BLE001 - not importable by its name: no recipe
            return None
    return None


def _describe(value: Any) -> str:
    kind = type(value)
    return f"a {kind.__module__}.{kind.__qualname__}"


def by_id_recipes(name_of_frame: str, module: str, names: set[str]) -> dict[str, Recipe]:
    """A recipe for every by-id global among ``names``, read off the frame's
    module in this (the capturing) process."""
    scope = vars(sys.modules[module])
    out: dict[str, Recipe] = {}
    for name in sorted(n for n in names if BY_ID.match(n)):
        if name not in scope:
            raise PrecompileError(
                f"capture: the compiled code of frame {name_of_frame!r} loads the global "
                f"{name!r}, which Dynamo bound in module {module!r} and has since removed, so "
                "the artifact cannot re-create it; capture again without touching the module"
            )
        r = recipe(scope[name])
        if r is None:
            raise PrecompileError(
                f"capture: the compiled code of frame {name_of_frame!r} loads the global "
                f"{name!r}, which Dynamo bound in module {module!r} to {_describe(scope[name])} "
                "that no import can re-create in a serving process (not a module, nor a class "
                "or function importable by its qualified name). Keep such a value out of the "
                "compiled region (compute it outside fn and pass it in), or capture with "
                "MakeFxTracer"
            )
        out[name] = r
    return out


def check_covered(name_of_frame: str, module: str, loaded: set[str], seeded: set[str]) -> None:
    """Every Dynamo-minted name the bytecode loads must be one the driver seeds."""
    minted = {n for n in loaded if n.startswith(("__compiled_fn", "__resume_at_", "__import_", _BUILTINS_KEY))
              or BY_ID.match(n)}
    missing = sorted(n for n in minted - seeded if not n.startswith(_BUILTINS_KEY))
    if missing:
        raise PrecompileError(
            f"capture: the compiled code of frame {name_of_frame!r} (module {module!r}) loads "
            f"globals Dynamo minted that the artifact would not re-create: {missing}; a served "
            "call would die of a NameError. This is a gap in torch_precompile: capture with "
            "MakeFxTracer, or keep that code out of fn"
        )

