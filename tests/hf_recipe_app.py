"""The recipes of transformers' "optimizing inference" guide, unmodified, run by
tests/test_hf_recipes.py under ``precompile run --capture`` and ``--serve``:

  python hf_recipe_app.py SEED PROMPTS NEW HOW [--dynamic] [--eps E]

HOW ``method``: a static cache and a compiled bound method
(``model.forward = torch.compile(model.forward, mode="reduce-overhead",
fullgraph=True)``); ``module``: ``model.compile()`` and generate's default cache.
PROMPTS: comma-separated prompt lengths, one ``generate(max_new_tokens=NEW)``
each. ``--eps``: the model's RMSNorm epsilon (a config value the capture did not
see). Tiny Llama, random weights from SEED. It knows nothing of precompile; prints
one ``RESULT <json>`` line: each generation's tokens against eager's."""

import copy
import json
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.utils import logging


def main():
    seed, new, how = int(sys.argv[1]), int(sys.argv[3]), sys.argv[4]
    eps = float(sys.argv[sys.argv.index("--eps") + 1]) if "--eps" in sys.argv else 1e-6
    logging.set_verbosity_error()
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
                      rms_norm_eps=eps)
    model = LlamaForCausalLM(cfg).eval()
    g = torch.Generator().manual_seed(seed + 1)
    prompts = [torch.randint(0, 128, (1, int(n)), generator=g) for n in sys.argv[2].split(",")]
    eager = copy.deepcopy(model)  # a copy: generate() remembers its static cache's length
    dynamic = {"dynamic": True} if "--dynamic" in sys.argv else {}
    if how == "method":
        model.generation_config.cache_implementation = "static"
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True, **dynamic)
    else:
        model.compile(**dynamic)
    with torch.no_grad():
        got = [model.generate(ids, max_new_tokens=new, do_sample=False) for ids in prompts]
        want = [eager.generate(ids, max_new_tokens=new, do_sample=False,
                               cache_implementation=model.generation_config.cache_implementation)
                for ids in prompts]
    print("RESULT " + json.dumps({"equal": [bool(torch.equal(a, b)) for a, b in zip(got, want)],
                                  "tokens": [a.shape[1] for a in got]}))


if __name__ == "__main__":
    main()
