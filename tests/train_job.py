"""An unmodified training script that checkpoints and resumes, for the restarted-job
test. Usage: python train_job.py LOSSES.json --steps N [--resume CKPT] [--save CKPT]

The step is train_models.step (loss and backward); AdamW runs after it. A resumed
run loads the model's and the optimizer's state_dict and trains on with the batches
that follow the checkpoint's."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from train_models import batches, mlp, step  # noqa: E402 - PRECOMPILE_CAPTURE/SERVE wrap this step


def main() -> None:
    out, argv = sys.argv[1], sys.argv[2:]
    steps = int(argv[argv.index("--steps") + 1])
    model = mlp(seed=5)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    done = 0
    if "--resume" in argv:
        ckpt = torch.load(argv[argv.index("--resume") + 1])
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        done = ckpt["done"]
    data = batches(done + steps, seed=3)[done:]
    losses = []
    for x, y in data:
        losses.append(float(step(model, x, y)))
        opt.step()
        opt.zero_grad(set_to_none=True)
    if "--save" in argv:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "done": done + steps},
                   argv[argv.index("--save") + 1])
    Path(out).write_text(json.dumps(losses))
    # PRECOMPILE_SERVE replaced the step with the loaded artifact (a PrecompiledRunnable subclass)
    print("TRAINED", done + steps, "with", type(step).__name__)


if __name__ == "__main__":
    main()
