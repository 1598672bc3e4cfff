"""CHORD (ms-swift's GRPO with expert SFT rows, Framework.grpo_chord; workload.chord_sft_batch).

Each training micro-step, after GRPO's forward and loss, ms-swift 4.6.0 draws `chord_sft_batch` rows of the SFT
dataset, runs the policy over them and adds mu x their cross-entropy to GRPO's loss before one backward
(swift/rlhf_trainers/grpo_trainer.py:1223-1224, utils.py:1633-1675): the SFT rows' forward runs while GRPO's saved
activations and its log-probs' saved tensors are live, and backward takes the SFT branch first (its ops are the
later ones). Their head is the model's logits upcast to fp32 and torch's cross_entropy (swift/trainers/utils.py:
202-217), the pattern of transformers' own loss (planner.estimate.recipe_terms.loss_bytes). The rows are encoded by
the trainer's template at --max_length (swift/rlhf_trainers/utils.py:1576-1584; longer ones raise and are drawn
again), which memplan reads as the prompt's limit: planned at that length.
"""

from __future__ import annotations

from dataclasses import replace

from planner.config.spec import MemoryBreakdown
from planner.config.workload import Workload
from planner.estimate import activation_terms, ref_in_step, state_terms
from planner.estimate.setup import Setup


def sft_setup(s: Setup) -> Setup:
    """The SFT rows of one micro-step as a supervised step of their own: chord_sft_batch rows at the rows' length."""
    w = s.knobs.workload
    knobs = s.knobs.model_copy(update={"workload": Workload()})
    return replace(s, knobs=knobs, micro_batch=w.chord_sft_batch, seq_len=w.prompt_tokens())


def sft_moment_bytes(sft: MemoryBreakdown) -> int:
    """The SFT rows' own bytes at their peak (activations and transients: their forward's saved tensors, the logits'
    fp32 upcast and cross-entropy), the states they share with GRPO's step left out."""
    return sft.activations_bytes + sft.temp_bytes


def chord_terms(s: Setup, resident: dict[str, int], sft: MemoryBreakdown) -> dict[str, int]:
    """The chord-sft phase: the resident terms, the gradients of the earlier micro-steps, GRPO's saved activations
    and log-probs (ref_in_step.policy_head_saved_bytes), and the SFT rows at their peak."""
    return {
        **resident,
        "grads_bytes": state_terms.gradients_bytes(s) if s.grad_accum > 1 else 0,
        "saved_activations_bytes": activation_terms.activations_bytes(s),
        "policy_logps_bytes": ref_in_step.policy_head_saved_bytes(s),
        "chord_sft_bytes": sft_moment_bytes(sft),
    }
