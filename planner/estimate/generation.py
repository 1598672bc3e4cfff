"""HF generate on the training GPU (TRL's GRPO and GKD with generation hf, and an RL run's rollout engine hf:
planner.estimate.roles): the KV cache of the sequences sampled at once, the prefill's or last decode step's transient,
the sampling tensors, and the weights gathered for generation."""

from __future__ import annotations

from planner.estimate import linear_attention, weight_sync
from planner.estimate.nograd import compute_dtype_bytes, nograd_forward_bytes, nograd_vision_bytes
from planner.estimate.setup import Setup

SAMPLING_FP32_COPIES = 3  # generate's fp32 copy of the last logits, the processed scores, softmax's probabilities


def kv_cache_bytes(s: Setup, sequences: int, tokens: int) -> int:
    """HF's DynamicCache: what every layer caches for `tokens` positions of `sequences` rows, in the model's
    compute dtype; a hybrid model's linear-attention layers a fixed state per row instead."""
    t, c = s.model.text, compute_dtype_bytes(s)
    if t.linear is not None:  # Qwen3-Next / Qwen3.5: only the full-attention layers cache keys and values
        kv = (t.layers - t.linear.layers) * cache_width(t) * tokens * sequences * c
        return kv + linear_attention.recurrent_state_bytes(t, sequences, c)
    return t.layers * cache_width(t) * tokens * sequences * c


def cache_width(t) -> int:
    """Elements one token adds to one layer's cache: its keys and values, or under DeepSeek's latent attention
    the compressed latent and the rotary key (kv_lora_rank + qk_rope_head_dim: transformers 5.23 caches them
    before expanding, modeling_deepseek_v2.py)."""
    return t.mla.kv_lora_rank + t.mla.qk_rope_head_dim if t.mla is not None else 2 * t.kv_dim


def sequences_per_generation(s: Setup) -> int:
    """Completions one rank generates at once: its share of the generation batch. Under sequence parallel S the
    generation batch feeds S x as many micro-steps, each rank's rows gathered in its group and shared out
    (ms-swift 4.6.0 swift/rlhf_trainers/grpo_trainer.py:152-153, rollout_mixin.py:308-330): a rank
    generates 1/S of the rows its micro-steps train on, whole (its engine runs no sequence parallel)."""
    return max(1, s.micro_batch * s.knobs.workload.steps_per_gen(s.grad_accum) // s.knobs.sequence_parallel)


def generation_terms(s: Setup, n: int | None = None) -> dict[str, int]:
    """HF generation's largest moment: the prefill over the prompts with their cache, or the last decode step with
    the whole cache and one layer's cache being grown (DynamicCache concatenates: old and new live at once); plus
    the sampling tensors and the weights gathered for generation. None off the rank (vLLM generates). `n`: the
    sequences sampled at once (default: the rank's generation batch)."""
    w, t = s.knobs.workload, s.model.text
    if w.generation != "hf":
        return {}
    n = n or sequences_per_generation(s)
    prompt_kv = kv_cache_bytes(s, n, w.prompt_tokens())
    full_kv = kv_cache_bytes(s, n, w.seq_len())
    prefill = nograd_forward_bytes(s, n, w.prompt_tokens())
    grow = 2 * full_kv // t.layers
    kv, transient = (prompt_kv, prefill) if prompt_kv + prefill > full_kv + grow else (full_kv, grow)
    sampling = n * t.vocab * (compute_dtype_bytes(s) + 4 * SAMPLING_FP32_COPIES)
    tower = nograd_vision_bytes(s, n) if transient == prefill and s.model.vision is not None else 0
    tower = tower if tower == prefill else 0  # the prompts' images through the tower decide the prefill
    return {
        "kv_cache_bytes": kv,
        "generation_transient_bytes": transient - tower + sampling,
        **({"generation_tower_bytes": tower} if tower else {}),
        "generation_weights_bytes": weight_sync.generation_weights_bytes(s),
    }
