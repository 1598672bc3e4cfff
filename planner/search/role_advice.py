"""Why an RL run's plan (planner.estimate.roles) does not fit: the GPU group and phase of the peak, its largest
term, and the role settings that shrink that term (flags here; planner.search.role_fixes finds the smallest one that
fits and names it in the framework's keys)."""

from __future__ import annotations

from planner.config.spec import GIB, Plan
from planner.frameworks import FRAMEWORKS

# a term of planner.estimate.roles' phases (its name less _bytes; role prefixes stripped) -> (what it is, its fixes)
TERMS = {
    "rollout": ("the rollout engine's share", "a lower --rollout-memory, or the rollout on its own GPUs (--placement)"),
    "rollout_asleep": ("the sleeping rollout engine", "--sleep-level 1 or 2, or --rollout-eager (no CUDA graphs)"),
    "rollout_sync": ("the rollout engine's weights at the sync", "--rollout-tp 2 or more"),
    "sync_gather": ("the weights gathered for the sync", "the actor on more GPUs"),
    "actor_resident": ("the actor's states", "--role-offload actor-params,actor-optimizer, or LoRA (--lora-rank)"),
    "critic_resident": ("the critic's states", "--role-offload critic-params,critic-optimizer, or a smaller critic"),
    "ref_resident": ("the reference model", "--role-offload ref, or LoRA (the base is the reference)"),
    "reward_resident": ("the reward model", "--role-offload reward"),
    "actor_update": ("the actor's update", "a smaller --max-tokens-per-gpu or micro-batch, or full checkpointing"),
    "critic_update": ("the critic's update", "a smaller --critic-max-tokens-per-gpu"),
    "actor_old_logps": ("the old log-prob pass", "a smaller --logprob-max-tokens-per-gpu"),
    "ref_reference_forward": ("the reference pass", "a smaller --logprob-max-tokens-per-gpu"),
    "critic_values": ("the critic's values pass", "a smaller --critic-max-tokens-per-gpu"),
    "reward_scoring": ("reward scoring", "the reward model on its own GPUs (--placement)"),
}


def gib(x: int) -> str:
    return f"{x / GIB:.1f} GiB"


def deciding_term(plan: Plan) -> tuple[str, str, int]:
    """(group, term, bytes): the largest term of the peak (group, phase)."""
    m = plan.memory
    group, term = m.peak_term.split(": ", 1)
    return group, term, m.detail[m.peak_term + "_bytes"]


def reason(plan: Plan, usable: int) -> str:
    """One line: the group and phase that run out of memory, the deciding term, what shrinks it."""
    m = plan.memory
    group, term, size = deciding_term(plan)
    what, fix = TERMS.get(term, (term.replace("_", " "), "more GPUs"))
    fix = pass_fix(plan, term) or fix
    return (
        f"{group} runs out of memory in {m.peak_phase}: {gib(m.device_total_bytes)} per GPU > {gib(usable)} usable; "
        f"its largest term is {what} ({gib(size)}): {fix}"
    )


def pass_fix(plan: Plan, term: str) -> str | None:
    """A log-prob pass's fixes as the plan's framework sizes it: the reference at its own budget where the framework
    has one (verl's ref.log_prob_max_token_len_per_gpu), and the framework's fused log-prob head where it has one and
    the plan is without it (verl's model.use_fused_kernels: 512 tokens of logits at a time); None for another term."""
    if term not in ("actor_old_logps", "ref_reference_forward"):
        return None
    engine, roles = FRAMEWORKS[plan.framework].role_engine, plan.workload.roles
    own = engine is not None and engine.own_pass_sizes and term == "ref_reference_forward"
    fix = f"a smaller --{'ref-' if own else ''}logprob-max-tokens-per-gpu"
    if engine is not None and engine.fused_chunk_tokens and not roles.fused_kernels:
        fix += f", or {plan.framework}'s fused log-prob head (--fused-kernels true)"
    return fix


def engine_reason(plan: Plan) -> str | None:
    """The rollout engine's KV cache cannot hold one longest sequence (vLLM refuses to start: "... larger than the
    maximum number of tokens that can be stored in KV cache"); None where it can."""
    held = plan.memory.detail.get("rollout_kv_cache_tokens")
    need = plan.workload.seq_len()
    if held is None or held >= need:
        return None
    return (
        f"the rollout engine's KV cache holds {held:,} tokens, less than one {need:,}-token sequence: vLLM refuses to "
        "start; a higher --rollout-memory, --rollout-tp 2 or more, or the rollout on its own GPUs (--placement)"
    )
