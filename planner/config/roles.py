"""The roles of an RL run as verl and OpenRLHF run it (`--workload ppo | grpo | rloo | reinforce++` with `--framework
verl | openrlhf`): which models exist, where each lives, the rollout engine, the token budgets and what each role
offloads.

Roles by advantage estimator (verl trainer/ppo/utils.py need_critic: only "gae" needs a critic; OpenRLHF
cli/train_ppo_ray.py: a critic only for "gae"):
- ppo: actor, critic, reference (KL), reward model (when given), rollout;
- grpo, rloo, reinforce++: actor, reference (KL), reward model (when given), rollout; no critic.
A reward model exists only when one is named (`reward_model`): without it the reward is a function (verl's
reward_manager, OpenRLHF's --remote_rm_url or a reward function), which holds no GPU memory.

Placement: "colocate" puts every role on every GPU (verl's hybrid engine, OpenRLHF's --colocate_all_models); or
groups, each `role+role:GPUs`, comma-separated: "actor+ref:4,critic+reward:2,rollout:2" (OpenRLHF's per-role GPU
counts and --colocate_actor_ref / --colocate_critic_reward; vLLM engines on their own GPUs). Every role of the run
is in exactly one group; the groups' GPUs add up to the run's.

Rollout engine "hf": no engine; the actor samples with its own HF generate in every training process, every role
resident there (placement colocate): OpenRLHF's pre-Ray openrlhf.cli.train_ppo, LLaMA-Factory's stage ppo and
ms-swift's rlhf ppo (TRL's PPOTrainer), one process group holding policy, critic, reference and reward model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS

ROLE_NAMES: tuple[str, ...] = ("actor", "critic", "ref", "reward", "rollout")
OFFLOADS: tuple[str, ...] = ("actor-params", "actor-optimizer", "ref", "critic-params", "critic-optimizer", "reward")
MAX_TOKENS_PER_GPU = 1 << 22
ACTOR = "actor"  # a critic_model / reward_model of the actor's shapes (a reader's stand-in for one not found offline)


@dataclass(frozen=True)
class Group:
    roles: tuple[str, ...]
    gpus: int  # 0: every GPU of the run (colocate)

    @property
    def name(self) -> str:
        return "+".join(self.roles)


def parse_placement(text: str) -> tuple[Group, ...]:
    """The placement's groups (a BadInput naming the bad part); "colocate" is one group of every role, gpus 0."""
    if text == "colocate":
        return (Group(ROLE_NAMES, 0),)
    groups, seen = [], set()
    for part in text.split(","):
        roles, sep, gpus = part.partition(":")
        names = tuple(r.strip() for r in roles.split("+"))
        if not sep or not gpus.strip().isdigit() or int(gpus) < 1:
            raise BadInput(
                f"--placement {text!r}: {part!r} is not role+role:GPUs (e.g. actor+ref:4,critic:2,rollout:2) or "
                "'colocate'",
                "placement",
            )
        bad = [r for r in names if r not in ROLE_NAMES]
        if bad:
            raise BadInput(f"--placement: unknown role {bad[0]!r}; roles are {', '.join(ROLE_NAMES)}", "placement")
        again = seen & set(names)
        if again:
            raise BadInput(f"--placement: role {min(again)!r} is in two groups", "placement")
        seen |= set(names)
        groups.append(Group(names, int(gpus)))
    if "actor" not in seen:
        raise BadInput("--placement: no group holds the actor", "placement")
    return tuple(groups)


class Roles(BaseModel):
    """verl's / OpenRLHF's role settings (every face: the flags below, the API's `workload.roles`)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    critic_model: str | None = Field(
        default=None,
        description="ppo: the critic's model (catalog name or config.json, or 'actor'; default: the actor's)",
    )
    reward_model: str | None = Field(
        default=None,
        description=(
            "a reward model scored on the GPUs (catalog name or config.json, or 'actor': the actor's shapes); none: a "
            "function"
        ),
    )
    placement: str = Field(
        default="colocate",
        max_length=200,
        description="colocate (every role on every GPU) or groups role+role:GPUs, e.g. actor+ref:4,critic:2,rollout:2",
    )
    mini_batches: int = Field(
        default=1,
        ge=1,
        le=1 << 12,
        description=(
            "optimizer steps one generation batch feeds (verl data.train_batch_size / actor.ppo_mini_batch_size; "
            "OpenRLHF rollout.batch_size x n_samples_per_prompt / train.batch_size)"
        ),
    )
    rollout_engine: Literal["vllm", "sglang", "hf"] = Field(
        default="vllm",
        description=(
            "the rollout engine: vllm (verl, OpenRLHF), sglang (verl), or hf: the actor's own HF generate in every "
            "training process (OpenRLHF's train_ppo, LLaMA-Factory's and ms-swift's PPO; placement colocate)"
        ),
    )
    generate_batch: int | None = Field(
        default=None,
        ge=1,
        le=1 << 12,
        description=(
            "rollout hf: sequences one generate call samples (OpenRLHF --micro_rollout_batch_size, TRL's "
            "local_rollout_forward_batch_size; default: the micro-batch)"
        ),
    )
    rollout_tp: int = Field(default=1, ge=1, le=64, description="the rollout engine's tensor-parallel size")
    rollout_memory: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description=(
            "the rollout engine's share of each card (vLLM gpu_memory_utilization of the total, SGLang "
            "mem_fraction_static of the free memory; default: the framework's, verl 0.5, OpenRLHF 0.95)"
        ),
    )
    reward_memory: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description=(
            "verl: the reward model's own vLLM engine's share of each card (reward.reward_model.rollout."
            "gpu_memory_utilization, default 0.5)"
        ),
    )
    sleep_level: Literal[0, 1, 2] | None = Field(
        default=None,
        description=(
            "colocated rollout between its phases: 0 keeps weights and KV cache, 1 frees the KV cache and moves the "
            "weights to host RAM, 2 frees both (default: the framework's, verl 2, OpenRLHF 0 without --vllm.enable_sleep)"
        ),
    )
    rollout_eager: bool = Field(default=False, description="the engine runs without CUDA graphs (enforce_eager)")
    move_model_batches: int | None = Field(
        default=None,
        ge=1,
        le=1 << 12,
        description=(
            "ms-swift's --move_model_batches: the weight sync gathers the decoder layers in this many groups (default: "
            "the whole model at once)"
        ),
    )
    max_tokens_per_gpu: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKENS_PER_GPU,
        description="token budget of the actor's update micro-batches (verl use_dynamic_bsz); none: the micro-batch",
    )
    logprob_max_tokens_per_gpu: int | None = Field(
        default=None, ge=1, le=MAX_TOKENS_PER_GPU, description="token budget of the no-grad log-prob passes"
    )
    # verl's keys default to null and are required where no token budget cuts the passes (v0.7.0 trainer/config/
    #   rollout/rollout.yaml:87, ref/ref.yaml:16; utils/config.py:156-168 check_mutually_exclusive): none here is
    #   the actor's micro-batch, as memplan planned these passes before it read the keys
    logprob_micro_batch: int | None = Field(
        default=None,
        ge=1,
        le=1 << 12,
        description=(
            "rows of one old-log-prob micro-batch (verl rollout.log_prob_micro_batch_size_per_gpu); none: the "
            "micro-batch"
        ),
    )
    ref_logprob_micro_batch: int | None = Field(
        default=None,
        ge=1,
        le=1 << 12,
        description=(
            "rows of one reference log-prob micro-batch (verl ref.log_prob_micro_batch_size_per_gpu); none: the "
            "micro-batch"
        ),
    )
    ref_logprob_max_tokens_per_gpu: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKENS_PER_GPU,
        description=(
            "token budget of the reference's log-prob pass (verl ref.log_prob_max_token_len_per_gpu); none: the old "
            "log-probs'"
        ),
    )
    critic_max_tokens_per_gpu: int | None = Field(
        default=None, ge=1, le=MAX_TOKENS_PER_GPU, description="token budget of the critic's update and values"
    )
    offload: tuple[str, ...] = Field(
        default=(), description=f"what stays on the host outside its role's phases: {', '.join(OFFLOADS)}"
    )
    entropy: Literal["off", "on", "checkpointed"] = Field(
        default="off",
        description=(
            "the entropy term in the actor's update (verl entropy_coeff != 0 or calculate_entropy; checkpointed: "
            "entropy_checkpointing); the old log-probs always compute it"
        ),
    )
    fused_kernels: bool | None = Field(
        default=None,
        description=(
            "the actor's and the reference's log-probs from verl's fused head (model.use_fused_kernels: 512 tokens of "
            "logits at a time), not the whole logits (default off)"
        ),
    )
    remove_padding: bool | None = Field(
        default=None,
        description=(
            "rows packed without padding (verl use_remove_padding, default on; OpenRLHF --ds.packing_samples, default off)"
        ),
    )

    @field_validator("offload")
    @classmethod
    def _offloads(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [o for o in v if o not in OFFLOADS]
        if bad:
            raise BadInput(f"--role-offload {bad[0]!r}: accepted are {', '.join(OFFLOADS)}", "offload")
        return tuple(sorted(set(v)))

    @field_validator("placement")
    @classmethod
    def _placement(cls, v: str) -> str:
        parse_placement(v)
        return v

    def resolved(self, framework: str) -> Roles:
        """The framework's defaults filled in and what it always offloads (its adapter's RoleEngine: defaults,
        offloads). ValueError for a framework that plans no roles."""
        engine = FRAMEWORKS[framework].role_engine
        if engine is None:
            raise ValueError(f"framework {framework!r} plans no roles (planner.frameworks.rl.RoleEngine)")
        fill: dict = {k: v for k, v in engine.defaults.items() if getattr(self, k) is None}
        forced = set(engine.offloads) - set(self.offload)
        if forced:
            fill["offload"] = tuple(sorted({*self.offload, *forced}))
        return self.model_copy(update=fill) if fill else self

    def groups(self) -> tuple[Group, ...]:
        return parse_placement(self.placement)

    def actor_gpus(self, world: int) -> int:
        """The GPUs the actor trains on, of the run's `world`: its own group's, or all of them when colocated (the
        data-parallel ranks of the global batch)."""
        if self.placement == "colocate":
            return world
        return next(g.gpus for g in self.groups() if "actor" in g.roles)

    @property
    def colocated(self) -> bool:
        """The rollout shares the actor's GPUs (verl's hybrid engine)."""
        return next(g for g in self.groups() if "actor" in g.roles).roles.count("rollout") == 1


def existing_roles(kind: str, roles: Roles) -> tuple[str, ...]:
    """The roles a run of `kind` has: a critic for ppo (GAE) alone; the reference when KL is used (the caller drops it
    when beta is 0); a reward model when one is named."""
    out = ["actor", "rollout", "ref"]
    if kind == "ppo":
        out.append("critic")
    if roles.reward_model:
        out.append("reward")
    return tuple(out)


def check_groups(kind: str, roles: Roles, beta: float, world: int) -> None:
    """The placement against the run's roles and GPUs (BadInput naming what is wrong)."""
    have = set(existing_roles(kind, roles)) - (set() if beta > 0 else {"ref"})
    groups = roles.groups()
    if roles.rollout_engine == "hf" and roles.placement != "colocate":
        raise BadInput(
            "--rollout-engine hf generates in the actor's own processes, every role beside it: --placement colocate",
            "placement",
        )
    if roles.placement == "colocate":
        if world % roles.rollout_tp:
            raise BadInput(f"--rollout-tp {roles.rollout_tp} does not divide the {world} GPUs", "rollout_tp")
        return
    placed = {r for g in groups for r in g.roles}
    extra, missing = placed - have, have - placed
    if missing:
        raise BadInput(f"--placement: role {min(missing)!r} of this {kind} run is in no group", "placement")
    if extra:
        raise BadInput(f"--placement: role {min(extra)!r} does not exist in this {kind} run", "placement")
    total = sum(g.gpus for g in groups)
    if total != world:
        raise BadInput(
            f"--placement gives {total} GPUs ({roles.placement}) but the run has {world}: the groups must add up",
            "placement",
        )
    for g in groups:
        if "rollout" in g.roles and g.gpus % roles.rollout_tp:
            raise BadInput(
                f"--rollout-tp {roles.rollout_tp} does not divide the rollout group's {g.gpus} GPUs", "rollout_tp"
            )
