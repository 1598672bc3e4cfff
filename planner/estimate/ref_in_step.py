"""A reference forward inside the micro-step, after the policy's own forward: the policy's saved activations, its
log-prob head's saved tensors and the gradients accumulated so far stay live beside the reference's no-grad pass.

Who runs it there:
- TRL's DPO (unless precompute_ref_log_probs): the reference's log-probs are computed in the loss, after the policy's
  concatenated forward;
- ms-swift v3.5.0 .. v3.6.4's GRPO (Framework.grpo_reference "in-step"): `_compute_loss` takes the policy's
  per-token log-probs, then the reference model's (or the policy's with its adapter disabled) under no_grad
  (v3.5.0 swift/trainers/rlhf_trainer/grpo_trainer.py:1091, :1095-1100; v3.6.4 :1136-1156; main since 2025-05-22,
  97e3692df "[grpo] support liger loss"). v3.4.x (:1055-1058 at v3.4.1) and v3.7 on (:1155-1163 at v3.7.0) compute
  them in `_prepare_batch_inputs`, before the micro-step, between steps as TRL does (planner.estimate.rl).
"""

from __future__ import annotations

from planner.estimate import activation_terms, fp32_logps, recipe_terms, role_heads, state_terms, temp_terms
from planner.estimate.nograd import compute_dtype_bytes
from planner.estimate.setup import Setup
from planner.frameworks import FRAMEWORKS, adapter


def grpo_reference_in_step(s: Setup) -> bool:
    """The framework's release scores the reference inside GRPO's micro-step (Framework.grpo_reference)."""
    k = s.knobs
    if k.workload.kind != "grpo" or k.framework not in FRAMEWORKS:
        return False
    return adapter(k.framework, k.release).grpo_reference == "in-step"


def policy_head_saved_bytes(s: Setup) -> int:
    """What the policy's log-prob head keeps for backward while the reference forward (or CHORD's SFT rows,
    planner.estimate.chord) runs: each row's
    log_softmax output (`logprobs full`; ms-swift 3.2-3.6's whole-logits scoring of a multimodal model keeps it over
    the completion's tokens only, TRL's selective_log_softmax row by row on the sliced logits), or the fused head's
    copy of the scored hidden states; and the per-token log-probs."""
    w, t, c = s.knobs.workload, s.model.text, compute_dtype_bytes(s)
    rows, scored = w.rows(s.micro_batch), min(w.scored_tokens(), s.seq_len)  # s.seq_len: the rank's slice under SP
    if role_heads.upcasts(s.knobs.framework):  # OpenRLHF: the fp32 logits its cross-entropy saved, and its outputs
        return 4 * rows * s.seq_len * t.vocab + 16 * rows * s.seq_len
    if fp32_logps.scores_fp32(s):  # the fp32 logits (or KTO's index copies of them) and their log_softmax
        return fp32_logps.policy_kept_bytes(rows * s.seq_len, t.vocab, fp32_logps.policy_keeps_logits(s))
    if temp_terms.whole_logits(s):
        return c * rows * scored * t.vocab + 8 * rows * scored
    if temp_terms.swift_logps(s) in (
        "kept",
        "copied",
    ):  # each row's log_softmax; upcast: fp32 logits (test_swift_logps)
        upcast = recipe_terms.swift_logits_upcast(s.knobs)
        return (4 * rows * (scored + 1) if upcast else c * rows * scored) * t.vocab + 8 * rows * scored
    if w.logprobs == "full":
        return c * rows * s.seq_len * t.vocab
    return (c * scored * t.hidden + 8 * scored) * rows + 16 * rows * s.seq_len


def in_step_terms(s: Setup, resident: dict[str, int], nograd_pass: dict[str, int]) -> dict[str, int]:
    """The reference-forward phase inside the micro-step: the resident terms, the gradients accumulated by the
    earlier micro-steps, the policy's saved activations and head, and the reference's no-grad pass."""
    return {
        **resident,
        "grads_bytes": state_terms.gradients_bytes(s) if s.grad_accum > 1 else 0,
        "saved_activations_bytes": activation_terms.activations_bytes(s),
        "policy_logps_bytes": policy_head_saved_bytes(s),
        **nograd_pass,
    }
