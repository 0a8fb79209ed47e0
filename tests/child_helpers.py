"""What the tests' child scripts share, imported with the tests directory on
``sys.path`` (the scripts insert it)."""

from __future__ import annotations

from typing import Any, Callable


def refused(thunk: Callable[[], Any]) -> str:
    """How ``thunk()`` ended, on one line: the PrecompileError's message,
    ``NOT REFUSED`` when it returned, ``RAW <type>: <message>`` for any other
    exception (a raw error reaching the user is itself a bug to assert against)."""
    import torch_precompile as tp

    try:
        thunk()
    except tp.PrecompileError as e:
        return str(e).replace("\n", " ")
    except Exception as e:  # noqa: BLE001
        return f"RAW {type(e).__name__}: {e}".replace("\n", " ")
    return "NOT REFUSED"
