"""Lifting nn.Module state to graph inputs, so no weight is ever baked.

Parameters and buffers of every nn.Module argument become explicit graph inputs in a
fixed order (parameters, then buffers; modules in argument order). A tensor reachable
under several names (tied weights) is interned once, under its first name; the
driver reproduces exactly this order from the runtime model.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .._errors import PrecompileError


@dataclasses.dataclass
class Lifted:
    """The interned state of the module arguments."""

    tensors: list[torch.Tensor]          # unique params, then unique buffers
    names: list[tuple[int, str]]         # (argument position, qualified name) per tensor
    num_params: int
    # Every (position, name) that reparametrization must bind, with its unique index:
    # tied names point at the same index.
    bindings: list[tuple[int, str, int]]

    @property
    def param_names(self) -> list[tuple[int, str]]:
        return self.names[: self.num_params]

    @property
    def buffer_names(self) -> list[tuple[int, str]]:
        return self.names[self.num_params:]


def lift(args: tuple[Any, ...]) -> Lifted:
    by_id: dict[int, int] = {}
    tensors: list[torch.Tensor] = []
    names: list[tuple[int, str]] = []
    bindings: list[tuple[int, str, int]] = []
    pending_buffers: list[tuple[int, str, torch.Tensor]] = []
    for pos, a in enumerate(args):
        if not isinstance(a, torch.nn.Module):
            continue
        for name, p in a.named_parameters(remove_duplicate=False):
            _intern(pos, name, p, by_id, tensors, names, bindings)
        pending_buffers.extend((pos, n, b) for n, b in a.named_buffers(remove_duplicate=False))
    num_params = len(tensors)
    for pos, name, b in pending_buffers:
        if b is None:
            continue
        _intern(pos, name, b, by_id, tensors, names, bindings)
    return Lifted(tensors, names, num_params, bindings)


def _intern(pos: int, name: str, t: torch.Tensor, by_id: dict[int, int],
            tensors: list[torch.Tensor], names: list[tuple[int, str]],
            bindings: list[tuple[int, str, int]]) -> None:
    if t.is_nested:
        raise PrecompileError(
            f"argument {pos}'s tensor {name!r} is a nested tensor, which capture does not "
            "support; make it a plain dense tensor"
        )
    idx = by_id.get(id(t))
    if idx is None:
        idx = by_id[id(t)] = len(tensors)
        tensors.append(t)
        names.append((pos, name))
    bindings.append((pos, name, idx))


def plain_tensor_attributes(module: torch.nn.Module, prefix: str) -> list[tuple[torch.Tensor, str]]:
    """Tensors held as plain (unregistered) module attributes, with qualified names."""
    found = []
    for mod_name, m in module.named_modules():
        registered = set(m._parameters) | set(m._buffers)
        for attr, value in vars(m).items():
            if attr not in registered and isinstance(value, torch.Tensor):
                found.append((value, ".".join(p for p in (prefix, mod_name, attr) if p)))
    return found


def closed_over_tensors(fn: Any) -> list[tuple[torch.Tensor, str]]:
    """Tensors fn reaches through its closure or the globals it names."""
    found = []
    code = getattr(fn, "__code__", None)
    for cell_name, cell in zip(getattr(code, "co_freevars", ()), getattr(fn, "__closure__", None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, torch.Tensor):
            found.append((value, f"closed-over variable {cell_name!r}"))
    for name in getattr(code, "co_names", ()):
        value = getattr(fn, "__globals__", {}).get(name)
        if isinstance(value, torch.Tensor):
            found.append((value, f"global {name!r}"))
    return found
