"""Dynamo's switches that leave guards out, as a capture must find them.

Inside one process Dynamo may skip a guard because something else of that
process stands in for it (a dict tag, a watcher, the assumption that nothing is
rebound). An artifact crosses processes, where none of that holds. docs/api.md's
rule table lists every such mechanism with the substitute an artifact uses; the
switches below are the ones whose non-default value would make a capture record
fewer guards than the artifact needs, so a capture refuses them by name.
"""

from __future__ import annotations

from typing import Any

# switch -> (its safe value, what setting it otherwise gives up)
UNSAFE: dict[str, tuple[Any, str]] = {
    "guard_nn_modules": (True, "Dynamo would assume every module's attributes never change"),
    "_unsafe_skip_fsdp_module_guards": (False, "Dynamo would skip every guard inside FSDP modules"),
}


def refuse_unsafe_switches() -> None:
    """Raise PrecompileError naming each switch set to leave guards out."""
    import torch._dynamo.config as config

    from ..._errors import PrecompileError

    found = [f"torch._dynamo.config.{name} = {getattr(config, name)!r} ({why})"
             for name, (safe, why) in UNSAFE.items()
             if hasattr(config, name) and getattr(config, name) != safe]
    if found:
        raise PrecompileError(
            "capture: Dynamo is configured to leave guards out that an artifact needs, since a "
            f"serving process cannot stand in for them: {'; '.join(found)}. Capture with the "
            "default value (docs/api.md lists every such switch)")
