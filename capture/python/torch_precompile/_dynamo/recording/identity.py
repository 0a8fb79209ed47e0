"""The rule for identity guards: invariant by proof, checked by a portable key, or refused.

Dynamo guards a function, builtin, class or module by its identity (ID_MATCH,
FUNCTION_MATCH, CLOSURE_MATCH on the code, BUILTIN_MATCH, CLASS_MATCH,
MODULE_MATCH), which no other process shares. Every such guard an artifact does
not carry as it is (the default filter drops it, or the invariance policy takes
it out of the serialized guards) is, for its value and source, exactly one of:

- **invariant**, with the proof written in the artifact: a module reached by
  import path (an attribute chain off one of Dynamo's import aliases or by-id
  globals, which the artifact itself re-creates by import); a class without an
  importable name read off a class (its MRO), fixed when that class was made;
  Dynamo's own code and its list of continuations, locked to the captured torch;
- **checked** on every call by a pin (``driver/pins.py``): a Python function —
  module-level, nested, a lambda, a method read off its class — by the
  fingerprint of its code, defaults and closure values; a builtin by its own
  qualified name (``torch.relu`` passed as an argument, ``len`` in the builtins
  dict, ``torch.nn.functional.gelu`` read off its module, so a patched function is
  seen); a class by its qualified name and identity; a module by name; None,
  True, False, Ellipsis by identity; a builtin method bound to an instance by its
  name and the instance's class; a bound method or a partial guarded as a whole
  by its function's fingerprint (and arguments as spelled);
- **refused** at capture, naming the source and the remedy: a class made at run
  time that no name reaches, or any of these read through an expression the
  artifact cannot evaluate.

Nothing that arrives as a value (an argument, a default, a closure cell, an
attribute, a dict entry, a global bound at run time) is invariant, whatever its
type, and neither is a function reached by import path: someone may have replaced
it (a library patching ``torch.nn.functional.gelu``, a method rebound on its
class), so what the serving call finds there must be what the capture compiled.
Instances (configuration objects, optimizers, process groups) are judged by
``guards._judge`` and ``library_objects``; this module answers for the values above.
"""

from __future__ import annotations

import types
from typing import Any, NamedTuple

from .. import minted
from ..pin_recipes import make

INVARIANT, CHECKED, REFUSED = "invariant", "checked", "refused"

# Guard types that compare an identity (the ones this rule answers for).
IDENTITY = frozenset({"ID_MATCH", "FUNCTION_MATCH", "CLASS_MATCH", "MODULE_MATCH", "NN_MODULE",
                      "CLOSURE_MATCH", "BUILTIN_MATCH"})

_SINGLETONS = {id(None): "None", id(True): "True", id(False): "False", id(Ellipsis): "Ellipsis"}
CLASS_LEVEL = ("TypeSource", "TypeDictSource", "TypeMROSource")  # steps that read off a class
# Dynamo's own code: locked to the torch the artifact checks it is served on.
_DYNAMO_OWN = ("torch._dynamo", "torch._inductor")
_DYNAMO_ALIASES = ("__import_torch_dot__dynamo", "__import_torch_dot__inductor")


class Verdict(NamedTuple):
    kind: str                 # INVARIANT | CHECKED | REFUSED
    why: str                  # the proof (invariant) or the reason (refused); "" when checked
    pin: tuple[str, tuple[Any, ...]] | None  # (source expression, recipe) when checked


def chain(src: Any) -> list[Any]:
    """A source's steps, root first."""
    out = [src]
    while getattr(out[-1], "base", None) is not None:
        out.append(out[-1].base)
    return out[::-1]


def _kind(step: Any) -> str:
    return type(step).__name__


def _by_import(steps: list[Any]) -> bool:
    """An attribute chain off a module the artifact imports itself: one of
    Dynamo's import aliases (``G['__import_torch_dot_nn']``), a by-id global
    (``G['_<id>_c0']``) or an import source."""
    root = steps[0]
    if _kind(root) == "ImportSource":
        rooted = True
    elif _kind(root) == "GlobalSource":
        name = root.global_name
        rooted = name.startswith("__import_") or bool(minted.BY_ID.match(name))
    else:
        rooted = False
    return rooted and all(_kind(s) == "AttrSource" for s in steps[1:])


def _plain(expr: str) -> bool:
    from ..spelling import plain_expression

    return plain_expression(expr)


def covers(e: Any) -> bool:
    """Whether this rule answers for the guard: an identity guard on a function,
    builtin, class, module or singleton."""
    if e.guard_type not in IDENTITY or not e.has_value:
        return False
    v = e.value
    return (isinstance(v, (types.FunctionType, types.ModuleType, type, types.MethodType, types.CodeType))
            or id(v) in _SINGLETONS or _builtin_key(v) is not None or _is_builtin(v)
            or type(v).__name__ == "partial")


def _builtin_key(value: Any) -> Any:
    from ..captured_values import builtin_key

    return builtin_key(value)


def _is_builtin(value: Any) -> bool:
    return type(value).__name__ in ("builtin_function_or_method", "method-wrapper")


def judge(e: Any) -> Verdict:
    """The verdict for an identity guard ``covers`` answers for."""
    src = e.orig_guard.originating_source
    steps = chain(src)
    expr = src.name
    value = e.value
    root = steps[0]
    if _kind(root) == "LocalSource" and root.local_name == "__nested_resume_fns":
        return Verdict(INVARIANT, "Dynamo's own list of the continuations it generated", None)
    if _kind(root) == "GlobalSource" and root.global_name.startswith(_DYNAMO_ALIASES) and _by_import(steps):
        return Verdict(INVARIANT, "read off Dynamo's own module (a polyfill's import), locked to the "
                       "captured torch release", None)
    if isinstance(value, types.ModuleType):
        if _by_import(steps):
            return Verdict(INVARIANT, f"the module {value.__name__}, reached by import path", None)
        return _checked(expr, make("module", value.__name__), "a module")
    if id(value) in _SINGLETONS:
        return _checked(expr, make("singleton", _SINGLETONS[id(value)]), "a singleton")
    if isinstance(value, type):
        from ..rendering.dynamo_free_guards import builtin_recipe

        r = minted.recipe(value) or builtin_recipe(value)  # types.NoneType: no builtins.NoneType
        if r is not None and r[0] == "attr":
            return _checked(expr, make("class", value.__module__, value.__qualname__, r[1], r[2]), "a class")
        if any(_kind(s) in CLASS_LEVEL for s in steps[1:]):
            return Verdict(INVARIANT, f"the class {value.__qualname__} read off a class, fixed when "
                           "that class was made", None)
        return Verdict(REFUSED, f"holds the class {value.__module__}.{value.__qualname__}, made at run "
                       "time, which no name reaches in a serving process; define it at module level",
                       None)
    if isinstance(value, types.FunctionType):
        module = value.__module__ or ""
        if module.startswith(_DYNAMO_OWN) and _by_import(steps):
            return Verdict(INVARIANT, f"Dynamo's own {module}.{value.__qualname__}, locked to the "
                           "captured torch release", None)
        from . import library_objects
        from ..captured_values import fingerprint

        wrapped = library_objects.wrapper_recipe(value)
        if wrapped is not None:
            return _checked(expr, wrapped, "a wrapper")
        return _checked(expr, make("code", module, value.__qualname__, fingerprint(value)), "a function")
    if isinstance(value, types.CodeType):
        from ..captured_values import code_digest

        return _checked(expr, make("code_object", value.co_qualname, code_digest(value)), "a code object")
    key = _builtin_key(value)
    if key is not None:
        return _checked(expr, make("builtin", key), "a builtin")
    from ..captured_values import fingerprint, spell

    if _is_builtin(value):  # bound to an instance (random.random): its name and its class
        owner = type(value.__self__)
        return _checked(expr, make("bound_builtin", value.__name__, owner.__module__, owner.__qualname__),
                        "a builtin method")
    if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
        owner = type(value.__self__)
        return _checked(expr, make("method", fingerprint(value.__func__), owner.__module__, owner.__qualname__,
                               value.__func__.__qualname__), "a bound method")
    if type(value).__name__ == "partial":
        return _checked(expr, make("partial", spell(value)), "a functools.partial")
    return Verdict(REFUSED, f"holds a {type(value).__module__}.{type(value).__qualname__} guarded as a "
                   "whole, which no serving process can check by name; pass the function and its "
                   "arguments separately", None)


def _checked(expr: str, recipe: tuple[Any, ...], what: str) -> Verdict:
    if not _plain(expr):
        return Verdict(REFUSED, f"holds {what} read through an expression the artifact cannot "
                       "evaluate to check it", None)
    return Verdict(CHECKED, "", (expr, recipe))
