"""Run in a venv with torch and transformers (argv[1]: the worktree root, for probes.tracker): the live bytes of a tiny
real Llama4ForConditionalGeneration's bf16 training step with labels (argv[2] "eval": its evaluation forward with
labels under no_grad, as HF's prediction_step runs it), at two vocabulary sizes; prints one JSON line
{"transformers": version, "bytes_per_token_entry": the peak's growth per token per added vocabulary entry}. The
model's parameters are created before the tracker and frozen but for the layer's norms, so the peak's growth with the
vocabulary is the head's logits and loss (tests/probes/test_half_loss.py)."""

import json
import sys
from contextlib import nullcontext

import torch
import transformers
from transformers import Llama4Config, Llama4ForConditionalGeneration

sys.path.insert(0, sys.argv[1])
from probes.tracker import LiveBytes

TOKENS, VOCABS = 256, (8192, 16384)
EVAL = sys.argv[2:] == ["eval"]


def peak(vocab: int) -> int:
    torch.manual_seed(0)
    text = {
        "vocab_size": vocab, "hidden_size": 64, "intermediate_size": 64, "intermediate_size_mlp": 64,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
        "num_local_experts": 2, "num_experts_per_tok": 1, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    }  # fmt: skip
    vision = {
        "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
        "vision_output_dim": 32, "projector_input_dim": 32, "projector_output_dim": 32, "image_size": 28,
        "patch_size": 14,
    }  # fmt: skip
    cfg = Llama4Config(text_config=text, vision_config=vision, image_token_index=vocab - 1)
    cfg._attn_implementation = "sdpa"
    model = Llama4ForConditionalGeneration(cfg).to(torch.bfloat16).train(not EVAL)
    for name, p in model.named_parameters():
        p.requires_grad_("layers.0" in name and "norm" in name)
    ids = torch.randint(3, vocab - 2, (1, TOKENS))
    mask = torch.ones(1, TOKENS, dtype=torch.long)  # axolotl's packed rows: sequence ids, none 0
    with torch.no_grad() if EVAL else nullcontext(), LiveBytes() as t:
        loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
        if not EVAL:
            loss.backward()
    return t.peak


small, large = (peak(v) for v in VOCABS)
growth = (large - small) / (TOKENS * (VOCABS[1] - VOCABS[0]))
print(json.dumps({"transformers": transformers.__version__, "bytes_per_token_entry": growth}))
