"""A state-mutation fuzzer for the identity rule (issue 50), on code nobody wrote
for it: tiny random-weight transformers models (Llama, GPT-2), a diffusers UNet,
a PEFT LoRA model and a user module with hooks, class attributes, a helper and a
closure.

``python state_fuzz.py capture DIR`` captures each model's step once (the API,
DynamoTracer, eager backend: the guards are the same as Inductor's).
``python state_fuzz.py serve DIR`` loads each artifact in a fresh process, builds
the model with other weights and other inputs, and for every piece of state the
trace could have read — each module's hook dicts and the process-wide ones, the
numbers and flags on every module, the functions and numbers on their classes,
the functions and constants of the modules those classes live in (and their
defaults), the configuration's entries, torch's functions and global state —
applies one mutation, calls the model eagerly and through the artifact, and
undoes it; then calls the artifact again on the restored state (the control).
Verdicts per mutation:

- ``refused``: the served call raised PrecompileError;
- ``equal``: served equals eager on the mutated state;
- ``WRONG``: served returned something else (must never happen);
- ``RAW``: served raised another error where eager did not;
- ``eager raised``: the mutation breaks the model itself (the served call
  refused or raised too: nothing to compare).

A refusal whose eager result did not move is needless; they are counted by kind.
Prints one ``FUZZ {json}`` line with every count. ``STATE_FUZZ_SAMPLE=N`` keeps
every Nth mutation (the torch 2.11 leg), ``STATE_FUZZ_MODELS=a,b`` some models.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch import nn

SCALE = 1.5


# --- the models, their steps and inputs ---------------------------------------------

def _quiet() -> None:
    import transformers

    transformers.logging.set_verbosity_error()


def llama(seed: int) -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    _quiet()
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)
    return LlamaForCausalLM(cfg).eval()


def gpt2(seed: int) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    _quiet()
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(cfg).eval()


def unet(seed: int) -> nn.Module:
    from diffusers import UNet2DConditionModel

    torch.manual_seed(seed)
    return UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, attention_head_dim=8, norm_num_groups=8).eval()


def lora(seed: int) -> nn.Module:
    from peft import LoraConfig, get_peft_model

    base = llama(seed)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                            lora_dropout=0.0, init_lora_weights=False))
    return model.eval()


def helper(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5 + 1.0


GAIN = 2.0


def make_act(power: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def act(x: torch.Tensor) -> torch.Tensor:
        return torch.sign(x) * x.abs() ** power
    return act


def clip_hook(_module: nn.Module, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
    return output.clamp(-2.0, 2.0)


class Block(nn.Module):
    scale = 2.0
    use_bias = True

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.act = make_act(1.5)
        self.mix = 0.25

    def extra(self, y: torch.Tensor) -> torch.Tensor:
        return y + GAIN if self.use_bias else y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.norm(self.lin(x))) * self.scale
        return self.extra(helper(y)) + self.mix * x


class UserNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def user(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    model = UserNet().eval()
    model.blocks[0].lin.register_forward_hook(clip_hook)  # a hook in force at capture and serve
    return model


def ids_inputs(seed: int) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 64, (2, 7), generator=g),)


def unet_inputs(seed: int) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 4, 8, 8, generator=g), torch.tensor([10]), torch.randn(1, 6, 32, generator=g)


def user_inputs(seed: int) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(3, 8, generator=g),)


def lm_step(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids).logits


def unet_step(model: nn.Module, sample: torch.Tensor, timestep: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    return model(sample, timestep, encoder_hidden_states=states).sample


def user_step(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x)


MODELS: dict[str, tuple[Callable[[int], nn.Module], Callable[..., Any], Callable[[int], tuple[Any, ...]]]] = {
    "llama": (llama, lm_step, ids_inputs),
    "gpt2": (gpt2, lm_step, ids_inputs),
    "unet": (unet, unet_step, unet_inputs),
    "lora": (lora, lm_step, ids_inputs),
    "user": (user, user_step, user_inputs),
}


# --- mutations -----------------------------------------------------------------------

def bump(out: Any) -> Any:
    """What a patched function or hook returns: its output, its first tensor moved."""
    if isinstance(out, torch.Tensor) and out.is_floating_point():
        return out * SCALE + 0.25
    if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor) and out[0].is_floating_point():
        return (bump(out[0]), *out[1:])
    if hasattr(out, "keys") and hasattr(out, "__setitem__"):
        for key in list(out.keys()):
            if isinstance(out[key], torch.Tensor) and out[key].is_floating_point():
                out[key] = bump(out[key])
                break
    return out


def patched(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Another function where ``fn`` was: the same call, its output moved."""
    def patched_fn(*args: Any, **kwargs: Any) -> Any:
        return bump(fn(*args, **kwargs))
    patched_fn.__name__ = patched_fn.__qualname__ = getattr(fn, "__name__", "patched")
    return patched_fn


def other_number(v: Any) -> Any:
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 1
    return v * 3.0 + 0.125


Mutation = tuple[str, str, Callable[[], Callable[[], None]]]  # kind, what, apply() -> undo


def set_attr(obj: Any, name: str, value: Any) -> Callable[[], Callable[[], None]]:
    def apply() -> Callable[[], None]:
        # an instance's or class's own entry, or a slot (__defaults__, cell_contents)
        had = not hasattr(obj, "__dict__") or name in vars(obj) or isinstance(obj, types.FunctionType)
        old = getattr(obj, name) if had else None
        setattr(obj, name, value)

        def undo() -> None:
            if had:
                setattr(obj, name, old)
            else:
                delattr(obj, name)
        return undo
    return apply


def set_param(module: nn.Module, name: str, value: nn.Parameter) -> Callable[[], Callable[[], None]]:
    def apply() -> Callable[[], None]:
        old = module._parameters[name]
        setattr(module, name, value)
        return lambda: setattr(module, name, old)
    return apply


def hook_output(_module: nn.Module, _inputs: Any, output: Any) -> Any:
    return bump(output)


def hook_input(_module: nn.Module, inputs: Any) -> Any:
    return (bump(inputs[0]), *inputs[1:]) if inputs and isinstance(inputs[0], torch.Tensor) else None


def hook_nothing(_module: nn.Module, _inputs: Any, _output: Any) -> None:
    return None  # a logger: changes nothing


def register(add: Callable[[], Any]) -> Callable[[], Callable[[], None]]:
    def apply() -> Callable[[], None]:
        return add().remove
    return apply


@contextlib.contextmanager
def nothing() -> Iterator[None]:
    yield


def entered(make: Callable[[], Any]) -> Callable[[], Callable[[], None]]:
    def apply() -> Callable[[], None]:
        ctx = make()
        ctx.__enter__()
        return lambda: ctx.__exit__(None, None, None)
    return apply


def state_setter(set_: Callable[[Any], None], get: Callable[[], Any], value: Any) -> Callable[[], Callable[[], None]]:
    def apply() -> Callable[[], None]:
        old = get()
        set_(value)
        return lambda: set_(old)
    return apply


def _plain_number(v: Any) -> bool:
    return type(v) in (bool, int, float)


def _classes(model: nn.Module) -> list[type]:
    seen: dict[type, None] = {}
    for m in model.modules():
        for klass in type(m).__mro__:
            if klass in (nn.Module, object) or klass.__module__.startswith(("torch.nn", "builtins")):
                continue
            seen.setdefault(klass, None)
    return list(seen)


def _own_functions(module: types.ModuleType) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in sorted(vars(module).items())
            if isinstance(v, types.FunctionType) and v.__module__ == module.__name__ and not k.startswith("__")]


def mutations(model: nn.Module) -> list[Mutation]:
    out: list[Mutation] = []
    named = list(model.named_modules())
    for path, m in named:
        where = path or "<root>"
        out.append(("forward hook", where, register(lambda m=m: m.register_forward_hook(hook_output))))
        out.append(("forward pre-hook", where, register(lambda m=m: m.register_forward_pre_hook(hook_input))))
        for key, v in sorted(vars(m).items()):
            if _plain_number(v) and not key.startswith("_"):
                out.append(("instance attribute", f"{where}.{key}", set_attr(m, key, other_number(v))))
            elif isinstance(v, types.FunctionType):
                out.append(("instance function", f"{where}.{key}", set_attr(m, key, patched(v))))
    for path, m in named[:3]:  # loggers that change nothing: refusing them is needless
        out.append(("no-op hook", path or "<root>", register(lambda m=m: m.register_forward_hook(hook_nothing))))
    mm = nn.modules.module
    out.append(("global hook", "register_module_forward_hook",
                register(lambda: mm.register_module_forward_hook(hook_output))))
    out.append(("global hook", "register_module_forward_pre_hook",
                register(lambda: mm.register_module_forward_pre_hook(hook_input))))
    modules: dict[str, types.ModuleType] = {}
    for cls in _classes(model):
        for key, v in sorted(vars(cls).items()):
            if key.startswith("__") and key not in ("__call__",):
                continue
            if isinstance(v, types.FunctionType):
                out.append(("class method", f"{cls.__qualname__}.{key}", set_attr(cls, key, patched(v))))
                if v.__defaults__ and any(_plain_number(d) for d in v.__defaults__):
                    new = tuple(other_number(d) if _plain_number(d) else d for d in v.__defaults__)
                    out.append(("default", f"{cls.__qualname__}.{key}", set_attr(v, "__defaults__", new)))
            elif _plain_number(v):
                out.append(("class attribute", f"{cls.__qualname__}.{key}", set_attr(cls, key, other_number(v))))
        mod = sys.modules.get(cls.__module__)
        if mod is not None:
            modules[mod.__name__] = mod
    for name, mod in sorted(modules.items()):
        for key, fn in _own_functions(mod):
            out.append(("module function", f"{name}.{key}", set_attr(mod, key, patched(fn))))
            if fn.__defaults__ and any(_plain_number(d) for d in fn.__defaults__):
                new = tuple(other_number(d) if _plain_number(d) else d for d in fn.__defaults__)
                out.append(("default", f"{name}.{key}", set_attr(fn, "__defaults__", new)))
            for i, cell in enumerate(fn.__closure__ or ()):
                with contextlib.suppress(ValueError):
                    if _plain_number(cell.cell_contents):
                        out.append(("closure cell", f"{name}.{key}[{i}]",
                                    set_attr(cell, "cell_contents", other_number(cell.cell_contents))))
        for key, v in sorted(vars(mod).items()):
            if _plain_number(v) and not key.startswith("__"):
                out.append(("module constant", f"{name}.{key}", set_attr(mod, key, other_number(v))))
    params = list(model.named_parameters())
    for path, p in params[::max(1, len(params) // 6)]:  # weights are inputs: other values serve
        owner, _, key = path.rpartition(".")
        mod = model.get_submodule(owner)
        out.append(("parameter replaced", path,
                    set_param(mod, key, nn.Parameter(p.detach() * 1.25, requires_grad=p.requires_grad))))
    head, embed = getattr(model, "lm_head", None), getattr(model, "get_input_embeddings", lambda: None)()
    if head is not None and embed is not None:  # tied at capture (GPT-2) or not (Llama): the other way
        if head.weight is embed.weight:
            out.append(("weights untied", "lm_head.weight",
                        set_param(head, "weight", nn.Parameter(head.weight.detach() * 0.5))))
        else:
            out.append(("weights tied", "lm_head.weight", set_param(head, "weight", embed.weight)))
    config = getattr(model, "config", None)
    if config is not None:
        for key, v in sorted(vars(config).items()):
            if _plain_number(v) and not key.startswith("_"):
                out.append(("config entry", f"config.{key}", set_attr(config, key, other_number(v))))
    F = torch.nn.functional
    for key in ("linear", "silu", "gelu", "softmax", "layer_norm", "group_norm", "embedding",
                "scaled_dot_product_attention", "dropout", "conv2d", "interpolate"):
        out.append(("torch function", f"torch.nn.functional.{key}", set_attr(F, key, patched(getattr(F, key)))))
    for key in ("tanh", "rsqrt", "cat", "matmul", "softmax"):
        out.append(("torch function", f"torch.{key}", set_attr(torch, key, patched(getattr(torch, key)))))
    out += [
        ("global state", "torch.no_grad()", entered(torch.no_grad)),
        ("global state", "torch.inference_mode()", entered(torch.inference_mode)),
        ("global state", "autocast cpu bfloat16", entered(lambda: torch.autocast("cpu", dtype=torch.bfloat16))),
        ("global state", "default dtype float64",
         state_setter(torch.set_default_dtype, torch.get_default_dtype, torch.float64)),
        ("global state", "deterministic algorithms",
         state_setter(torch.use_deterministic_algorithms, torch.are_deterministic_algorithms_enabled, True)),
        ("global state", "model.train()", lambda: (model.train(), model.eval)[1]),
    ]
    return out


HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
              "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")
GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks", "_global_forward_hooks_with_kwargs",
                     "_global_forward_hooks_always_called")


def hooks_snapshot(model: nn.Module) -> list[tuple[dict[Any, Any], dict[Any, Any]]]:
    """Every hook dict with what it holds now: a mutation's side effects on them
    are undone with it (transformers installs its output-capturing hooks the first
    time a call asks for hidden states, and keeps them)."""
    dicts = [getattr(m, a) for m in model.modules() for a in HOOK_DICTS if hasattr(m, a)]
    dicts += [getattr(nn.modules.module, a) for a in GLOBAL_HOOK_DICTS]
    return [(d, dict(d)) for d in dicts]


def restore_hooks(snapshot: list[tuple[dict[Any, Any], dict[Any, Any]]]) -> None:
    for d, held in snapshot:
        if d != held:
            d.clear()
            d.update(held)


# --- the two processes ---------------------------------------------------------------

def _chosen() -> list[str]:
    names = os.environ.get("STATE_FUZZ_MODELS")
    return [n for n in MODELS if not names or n in names.split(",")]


def capture(root: Path) -> None:
    import torch_precompile as precompile

    root.mkdir(parents=True, exist_ok=True)
    for name in _chosen():
        build, step, inputs = MODELS[name]
        model = build(0)
        with torch.no_grad(), precompile.capture(
                step, artifact_path=root / f"{name}.py", cache_path=root / f"{name}.cache",
                tracer=precompile.DynamoTracer(), backend="eager") as cap:
            cap(model, *inputs(0))
        print(f"captured {name}", flush=True)


def _same(a: Any, b: Any) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype
            and a.shape == b.shape and torch.allclose(a, b, atol=1e-4, rtol=1e-4))


def _attempt(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - sorted into refused / raw by the caller
        return ("refused" if type(e).__name__ == "PrecompileError" else "raised"), e


def serve(root: Path) -> dict[str, Any]:
    import torch_precompile as precompile

    sample = int(os.environ.get("STATE_FUZZ_SAMPLE", "1"))
    table: dict[str, Any] = {"models": {}, "wrong": [], "raw": [], "controls_failed": [], "needless": {}}
    for name in _chosen():
        build, step, inputs = MODELS[name]
        model = build(1)
        with torch.no_grad():  # other weights than the capture's, every parameter moved
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        args = inputs(1)
        served = precompile.load(root / f"{name}.py", root / f"{name}.cache")

        def both() -> tuple[tuple[str, Any], tuple[str, Any]]:
            with torch.no_grad():
                eager = _attempt(lambda: step(model, *args))
            with torch.no_grad(), precompile.no_compilation():
                return eager, _attempt(lambda: served(model, *args))

        base_eager, base = both()
        if base_eager[0] != "ok" or base[0] != "ok" or not _same(base[1], base_eager[1]):
            raise SystemExit(f"{name}: the unmutated control does not serve: {base[1]!r:.400}")
        counts = {"tried": 0, "refused": 0, "equal": 0, "WRONG": 0, "RAW": 0, "eager raised": 0, "needless": 0}
        for i, (kind, what, apply) in enumerate(mutations(model)):
            if i % sample:
                continue
            counts["tried"] += 1
            hooks = hooks_snapshot(model)
            try:
                undo = apply()
            except Exception as e:  # noqa: BLE001 - a mutation the object does not take
                counts["tried"] -= 1
                print(f"skipped {name} {kind} {what}: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            try:
                eager, got = both()
            finally:
                undo()
                restore_hooks(hooks)
            if eager[0] != "ok":
                counts["eager raised"] += 1
            elif got[0] == "refused":
                counts["refused"] += 1
                if _same(eager[1], base_eager[1]):
                    counts["needless"] += 1
                    table["needless"][kind] = table["needless"].get(kind, 0) + 1
            elif got[0] == "raised":
                counts["RAW"] += 1
                table["raw"].append(f"{name}: {kind} {what}: {type(got[1]).__name__}: {str(got[1])[:300]}")
            elif _same(got[1], eager[1]):
                counts["equal"] += 1
            else:
                counts["WRONG"] += 1
                table["wrong"].append(f"{name}: {kind} {what}")
            control_eager, control = both()
            if control[0] != "ok" or not _same(control[1], control_eager[1]) or not _same(
                    control_eager[1], base_eager[1]):
                table["controls_failed"].append(f"{name}: after {kind} {what}: {control[1]!r:.300}")
        table["models"][name] = counts
        print(f"served {name}: {counts}", flush=True)
    return table


if __name__ == "__main__":
    verb, where = sys.argv[1], Path(sys.argv[2])
    if verb == "capture":
        capture(where)
    else:
        print("FUZZ " + json.dumps(serve(where)), flush=True)
