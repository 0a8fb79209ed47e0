"""What a MakeFx trace ran that its graph cannot show: the hooks in force and the
methods found through the classes of its modules.

make_fx records the ops a call ran, not the Python that chose them: a hook or a
method is baked into the graph as the code it was at capture. The artifact holds
what the trace ran (``HOOKS``, ``GLOBAL_HOOKS``, ``CLASS_PATHS``) and checks it on
every call (the driver's ``_pc_check_hooks`` and ``_pc_class_paths``), as a
DynamoTracer artifact does by its pins: a hook added, removed or replaced, or a
method rebound on its class, is refused naming it.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator

import torch

# A module's hook dicts, and the process-wide ones in torch.nn.modules.module (the
# driver spells both lists again: it is a template, not an importer).
HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
              "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")
GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks", "_global_forward_hooks_with_kwargs",
                     "_global_forward_hooks_always_called")


@contextlib.contextmanager
def codes_run(into: set[Any]) -> Iterator[None]:
    """Every Python code object called while the block runs, added to ``into``
    (a profile function, chained to one already set)."""
    before = sys.getprofile()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            into.add(frame.f_code)
        if before is not None:
            before(frame, event, arg)

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(before)


def _spelled(hooks: dict[Any, Any]) -> list[str]:
    from .._dynamo.captured_values import spell

    return [spell(h) for h in hooks.values()]


def hooks(args: tuple[Any, ...], positions: list[int]) -> dict[int, dict[str, dict[str, list[str]]]]:
    """position -> module path -> hook dict -> each hook's spelling (_pc_spell): the
    dicts that held hooks at capture; every other one was empty."""
    out: dict[int, dict[str, dict[str, list[str]]]] = {}
    for pos in positions:
        for path, m in args[pos].named_modules(remove_duplicate=False):
            held = {a: _spelled(getattr(m, a)) for a in HOOK_DICTS if getattr(m, a, None)}
            if held:
                out.setdefault(pos, {})[path] = held
    return out


def global_hooks() -> dict[str, list[str]]:
    mod = torch.nn.modules.module
    return {a: _spelled(getattr(mod, a)) for a in GLOBAL_HOOK_DICTS if getattr(mod, a, None)}


def class_paths(args: tuple[Any, ...], positions: list[int], codes: set[Any]) -> list[tuple[str, ...]]:
    """The methods the trace found through the classes of its modules
    (_dynamo/class_paths.py)."""
    from .._dynamo.class_paths import class_paths as paths

    classes = {type(m): None for pos in positions for m in args[pos].modules()}
    return [list(p) for p in paths(classes, codes)]
