"""Real models we did not write: tiny random-weight Hugging Face transformers
models (built from configs, no hub), captured with the DEFAULT DynamoTracer and
the inductor backend in one process each, served in a fresh cold-host process
(empty Inductor/Triton caches, fresh TMPDIR and cwd) under
TORCH_PRECOMPILE_NO_COMPILATION=1 and the strict shim, with a journal.

Each serve perturbs every parameter of its model (other weights than the capture's)
and checks outputs against eager on those weights (1e-4), a second shape (served where a
captured variant covers it, else a PrecompileError naming the failed guard),
and 0 journal records. Every artifact is Dynamo-free (guards as checks, graphs
as programs). The GPT-2 training step checks the loss and every parameter's
gradient; the forwards captured with grad on (BERT, Llama, ResNet) run their backward
and check the gradients too. MakeFx runs where the model allows it, and refuses
clearly where it does not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cold_host, read_journal, run_python

pytest.importorskip("transformers")

TESTS = Path(__file__).resolve().parent

pytestmark = pytest.mark.slow

# name -> (builder, step, input maker, [capture calls as (batch, seq)])
CAPTURE = r"""
import json, sys, warnings
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import hf_models as hm
name, out = {name!r}, {out!r}
build, step, inputs, calls, grad = {spec!r}
model = getattr(hm, build)()
fn = getattr(hm, step)
make = getattr(hm, inputs)
with warnings.catch_warnings():
    warnings.simplefilter("error", RuntimeWarning)   # an early "will refuse" warning fails here
    with (torch.enable_grad() if grad else torch.no_grad()):
        with tp.capture(fn, artifact_path=f"{{out}}/{{name}}.py", cache_path=f"{{out}}/{{name}}.cache") as cap:
            for shape in calls:
                cap(model, make(*shape))
            s = cap.summary()
print("SUMMARY", json.dumps({{"digest": str(s), "complete": s.complete, "risky": s.risky_dropped_guards}}))
"""

SERVE = r"""
import copy, json, sys
sys.path.insert(0, {tests!r})
import torch, torch_precompile as tp
import hf_models as hm
from lib_models import perturb
from scenario_tools import assert_close, assert_models_match
name, out = {name!r}, {out!r}
build, step, inputs, calls, grad = {spec!r}
model = perturb(getattr(hm, build)())   # other weights than the capture's
fn = getattr(hm, step)
make = getattr(hm, inputs)
f = tp.load(f"{{out}}/{{name}}.py", f"{{out}}/{{name}}.cache")
results = {{}}
with (torch.enable_grad() if grad else torch.no_grad()):
    for shape in {serve_shapes!r}:
        served, ref = copy.deepcopy(model), copy.deepcopy(model)
        x = make(*shape, seed=7)
        try:
            with tp.no_compilation():
                y = f(served, x)
        except tp.PrecompileError as e:
            results[str(shape)] = "REFUSED " + str(e)
            continue
        want = fn(ref, x.clone())
        assert_close(y, want, "inductor", f"{{name}} {{shape}}")
        if grad and y.requires_grad:  # a forward captured with grad on: its backward too
            w = torch.linspace(-1, 1, y.numel()).view_as(y)
            (y * w).sum().backward()
            (want * w).sum().backward()
        if grad:
            assert_models_match(served, ref, "inductor", f"{{name}} {{shape}} grads")
            assert any(p.grad is not None for p in served.parameters())
        results[str(shape)] = "SERVED"
print("RESULTS", json.dumps(results))
"""

MODELS = {
    # gpt2 captures two lengths: the second compiles a dynamic variant that serves a third
    "gpt2": (("gpt2", "lm_logits", "tokens", [(2, 8), (2, 12)], False), [(2, 8), (2, 12), (2, 10)]),
    # bert and llama capture with grad on, as a capture does by default: served, each
    # forward's backward runs too
    "bert": (("bert", "hidden", "tokens", [(2, 8)], True), [(2, 8), (3, 8)]),
    "vit": (("vit", "classify", "pixels", [(2,)], False), [(2,), (3,)]),
    "llama": (("llama", "lm_logits", "tokens", [(2, 8)], True), [(2, 8), (2, 9)]),
    "gpt2_train": (("gpt2", "lm_train", "tokens", [(2, 8)], True), [(2, 8)]),
    # t5: an encoder-decoder whose relative position bias buckets a symbolic length in
    # the dynamic variant its second call compiles (which serves a third); resnet: a
    # conv net with batch norm in eval mode, captured with grad on (its backward runs
    # through the convolutions)
    "t5": (("t5", "seq2seq", "tokens", [(2, 8), (2, 12)], False), [(2, 8), (2, 12), (2, 10)]),
    "resnet": (("resnet", "classify", "pixels", [(2,)], True), [(2,), (3,)]),
}


def _tagged(stdout: str, tag: str):
    line = next(line for line in stdout.splitlines() if line.startswith(tag + " "))
    return json.loads(line[len(tag) + 1:])


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("real_models")


@pytest.mark.parametrize("name", list(MODELS))
def test_default_tracer_captures_and_serves_cold(artifacts: Path, tmp_path: Path, name: str) -> None:
    spec, serve_shapes = MODELS[name]
    r = run_python(CAPTURE.format(tests=str(TESTS), name=name, out=str(artifacts), spec=spec),
                   env={"OMP_NUM_THREADS": "2"}).check()
    summary = _tagged(r.stdout, "SUMMARY")
    assert summary["complete"] and summary["risky"] == [], summary
    text = (artifacts / f"{name}.py").read_text()
    assert "SERVING_MODE = 'standalone'" in text
    # guards as checks, graphs (forward and backward where grad is on) as programs
    assert "DYNAMO_FREE = True" in text, text[text.find("DYNAMO_FREE"):][:300]
    # Served on a host with another thread count than the capture's (a torchrun worker's).
    env, journal = cold_host(tmp_path)
    env["OMP_NUM_THREADS"] = "1"
    r = run_python(SERVE.format(tests=str(TESTS), name=name, out=str(artifacts), spec=spec,
                                serve_shapes=serve_shapes),
                   preload=True, env=env, cwd=tmp_path / "cwd").check()
    results = _tagged(r.stdout, "RESULTS")
    assert results[str(serve_shapes[0])] == "SERVED", results
    assert read_journal(journal) == [], "the cold serve ran (or tried to run) a compiler"
    if name in ("gpt2", "t5"):
        # the dynamic variant the second capture call compiled covers a length never captured
        assert set(results.values()) == {"SERVED"}, results
    elif len(serve_shapes) > 1:
        refused = results[str(serve_shapes[1])]
        assert refused.startswith("REFUSED") and "failed guards" in refused and "size mismatch" in refused, refused


MAKEFX = r"""
import sys
sys.path.insert(0, {tests!r})
import copy, torch, torch_precompile as tp
import hf_models as hm
from child_helpers import refused
out = {out!r}
gpt2 = hm.gpt2()
def capture(step, model, x, name):
    with tp.capture(step, artifact_path=f"{{out}}/{{name}}.py", cache_path=f"{{out}}/{{name}}.cache",
                    tracer=tp.MakeFxTracer()) as cap:
        return cap(model, x)
with torch.no_grad():
    print("CACHE |", refused(lambda: capture(hm.lm_full, gpt2, hm.tokens(2, 8), "cache")))
print("DATA |", refused(lambda: capture(hm.lm_train, gpt2, hm.tokens(2, 8), "data")))
from transformers import DynamicCache
print("INPUT |", refused(lambda: capture(hm.with_cache, gpt2, (hm.tokens(2, 8), {{"kv": DynamicCache()}}), "input")))
bert = hm.bert()
x = hm.tokens(2, 8)
with torch.no_grad():
    y = capture(hm.hidden, bert, x, "bert")
    torch.testing.assert_close(y, hm.hidden(copy.deepcopy(bert), x), atol=1e-4, rtol=1e-4)
print("captured")
"""


def test_makefx_on_real_models(tmp_path: Path) -> None:
    r = run_python(MAKEFX.format(tests=str(TESTS), out=str(tmp_path))).check()
    lines = {line.split(" | ")[0]: line for line in r.stdout.splitlines() if " | " in line}
    cache = lines["CACHE"]
    assert "transformers.cache_utils.DynamicCache" in cache and "output['past_key_values']" in cache, cache
    assert "use_cache=False" in cache and "DynamoTracer" in cache
    data = lines["DATA"]
    assert "aten._local_scalar_dense" in data and "DynamoTracer" in data, data
    given = lines["INPUT"]
    assert "transformers.cache_utils.DynamicCache at argument 1[1]['kv']" in given, given
    assert "captured" in r.stdout
    env, journal = cold_host(tmp_path / "serve")
    r = run_python(SERVE.format(tests=str(TESTS), name="bert", out=str(tmp_path),
                                spec=("bert", "hidden", "tokens", [], False), serve_shapes=[(2, 8)]),
                   preload=True, env=env, cwd=tmp_path / "serve" / "cwd").check()
    assert _tagged(r.stdout, "RESULTS") == {"(2, 8)": "SERVED"}
    # (no HEAVY check: transformers itself imports torch._dynamo and torch._inductor)
    assert read_journal(journal) == []


LOAD_FIRST_CAPTURE = r"""
import sys, torch, torch_precompile as tp
sys.path.insert(0, {tests!r})
import hf_models as hm
with torch.no_grad(), tp.capture(hm.lm_output, artifact_path={out!r} + "/o.py", cache_path={out!r} + "/o.cache",
                                 tracer=tp.DynamoTracer()) as cap:
    cap(hm.llama(), hm.tokens(2, 8))
"""

LOAD_FIRST_SERVE = r"""
import json, sys, torch, torch_precompile as tp
sys.path.insert(0, {tests!r})
import hf_models as hm
f = tp.load({out!r} + "/o.py", {out!r} + "/o.cache")   # before transformers builds any model
torch.manual_seed(7)
model = hm.llama()
with torch.no_grad():
    for p in model.parameters():
        p.add_(torch.randn_like(p) * 0.1)
    ids = hm.tokens(2, 8, seed=5)
    got, want = f(model, ids).logits, hm.lm_output(model, ids).logits
print("RESULT " + json.dumps({{"close": bool(torch.allclose(got, want, atol=1e-5)),
                               "dynamo_free": f.metadata["DYNAMO_FREE"]}}))
"""


def test_an_artifact_served_through_dynamos_guard_state_loads_before_the_model_is_built(tmp_path: Path) -> None:
    """A Llama's whole output under no_grad, its cache included (a ModelOutput and
    a DynamicCache that Dynamo rebuilds in its bytecode with torch.device and
    torch.dtype constants, which keeps the artifact on Dynamo's guard state): its guards read
    transformers' ``_CAN_RECORD_REGISTRY``, which a model fills when it is built. A
    load() before any model exists builds those guards at the first call (it raised a
    raw KeyError at load); served on other weights and inputs, equal to eager."""
    run_python(LOAD_FIRST_CAPTURE.format(tests=str(TESTS), out=str(tmp_path))).check()
    r = run_python(LOAD_FIRST_SERVE.format(tests=str(TESTS), out=str(tmp_path))).check()
    assert _tagged(r.stdout, "RESULT") == {"close": True, "dynamo_free": False}, r.stdout[-2000:]
