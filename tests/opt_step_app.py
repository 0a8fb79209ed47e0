"""PyTorch's "Compiling the optimizer" tutorial, unmodified, in four shapes, each
its own torch.compile site: ``@torch.compile def step_a(): opt_a.step()`` over Adam
with a tensor learning rate (the tutorial), its LR-scheduler variant
(``sched.step()`` inside the compiled function), AdamW with a float learning rate
that a StepLR outside changes, and SGD with momentum (whose first step creates its
state). Run by tests/test_compile_sites.py: ``python opt_step_app.py SEED STEPS
[BETA1]`` (BETA1: Adam's and AdamW's, a value a serving call may change). Prints
``RESULT <json>``: per shape, whether the parameters after STEPS steps equal eager
torch.optim's, and how the served steps' updates ran."""

import copy
import json
import sys

import torch

torch.manual_seed(int(sys.argv[1]))
steps = int(sys.argv[2])
beta1 = float(sys.argv[3]) if len(sys.argv) > 3 else 0.9


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


MAKERS = {
    "adam": lambda p: torch.optim.Adam(p, lr=torch.tensor(0.01), betas=(beta1, 0.999)),
    "adam_sched": lambda p: torch.optim.Adam(p, lr=torch.tensor(0.01)),
    "adamw_float_lr": lambda p: torch.optim.AdamW(p, lr=0.01, betas=(beta1, 0.999)),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
}
models = {name: mlp() for name in MAKERS}
opts = {name: make(models[name].parameters()) for name, make in MAKERS.items()}
opt_a, opt_b, opt_c, opt_d = opts.values()
sched_b = torch.optim.lr_scheduler.LinearLR(opt_b, total_iters=5)
sched_c = torch.optim.lr_scheduler.StepLR(opt_c, step_size=2, gamma=0.5)


@torch.compile(fullgraph=False)
def step_a():
    opt_a.step()


@torch.compile(fullgraph=False)
def step_b():
    opt_b.step()
    sched_b.step()


@torch.compile
def step_c():
    opt_c.step()


@torch.compile
def step_d():
    opt_d.step()


def reference(name):
    model = copy.deepcopy(models[name])
    opt = MAKERS[name](model.parameters())
    sched = (torch.optim.lr_scheduler.LinearLR(opt, total_iters=5) if name == "adam_sched" else
             torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5) if name == "adamw_float_lr" else None)

    def step():
        opt.step()
        if name == "adam_sched":
            sched.step()
    return model, step, opt, sched if name == "adamw_float_lr" else None


batches = [torch.randn(5, 8) for _ in range(steps)]
result = {}
for name, step in zip(MAKERS, (step_a, step_b, step_c, step_d)):
    ref = reference(name)
    for m, s, o, outside in ((models[name], step, opts[name], sched_c if name == "adamw_float_lr" else None), ref):
        for x in batches:
            m(x).pow(2).mean().backward()
            s()
            o.zero_grad()
            if outside is not None:
                outside.step()
    result[name] = {"close": all(torch.allclose(a, b, atol=1e-6)
                                 for a, b in zip(models[name].parameters(), ref[0].parameters()))}
import torch_precompile._optim_steps as served  # noqa: E402 - not the tutorial's: how the updates ran
for site, counts in served.served_updates.items():
    result[{"step_a": "adam", "step_b": "adam_sched", "step_c": "adamw_float_lr",
            "step_d": "sgd_momentum"}[site.split("@")[0]]]["updates"] = counts
print("RESULT " + json.dumps(result))
