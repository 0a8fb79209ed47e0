"""The methods a trace found through a class, as a serving call checks them.

Dynamo trusts a class's contents once the class's identity matches, and make_fx
bakes whatever code a method call reached. No identity outlives its process, so
an artifact checks, on every call, that each name along the MRO of a class the
trace read still finds the function the trace ran (driver/pins.py
``_pc_class_paths_check``; the MakeFx driver's ``_pc_class_paths``): a method
rebound on its class under another name, or a library class patched in the
capture job and not in the server (or the reverse), is refused naming both.
"""

from __future__ import annotations

import types
from typing import Any, Iterable

Path = tuple[str, str, str, str, str]  # class module, class qualname, attribute, function name, fingerprint


def class_paths(classes: Iterable[type], traced: Iterable[Any]) -> list[Path]:
    """(class module, class qualname, attribute, the function's name, its
    fingerprint) for every name along the MRO of each class that finds a function
    whose code the trace ran (``Net.extra``, ``LlamaRMSNorm.forward``,
    ``Module._call_impl``). A class no name imports is skipped: the identity rule
    refuses or proves it (recording/identity.py)."""
    from .captured_values import class_function, fingerprint
    from .minted import recipe

    codes = set(traced)
    out: set[Path] = set()
    for cls in list(classes):
        try:
            r = recipe(cls)
        except Exception:  # noqa: BLE001 - not nameable: nothing to check it by
            r = None
        if r is None or r[0] != "attr" or cls.__module__.startswith(("torch._dynamo", "torch._inductor")):
            continue
        seen: set[str] = set()
        for klass in cls.__mro__:
            for name, held in list(vars(klass).items()):
                if name in seen:
                    continue
                seen.add(name)
                fn = class_function(held)
                if isinstance(fn, types.FunctionType) and fn.__code__ in codes:
                    try:
                        out.add((cls.__module__, cls.__qualname__, name, f"{fn.__module__}.{fn.__qualname__}",
                                 fingerprint(fn)))
                    except Exception:  # noqa: BLE001 - a fingerprint that cannot be spelled
                        continue
    return sorted(out)
