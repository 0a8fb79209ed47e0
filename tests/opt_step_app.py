"""PyTorch's "Compiling the optimizer" tutorial, unmodified: ``@torch.compile
def opt_step(): opt.step()`` over Adam with a tensor learning rate. Run by
tests/test_compile_sites.py: ``python opt_step_app.py SEED STEPS``; prints one
``RESULT <json>`` line: the parameters after STEPS steps against eager Adam's."""

import copy
import json
import sys

import torch

torch.manual_seed(int(sys.argv[1]))
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
reference = copy.deepcopy(model)
opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
reference_opt = torch.optim.Adam(reference.parameters(), lr=torch.tensor(0.01))


@torch.compile(fullgraph=False)
def opt_step():
    opt.step()


batches = [torch.randn(5, 8) for _ in range(int(sys.argv[2]))]
for m, step, o in ((model, opt_step, opt), (reference, reference_opt.step, reference_opt)):
    for x in batches:
        m(x).pow(2).mean().backward()
        step()
        o.zero_grad()
print("RESULT " + json.dumps({"close": all(torch.allclose(a, b, atol=1e-6)
                                           for a, b in zip(model.parameters(), reference.parameters()))}))
