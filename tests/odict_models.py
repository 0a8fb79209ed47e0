"""A step that returns an OrderedDict subclass (as Hugging Face's ModelOutput
is) from a module that never imports ``collections`` itself, so Dynamo binds
the module into this one by id (``___module_collections_<id>_c<n>``) to
rebuild the output."""

from collections import OrderedDict

import torch
from torch import nn


class Output(OrderedDict):
    pass


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return Output(y=torch.relu(self.fc(x)))


def step(model, x):
    return model(x)
