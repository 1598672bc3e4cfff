"""The heads of an RL run's roles (planner.estimate.roles): what the log-prob and value computations hold beside the
model, per framework.

verl 0.9.1 (workers/actor/dp_actor.py _forward_micro_batch, remove-padding path): the packed row's logits
(tokens x vocabulary, the compute dtype: FSDP's bf16 param_dtype; HF does not upcast without labels), divided by the
temperature in place; log-probs by flash-attn's Triton cross-entropy (utils/torch_functional.py logprobs_from_logits,
inplace_backward unless the entropy needs the logits: its outputs are fp32 per token, its backward writes the
gradient into the logits); the entropy (entropy_from_logits: softmax, then logsumexp - sum(p x logits)) when
computed: always in compute_log_prob (the old log-probs), in the update when entropy_coeff != 0.
OpenRLHF 0.11.2 (models/actor.py:267, models/utils.py:172-196): the logits are cast to fp32 (a copy beside the
half-precision ones while it is made) and flash-attn's cross-entropy runs on them without inplace_backward, so the
update holds the fp32 logits and their new fp32 gradient at once; the entropy only with --actor.entropy_coef.
The releases before it hold the same: v0.9.0 casts at models/actor.py:171 and scores at models/utils.py:85-109,
v0.10.1 at actor.py:213 and utils.py:123-147 (fp32 logits into flash-attn's cross_entropy_loss, or the chunked
logsumexp without flash-attn), so the term is one for every OpenRLHF release memplan reads (git tags v0.9.0, v0.10.1).
The critic and the reward model score one value per token (AutoModelForTokenClassification, num_labels 1; OpenRLHF's
value_head Linear(hidden, 1)).
Pinned to the sim (probes/roles_sim.py; benchmarks/accuracy.py --rl, the role rows).
"""

from __future__ import annotations

from planner.frameworks import FRAMEWORKS

PER_TOKEN_FP32 = 4


def upcasts(framework: str) -> bool:
    """The framework scores fp32 logits (OpenRLHF), or the compute dtype's (verl): its RoleEngine.upcasts_logprobs."""
    engine = FRAMEWORKS[framework].role_engine
    return engine is not None and engine.upcasts_logprobs


def logprob_pass_head_bytes(tokens: int, vocab: int, compute_bytes: int, entropy: bool, upcast: bool = False) -> int:
    """A no-grad log-prob pass at its head: the logits (upcast: the half-precision ones and their fp32 copy while it
    is made); with the entropy, softmax's output and the product p x logits beside the scored logits; the
    cross-entropy's fp32 per-token outputs (loss, log-sum-exp, the negated log-probs)."""
    scored = (4 if upcast else compute_bytes) * tokens * vocab
    cast = compute_bytes * tokens * vocab if upcast and compute_bytes != 4 else 0
    return max(scored + cast, scored * (3 if entropy else 1)) + 3 * PER_TOKEN_FP32 * tokens


# logits-sized tensors beside the logits at the head's backward with an entropy term: the cross-entropy's own
# gradient (no longer in place), softmax's saved output, the gradients of p x logits to each factor, softmax's and
# logsumexp's backward temporaries and their sum (the sim probe at Qwen2.5-0.5B, 4,096 tokens: 6 with the entropy
# saved, and 6 when it is recomputed at backward under entropy_checkpointing: the recomputation rebuilds what was
# not saved at the same moment); they are freed before the head's matmul makes its weight gradient
ENTROPY_COPIES = 6


def update_head_bytes(
    tokens: int, vocab: int, hidden: int, compute_bytes: int, entropy: str, head_grad: int, upcast: bool = False
) -> int:
    """The actor's update at its head's backward: the scored logits (saved by the cross-entropy; verl: their gradient
    written in place; upcast: the fp32 logits and a new fp32 gradient), then the head weight's new gradient
    (`head_grad` bytes per parameter; 0 for a frozen head) and the hidden states' gradient; with an entropy term (on
    or checkpointed), first ENTROPY_COPIES more logits-sized tensors; the loss's per-token fp32 tensors."""
    logits = (4 if upcast else compute_bytes) * tokens * vocab
    grads = head_grad * vocab * hidden + compute_bytes * tokens * hidden
    entropy_bytes = (1 + ENTROPY_COPIES) * logits if entropy != "off" else 0
    if upcast:  # the fp32 logits and their gradient; then the gradient cast back beside the head's own gradients
        body = max(2 * logits, compute_bytes * tokens * vocab + grads, entropy_bytes)
    else:
        body = max(logits + grads, entropy_bytes)
    return body + 12 * PER_TOKEN_FP32 * tokens


# verl's fused head (model.use_fused_kernels, impl_backend torch: utils/experimental/torch_functional.py
# FusedLinearForPPOFunction, v0.7.0 :75-193): a chunk of tokens at a time, the logits made and cast to fp32 in the chunk
FUSED_PER_TOKEN = 16  # the per-token outputs (fp32 log-probs, the entropy) and a chunk's: measured at most 10.5 a token


def fused_logprob_pass_head_bytes(tokens: int, vocab: int, chunk: int, fp32_copies: int) -> int:
    """A no-grad log-prob pass through verl's fused head: `fp32_copies` fp32 logits-sized tensors of one chunk (its
    fp32 logits, softmax's output, log_softmax's or the entropy's temporaries: RoleEngine.fused_logprob_fp32_copies)
    and the per-token outputs. Pinned to verl's own function on CPU (tests/probes/test_verl_fused_head.py)."""
    return fp32_copies * PER_TOKEN_FP32 * min(tokens, chunk) * vocab + FUSED_PER_TOKEN * tokens


def fused_update_head_bytes(
    tokens: int, vocab: int, hidden: int, compute_bytes: int, entropy: str, head_trained: bool, chunk: int
) -> int:
    """The actor's update through verl's fused head, at its backward (FusedLinearForPPOFunction.backward, v0.7.0
    :134-193; _fused_linear_for_ppo_bwd :40-72), the largest of two moments of a chunk of c tokens: the logits'
    gradient made (the fp32 logits, softmax's output, the one-hot targets, their difference or product and the
    gradient: 5 fp32 logits-sized tensors; 7 with the entropy's log_softmax and its product), or the matmuls (the
    function's 3 fp32 locals, 4 with the entropy, the gradient cast to the compute dtype, the chunk's hidden-state
    gradient and, for a trained head, its weight gradient); beside them the hidden states' gradient (tokens x hidden)
    and the head's gradient accumulator, and from the second chunk on the previous chunk's two gradients (the loop's
    variables live until reassigned). Pinned to verl's own function on CPU (tests/probes/test_verl_fused_head.py)."""
    c = min(tokens, chunk)
    weight = compute_bytes * vocab * hidden if head_trained else 0
    locals_fp32, gradient_fp32 = (4, 7) if entropy != "off" else (3, 5)
    gradient = gradient_fp32 * PER_TOKEN_FP32 * c * vocab
    matmuls = locals_fp32 * PER_TOKEN_FP32 * c * vocab + compute_bytes * c * (vocab + hidden) + weight
    previous = compute_bytes * c * hidden + weight if tokens > chunk else 0
    return max(gradient, matmuls) + weight + compute_bytes * tokens * hidden + previous + FUSED_PER_TOKEN * tokens


def fused_head(framework: str, fused_kernels: bool | None) -> tuple[int, int]:
    """(chunk tokens, fp32 copies of a no-grad chunk) where the run scores through the framework's fused head, else
    (0, 0)."""
    engine = FRAMEWORKS[framework].role_engine
    if not fused_kernels or engine is None or not engine.fused_chunk_tokens:
        return 0, 0
    return engine.fused_chunk_tokens, engine.fused_logprob_fp32_copies


def value_pass_head_bytes(tokens: int, compute_bytes: int) -> int:
    """A value or reward pass at its head: one score per token."""
    return compute_bytes * tokens
