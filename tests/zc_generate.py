"""An unmodified greedy generate() script of a tiny GPT-2 with random weights
(tests/test_zero_code_targets.py): ``zc_generate.py SEED NEW_TOKENS``. Knows
nothing of precompile; prints ``TOKENS <json>``."""

import json
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

seed, new = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(seed)
# a wide initialisation: greedy decoding of random weights then varies its tokens
config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=128, n_positions=64,
                    bos_token_id=1, eos_token_id=None, initializer_range=0.5)
model = GPT2LMHeadModel(config).eval()
ids = torch.randint(0, 128, (1, 5), generator=torch.Generator().manual_seed(seed + 1))
with torch.no_grad():
    out = model.generate(ids, max_new_tokens=new, do_sample=False, pad_token_id=0)
print("TOKENS " + json.dumps(out[0].tolist()), flush=True)
