import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def step(model, x):
    return model(x)


def make(seed: int = 0):
    torch.manual_seed(seed)
    return Net(), torch.randn(4, 8)
