"""An unmodified job: imports the model module and calls step. Usage:
python -m envapp.job OUT.pt [--calls N] [--die-after K]"""

import os
import signal
import sys

import torch

from envapp.model import make, step


def main() -> None:
    out = sys.argv[1]
    calls = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else 2
    die_after = int(sys.argv[sys.argv.index("--die-after") + 1]) if "--die-after" in sys.argv else None
    model, x = make()
    ys = []
    for i in range(calls):
        ys.append(step(model, x))
        if die_after is not None and i + 1 == die_after:
            os.kill(os.getpid(), signal.SIGKILL)
    torch.save({"y": ys[-1], "x": x}, out)
    print("JOB DONE", calls)


if __name__ == "__main__":
    main()
