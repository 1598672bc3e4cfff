"""LoRA on the language model's ends (Knobs.lora_ends), beside --lora-targets' decoder linears: PEFT's lora.Embedding
on embed_tokens and a lora.Linear on lm_head (peft 0.21.2 tuners/lora/layer.py: Embedding.forward, Linear.forward),
as ms-swift's `--target_modules all-linear embed_tokens lm_head` and torchtune's apply_lora_to_output run them. Each
term in bytes or elements, pinned to the sim (tests/probes/test_lora_ends.py: Llama-3.2-1B and Qwen2.5-0.5B, tied,
cut to 8 layers, 2 x 2048 tokens, rank 16):

- the adapters: embedding_A (r x vocab) and embedding_B (hidden x r); the head's lora_A (r x hidden) and lora_B
  (vocab x r), fp32 as every adapter (PEFT's autocast_adapter_dtype);
- what the head's adapter saves: lora_A's copy of the final norm's output and lora_B's input (tokens x r), in the
  adapter's matmul dtype (bf16 under torch AMP, with the adapters' bf16 weight copies, and where DeepSpeed or FSDP
  cast the adapters to half; fp32 under bf16-pure and fp32);
- what the embedding's adapter saves: lora_B's input (tokens x r) and, without checkpointing, the first layer's
  input now needing its gradient (its first norm keeps its fp32 input: 4 bytes an element; with LoRA dropout the
  first layer's q/k/v dropout masks, which activations' layer terms count already: the sim is within 7 MiB);
- the embedding's backward: the gradient reaches the first layer's input, whose norm's backward holds 22 bytes a
  token x hidden at once (sim); the first layer's backward comes last, with every activation freed, so it is below
  the step's peak and not a term;
- the head's forward: `result + lora_B(lora_A(x)) * scaling` holds the base logits, lora_B's output and the scaled
  copy (then the sum) at once: three vocabulary-wide tensors a token where the loss alone holds its own.
"""

from __future__ import annotations

from planner.estimate import lora
from planner.estimate.recipe_terms import CHUNKED_LOSS_CHUNKS
from planner.model.lora_targets import end_modules


def ends(knobs) -> list[str]:
    """The PEFT modules of the ends LoRA adapts (embed_tokens, lm_head): none without LoRA."""
    return end_modules(knobs.lora_ends) if knobs.lora_rank else []


def end_adapter_params(model, knobs) -> int:
    """r x (vocab + hidden) per adapted end."""
    return len(ends(knobs)) * knobs.lora_rank * (model.text.vocab + model.text.hidden)


def end_tensor_sizes(model, knobs) -> list[tuple[int, int]]:
    """(elements, count) of the ends' factors: r x vocab and r x hidden each."""
    r, t = knobs.lora_rank, model.text
    return [(r * t.vocab, len(ends(knobs))), (r * t.hidden, len(ends(knobs)))] if ends(knobs) else []


def head_saved_bytes(model, knobs, tokens: int) -> int:
    """The head's adapter: lora_A's input copy and lora_B's input in the adapters' matmul dtype (2 bytes under
    AMP and where DeepSpeed or FSDP cast the adapters to half, 4 under bf16-pure and fp32), under AMP the two
    factors' bf16 copies too (sim: Llama-3.2-1B 4,096 tokens 20.1 MiB under AMP, 32.25 under bf16-pure and fp32);
    with LoRA dropout 8 MiB more (its mask), 40 in fp32."""
    if "lm_head" not in ends(knobs):
        return 0
    t, r, mode = model.text, knobs.lora_rank, lora.adapter_mode(knobs)
    a = 2 if mode in ("amp", "half") else 4
    copies = 2 * r * (t.hidden + t.vocab) if mode == "amp" else 0
    # LoRA dropout: its bool mask and, in fp32, the dropped input lora_A saves in place of the norm's output
    dropout = tokens * t.hidden * (5 if mode == "fp32" else 1) if lora.dropout_runs(knobs) else 0
    return a * tokens * (t.hidden + r) + copies + dropout


def embed_saved_bytes(model, knobs, tokens: int, first_input: bool) -> int:
    """The embedding's adapter: lora_B's input (tokens x r; under AMP its bf16 cast and embedding_B's copy) and,
    where `first_input` (no checkpointing, the first layer's input otherwise needing no gradient), the first norm's
    fp32 input (sim: 32.2 MiB for Llama-3.2-1B at 4,096 tokens, 0.19 with checkpointing)."""
    if "embed_tokens" not in ends(knobs):
        return 0
    t, r, mode = model.text, knobs.lora_rank, lora.adapter_mode(knobs)
    own = {"amp": 2 * tokens * r + 2 * r * t.hidden, "half": 2 * tokens * r}.get(mode, 4 * tokens * r)
    return own + (4 * tokens * t.hidden if first_input else 0)


def head_forward_bytes(model, knobs, tokens: int, residual_bytes: int) -> int:
    """The head's forward moment, logits included: under AMP (and with the adapters cast to half) the half base
    logits, lora_B's half output and its scaled copy (6 bytes a token x entry); bf16-pure: the bf16 logits beside
    lora_B's fp32 output and the scaled one, then their fp32 sum (10); fp32: three fp32 tensors (12; sim: the
    forward's end rises by 4 bytes a token x entry, 2,004 MiB for Llama-3.2-1B at 4,096 tokens). Under the chunked
    loss the head runs a chunk at a time beside the earlier chunks' saved fp32 log-softmax and the previous chunk's
    fp32 logits, and the final norm's output the chunks are cut from (`residual_bytes` an element; recipe.loss
    .chunked_loss_sum; sim, fp32: 282.5 MiB over the chunked loss's own moment, one chunk x 4 bytes and the hidden
    states). 0 without LoRA on the head."""
    if "lm_head" not in ends(knobs):
        return 0
    per = {"amp": 6, "half": 6, "bf16-pure": 10, "fp32": 12}[lora.adapter_mode(knobs)]
    if knobs.loss != "chunked":
        return per * tokens * model.text.vocab
    chunk = -(-tokens // CHUNKED_LOSS_CHUNKS)
    return (
        4 * (tokens - chunk) + 4 * chunk + per * chunk
    ) * model.text.vocab + residual_bytes * tokens * model.text.hidden
