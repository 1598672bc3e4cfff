"""TRL's PPOTrainer on one process (ms-swift's `rlhf --rlhf_type ppo`; RoleEngine.keeps_scores and
joint_value_update): the rollout's fp32 scores kept through the step, and the policy and its value model trained by
one forward and one backward. Read in trl 0.29.1 (what ms-swift 4.6.0 runs) trl/experimental/ppo/ppo_trainer.py, the
same at v1.9.0 (lines in brackets; TRL 1.16 has no PPOTrainer):
- generate keeps every step's fp32 scores (torch.stack(output.scores), :119 [:110]) and batch_generation pads the
  chunks into one tensor for the rank's batch (:147-151 [:138-142]), bound to `logitss` (:686 [:690]) and never
  deleted (:747 [:751] deletes the rest): one copy lives through the reference, value and reward forwards and the
  whole update, and on into the next rollout until batch_generation returns its successor;
- PolicyAndValueWrapper.forward (:284-295 [:275-294]) runs the value model's own backbone (its full LM body, not a
  head on the policy) and the policy on the same rows, and one backward of the summed loss (:844 [:848]): both
  models' activations and gradients are live at once, one optimizer over both;
- the update's tensors are deleted once per mini-batch (:869 [:873]), not per micro-batch: from the second
  micro-step on, the previous one's output (the policy's logits over the whole row) and its no-grad softmax for the
  entropy (:851 [:855]) are alive through the next forward and backward.
Pinned by a real CPU step of TRL's PPOTrainer (tests/probes/test_trl_ppo.py)."""

from __future__ import annotations

from dataclasses import replace

from planner.estimate import activation_terms, state_terms
from planner.estimate.nograd import compute_dtype_bytes
from planner.estimate.setup import Setup

FP32 = 4  # generate's scores: transformers casts each step's logits to float32


def rollout_scores_bytes(a: Setup, copies: int = 1) -> int:
    """The rollout's fp32 scores for the rank's batch (per_device_train_batch_size x gradient_accumulation_steps rows,
    local_batch_size, ppo_trainer.py:455: the plan's micro-steps of every mini-batch), completion x vocabulary each:
    `copies` 3 while batch_generation pads the chunks (the previous step's copy, still bound to `logitss`, the list and
    its padded copy), 1 after."""
    rows = a.micro_batch * a.knobs.workload.steps_per_gen(a.grad_accum)
    return copies * FP32 * rows * a.knobs.workload.max_completion_length * a.model.text.vocab


def previous_micro_step_bytes(a: Setup) -> int:
    """What the previous micro-step leaves alive through the next one's forward and backward: the policy's logits
    over its whole rows and the softmax over the completion's, in the compute dtype. None with one micro-step per
    mini-batch (each mini-batch's tensors are deleted, :869; `grad_accum`: one mini-batch's micro-steps)."""
    if a.grad_accum <= 1:
        return 0
    w, c = a.knobs.workload, compute_dtype_bytes(a)
    return c * a.micro_batch * a.model.text.vocab * (a.seq_len + w.max_completion_length)


def accumulating(a: Setup) -> Setup:
    """The policy's setup for its update's own terms: TRL's Accelerator accumulates over gradient_accumulation_steps
    micro-steps (ppo_trainer.py:452, accelerator.accumulate :806), across num_mini_batches' mini-batches, so its
    gradients are kept from the first micro-step of the rank's batch to the one optimizer step; the plan's grad_accum
    is one mini-batch's micro-steps (roles.mini_batches of them: planner.frameworks.swift.reader_ppo)."""
    return replace(a, grad_accum=a.knobs.workload.steps_per_gen(a.grad_accum))


def joint_update_terms(critic: Setup, a: Setup) -> dict[str, int]:
    """What the update phase holds beside the policy's own update step and every role's resident states: the value
    model's gradients and its forward's saved activations over the same micro-batch at the one backward (its
    parameters and optimizer states are its resident term), and the previous micro-step's tensors."""
    return {
        "critic_grads_bytes": state_terms.gradients_bytes(critic),
        "critic_activations_bytes": activation_terms.activations_bytes(critic),
        "previous_micro_step_bytes": previous_micro_step_bytes(a),
    }
