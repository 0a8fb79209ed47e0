"""The single-use lifecycle every capture shares: new -> open -> spent.

One place for the state checks and their messages, so both tracers refuse a
re-entry, a call outside the block and a save after exit in the same words.
"""

from __future__ import annotations

from ._errors import PrecompileError

SPENT = "this capture's block has exited and a capture is single-use; call capture() again for a fresh one"


def check_enter(state: str) -> None:
    if state == "spent":
        raise PrecompileError(f"capture: {SPENT}")
    if state == "open":
        raise PrecompileError("capture: this capture is already open; a capture is entered once")


def check_call(state: str) -> None:
    if state != "open":
        raise PrecompileError(
            "capture: call the capture inside its `with` block" if state == "new" else f"capture: {SPENT}"
        )


def check_save(state: str) -> None:
    if state != "open":
        raise PrecompileError(
            "capture: save() works only inside the capture's `with` block"
            if state == "new" else f"capture: save() after exit: {SPENT}"
        )
