"""Tiny random-weight Hugging Face models, built from configs (no hub access),
and the module-level steps the real-model matrix captures."""

from __future__ import annotations

import torch


def _quiet() -> None:
    import transformers

    transformers.logging.set_verbosity_error()


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    _quiet()
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    return GPT2LMHeadModel(cfg).eval()


def bert():
    from transformers import BertConfig, BertModel

    _quiet()
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    return BertModel(cfg).eval()


def vit():
    from transformers import ViTConfig, ViTForImageClassification

    _quiet()
    torch.manual_seed(0)
    cfg = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=64, num_labels=5)
    return ViTForImageClassification(cfg).eval()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    _quiet()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()


def t5():
    """Encoder-decoder with a relative position bias (bucketed in the graph)."""
    from transformers import T5Config, T5Model

    _quiet()
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=128, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2,
                   num_heads=2, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                   decoder_start_token_id=0, pad_token_id=0)
    return T5Model(cfg).eval()


def resnet():
    """A conv net: convolutions, batch norm in eval mode, pooling."""
    from transformers import ResNetConfig, ResNetForImageClassification

    _quiet()
    torch.manual_seed(0)
    cfg = ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                       layer_type="basic", num_labels=5)
    return ResNetForImageClassification(cfg).eval()


def tokens(batch: int, seq: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 128, (batch, seq), generator=g)


def pixels(batch: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 3, 32, 32, generator=g)


# --- the captured steps (module-level, as DynamoTracer requires)

def lm_logits(model, ids):
    return model(input_ids=ids, use_cache=False).logits


def lm_output(model, ids):
    """The model's whole output, its cache included (a ModelOutput holding a
    DynamicCache, rebuilt by Dynamo's bytecode)."""
    return model(ids)


def hidden(model, ids):
    return model(input_ids=ids).last_hidden_state


def seq2seq(model, ids):
    # use_cache=False: with a cache, transformers deep-copies an encoder-decoder
    # config, whose identity no artifact can check (README, "Limits")
    return model(input_ids=ids, decoder_input_ids=ids[:, :4], use_cache=False).last_hidden_state


def classify(model, px):
    return model(pixel_values=px).logits


def lm_train(model, ids):
    out = model(input_ids=ids, labels=ids, use_cache=False)
    out.loss.backward()
    return out.loss.detach()


def lm_full(model, ids):
    return model(input_ids=ids)


def with_cache(model, inputs):
    ids, _state = inputs
    return model(input_ids=ids, use_cache=False).logits
