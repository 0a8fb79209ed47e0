"""Frames Dynamo compiles on their own that an artifact must name to find again:
a function made by exec (its code has no module, as a dataclass's generated
__init__), and a property getter and a classmethod (found through the class)."""

import torch

_ns: dict = {}
exec(compile("def made(x):\n    print('made')\n    return x + 1\n", "<string>", "exec"), _ns)
made = _ns["made"]


def calls_made(x):
    return made(x * 2) * 3


class Holder(torch.nn.Module):
    @property
    def scale(self):
        return 2.0

    @classmethod
    def build(cls):
        return cls()
