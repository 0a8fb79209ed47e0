"""Issue 50's seven silent cases as an unmodified torch.compile script: run under
``precompile run --capture DIR`` with ``HC_VALUES=A``, then ``--serve DIR
--lockdown`` with A (the capture's state: served) and B (a hook added at serve, a
method rebound on its class, a library class patched in the capture job and not
here: refused, or equal to eager). Each case is its own call site with its own
model, and its state is set up before its first call and undone after its last.
Prints one ``RESULT {json}`` line: per case, "served", "refused: ..." or "WRONG",
and once a case's change is undone, the same call again (served)."""

import json
import os
import sys

import torch
from torch import nn
from transformers.models.llama.modeling_llama import LlamaRMSNorm

B = os.environ.get("HC_VALUES") == "B"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.out = nn.Linear(4, 4)

    def extra_a(self, y):
        return y + 1.0

    def extra_b(self, y):
        return y * 2.0

    extra = extra_a

    def forward(self, x):
        return self.extra(self.out(torch.relu(self.lin(x))))


class Rebound(Net):
    pass


class Hooked(Net):  # a site of its own: captured with hooks in force
    pass


class Hooked2(Net):
    pass


def fused_forward(self, hidden_states):
    """What a kernel-patching library puts on LlamaRMSNorm.forward (here: a scale less)."""
    return hidden_states * torch.rsqrt(hidden_states.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)


class Normed(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.norm = LlamaRMSNorm(4)

    def forward(self, x):
        return self.norm(self.lin(x))


if not B:  # the capture job patches the library; the serving script forgot to
    LlamaRMSNorm.forward = fused_forward


def times3(_module, _inputs, output):
    return output * 3


def shift(_module, inputs):
    return (inputs[0] + 0.5,)


def by_buffer(module, _inputs, output):
    return output * module.late_scale


def perturbed(model):
    """Other weights than the capture's: a baked-in weight would show."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def case(setup, cls=Net):
    """(compiled, eager, undo): the model compiled at its own site, with the state
    setup(net, B) makes applied before the first call (None: nothing in this run)."""
    net = perturbed(cls())
    compiled = torch.compile(net, backend="eager")
    return compiled, net, setup(net)


def run(compiled, eager, x):
    try:
        y = compiled(x)
    except Exception as e:  # noqa: BLE001 - a refusal is the PrecompileError
        if type(e).__name__ != "PrecompileError":
            raise
        return f"refused: {e}"
    return "served" if torch.allclose(y, eager(x), atol=1e-5) else "WRONG"


def hook_on_sub(net):
    if not B:
        return None
    return net.lin.register_forward_hook(times3).remove


def pre_hook_on_self(net):
    if not B:
        return None
    return net.register_forward_pre_hook(shift).remove


def pre_hook_on_sub(net):
    if not B:
        return None
    return net.out.register_forward_pre_hook(shift).remove


def global_hook(_net):
    if not B:
        return None
    return nn.modules.module.register_module_forward_hook(times3).remove


def late_buffer(net):
    if not B:
        return None
    net.out.register_buffer("late_scale", torch.tensor(4.0))
    return net.out.register_forward_hook(by_buffer).remove


def rebind(_net):
    if not B:
        return None
    Net.extra = Net.extra_b

    def undo():
        Net.extra = Net.extra_a
    return undo


def rebind_on_subclass(_net):
    if not B:
        return None
    Rebound.extra = Net.extra_b

    def undo():
        del Rebound.extra
    return undo


def hook_kept(net):
    """Hooks in force at capture, registered again by the serving script: served."""
    net.lin.register_forward_hook(times3)
    net.register_forward_pre_hook(shift)


def hook_replaced(net):
    """A hook the capture ran with, another one of the same shape at serve."""
    net.out.register_forward_hook(by_buffer if B else times3)
    net.out.register_buffer("late_scale", torch.tensor(4.0))


def main():
    torch.manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    x = torch.randn(3, 4)
    out = {}
    for name, setup, cls in [("hook on a submodule", hook_on_sub, Net),
                             ("pre-hook on the compiled module", pre_hook_on_self, Net),
                             ("pre-hook on a submodule", pre_hook_on_sub, Net),
                             ("global forward hook", global_hook, Net),
                             ("hook reading a late buffer", late_buffer, Net),
                             ("method rebound on its class", rebind, Net),
                             ("method rebound on a subclass", rebind_on_subclass, Rebound),
                             ("library class patched at capture only", lambda _n: None, Normed),
                             ("hooks kept", hook_kept, Hooked),
                             ("hook replaced", hook_replaced, Hooked2)]:
        compiled, eager, undo = case(setup, cls)
        out[name] = run(compiled, eager, x)
        if undo is not None:
            undo()
            out[name + ", undone"] = run(compiled, eager, x)  # the capture's state serves again
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
