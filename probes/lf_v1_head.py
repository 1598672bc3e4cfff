"""LLaMA-Factory 0.9.5's v1 trainer's SFT loss on real CPU tensors, traced by probes.tracker: its own
SFTTrainer.compute_loss and BaseTrainer.compute_log_probs (src/llamafactory/v1/trainers/sft_trainer.py:25-29,
core/base_trainer.py:214-228), run in LLaMA-Factory's venv on a one-layer Llama 16 wide, so that nearly every byte is
the head's. `python probes/lf_v1_head.py VOCAB ROWS:WIDTH ...` prints, for fp32 and bf16 weights and each shape, the
peak live bytes of the forward (to compute_loss's return) and of the backward, as JSON."""

from __future__ import annotations

import json
import sys
import types

import torch

from probes.tracker import LiveBytes


def peaks(vocab: int, rows: int, width: int, dtype: torch.dtype) -> dict[str, int]:
    from llamafactory.v1.core.base_trainer import BaseTrainer
    from llamafactory.v1.trainers.sft_trainer import SFTTrainer
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg).to(dtype)
    ids = torch.randint(0, vocab, (rows, width), generator=torch.Generator().manual_seed(1))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}
    batch["loss_weights"] = torch.ones(rows, width)
    trainer = types.SimpleNamespace(device=torch.device("cpu"), model=model)  # what compute_loss reads of self
    trainer.compute_log_probs = types.MethodType(BaseTrainer.compute_log_probs, trainer)
    with LiveBytes() as t:
        loss = SFTTrainer.compute_loss(trainer, batch)
        forward = t.peak
        t.peak = t.live  # then the backward's own peak
        loss.backward()
    return {"forward": forward, "backward": t.peak}


if __name__ == "__main__":
    vocab = int(sys.argv[1])
    shapes = [tuple(map(int, a.split(":"))) for a in sys.argv[2:]]
    out = {
        name: {f"{r}:{w}": peaks(vocab, r, w, dtype) for r, w in shapes}
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    print(json.dumps(out))
