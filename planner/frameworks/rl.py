"""How an RL framework that plans its runs by roles (actor, critic, reference, reward model, rollout engine:
planner.estimate.roles) spends memory apart from the recipe: data its adapter declares (Framework.role_engine), read
by planner.config.roles, planner.estimate and planner.search, which test no framework's name."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RoleEngine:
    """An RL framework's role machinery, each field citing the framework's file in its adapter."""

    # planner.config.roles.Roles fields it fills where the run leaves them unset (Roles.resolved)
    defaults: dict[str, object] = field(default_factory=dict)
    offloads: tuple[str, ...] = ()  # the roles it always keeps on the host (--role-offload names)
    sleep_on: int = 1  # the level its colocated engine sleeps at once sleeping is on (the nearest setting offers it)
    profile: tuple[int, int] = (2048, 128)  # the engine's profile run: max_num_batched_tokens, max_num_seqs
    upcasts_logprobs: bool = False  # scores fp32 logits (a copy of the half-precision ones), else the compute dtype's
    logprob_entropy: bool = False  # its old-log-prob pass computes the entropy too, whatever the coefficient
    # its old log-probs and reference passes take micro-batches and token budgets of their own (Roles.logprob_micro_batch,
    # ref_logprob_micro_batch, ref_logprob_max_tokens_per_gpu), else they run at the update's
    own_pass_sizes: bool = False
    # its fused log-prob head (Roles.fused_kernels: planner.estimate.role_heads.fused_*): the tokens of logits one
    # chunk scores, and the fp32 logits-sized tensors a chunk of a no-grad pass holds (0: it has no such head)
    fused_chunk_tokens: int = 0
    fused_logprob_fp32_copies: int = 0
    reward_engine: bool = False  # scores with its reward model in an inference server, not a training worker
    reward_memory: float = 0.0  # that server's share of the card (reward_engine)
    critic_own_budget: bool = False  # the critic's values pass and update both cut by the critic's token budget
    sync_bytes_per_param: int | None = None  # the weights' dtype a sync gathers in (None: the compute dtype)
    sync_bucket_bytes: int = 0  # the transfer buffer each trainer rank fills for the engine
    grpo: bool = True  # its GRPO is planned by roles too (else TRL's GRPO path: planner.estimate.rl)
    one_sample_groups: bool = False  # its GRPO runs one sample a prompt (the group's advantage is the raw score)
    value_head_on_policy: bool = False  # the critic is a value head on the policy (no model of its own)
    generate_gathers: bool = False  # HF generate under ZeRO-3 gathers the whole policy first (TRL's unwrap)
    keeps_scores: bool = False  # generate returns every step's fp32 scores of the rank's batch (TRL's PPO)
    joint_value_update: bool = False  # policy and value model in one forward and one backward (TRL's PPO)
