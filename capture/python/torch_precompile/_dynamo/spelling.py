"""How guard sources and slots are spelled alike in every process: addresses and
per-process counters scrubbed, a local's ``L[...]`` dropped, and which source
expressions a pin may evaluate. The lowest of the guard modules: guards,
identity and captured_values all read it, and it reads only ``minted``."""

from __future__ import annotations

import re
from typing import Any

# Addresses and per-process counters differ run to run; scrub them so slots and
# rendered checks compare (and the artifact diffs) stably. (pattern, replacement)
# in order; a slot's spelling also drops the L[...] of a local. The artifact
# spells slots with these same rules (render writes them as _SLOT_SPELLING).
NORMALIZE = ((r"(___check_(?:obj|type)_id\(.*?, )\d+\)", r"\1<id>)"),
             (r"__builtins_dict___\d+", "__builtins_dict__"),
             (r"_\d{9,}_c\d+\b", "_<id>_c<n>"))
SLOT_SPELLING = ((r"\bL\[(['\"])(.*?)\1\]", r"\2"), *NORMALIZE)
_NORMALIZE = [(re.compile(p), r) for p, r in NORMALIZE]
_SLOT_SPELLING = [(re.compile(p), r) for p, r in SLOT_SPELLING]


def normalize(text: str) -> str:
    for pattern, replacement in _NORMALIZE:
        text = pattern.sub(replacement, text)
    return text


def slot_source(name: str) -> str:
    """``L['self'].act`` -> ``self.act``; globals keep their ``G[...]`` spelling."""
    for pattern, replacement in _SLOT_SPELLING:
        name = pattern.sub(replacement, name)
    return name


# Identifiers a pinned source may use: Dynamo's scope dicts and the builtins its
# source names spell: dict(type(x).__dict__); a dict entry by its key's position,
# list(dict.keys(d))[i] (transformers' ACT2FN[...] read in a forward, torch's pytree
# registry); a module Dynamo names by import, __import__('torch').utils._pytree.
_PIN_NAMES = frozenset({"G", "L", "dict", "type", "list", "__import__"})


def plain_expression(expr: str) -> bool:
    """An expression over the frame's globals and locals and the builtins that
    Dynamo's source names spell, which the driver can evaluate."""
    from .minted import loaded_globals

    try:
        return loaded_globals([compile(expr, "<pin>", "eval")]) <= _PIN_NAMES
    except SyntaxError:
        return False


FrameKey = tuple[str, str, int]  # (co_name, co_filename, co_firstlineno)


def frame_key(code: Any) -> FrameKey:
    """How every stage names a frame: its code's name, file and first line."""
    return (code.co_name, code.co_filename, code.co_firstlineno)
