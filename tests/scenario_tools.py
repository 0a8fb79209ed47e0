"""Helpers the capture/serve child processes share: comparing against eager."""

from __future__ import annotations

import copy

import torch
import torch.utils._pytree as pytree

TOL = {"eager": dict(atol=1e-6, rtol=1e-5), "inductor": dict(atol=1e-4, rtol=1e-4)}


def clone_args(args):
    """The same arguments for an eager reference run: models deep-copied, tensors cloned."""
    out = []
    for a in args:
        if isinstance(a, torch.nn.Module):
            out.append(copy.deepcopy(a))
        else:
            out.append(pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, a))
    return tuple(out)


def assert_close(got, want, backend: str, what: str) -> None:
    g, gs = pytree.tree_flatten(got)
    w, ws = pytree.tree_flatten(want)
    assert gs == ws, f"{what}: structure {gs} != {ws}"
    for i, (a, b) in enumerate(zip(g, w)):
        if isinstance(b, torch.Tensor):
            torch.testing.assert_close(a, b, **TOL[backend], msg=lambda m: f"{what} leaf {i}: {m}")
        else:
            assert a == b, f"{what} leaf {i}: {a!r} != {b!r}"


def assert_models_match(got: torch.nn.Module, want: torch.nn.Module, backend: str, what: str) -> None:
    """Buffers (e.g. BatchNorm running stats) and .grad fields equal the eager run's."""
    for (n, b1), (_, b2) in zip(got.named_buffers(), want.named_buffers()):
        torch.testing.assert_close(b1, b2, **TOL[backend], msg=lambda m: f"{what} buffer {n}: {m}")
    for (n, p1), (_, p2) in zip(got.named_parameters(), want.named_parameters()):
        assert (p1.grad is None) == (p2.grad is None), f"{what} grad of {n}: {p1.grad is None} vs {p2.grad is None}"
        if p1.grad is not None:
            torch.testing.assert_close(p1.grad, p2.grad, **TOL[backend], msg=lambda m: f"{what} grad {n}: {m}")
