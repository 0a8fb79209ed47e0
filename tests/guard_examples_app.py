"""Issue 36's examples as an unmodified torch.compile script: run under ``precompile
run --capture DIR`` with ``GV_VALUES=A``, then ``--serve DIR --lockdown`` with A (the
captured values: served) and B (another function, builtin, default, helper body,
patched torch function, score_mod: refused, or equal to eager). Prints one
``RESULT {json}`` line: per example, "served", "refused: ..." or "WRONG"."""

import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import flex_attention

B = os.environ.get("GV_VALUES") == "B"

K_DEFAULT = 5.0 if B else 2.0


def square(x):
    return x * x


def cube(x):
    return x * x * x


if B:
    def scaled(x):  # the helper, edited after the capture
        return x * 3
else:
    def scaled(x):
        return x * 2


if B:  # a library patches a torch function before the serving run
    def fused_gelu(x, approximate="none"):
        return torch.tanh(x)
    F.gelu = fused_gelu


def relative_bias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx)


def alibi(score, b, h, q_idx, kv_idx):
    return score - 0.5 * (q_idx - kv_idx).abs()


@torch.compile(backend="eager")
def apply(f, x):
    return f(x) + 1.0


@torch.compile(backend="eager")
def body(x, k=K_DEFAULT):
    return x * k


@torch.compile(backend="eager")
def uses_helper(x):
    return scaled(x) + 1


@torch.compile(backend="eager")
def uses_gelu(x):
    return F.gelu(x) + 1


FLEX = not os.environ.get("GV_NO_FLEX")  # torch 2.11 cannot read back its score_mod guards
if FLEX:
    @torch.compile(backend="eager")
    def attend(q, k, v, score_mod):
        return flex_attention(q, k, v, score_mod=score_mod)


def attention(q, k, v, score_mod):
    """flex_attention's math in eager (flex_attention itself calls torch.compile)."""
    s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    q_idx = torch.arange(s.shape[-2]).view(-1, 1)
    kv_idx = torch.arange(s.shape[-1]).view(1, -1)
    return score_mod(s, None, None, q_idx, kv_idx).softmax(-1) @ v


def run(name, compiled, eager, *args):
    try:
        y = compiled(*args)
    except Exception as e:  # noqa: BLE001 - a refusal is the PrecompileError
        if type(e).__name__ != "PrecompileError":
            raise
        return f"refused: {e}"
    return "served" if torch.allclose(y, eager(*args), atol=1e-5) else "WRONG"


def main():
    torch.manual_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    x = torch.randn(6)
    q, k, v = (torch.randn(1, 2, 8, 4) for _ in range(3))
    out = {
        "function": run("function", apply, apply.__wrapped__, cube if B else square, x),
        "builtin": run("builtin", apply, apply.__wrapped__, torch.tanh if B else torch.relu, x),
        "default": run("default", body, body.__wrapped__, x),
        "helper": run("helper", uses_helper, uses_helper.__wrapped__, x),
        "helper again": run("helper", uses_helper, uses_helper.__wrapped__, x + 1),  # compiles nothing new
        "patched": run("patched", uses_gelu, uses_gelu.__wrapped__, x),
    }
    if FLEX:
        out["score_mod"] = run("score_mod", attend, attention, q, k, v, alibi if B else relative_bias)
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
