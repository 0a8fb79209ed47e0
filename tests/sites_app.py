"""An unmodified script that uses torch.compile four ways (a module, a function,
a decorator, ``module.compile()``), run by tests/test_compile_sites.py under
``precompile run --capture`` and ``--serve``: ``python sites_app.py SEED ROWS
[--extra] [--fullgraph]``. It knows nothing of precompile. Prints one ``RESULT
<json>`` line: each call against eager on the same weights and inputs."""

import json
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def scale(x, k: float):
    return torch.sin(x) * k


def shift(x):
    return x + 1


def noisy(x):
    print("a graph break")
    return x * 2


@torch.compile
def head(y):
    return torch.softmax(y, dim=-1)


def main():
    seed, rows = int(sys.argv[1]), int(sys.argv[2])
    torch.manual_seed(seed)
    net = Net()
    cnet = torch.compile(net)
    cscale = torch.compile(scale, dynamic=False)
    tail = torch.nn.Linear(4, 4)
    want_tail = torch.nn.Linear(4, 4)
    want_tail.load_state_dict(tail.state_dict())
    tail.compile()
    out = {"calls": [], "compile_patched": hasattr(torch.compile, "__wrapped__"),
           "state_dict_keys": sorted(cnet.state_dict())[:1]}
    for n in (rows, rows + 1):
        x = torch.randn(n, 8)
        y = tail(head(cnet(cscale(x, 2.0))))
        want = want_tail(torch.softmax(net(torch.sin(x) * 2.0), dim=-1))
        out["calls"].append(bool(torch.allclose(y, want, atol=1e-5)))
    if "--fullgraph" in sys.argv:  # a graph break where fullgraph=True forbids one
        out["fullgraph"] = torch.compile(noisy, fullgraph=True)(torch.ones(2)).tolist()
    if "--extra" in sys.argv:  # a site the capture never reached
        try:
            out["extra"] = bool(torch.compile(shift)(torch.ones(2)).eq(2).all())
        except Exception as e:  # noqa: BLE001 - reported to the test
            out["extra"] = f"{type(e).__name__}: {e}"
    print("RESULT " + json.dumps(out), flush=True)


main()
