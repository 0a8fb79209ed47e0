"""Process groups and the distributed config slot: what a capture records about
them and a serving job must match.

A process group is made anew in every job, so Dynamo's identity guard on one
(``ID_MATCH G['dist'].group.WORLD``) can never hold in another process; and
Dynamo bakes what ``torch.distributed.get_rank()`` / ``get_world_size()``
return into the graph (``y / 2``) with no guard at all beyond the function's
identity. What the graph depends on is the group's shape: its backend, world
size and this process's rank. So each of those drops becomes a *checked
recipe*, carried by the pinning mechanism (``Fact.pin``): the standalone driver
reads the group and refuses a call in a job whose group differs, naming the
field. ``compile_on_one_rank`` (read through its config entry's ContextVar,
whose identity is fixed once ``torch.compiler.config`` is imported) becomes a
check of its value.

Recipes: ``("process_group", backend, world_size, rank)`` and
``("config", module, key, value)``. The rank is always checked: an artifact
serves the rank that captured it (per-rank pairs, ``m.{rank}.py``).
"""

from __future__ import annotations

import re
import sys
from typing import Any

# The pin expression that stands for the default group (what the baked
# functions read when called without a group).
DEFAULT_GROUP = "<default process group>"

# Config slots whose ContextVar a traced read guards by identity, and which
# the artifact checks by value instead: (module, key).
CHECKED_CONFIG = (("torch.compiler.config", "compile_on_one_rank"),)

# torch.distributed functions Dynamo calls at trace time and bakes the result
# of (torch/_dynamo/variables/torch.py, handle_constant_processgroup_functions).
_BAKED = ("get_rank", "get_world_size", "get_process_group_ranks", "_get_group_size_by_name",
          "_get_group_tag", "_rank_not_in_group", "_resolve_group_name_by_ranks_and_tag")

# A config slot's user override (a ContextVar) and what it holds. torch leaves
# the override set once any Inductor compile patched the slot (it restores the
# value, not the unset state), so a guard on what it holds depends on the
# process's history, not on the setting: both are checked by value instead.
_USER_OVERRIDE = re.compile(r"compiler(?:\.|_dot_)config'?\]?\._config\[(['\"])(\w+)\1\]\.user_override(\.get\(\))?$")


def _c10d() -> Any:
    return sys.modules.get("torch.distributed.distributed_c10d")


def group_recipe(pg: Any) -> tuple[Any, ...]:
    import torch.distributed as dist

    return ("process_group", str(dist.get_backend(pg)), int(pg.size()), int(pg.rank()))


def _is_group(value: Any) -> bool:
    c10d = _c10d()
    return c10d is not None and isinstance(value, c10d.ProcessGroup)


def _baked(value: Any) -> str | None:
    c10d = _c10d()
    if c10d is None or not callable(value):
        return None
    return next((n for n in _BAKED if getattr(c10d, n, None) is value), None)


def judge(e: Any) -> tuple[str, tuple[str, tuple[Any, ...]]] | None:
    """(why the drop is risky unless checked, (pin expression, recipe)) for a
    dropped guard on a process group, a baked torch.distributed function or a
    checked config slot; None for any other guard."""
    if not e.has_value:
        return None
    value = e.value
    expr = e.orig_guard.originating_source.name
    if _is_group(value):
        return ("holds a process group made at run time, whose identity no serving process can "
                "match; only a standalone artifact checks its backend, world size and rank instead",
                (expr, group_recipe(value)))
    name = _baked(value)
    if name is not None:
        c10d = _c10d()
        if not c10d.is_initialized():
            return None
        return (f"Dynamo baked what torch.distributed.{name}() returned into the graph, which only "
                "a standalone artifact checks against the live process group",
                (DEFAULT_GROUP, group_recipe(c10d._get_default_group())))
    key = overridden_slot(expr)
    if key is not None:
        module = dict((k, m) for m, k in CHECKED_CONFIG)[key]
        config = sys.modules.get(module)
        if config is not None:
            return (f"reads the configuration slot {module}.{key} through its override, which only "
                    "a standalone artifact checks by value",
                    (f"{module}.{key}", ("config", module, key, getattr(config, key))))
    return None


def overridden_slot(source: str) -> str | None:
    """The checked config slot whose user override ``source`` reads, or None."""
    m = _USER_OVERRIDE.search(source)
    if m is not None and any(m.group(2) == key for _module, key in CHECKED_CONFIG):
        return m.group(2)
    return None


def describe(recipe: tuple[Any, ...]) -> str:
    """How PINNED_BINDINGS names what a pin checks."""
    if recipe[0] == "process_group":
        return f"process group backend={recipe[1]} world_size={recipe[2]} rank={recipe[3]}"
    if recipe[0] == "config":
        return f"{recipe[1]}.{recipe[2]} == {recipe[3]!r}"
    return ".".join(recipe[1:])
