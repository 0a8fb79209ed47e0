"""The torch internals that differ across the supported releases (2.11.0 through
2.15.0), one module per concern. Each function names the versions that differ and
what it does on each; nothing outside this package checks a torch version."""

from __future__ import annotations

from types import FrameType


def raised_in(e: BaseException) -> FrameType | None:
    """The frame an exception was raised in (its traceback's innermost): how a
    torch failure that differs by release is told from a look-alike."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return None if tb is None else tb.tb_frame
