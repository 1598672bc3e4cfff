"""The temporaries of a step's peak moments, one small function per term, in bytes: the logits and loss at the start
of backward (each framework's and task's head), the last layer's backward (its activations, the gradient flowing
in, the MLP's or eager softmax's transient, parallel attention's blocks), the end of backward (the largest
gradient's transient, a tied embedding's gradient sum), a quantized base's dequantized weight.
planner.estimate.memory picks the peak among the moments."""

from __future__ import annotations

from planner.config.tasks import NO_VOCABULARY
from planner.estimate import activations as act
from planner.estimate import (
    boft,
    fp32_logps,
    freeze,
    frozen_lm,
    fsdp,
    gkd,
    heads,
    kto_entropy,
    lora_ends,
    parallel,
    quant,
    recipe_terms,
    role_heads,
    v1_head,
    zero,
)
from planner.estimate.activation_terms import (
    activations_bytes,
    autocast_weight_copy_bytes,
    frozen_ends_bytes,
    live_weight_copy_layers,
    lora_layer_bytes,
    plora_layer_bytes,
    text_shape,
    torch_autocast,
    ulysses_layer_bytes,
)
from planner.estimate.loss_dtype import half_loss
from planner.estimate.quant_modules import dense_names
from planner.estimate.setup import Setup
from planner.estimate.state_terms import gathered_params_bytes, grad_bytes_per_param
from planner.estimate.trained import frozen_modules, frozen_weight_bytes_per_param, largest_trainable_matrix_params
from planner.frameworks import FRAMEWORKS, adapter
from planner.model.modelspec import IDLE_HEAD


def whole_logits(s: Setup) -> bool:
    """A GRPO step scored from the model's whole logits: the framework's release does it for a multimodal model
    (Framework.vlm_logprobs "whole": ms-swift 3.2-3.6, recipe_terms.whole_logits_logps_bytes) and the model has a
    tower (ms-swift's model_meta.is_multimodal is the model's, whether the rows hold images or not)."""
    k = s.knobs
    if k.workload.kind != "grpo" or s.model.vision is None or k.framework not in FRAMEWORKS:
        return False
    return adapter(k.framework, k.release).vlm_logprobs == "whole"


def swift_logps(s: Setup) -> str:
    """How a GRPO step's tokens are scored where the framework's release scores them itself (Framework.grpo_logprobs,
    recipe_terms.swift_logps_bytes): "kept", the model's logits over the completion divided in place (ms-swift's 4
    line); "slice", under sequence parallel, the logits of every token of the rank's slice (the 4 line); "copied",
    the completion's logits divided into a copy (the 3.7 and 3.9 lines); "" elsewhere."""
    k = s.knobs
    if k.workload.kind != "grpo" or k.framework not in FRAMEWORKS:
        return ""
    how = adapter(k.framework, k.release).grpo_logprobs
    if how == "swift":
        return "slice" if k.sequence_parallel > 1 else "kept"
    return "copied" if how == "swift-copy" else ""


def swift_logps_head_bytes(s: Setup, rows: int, width: int, c: int, grad: bool) -> int:
    """ms-swift's own log-probs over `rows` of `width` tokens (swift_logps' path, recipe_terms.swift_logps_bytes):
    the completion's tokens, or every token of the rank's slice; `c` the logits' dtype bytes."""
    path, w = swift_logps(s), s.knobs.workload
    tokens = width if path == "slice" else min(width, w.scored_tokens())
    upcast = recipe_terms.swift_logits_upcast(s.knobs)
    return recipe_terms.swift_logps_bytes(rows, tokens, s.model.text.vocab, c, upcast, grad, path)


def kto_entropy_bytes(s: Setup) -> int:
    """TRL v1.7.0 .. v1.9.0's KTO at its entropy metric, just before backward (Framework.kto_entropy_copy,
    planner.estimate.kto_entropy), every activation saved; 0 where the release does not run it."""
    k = s.knobs
    if (
        k.workload.kind != "kto"
        or k.framework not in FRAMEWORKS
        or not adapter(k.framework, k.release).kto_entropy_copy
    ):
        return 0
    t, rows, width, p = text_shape(s)
    c = act.saved_dtype_bytes(p)[1]
    return kto_entropy.entropy_moment_bytes(rows, width, t.vocab, c, not k.workload.precompute_ref_log_probs)


def logits_loss_bytes(s: Setup) -> int:
    """The logits and the loss at the start of backward: each framework's and task's head (recipe_terms, role_heads,
    heads, gkd)."""
    if "logits_loss_bytes" not in s.memo:  # asked for several times a candidate: computed once (Setup.memo)
        _, rows, width, p = text_shape(s)  # LoRA on the head: its forward's moment, where larger (lora_ends)
        head = lora_ends.head_forward_bytes(s.model, s.knobs, rows * width, act.saved_dtype_bytes(p)[0])
        s.memo["logits_loss_bytes"] = max(_logits_loss_bytes(s), head)
    return s.memo["logits_loss_bytes"]


def _logits_loss_bytes(s: Setup) -> int:
    t, rows, width, p = text_shape(s)
    head_trainable = (not s.lora or s.knobs.lora_train_embeddings) and not frozen_lm.language_frozen(s.knobs)
    head_trainable = head_trainable and not freeze.freeze_tuned(s.knobs)  # freeze tuning's head is frozen
    head_grad = grad_bytes_per_param(s.knobs) if head_trainable else 0
    w = s.knobs.workload
    if s.knobs.role_run or (
        w.rl and role_heads.upcasts(s.knobs.framework)
    ):  # verl / OpenRLHF (DPO too) heads  # verl's / OpenRLHF's actor (a critic: its one-output head, vocab 1)
        entropy = w.roles.entropy if t.vocab > 1 else "off"
        c = act.saved_dtype_bytes(p)[1]
        chunk, _ = role_heads.fused_head(s.knobs.framework, w.roles.fused_kernels)
        if chunk and t.vocab > 1:  # verl's fused head: the logits' gradient a chunk at a time
            return role_heads.fused_update_head_bytes(rows * width, t.vocab, t.hidden, c, entropy, head_grad > 0, chunk)
        up = role_heads.upcasts(s.knobs.framework) and t.vocab > 1
        return role_heads.update_head_bytes(rows * width, t.vocab, t.hidden, c, entropy, head_grad, up)
    if w.kind == "gkd":  # both models' logits and the generalized JSD's temporaries
        return gkd.loss_bytes(s, rows)
    if whole_logits(s):  # ms-swift 3.2-3.6's GRPO on a multimodal model
        return recipe_terms.whole_logits_logps_bytes(t, rows, width, min(width, w.scored_tokens()), p)
    if swift_logps(s):  # ms-swift's GRPO: its own log-probs (kept, copied, or the rank's slice's)
        return swift_logps_head_bytes(s, rows, width, act.saved_dtype_bytes(p)[1], True)
    if fp32_logps.scores_fp32(s):  # LLaMA-Factory's DPO and KTO: one log_softmax over the fp32 logits
        return fp32_logps.backward_head_bytes(rows * width, t.vocab)
    if w.rl and w.logprobs == "full":
        full = recipe_terms.full_logprob_bytes(t, rows, width, p)
        return max(full + recipe_terms.packed_row_grad_bytes(t, s.knobs, rows * width, p), kto_entropy_bytes(s))
    if w.rl:  # TRL scores the completion tokens with its fused log-prob head (a packed row: each row it packs)
        scored = rows * width // s.seq_len * max(1, min(s.seq_len, w.scored_tokens()))
        return recipe_terms.logprob_head_bytes(t, scored, p, head_grad)
    if heads.value_head_rm(s.knobs):  # trl's value-head model: the logits made and cast, then discarded
        c = act.saved_dtype_bytes(p)[1]  # under torch's autocast the ValueHead's Linear runs in bf16
        return heads.value_head_bytes(rows * width, t.vocab, t.hidden, c, torch_autocast(s.knobs))
    if s.knobs.task in NO_VOCABULARY:  # a score head or none (planner.estimate.heads)
        k, dp = s.knobs, s.knobs.data_parallel_of(s.world_size)
        c = act.saved_dtype_bytes(p)[1]
        return heads.task_head_bytes(k.task, rows, rows * width, t.hidden, k.num_labels, k.negatives, c, dp)
    head = adapter(s.knobs.framework, s.knobs.release).sft_head
    if head == "lf-v1" and s.knobs.loss == "standard":  # LLaMA-Factory v1's own loss beside transformers' (v1_head)
        return v1_head.v1_loss_bytes(rows, width, t.vocab, act.saved_dtype_bytes(p)[1])
    if head == "swift-sp" and s.knobs.sequence_parallel > 1 and s.knobs.loss != "fused":  # ms-swift's own SP loss
        return recipe_terms.swift_sp_loss_bytes(t, s.knobs, rows * width, p)
    if head == "fused-logprob" and s.knobs.loss == "standard":  # TRL's SFT: the same head, every next token (its
        # 1.7 line's chunked_nll; under Liger, v1.7.0 sft_config.py:335-336 runs nll, Liger's loss below)
        return recipe_terms.logprob_head_bytes(t, rows * max(1, width - 1), p, head_grad)
    if s.knobs.loss == "standard" and half_loss(s):  # the model's own cross-entropy over its half logits
        return act.half_loss_bytes(t, rows * width, p)
    return recipe_terms.loss_bytes(t, s.knobs, rows * width, p, head_grad)


def backward_start_temp_bytes(s: Setup) -> int:
    """At the loss, before any layer's backward: the logits and loss, the mask, autocast's weight copies, ZeRO-3's
    gathers. No quantized linear runs there (the head is not quantized), so no dequantization transient: the last
    layer's backward holds it (last_layer_temp_bytes). Measured against the sim (Llama-3.2-1B cut to 4 layers, LoRA,
    2 x 2048, checkpointing off and full; 2026-12-07): with it nf4 +0.46/+0.70%, int8 +0.61/+0.65%, gptq
    +1.27/+1.65%, awq +0.46/+0.70%, hqq +2.38/+3.05%, ct-w4a16 +1.21/+1.54%; without it every one +0.09% to
    +0.26%."""
    t, rows, width, p = text_shape(s)
    return (
        logits_loss_bytes(s)
        + act.attention_mask_bytes(t, rows, width, p)
        + autocast_weight_copy_bytes(s, live_weight_copy_layers(s))
        + gathered_params_bytes(s)
    )


def dequantized_bytes(s: Setup) -> int:
    """A quantized base: the weight dequantized for the matmul running (planner.estimate.quant)."""
    compute = act.saved_dtype_bytes(text_shape(s)[3])[1]
    return quant.dequantized_weight_bytes(s.model, s.knobs.quant, compute, dense_names(s))


def last_layer_activations_bytes(s: Setup) -> int:
    """During the last layer's backward: every layer's saved activations (under checkpointing, what each
    checkpointed layer keeps plus the recomputed layer's whole set; under offload, the layer brought back),
    the vision tower's; the final norm's saved tensors are freed by then."""
    t, rows, width, p = text_shape(s)
    recomputed = recipe_terms.recomputed_layer_bytes(t, s.knobs, rows, width, p)
    if recomputed and s.knobs.checkpointing != "offload":  # the recomputed layer holds LoRA's and Ulysses' tensors too
        recomputed += lora_layer_bytes(s) + ulysses_layer_bytes(s) + plora_layer_bytes(s)
    final = 0 if s.knobs.checkpointing == "offload" else act.final_norm_bytes(t, rows, width, p) - frozen_ends_bytes(s)
    return activations_bytes(s) - final + recomputed


def head_grad_bytes(s: Setup) -> int:
    """Gradients that exist once backward has passed the lm_head and the final norm (the head's
    gradient, or the tied embedding's), counted when gradients are not already all live."""
    if s.knobs.zero_stage >= 2 or s.knobs.fsdp != "off" or s.knobs.optimizer_in_backward:
        return 0
    if freeze.freeze_tuned(s.knobs):  # the final norm and the head frozen (planner.estimate.freeze)
        return 0
    if s.lora:  # the trained copy of the head, in the base's dtype
        return (
            s.model.text.vocab * s.model.text.hidden * frozen_weight_bytes_per_param(s.knobs)
            if s.knobs.lora_train_embeddings
            else 0
        )
    m = s.model
    idle = frozen_modules(s).endswith(IDLE_HEAD)  # an embedding run's head takes none (trained.frozen_modules)
    head = sum(t.numel for t in m.tensors if t.role == "norm" or (t.role == "head" and not idle))
    if not any(t.role == "head" for t in m.tensors):  # tied: the embedding's gradient (none without a head: vocab 0)
        head += sum(t.numel for t in m.tensors if t.role == "embed" and t.shape[0] == m.text.vocab)
    return head * grad_bytes_per_param(s.knobs)


def last_layer_temp_bytes(s: Setup) -> int:
    """During the last layer's backward: the mask, autocast weight copies, ZeRO-3 gathers, the
    gradient flowing into the layer (residual-stream width), the MLP's gradient transient or, where larger, eager
    attention's softmax backward (act.eager_softmax_backward_extra_bytes); BOFT's rotation gradient."""
    t, rows, width, p = text_shape(s)
    r, _ = act.saved_dtype_bytes(p)
    return (
        act.attention_mask_bytes(t, rows, width, p)
        + autocast_weight_copy_bytes(s, live_weight_copy_layers(s))
        + gathered_params_bytes(s)
        + fsdp.backward_temp_bytes(s, end=False)
        + r * rows * width * t.hidden
        + dequantized_bytes(s)
        + max(
            act.mlp_backward_transient_bytes(t, rows, width, p),
            act.eager_softmax_backward_extra_bytes(t, rows, width, p),
        )
        + parallel_attention_temp_bytes(s)
        + boft.backward_temp_bytes(s.model, s.knobs, rows * width)
    )


def parallel_attention_temp_bytes(s: Setup) -> int:
    """In the last layer's attention backward: Ulysses' all-to-all copy of the q, k and v gradients, ring attention's
    key/value blocks and their gradients in flight (planner.estimate.parallel; 0 without them)."""
    _, c = act.saved_dtype_bytes(text_shape(s)[3])
    return parallel.ulysses_all_to_all_bytes(s, c) + parallel.ring_kv_blocks_bytes(s, c, backward=True)


def tied_embedding_grad_transient_bytes(s: Setup) -> int:
    """A tied embedding's last moment: autograd holds the head's gradient in the weight's input buffer
    until the embedding's gradient arrives, then sums the two, so two vocab x hidden gradients live
    beside the gradients already counted (sim probe, Gemma-2 and Llama-3.2 at the end of backward:
    grads 1.2 GiB + temporaries 3 x 2.2 GiB where one gradient of the head was counted before)."""
    m = s.model
    if s.lora or not m.text.tied or freeze.freeze_tuned(s.knobs):  # a frozen embedding takes no gradient
        return 0
    return 2 * m.text.vocab * m.text.hidden * grad_bytes_per_param(s.knobs)


def end_of_backward_temp_bytes(s: Setup) -> int:
    """The larger of the last layer's backward (its activations, the largest trainable matrix's gradient
    transient or eager attention's softmax backward, its autocast weight copies) and a tied embedding's gradient sum (when the head's bf16
    copy is already freed); ZeRO-3 gathers on top; with ZeRO-1/2's optimizer offloaded, the fp64 copy of the largest
    gradient's piece the boundary's hand-off to the host makes beside it (zero.offload_norm_copy_bytes)."""
    t, rows, width, p = text_shape(s)
    transient = largest_trainable_matrix_params(s) * grad_bytes_per_param(s.knobs)
    # eager attention's softmax backward: no weight gradient, and the MLP's and o_proj's autocast copies freed
    eager = act.eager_softmax_backward_extra_bytes(t, rows, width, p)
    layer = act.layer_bytes(t, rows, width, p) + max(transient + autocast_weight_copy_bytes(s, 1), eager)
    if t.moe:  # the gate-up output's gradient, beside the experts' weight gradient it makes
        layer += act.mlp_backward_transient_bytes(t, rows, width, p)
    return (
        max(layer, tied_embedding_grad_transient_bytes(s))
        + gathered_params_bytes(s)
        + fsdp.backward_temp_bytes(s, end=True)
        + dequantized_bytes(s)
        + zero.offload_norm_copy_bytes(s)
    )
