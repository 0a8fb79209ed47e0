"""The single-use lifecycle every capture shares: new -> open -> spent.

One place for the state checks and their messages, so both tracers refuse a
re-entry, a call outside the block, a save after exit and an argument no
artifact can serve in the same words.
"""

from __future__ import annotations

import sys
from typing import Any

from ._errors import PrecompileError

SPENT = "this capture's block has exited and a capture is single-use; call capture() again for a fresh one"


def check_enter(state: str) -> None:
    if state == "spent":
        raise PrecompileError(f"capture: {SPENT}")
    if state == "open":
        raise PrecompileError("capture: this capture is already open; a capture is entered once")


def check_call(state: str, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> None:
    if state != "open":
        raise PrecompileError(
            "capture: call the capture inside its `with` block" if state == "new" else f"capture: {SPENT}"
        )
    _check_not_traced()
    _check_no_ddp(args, kwargs or {})


def _check_no_ddp(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A DistributedDataParallel argument is refused before anything runs: Dynamo
    runs DDP's forward eagerly (it breaks at DDP's logger, and ``_inside_ddp_forward``
    is skipped), and the wrapped module's forward it compiles inside that eager
    region is not a frame of the capture, so the artifact would serve the model
    uncompiled; make_fx would trace DDP's hooks with the live process group."""
    ddp = getattr(sys.modules.get("torch.nn.parallel.distributed"), "DistributedDataParallel", None)
    if ddp is None:
        return
    named = [(f"argument {i}", a) for i, a in enumerate(args)] + [(f"argument {k!r}", v) for k, v in kwargs.items()]
    where = next((name for name, value in named if isinstance(value, ddp)), None)
    if where is None:
        return
    raise PrecompileError(
        f"capture: {where} is a DistributedDataParallel-wrapped module, which no artifact "
        "serves compiled: Dynamo runs DDP's forward eagerly and the wrapped module's graph "
        "is not recorded in the capture. Pass the wrapped module (ddp.module) instead; for a "
        "training step, write DDP's gradient all-reduce in fn with DynamoTracer (after "
        "loss.backward(): for p in model.parameters(): dist.all_reduce(p.grad); "
        "p.grad.div_(dist.get_world_size())), which captures and serves the gradients DDP "
        "computes"
    )


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
