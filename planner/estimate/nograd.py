"""No-grad forward passes: a decoder layer's largest moment and a VLM tower's without autograd (what GRPO's and DPO's
reference and old-policy passes hold, planner.estimate.rl), and the evaluation phase of a supervised run: HF
Trainer's prediction_step runs the model with labels under torch.no_grad at per_device_eval_batch_size rows of the
full length, between optimizer steps."""

from __future__ import annotations

from dataclasses import replace

from planner.estimate import activations as act
from planner.estimate import recipe_terms
from planner.estimate.loss_dtype import half_loss
from planner.estimate.setup import Setup
from planner.estimate.vision import QWEN2_TOWERS, encoder_tokens, masked_tower_bytes
from planner.frameworks import FRAMEWORKS, adapter


def compute_dtype_bytes(s: Setup) -> int:
    return 4 if s.knobs.precision == "fp32" else 2


def planned_text(s: Setup):
    """The language model as the plan runs it: the --attention knob's kernel where it names one (sdpa is the model's
    own), as the training path reads it (recipe_terms.text_spec); the reference, old-policy and generation passes run
    the same modules."""
    return recipe_terms.with_attention(s.model.text, s.knobs)


def nograd_forward_bytes(s: Setup, rows: int, width: int) -> int:
    """One no-grad forward's largest moment, inside a decoder layer: the residual stream and the normed input, then
    the MLP's gate and up outputs with their product (3 x tokens x intermediate), or attention's q, k, v (repeated
    to all heads with a mask), output and SDPA's float bias or eager attention's scores (eager_scores_nograd_bytes);
    plus the 4-D mask of the forward; or the tower's over the rows' images (of the packed rows where `rows` is one
    packed row: Setup.packed_rows)."""
    t = planned_text(s)
    p = "fp32" if s.knobs.precision == "fp32" else "half"
    r, c = act.saved_dtype_bytes(p)
    tokens = rows * width
    stream = (r + c) * tokens * t.hidden
    mlp = 3 * c * tokens * t.intermediate
    kv_width = t.q_dim if t.kv_heads < t.heads and t.attention != "flash" else t.kv_dim
    attention = c * tokens * (2 * t.q_dim + 2 * kv_width)
    if t.attention == "sdpa":
        attention += act.sdpa_bias_saved_bytes(rows, width, p)
    attention += eager_scores_nograd_bytes(s, rows, width)
    return max(
        stream + max(mlp, attention) + act.attention_mask_bytes(t, rows, width, p),
        nograd_vision_bytes(s, s.packed_rows or rows),
    )


def eager_scores_nograd_bytes(s: Setup, rows: int, width: int) -> int:
    """Eager attention's s x s moment in one layer of a no-grad forward (a reference or old-policy pass, an
    evaluation): at the softmax, the masked scores in the compute dtype, their fp32 copy and the fp32 softmax output
    (transformers 5.25 eager_attention_forward: softmax(attn_weights, dtype=torch.float32); torch's softmax with a
    dtype converts its input first, aten/src/ATen/native/SoftMax.cpp softmax(), except fp16 on CUDA), 10 bytes a
    score in bf16 and 8 in fp32 (no copy), freed before the next layer. Measured on a tiny Llama's no-grad forward
    on CPU, eager against SDPA (tests/probes/test_eager_nograd.py). Not for gpt-oss's sink softmax (unmeasured)."""
    t, c = planned_text(s), compute_dtype_bytes(s)
    if t.attention != "eager" or t.sinks:
        return 0
    return rows * t.heads * width * width * (c + 4 + (4 if c != 4 else 0))


def nograd_vision_bytes(s: Setup, rows: int) -> int:
    """A VLM's prompt images through the vision tower without grad: inside one block, three copies of the patch
    stream (residual, normed input, Qwen2.5-VL's window-reordered copy) and the MLP's gate, up and product (two for a
    plain MLP); beside them the merged image embeddings handed to the language model. Measured against Qwen2.5-VL's
    tower on CPU (tests/probes/test_rl.py)."""
    v = s.model.vision
    if v is None or not s.tower_image_tokens:
        return 0
    c = compute_dtype_bytes(s)
    patches = rows * encoder_tokens(v, s.tower_image_tokens)
    block = 3 * c * patches * v.hidden + (3 if v.gated_mlp else 2) * c * patches * v.intermediate
    if masked_tower(s):  # every image of the call in one SDPA on torch's math path: its N x N moment, no grad
        profile = "fp32" if c == 4 else "half"
        block = max(block, 3 * c * patches * v.hidden + masked_tower_bytes(v, patches, profile, trained=False))
    return block + c * rows * s.tower_image_tokens * s.model.text.hidden


def masked_tower(s: Setup) -> bool:
    """The tower runs transformers 4.45-4.50's Qwen2-VL SDPA over a mask of every patch (vision.masked_tower_bytes):
    the framework's release runs those transformers (Framework.tower_sdpa), the tower is Qwen2-VL's or Qwen2.5-VL's,
    under SDPA. A no-grad pass's call holds every image of its rows: GRPO's generation prefill (ms-swift's PtEngine
    takes the rank's whole generation batch at once, max_batch_size=0: v3.3.0 swift/trainers/rlhf_trainer/
    grpo_trainer.py PtEngine.from_model_template; a micro-batch in 3.2-3.3, micro-batch x accumulation rows in 3.4-3.6,
    v3.4.1 :373-381), the reference and old-policy passes (a micro-batch each)."""
    v, k = s.model.vision, s.knobs
    if v is None or v.block not in QWEN2_TOWERS or k.attention != "sdpa" or not s.tower_image_tokens:
        return False
    return k.framework in FRAMEWORKS and adapter(k.framework, k.release).tower_sdpa == "masked-3d"


def eval_head_bytes(s: Setup, tokens: int) -> int:
    """The loss of an evaluation forward with labels: the final hidden states, the head's logits, their fp32 upcast
    (transformers 5.23 loss/loss_utils.py:61, none when the logits are fp32) and cross_entropy's fp32 log-softmax
    (:42), all live at once under no_grad. Where the model's own loss runs in the logits' dtype (loss_dtype.half_loss:
    Llama4ForConditionalGeneration, 4.51.1 modeling_llama4.py:1784-1800 .. 5.16.1 :1330-1346, the same forward in
    evaluation): the logits, the unmasked tokens' shifted copy and log_softmax's output, three in the compute dtype
    (activations.half_loss_bytes' count); measured 5.98 bytes per token per entry in bf16 at 4.52.4 and 5.16.1, 10.0
    at 5.25 (tests/probes/test_half_loss.py)."""
    t, c = s.model.text, compute_dtype_bytes(s)
    if s.knobs.loss == "standard" and half_loss(s):
        return c * tokens * t.hidden + act.half_loss_bytes(t, tokens, "fp32" if c == 4 else "half")
    return c * tokens * t.hidden + (c + (4 if c != 4 else 0) + 4) * tokens * t.vocab


def eval_forward_bytes(s: Setup) -> int:
    """The evaluation phase's transient (knobs.eval_batch rows at seq_len, 0 when the run does not evaluate): the
    largest of a decoder layer's no-grad moment, the loss's, and the logits kept for compute_metrics at a step's
    concatenation (by then the loss's temporaries are freed)."""
    rows = s.knobs.eval_batch
    if not rows:
        return 0
    e = replace(s, micro_batch=rows)
    return max(
        nograd_forward_bytes(e, rows, s.seq_len), eval_head_bytes(e, rows * s.seq_len), eval_logits_kept_bytes(s)
    )


def eval_logits_kept_bytes(s: Setup) -> int:
    """Logits live when HF's evaluation_loop adds a step's to those it keeps for compute_metrics (transformers 5.23
    trainer.py:2966-3045): the step's own, its gathered copy from every rank (accelerate gather_for_metrics: a new
    world x rows buffer on every rank, accelerate/utils/operations.py:330-349; on one rank the step's own tensor), the
    steps held since eval_accumulation_steps last moved them to the host (trainer.py:3038-3045), and the new buffer
    torch.cat makes of them all (trainer_pt_utils.py:80-95; the first step is kept as it is). At the k-th step: 2k
    steps' worth, plus the rank's own logits beside a gathered copy. In the head's dtype (bf16 under bf16 or AMP;
    modeling_llama.py:467-468 does not upcast). Measured on one CPU rank (HF's Trainer.evaluate under the tracker,
    tests/probes/test_eval_logits.py)."""
    k = s.knobs
    if not (k.eval_logits_steps and k.eval_batch):
        return 0
    local = k.eval_batch * s.seq_len * s.model.text.vocab * compute_dtype_bytes(s)
    step = s.world_size * local
    live = 2 * k.eval_logits_steps * step if k.eval_logits_steps > 1 else step
    return live + (local if s.world_size > 1 else 0)
