"""The one way a gate hooks into torch or Triton: a :class:`Patch` that replaces
one attribute with a wrapper and can put the original back.

A gated callable checks the lockdown first and otherwise calls the original
untouched, so unlocked use (the capture machinery included) behaves exactly as
stock torch. Wrappers are marked, so installing twice never wraps twice.
No torch import here.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from typing import Any, Callable

from .. import _lockdown

log = logging.getLogger("torch_precompile.gates")

_MARK = "__precompile_gate__"
_lock = threading.Lock()
_applied: list["Patch"] = []


class Patch:
    """``owner.name`` replaced by ``replacement``; :meth:`undo` restores ``original``."""

    __slots__ = ("owner", "name", "original", "replacement")

    def __init__(self, owner: Any, name: str, original: Any, replacement: Any) -> None:
        self.owner = owner
        self.name = name
        self.original = original
        self.replacement = replacement

    def undo(self) -> None:
        if vars(self.owner).get(self.name) is self.replacement:
            setattr(self.owner, self.name, self.original)

    def __repr__(self) -> str:
        return f"<Patch {qualname(self.owner)}.{self.name}>"


def qualname(owner: Any) -> str:
    module = getattr(owner, "__module__", None)
    name = getattr(owner, "__qualname__", None) or getattr(owner, "__name__", repr(owner))
    return f"{module}.{name}" if module and isinstance(owner, type) else name


def replace(owner: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Patch | None:
    """Replace ``owner.name`` (a function, method, classmethod or staticmethod
    defined on ``owner`` itself) by ``make(original_function)``. Returns None
    when the attribute is missing (another torch/Triton version) or already gated."""
    with _lock:
        raw = vars(owner).get(name)
        if raw is None:
            log.debug("not gating %s.%s: no such attribute here", qualname(owner), name)
            return None
        descriptor = type(raw) if isinstance(raw, (classmethod, staticmethod)) else None
        fn = raw.__func__ if descriptor is not None else raw
        if getattr(fn, _MARK, False):
            return None
        wrapper = make(fn)
        setattr(wrapper, _MARK, True)
        replacement = descriptor(wrapper) if descriptor is not None else wrapper
        setattr(owner, name, replacement)
        patch = Patch(owner, name, raw, replacement)
        _applied.append(patch)
        return patch


def refuse(what: str, remedy: str | None = None) -> None:
    """Raise PrecompileError for ``what`` if this thread is locked down."""
    log.debug("lockdown refuses: %s", what)
    try:
        if remedy is None:
            _lockdown.check(what)
        else:
            _lockdown.check(what, remedy)
    except Exception:
        from . import aftermath

        aftermath.note_refusal()  # what caches the refusal as an answer is cleared later
        raise


def gate(owner: Any, name: str, describe: Callable[..., str], remedy: str | None = None) -> Patch | None:
    """Gate ``owner.name``: under lockdown it raises PrecompileError naming
    ``describe(*args, **kwargs)`` (called with the original's arguments) instead
    of running; otherwise it is the original, plus one lockdown check."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def gated(*args: Any, **kwargs: Any) -> Any:
            if _lockdown.current() is not None:
                refuse(_describe(describe, original, args, kwargs), remedy)
            return original(*args, **kwargs)

        return gated

    return replace(owner, name, make)


def name_of(fn: Any) -> str:
    """A user-recognisable name: the function and where it is, or the module class."""
    code = getattr(fn, "__code__", None)
    qualname = getattr(fn, "__qualname__", None)
    if code is not None and qualname:
        return f"'{qualname}' ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"
    if qualname:
        return f"'{qualname}'"
    return f"a {type(fn).__name__}"


def _describe(describe: Callable[..., str], original: Callable[..., Any], args: tuple, kwargs: dict) -> str:
    # A description must never hide the refusal behind a second error.
    try:
        return describe(*args, **kwargs)
    except Exception:  # noqa: BLE001
        return f"{original.__module__}.{original.__qualname__}"


def original(fn: Any) -> Any:
    """The ungated callable behind ``fn`` (``fn`` itself when it is not a gate)."""
    while getattr(fn, _MARK, False):
        fn = fn.__wrapped__
    return fn


def applied() -> list[Patch]:
    with _lock:
        return list(_applied)


def undo_all() -> None:
    """Remove every gate (tests use it to reach what lies behind the Python gates)."""
    with _lock:
        while _applied:
            _applied.pop().undo()
