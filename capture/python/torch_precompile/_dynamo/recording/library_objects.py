"""Library objects whose dropped identity guards become checks the artifact can make.

Dynamo guards some objects of libraries by identity, which no serving process can
match: a configuration object it deep-copies or treats as a constant (transformers
deep-copies an encoder-decoder config to build its cache, and guards the config,
its ``__dict__`` and every entry of it), and a function made by a factory (the
per-field validators huggingface_hub's strict dataclasses keep in a config class's
``__validators__``). What the traced program depends on is not those identities:

- a **configuration object** (a ``transformers`` ``PretrainedConfig``, a
  ``diffusers`` ``FrozenDict``, a dataclass instance) is checked by its class,
  through its importable qualified name, and by the values of its entries,
  recorded at capture and compared at serve. The guards under it (its
  ``__dict__``, each entry) are covered by that check. An entry whose value has
  no portable spelling (its repr holds an address) leaves the guards on the
  config refused, named.
- a **function without an importable name** (``_create_type_validator.<locals>.
  validator``) is checked by its module and qualified name: the slot must still
  hold a function made by the same factory.

- a **torch.optim optimizer** (``opt.step()`` inside the captured function) is
  checked by its class and the sizes of its parameter groups: its state tensors
  are never part of the artifact (Dynamo leaves its ``step`` to plain Python).
- a **wrapper made at run time** (``functools.wraps``) around a function importable
  by name, as an LR scheduler puts on ``opt.step``, is checked by the function it
  wraps and its own code.
- a **type annotation** made at class creation (``int | None``, held in a
  validator's closure) is checked by its spelling: equal annotations stand for
  each other.

Recipes (``Fact.pin``): ``("values", module, qualname, ((key, repr, literal), ...))``,
``("named", module, qualname)``, ``("optimizer", module, qualname, sizes)``, ``("wrapper", module, qualname, code
name, first line)`` and
``("spelled", repr)``; the driver checks them
on each call.
"""

from __future__ import annotations

import ast
import dataclasses
import types
from typing import Any, Iterable, Mapping

from ..pin_recipes import Recipe, make

# Classes (module prefix, qualname) whose instances are configuration objects.
_CONFIG_CLASSES = (("transformers.", "PretrainedConfig"), ("transformers.", "PreTrainedConfig"),
                   ("diffusers.", "FrozenDict"))



def is_config(value: Any) -> bool:
    if isinstance(value, type):
        return False
    if dataclasses.is_dataclass(value):
        return True
    return any(c.__module__.startswith(m) and c.__qualname__ == q
               for c in type(value).__mro__ for m, q in _CONFIG_CLASSES)


# Bookkeeping entries that say where a config came from, not what it computes: a
# model loaded from another path or saved by another release serves the same graph.
_PROVENANCE = frozenset({"_name_or_path", "name_or_path", "_commit_hash", "transformers_version",
                         "architectures", "_diffusers_version", "_class_name", "_use_default_values"})


def _entries(config: Any) -> dict[str, Any]:
    """What a value check compares: the instance dict, and a mapping's items, less
    the provenance entries."""
    out = dict(vars(config)) if hasattr(config, "__dict__") else {}
    if isinstance(config, Mapping):
        out.update({f"[{k!r}]": v for k, v in config.items()})
    return {k: v for k, v in out.items() if k.strip("[]'\"") not in _PROVENANCE}


def _spelling(value: Any) -> tuple[str, bool] | None:
    """(repr, whether it reads back as a Python literal equal to value), or None
    when the repr is tied to this process (an address)."""
    text = repr(value)
    if " at 0x" in text or "object at" in text:
        return None
    try:
        return text, ast.literal_eval(text) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text, False


def values_recipe(config: Any) -> tuple[Recipe | None, str]:
    """(recipe, "") checking ``config`` by class and values, or (None, why not)."""
    cls = type(config)
    if "<locals>" in cls.__qualname__:
        return None, f"its class {cls.__qualname__} has no importable name"
    items = []
    for key, value in sorted(_entries(config).items()):
        spelled = _spelling(value)
        if spelled is None:
            return None, (f"its entry {key!r} holds a {type(value).__module__}.{type(value).__qualname__} "
                          "whose value has no spelling another process can compare")
        items.append((key, *spelled))
    return make("values", cls.__module__, cls.__qualname__, tuple(items)), ""


def config_roots(entries: Iterable[Any], dropped: Iterable[bool]) -> dict[str, tuple[Recipe | None, str]]:
    """Source name -> (values recipe or None, why not) for every dropped identity
    guard in one frame compile whose value is a configuration object."""
    out: dict[str, tuple[Recipe | None, str]] = {}
    for e, drop in zip(entries, dropped):
        if drop and e.has_value and is_config(e.value):
            out.setdefault(e.orig_guard.originating_source.name, values_recipe(e.value))
    return out


def under(name: str, roots: Iterable[str]) -> str | None:
    """The root ``name`` is, or hangs off by an attribute or item step."""
    for root in roots:
        if name == root or name.startswith((root + ".", root + "[")):
            return root
    return None


def named_recipe(value: Any) -> Recipe | None:
    """("named", module, qualname) for a function made inside another (a factory's
    product), which no import returns but whose maker its name identifies."""
    if not isinstance(value, types.FunctionType):
        return None
    module, qualname = value.__module__, value.__qualname__
    if isinstance(module, str) and "<locals>" in qualname and "<lambda>" not in qualname:
        return make("named", module, qualname)
    return None


def wrapper_recipe(value: Any) -> Recipe | None:
    """("wrapper", module, qualname, code name, first line) for a ``functools.wraps``
    wrapper made at run time around a function importable by name (an LR
    scheduler's per-optimizer ``opt.step``): the slot must hold a wrapper of the
    same code around the same function."""
    from ..minted import recipe

    inner = getattr(value, "__wrapped__", None)
    code = getattr(value, "__code__", None)
    if not isinstance(value, types.FunctionType) or inner is None or code is None:
        return None
    r = recipe(inner) or _redecorated(inner)
    if r is None or r[0] != "attr":
        return None
    return make("wrapper", r[1], r[2], code.co_name, code.co_firstlineno)


def _redecorated(fn: Any) -> Recipe | None:
    """("attr", ...) naming a method a subclass decorated anew under its base's name
    (``AdamW.step`` is a ``functools.wraps`` copy named ``Adam.step``): found in the
    class dict of a subclass of the class its qualified name says."""
    import importlib

    owner, _, name = getattr(fn, "__qualname__", "").rpartition(".")
    if not owner or "<locals>" in owner:
        return None
    try:
        base: Any = importlib.import_module(fn.__module__)
        for part in owner.split("."):
            base = getattr(base, part)
    except (ImportError, AttributeError):
        return None
    stack = [base] if isinstance(base, type) else []
    while stack:
        cls = stack.pop()
        if cls.__dict__.get(name) is fn and "<locals>" not in cls.__qualname__:
            return ("attr", cls.__module__, f"{cls.__qualname__}.{name}")
        stack.extend(cls.__subclasses__())
    return None


def optimizer_recipe(value: Any) -> Recipe | None:
    """("optimizer", module, qualname, params per group) for a torch.optim
    optimizer Dynamo guarded by identity. Its hyper-parameters need no check here:
    a graph that bakes one (``lr``) keeps a value guard on it, and a step that runs
    as plain Python reads the live value."""
    import sys

    optim = sys.modules.get("torch.optim")
    if optim is None or not isinstance(value, optim.Optimizer):
        return None
    cls = type(value)
    if "<locals>" in cls.__qualname__:
        return None
    return make("optimizer", cls.__module__, cls.__qualname__, tuple(len(g["params"]) for g in value.param_groups))


_ANNOTATIONS = ("types.UnionType", "types.GenericAlias", "typing._GenericAlias",
                "typing._UnionGenericAlias", "typing._LiteralGenericAlias")


def spelled_recipe(value: Any) -> Recipe | None:
    """("spelled", repr) for a type annotation made at class creation (``int | None``
    in a dataclass field), which equal values stand for: compared by its repr."""
    kind = type(value)
    if f"{kind.__module__}.{kind.__qualname__}" in _ANNOTATIONS:
        spelled = _spelling(value)
        if spelled is not None:
            return make("spelled", spelled[0])
    return None
