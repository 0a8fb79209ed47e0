"""Library objects the risky-drop lint used to refuse: a diffusers UNet (attention
processors), transformers encoder-decoders called with their cache (a deep-copied
config), a sequence-classification fine-tuning step (config validators). Tiny
random-weight configs, no hub; the steps are module-level, as DynamoTracer needs."""

from __future__ import annotations

import torch


def _quiet() -> None:
    import transformers

    transformers.logging.set_verbosity_error()


def perturb(model: torch.nn.Module, seed: int = 11, scale: float = 0.05) -> torch.nn.Module:
    """Other weights than the capture's: every parameter moved by seeded noise."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g, dtype=p.dtype) * scale)
    return model


def unet():
    from diffusers import UNet2DConditionModel

    torch.manual_seed(0)
    return UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, attention_head_dim=8, norm_num_groups=8).eval()


def unet_inputs(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 4, 8, 8, generator=g), torch.tensor([10]), torch.randn(1, 6, 32, generator=g)


def unet_step(model, sample, timestep, encoder_states):
    return model(sample, timestep, encoder_hidden_states=encoder_states).sample


def t5():
    from transformers import T5Config, T5ForConditionalGeneration

    _quiet()
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=128, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=2,
                   relative_attention_num_buckets=8, relative_attention_max_distance=16,
                   decoder_start_token_id=0, pad_token_id=0)
    return T5ForConditionalGeneration(cfg).eval()


def bart():
    from transformers import BartConfig, BartForConditionalGeneration

    _quiet()
    torch.manual_seed(0)
    cfg = BartConfig(vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                     decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
    return BartForConditionalGeneration(cfg).eval()


def tokens(batch: int, seq: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, 128, (batch, seq), generator=g)


def encode(model, ids):
    return model.get_encoder()(input_ids=ids).last_hidden_state


def decode_step(model, encoder_states, decoder_ids, cache):
    """One greedy decoding step over an EncoderDecoderCache (the cache on)."""
    out = model(encoder_outputs=(encoder_states,), decoder_input_ids=decoder_ids, past_key_values=cache,
                use_cache=True)
    return out.logits[:, -1], out.past_key_values


def greedy(model, step, ids, steps: int):
    """(tokens, last-position logits per step) of a greedy decode: the encoder once,
    then ``steps`` decoder steps through ``step``."""
    from transformers import DynamicCache, EncoderDecoderCache

    states = encode(model, ids)
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    token = torch.zeros(ids.shape[0], 1, dtype=torch.long)
    out, logits = [], []
    for _ in range(steps):
        last, cache = step(model, states, token, cache)
        token = last.argmax(-1, keepdim=True)
        out.append(token[0, 0].item())
        logits.append(last)
    return out, logits


def with_cache(model, ids):
    """The model's default call (use_cache=True): it builds its own cache, deep-copying
    its config."""
    out = model(input_ids=ids, decoder_input_ids=ids[:, :4], use_cache=True)
    return out.logits, out.past_key_values


def bert_classifier():
    from transformers import BertConfig, BertForSequenceClassification

    _quiet()
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, num_labels=3,
                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertForSequenceClassification(cfg)


def batches(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, 128, (2, 8), generator=g), torch.randint(0, 3, (2,), generator=g)) for _ in range(n)]


def classify_step(model, ids, labels):
    """A fine-tuning step, optimizer outside: the first call sets config.problem_type,
    which runs the config class's validators."""
    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    return loss.detach()


def classify_step_opt(model, opt, ids, labels):
    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def train(model, step, data, inside: bool):
    """Losses of a loop of steps with AdamW, inside ``step`` or after it."""
    # lr 1e-3: Adam turns the rounding noise of a zero gradient (an attention key bias)
    # into steps of about lr, which must stay inside the 1e-4 tolerance
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for ids, labels in data:
        if inside:
            losses.append(float(step(model, opt, ids, labels)))
        else:
            losses.append(float(step(model, ids, labels)))
            opt.step()
            opt.zero_grad(set_to_none=True)
    return losses
