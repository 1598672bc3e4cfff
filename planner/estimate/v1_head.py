"""LLaMA-Factory 0.9.5's v1 trainer's SFT head (Framework.sft_head "lf-v1"): its compute_log_probs calls the model
with the labels, so transformers' own loss runs (the logits cast to fp32, its log-softmax saved by the output's loss,
which lives until the function returns), then casts the logits to fp32 again (a copy where they are half), takes the
shifted logits' contiguous copy (none for one row: the slice is contiguous already) and a cross-entropy per token
whose log-softmax it saves (v0.9.5 src/llamafactory/v1/core/base_trainer.py:214-228, trainers/sft_trainer.py:25-29).
Pinned by tests/probes/test_lf_v1_head.py: v1's own compute_loss on CPU tensors, LLaMA-Factory 0.9.5's venv."""

from __future__ import annotations


def v1_forward_loss_bytes(rows: int, width: int, vocab: int, logits_bytes: int) -> int:
    """At v1's own log-softmax in forward: the model's logits (`logits_bytes` an entry), transformers' saved fp32
    log-softmax over every token, v1's fp32 cast where the logits are half, the shifted copy where there are several
    rows, and v1's fp32 log-softmax over the shifted tokens."""
    tokens, shifted = rows * width, rows * (width - 1)
    cast = 4 * tokens * vocab if logits_bytes < 4 else 0
    copy = 4 * shifted * vocab if rows > 1 else 0
    return logits_bytes * tokens * vocab + 4 * tokens * vocab + cast + copy + 4 * shifted * vocab


def v1_backward_loss_bytes(rows: int, width: int, vocab: int) -> int:
    """In the loss's backward: v1's saved fp32 log-softmax and two fp32 gradients of the logits' size (the
    log-softmax's, then the shift's zero-filled full one), transformers' loss and the forward's copies freed."""
    return 4 * rows * (width - 1) * vocab + 8 * rows * width * vocab


def v1_loss_bytes(rows: int, width: int, vocab: int, logits_bytes: int) -> int:
    """The larger of the two moments (the sim's kind of bound: the activations live are the same at both)."""
    return max(v1_forward_loss_bytes(rows, width, vocab, logits_bytes), v1_backward_loss_bytes(rows, width, vocab))
