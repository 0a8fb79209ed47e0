"""Models and step functions the DynamoTracer tests capture and serve.

Module-level functions of an importable module, as a Dynamo artifact requires;
the fresh processes the tests start put this directory on sys.path.
"""

from __future__ import annotations

import collections
import os

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class DropMLP(nn.Module):
    """Behaves differently in train and eval (dropout, batch norm statistics)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.bn = nn.BatchNorm1d(8)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        return self.drop(self.bn(self.fc(x)))


class BreakingChild(nn.Module):
    """A graph break inside a child module's forward: only the frame evaluator
    sees this frame, so its artifact serves installed."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.sin(self.inner(x))
        torch._dynamo.graph_break()
        return h * 2


class Parent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Linear(8, 8)
        self.child = BreakingChild()
        self.post = nn.Linear(8, 4)

    def forward(self, x):
        return self.post(self.child(torch.relu(self.pre(x))))


class EnvScaledChild(nn.Module):
    """A graph break inside a child's forward, then a read of the environment."""

    def forward(self, x):
        h = torch.sin(x)
        torch._dynamo.graph_break()
        return h * int(os.environ["SCALE"])


class EnvParent(nn.Module):
    """Its capture serves installed; the child's continuation guards on $SCALE."""

    def __init__(self) -> None:
        super().__init__()
        self.child = EnvScaledChild()

    def forward(self, x):
        return self.child(torch.relu(x))


class Activation(nn.Module):
    """Holds a Python function in an attribute: a configuration-chosen slot."""

    def __init__(self, act=torch.tanh) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = act

    def forward(self, x):
        return self.act(self.fc(x))


def my_act(x):
    return x * torch.sigmoid(x)


class PrintingChild(nn.Module):
    """A graph break (a print) inside a child module's forward that reads nothing
    of Dynamo: its artifact serves installed, and Dynamo-free."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.sin(self.inner(x))
        print("inside the child")
        return h * 2


class PrintParent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Linear(8, 8)
        self.child = PrintingChild()
        self.post = nn.Linear(8, 4)

    def forward(self, x):
        return self.post(self.child(torch.relu(self.pre(x))))


class Stack(nn.Module):
    """Layers in a ModuleList, run in its order: the guards check its keys by position."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def step(model, x):
    return model(x)


def env_scaled(x):
    return x * int(os.environ["SCALE"])  # an item read of os.environ: guarded by value


def add_one(x):
    return x + 1


def scaled(model, x, scale=2.0, *, shift=0.5):
    return model(x) * scale + shift


def with_int(x, n):
    return x * n + n


def print_break(model, x):
    y = model(x)
    print("between graphs")
    return torch.cos(y)


def item_branch(model, x):
    y = model(x)
    if x.sum().item() > 0:  # a data-dependent branch: graph break on .item()
        return y * 2
    return y - 1


def train_step(model, x, target):
    loss = ((model(x) - target) ** 2).mean()
    loss.backward()
    return loss.detach()


def raises(x):
    if x.shape[0] == 3:
        raise ValueError("three rows are not allowed")
    return x * 3


def other_act(x):
    return x * torch.tanh(x)


def make_nested():
    def nested(x):  # no closure, but not reachable by name from the module
        return x + 1
    return nested


def tagged_tail(model, x):
    y = model(x)
    print("tail")
    return y, model.tag.__name__  # graphless after the break; model.tag is a config slot


def scaled_act(k):
    """An activation built at run time: no import names it, so the artifact checks
    it by the fingerprint of its code and closure (k)."""
    def act(x):
        return x * k
    return act


class ClassAct(nn.Module):
    """Builds its activation from a class held in an attribute."""

    def __init__(self, act_cls) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act_cls = act_cls

    def forward(self, x):
        return self.act_cls()(self.fc(x))


def local_act_class(k):
    """A module class made at run time: no name reaches it in a serving process,
    so a guard on it can be neither checked nor proven invariant (refused)."""
    class Scale(nn.Module):
        def forward(self, x):
            return x * k
    return Scale


plus_one = lambda x: x + 1  # noqa: E731 - a module-level lambda: only MakeFx takes one


def uses_len(x):
    return x * len(x.shape)  # len is a builtin: a BUILTIN_MATCH guard every variant keeps alike


class _Instantiating(collections.OrderedDict):
    """A registry whose lookup builds the class it holds, like transformers' ACT2FN."""

    def __getitem__(self, key):
        return super().__getitem__(key)()


ACTS = _Instantiating(relu=nn.ReLU, tanh=nn.Tanh)


def registry_act(x):
    # Dynamo reads the entry as dict.__getitem__(ACTS, list(dict.keys(ACTS))[1])
    return ACTS["tanh"](x) + 1


def vmapped(x):
    # a functorch transform inside fn: Dynamo guards the functorch stack (empty here)
    return torch.vmap(torch.sin)(x) + 1
