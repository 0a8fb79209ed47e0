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
    _check_not_traced()


def _check_not_traced() -> None:
    """A capture call runs fn for real and traces it itself: inside another trace
    (a FakeTensorMode, a make_fx or export trace, a torch.compile'd region) its
    tensors are not real and the trace would nest."""
    import torch

    keys = torch._C._TorchDispatchModeKey
    if torch._C._get_dispatch_mode(keys.FAKE) is not None:
        inside = "an enclosing FakeTensorMode"
    elif torch._C._get_dispatch_mode(keys.PROXY) is not None:
        inside = "another make_fx / torch.export trace"
    elif torch.compiler.is_compiling():
        inside = "a region torch.compile is tracing"
    else:
        return
    raise PrecompileError(
        f"capture: the capture was called inside {inside}; a capture runs fn on real "
        "tensors and traces it itself, so it cannot run inside another trace. Call it "
        "outside (capture the outer function instead)"
    )


def check_save(state: str) -> None:
    if state != "open":
        raise PrecompileError(
            "capture: save() works only inside the capture's `with` block"
            if state == "new" else f"capture: save() after exit: {SPENT}"
        )
