"""The workload a plan trains: supervised steps (sft), DPO pairs or GRPO generations, with TRL's inputs.

GRPO takes TRL's `GRPOConfig` fields under TRL's names and meanings (trl/trainer/grpo_config.py, TRL 1.16):
the per-device batch and the global batch count completions; `steps_per_generation` defaults to the gradient
accumulation, so one generation batch (per_device x world x steps_per_generation completions) is sampled at once;
that batch must hold whole groups of `num_generations` completions (GRPOConfig.__post_init__); a reference model
exists when `beta` > 0 (GRPOTrainer.__init__: beta 0.0 means no reference model; PEFT disables the adapter
instead of keeping one). TRL 1.16 has no `max_prompt_length`: prompts are not cut, so `max_prompt_length` here is
the longest prompt the data holds (text and image tokens), what the plan is made for.

DPO takes `DPOConfig`'s `max_length` (chosen or rejected row, prompt included) and `precompute_ref_log_probs`
(trl/trainer/dpo_trainer.py: with it, or with a PEFT adapter, no reference model is kept); the global batch
counts pairs, and each micro-step runs chosen and rejected rows as one batch of 2 x micro rows. Padding-free (the
knob `batching` packed: TRL 0.14-0.28's `padding_free`, ms-swift's `--padding_free` / `--packing`) runs them as one
row of their 2 x micro x max_length tokens at most, position_ids restarting at each row (trl v0.28.0
dpo_trainer.py:1643-1650), through flash-attn's varlen kernel; under Ulysses sequence parallel (ms-swift 3.7+) each
rank holds 1/S of every row (planner.estimate.parallel.view). Which framework runs which: Runs.dpo_runs.

GKD (TRL 1.16's trl/experimental/gkd GKDTrainer, ms-swift 4.6.0's `swift rlhf --rlhf_type gkd`): rows of `max_length`
tokens scored against a frozen teacher (`teacher_model`; none: the student itself without grad, ms-swift's
self-distillation); with probability `lmbda` a step trains on the student's own completions of at most
`max_completion_length` tokens after the prompt (generated on the training GPU); `jsd_beta` is their `beta`, the
generalized JSD's interpolation (0: forward KL, 1: reverse KL), which decides the loss's temporaries
(planner.estimate.gkd).

KTO (TRL 1.16's trl/trainer/kto_trainer.py, LLaMA-Factory's `stage: kto`, ms-swift's `rlhf --rlhf_type kto`): DPO's
inputs (`max_length`, `precompute_ref_log_probs`), but one completion per row, labelled desirable or not (the
global batch counts rows, and a micro-step runs `micro` rows, not 2 x micro). Its KL term comes from a second batch of
mismatched pairs (each row's prompt with its neighbour's completion, kto_trainer.py:1141-1151): before the policy's
forward, the policy scores them without grad (`_compute_kl_logps`, kto_trainer.py:1337-1368: the kl-forward phase);
the reference scores both batches after it, one after the other (kto_trainer.py:1426-1436). TRL's KTOTrainer wants 2 or
more rows per device for the KL estimate (kto_trainer.py:844-847: a TRL rule, planner.frameworks.trl; LLaMA-Factory
and ms-swift skip that __init__). The desirable/undesirable weights scale the loss only. Padding-free (batching packed:
ms-swift 3.9+'s `--padding_free` / `--packing`, swift/template/base.py:1884-1893) runs the micro-batch's rows as one
row of their micro x max_length tokens at most, and the KL rows as another; no framework splits KTO's rows over ranks
(Runs.kto_runs says which runs what).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.config.roles import Roles
from planner.errors import BadInput

WORKLOADS: tuple[str, ...] = ("sft", "dpo", "grpo", "ppo", "rloo", "reinforce++", "gkd", "kto")
GENERATIONS: tuple[str, ...] = ("hf", "vllm-colocate", "vllm-server")
MAX_TOKENS = 1 << 20
GRPO_PROMPT_DEFAULT = 512


# the Workload fields every face takes as a flag of its own (--num-generations ...; DPO's row length is --max-length)
WORKLOAD_FLAGS = (
    "num_generations",
    "max_prompt_length",
    "max_completion_length",
    "beta",
    "generation",
    "vllm_gpu_memory_utilization",
    "steps_per_generation",
    "num_iterations",
    "precompute_ref_log_probs",
    "logprobs",
    "teacher_model",
    "teacher_sharding",
    "lmbda",
    "jsd_beta",
    "chord_sft_batch",
)


class Workload(BaseModel):
    """What one optimizer step trains on (every face: `--workload` and the flags below, the API's `workload`)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    kind: Literal["sft", "dpo", "grpo", "ppo", "rloo", "reinforce++", "gkd", "kto"] = Field(
        default="sft",
        description=(
            "sft, TRL's dpo (global batch in pairs) or grpo (in completions), or under verl or OpenRLHF ppo, grpo, rloo, "
            "reinforce++ by their roles; gkd: distillation from a teacher (TRL's GKDTrainer, ms-swift's rlhf gkd); kto: "
            "TRL's KTOTrainer (one completion a row, desirable or not; global batch in rows)"
        ),
    )
    # GRPO (GRPOConfig); TRL's defaults
    num_generations: int = Field(
        default=8, ge=1, le=1 << 12, description="completions sampled per prompt (TRL's GRPO: 2 or more)"
    )
    max_prompt_length: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKENS,
        description=(
            f"GRPO: longest prompt in tokens, image tokens included (TRL 1.16 does not cut prompts; default "
            f"{GRPO_PROMPT_DEFAULT}); DPO: the prompt part of max_length, when known (default: a row may be all "
            "completion)"
        ),
    )
    max_completion_length: int = Field(
        default=512, ge=1, le=MAX_TOKENS, description="GRPO: longest completion in tokens"
    )
    beta: float = Field(default=0.0, ge=0, le=1e4, description="KL coefficient; > 0 keeps a reference model")
    generation: Literal["hf", "vllm-colocate", "vllm-server"] = Field(
        default="hf",
        description="GRPO: hf (generate on the training GPU), vllm-colocate or vllm-server",
    )
    vllm_gpu_memory_utilization: float = Field(
        default=0.3, gt=0, le=1, description="GRPO with vllm-colocate: vLLM's share of the card"
    )
    steps_per_generation: int | None = Field(
        default=None,
        ge=1,
        le=1 << 12,
        description=("micro-steps one generation batch feeds; default: the gradient accumulation"),
    )
    num_iterations: int = Field(
        default=1, ge=1, le=1 << 10, description="GRPO: optimisation passes per generation batch"
    )
    logprobs: Literal["fused", "full"] = Field(
        default="fused",
        description=(
            "fused: TRL 1.16's log-prob head (no logits kept); full: the whole (rows, tokens, vocabulary) logits, then "
            "each row's log_softmax, as TRL before its fused head and trainers built on it (VLM-R1's) compute them"
        ),
    )
    # DPO (DPOConfig)
    max_length: int = Field(
        default=1024,
        ge=2,
        le=MAX_TOKENS,
        description="DPO: longest row in tokens (chosen or rejected, prompt included)",
    )
    precompute_ref_log_probs: bool = Field(
        default=False, description="DPO: reference log-probs computed before training (no reference model kept)"
    )
    # GKD (GKDConfig; ms-swift's rlhf_args.py)
    teacher_model: str | None = Field(
        default=None,
        max_length=300,
        description=(
            "gkd, or grpo where the framework scores with a teacher (ms-swift 4's OPD-RL): the teacher (catalog name "
            "or config.json); none: the student itself, without grad"
        ),
    )
    teacher_sharding: Literal["as-student", "whole", "zero3", "zero3-offload"] = Field(
        default="as-student",
        description=(
            "the teacher's weights on each GPU: as the student's are sharded, whole, ZeRO-3 shards, or on the host "
            "(ZeRO-3 parameter offload) (ms-swift's --teacher_deepspeed)"
        ),
    )
    lmbda: float = Field(
        default=0.5, ge=0, le=1, description="gkd: share of steps on the student's own completions (0: none generated)"
    )
    jsd_beta: float = Field(
        default=0.5, ge=0, le=1, description="gkd: the generalized JSD's beta (0: forward KL, 1: reverse KL)"
    )
    # CHORD (ms-swift's GRPO with --chord_sft_per_device_train_batch_size, Framework.grpo_chord)
    chord_sft_batch: int = Field(
        default=0,
        ge=0,
        le=1 << 12,
        description=(
            "grpo: CHORD's expert SFT rows a device takes each micro-step (ms-swift's "
            "--chord_sft_per_device_train_batch_size), whose loss joins GRPO's before one backward; 0: none"
        ),
    )
    # verl's / OpenRLHF's roles (planner.config.roles): ppo, rloo, reinforce++, and grpo under --framework verl/openrlhf
    roles: Roles = Field(
        default_factory=Roles, description="verl / OpenRLHF: the roles, their GPUs, the rollout engine"
    )

    @model_validator(mode="after")
    def _rules(self) -> Workload:
        given = {f for f, info in type(self).model_fields.items() if getattr(self, f) != info.default}
        if self.kind in ("dpo", "sft") and self.num_generations < 2:  # GRPO's: the framework decides (spec_rules)
            raise BadInput(
                f"--num-generations {self.num_generations}: GRPO compares 2 or more completions of a prompt",
                "num_generations",
            )
        if self.preference and self.max_prompt_length is not None and self.max_prompt_length >= self.max_length:
            raise BadInput(
                f"--max-prompt-length {self.max_prompt_length} leaves no completion in --max-length {self.max_length}",
                "max_prompt_length",
            )
        if "vllm_gpu_memory_utilization" in given and self.generation != "vllm-colocate":
            raise BadInput(
                "--vllm-gpu-memory-utilization is the colocated vLLM's share of the card: it needs "
                "--generation vllm-colocate",
                "vllm_gpu_memory_utilization",
            )
        if self.roles.move_model_batches is not None and self.generation == "hf":
            raise BadInput(
                "--move-model-batches splits the weight sync to vLLM: it needs --generation vllm-colocate or vllm-server",
                "move_model_batches",
            )
        if self.kind == "sft" and "logprobs" in given:
            raise BadInput(
                "--logprobs is how DPO / GRPO score tokens: it needs --workload dpo or grpo (or kto)", "logprobs"
            )
        grpo_only = {
            "num_generations",
            "max_completion_length",
            "beta",
            "generation",
            "steps_per_generation",
            "num_iterations",
            "chord_sft_batch",
        } & given
        if self.kind == "gkd":  # the on-policy completions' length and engine (Framework.gkd_vllm)
            grpo_only -= {"max_completion_length", "generation", "steps_per_generation"}
        if self.kind not in ("grpo", "ppo", "rloo", "reinforce++") and grpo_only:
            field = min(grpo_only)
            raise BadInput(f"--{field.replace('_', '-')} is a GRPO input: it needs --workload grpo", field)
        if self.kind in ("ppo", "rloo", "reinforce++"):
            trl_only = {"generation", "vllm_gpu_memory_utilization", "logprobs"} & given
            if trl_only:
                field = min(trl_only)
                raise BadInput(
                    f"--{field.replace('_', '-')} is TRL's: a {self.kind} run's rollout and log-probs are set by its roles "
                    "(--rollout-engine, --rollout-memory, --placement)",
                    field,
                )
        elif self.roles != Roles() and self.kind != "grpo" and not self._gkd_engine_roles():
            raise BadInput("--placement and the role flags are for RL runs (ppo, grpo, rloo, reinforce++)", "roles")
        dpo_only = {"max_length", "precompute_ref_log_probs"} & given
        if self.kind == "gkd":
            dpo_only -= {"max_length"}
        self._gkd_rules(given)
        if not self.preference and dpo_only:
            field = min(dpo_only)
            raise BadInput(f"--{field.replace('_', '-')} is a DPO input: it needs --workload dpo or kto", field)
        return self

    def _gkd_engine_roles(self) -> bool:
        """GKD's vLLM engine settings alone (its sleep level, offload, tensor parallel and sync groups: GRPO's)."""
        engine = {"sleep_level", "offload", "rollout_tp", "move_model_batches"}
        rest = {f: v for f, v in self.roles.model_dump().items() if f not in engine}
        return self.kind == "gkd" and self.generation != "hf" and rest == Roles().model_dump(exclude=engine)

    def _gkd_rules(self, given: set[str]) -> None:
        gkd_only = {"lmbda", "jsd_beta"} & given | ({"teacher_model"} & given if self.kind != "grpo" else set())
        if "teacher_sharding" in given and not self.teacher_model:
            raise BadInput(
                "--teacher-sharding places a teacher's weights: it needs --teacher-model", "teacher_sharding"
            )
        if self.kind != "gkd" and gkd_only:
            field = min(gkd_only)
            raise BadInput(f"--{field.replace('_', '-')} is a GKD input: it needs --workload gkd", field)
        if (
            self.kind == "gkd"
            and self.lmbda > 0
            and self.prompt_tokens() + self.max_completion_length > self.max_length
        ):
            raise BadInput(
                f"--max-completion-length {self.max_completion_length} after a prompt of {self.prompt_tokens()} tokens "
                f"exceeds --max-length {self.max_length}: GKD's rows hold the prompt and the student's completion",
                "max_completion_length",
            )

    @property
    def preference(self) -> bool:
        """Scored rows of `max_length` against a reference (DPO's pairs, KTO's labelled rows)."""
        return self.kind in ("dpo", "kto")

    @property
    def rl(self) -> bool:
        return self.kind != "sft"

    @property
    def generates(self) -> bool:
        """A run that samples completions for every step (GRPO, and the role runs; GKD samples a share: lmbda)."""
        return self.kind not in ("sft", "dpo", "gkd", "kto")

    @property
    def role_run(self) -> bool:
        """Planned by roles (planner.estimate.roles): ppo, rloo, reinforce++ (grpo too under verl / OpenRLHF: the
        framework decides, planner.config.spec.Knobs.role_run)."""
        return self.kind in ("ppo", "rloo", "reinforce++")

    def seq_len(self) -> int:
        """Tokens of the longest row a micro-step trains on."""
        return self.prompt_tokens() + self.max_completion_length if self.generates else self.max_length

    def prompt_tokens(self) -> int:
        """GRPO: the prompt; DPO: the prompt part of a row when given (0 otherwise: all of it may be scored)."""
        if self.generates:
            return self.max_prompt_length or GRPO_PROMPT_DEFAULT
        if self.kind == "gkd":  # the prompt the student completes; default: the row less a whole completion
            return self.max_prompt_length or max(1, self.max_length - self.max_completion_length)
        return self.max_prompt_length or 0

    def scored_tokens(self) -> int:
        """Tokens per row whose log-probability TRL computes (the completion; DPO: the row less its prompt)."""
        return self.seq_len() - self.prompt_tokens()

    def rows(self, micro_batch: int) -> int:
        """Rows in one micro-step's forward: DPO runs chosen and rejected together."""
        return 2 * micro_batch if self.kind == "dpo" else micro_batch

    def steps_per_gen(self, grad_accum: int) -> int:
        """Micro-steps one generation batch feeds: steps_per_generation, or the optimizer steps a generation feeds
        (an RL run's roles.mini_batches; TRL: one) of grad_accum micro-steps each."""
        return self.steps_per_generation or grad_accum * self.roles.mini_batches

    def generation_batch(self, micro_batch: int, grad_accum: int, world: int) -> int:
        """GRPOConfig.generation_batch_size: completions sampled at once, all ranks."""
        return micro_batch * world * self.steps_per_gen(grad_accum)

    def split_error(self, micro_batch: int, grad_accum: int, world: int) -> str | None:
        """TRL's rule between the split and num_generations (GRPOConfig.__post_init__), or None."""
        if not self.generates:
            return None
        gen = self.generation_batch(micro_batch, grad_accum, world)
        if gen % self.num_generations:
            return (
                f"the generation batch ({micro_batch} per device x {world} GPUs x {self.steps_per_gen(grad_accum)} "
                f"steps per generation = {gen} completions) is not divisible by --num-generations "
                f"{self.num_generations}: TRL samples whole groups"
            )
        return None

    def has_reference(self, lora: bool) -> bool:
        """A reference model is kept on the device (no PEFT adapter to disable, needed, not precomputed)."""
        if lora or self.kind in ("sft", "gkd"):  # GKD's frozen model is its teacher (planner.estimate.gkd)
            return False
        return self.beta > 0 if self.generates else not self.precompute_ref_log_probs

    def computes_old_logps(self, grad_accum: int) -> bool:
        """GRPOTrainer._generate_and_score_completions: old log-probs are computed when generation is not aligned with
        the optimizer step (grad_accum not a multiple of steps_per_generation x num_iterations) or under vLLM
        (importance-sampling correction, on by default)."""
        every = self.steps_per_gen(grad_accum) * self.num_iterations
        if self.role_run:
            return True  # verl's compute_log_prob and OpenRLHF's make_experience always recompute them
        return self.kind == "grpo" and (grad_accum % every != 0 or self.generation != "hf")

    def summary(self, roles: bool = False) -> str:
        """One line of what the run trains; `roles`: planned by its roles (a grpo run of verl or OpenRLHF)."""
        if self.role_run or roles:
            return (
                f"{self.kind.upper()}: {self.num_generations} sample{'s' if self.num_generations > 1 else ''} of <= "
                f"{self.max_completion_length} tokens after "
                f"prompts of <= {self.prompt_tokens()}, {self.roles.rollout_engine} rollout, {self.roles.placement}"
            )
        if self.kind == "grpo":
            ref = f", beta {self.beta:g}" if self.beta else ""
            ref += f", scored by teacher {self.teacher_model}" if self.teacher_model else ""
            rows = f"{self.chord_sft_batch} SFT row{'s' if self.chord_sft_batch > 1 else ''}"
            ref += f", CHORD's {rows} a micro-step" if self.chord_sft_batch else ""
            return (
                f"GRPO: {self.num_generations} generation{'s' if self.num_generations > 1 else ''} of <= "
                f"{self.max_completion_length} tokens after prompts "
                f"of <= {self.prompt_tokens()}, {self.generation} generation{ref}"
            )
        if self.kind == "dpo":
            return f"DPO: chosen/rejected pairs of <= {self.max_length} tokens"
        if self.kind == "kto":
            return (
                f"KTO: desirable/undesirable rows of <= {self.max_length} tokens, with a KL batch of mismatched pairs"
            )
        if self.kind == "gkd":
            return (
                f"GKD: rows of <= {self.max_length} tokens against {self.teacher_model or 'the student itself'}, "
                f"lmbda {self.lmbda:g} (completions of <= {self.max_completion_length}), JSD beta {self.jsd_beta:g}"
            )
        return "SFT"


def check_rl_knobs(w: Workload, knobs: dict) -> None:
    """What TRL's trainers run: HF Trainer's recipe (checkpointing off/full, TRL's own log-prob head, padded rows)."""
    if not w.rl:
        return
    rules = {
        "checkpointing": ("off", "full"),
        "loss": ("standard",),
        # DPO's and KTO's padding-free rows (above; which framework runs them: Runs.dpo_runs, Runs.kto_runs)
        "batching": ("padded", "packed") if w.kind in ("dpo", "kto") else ("padded",),
        "optimizer_in_backward": (False,),
    }
    for field, allowed in rules.items():
        if knobs.get(field, allowed[0]) not in allowed:
            flag = "--" + field.replace("_", "-")
            who = "verl's and OpenRLHF's trainers run " if w.role_run else "TRL's trainers run "
            why = "their own log-prob heads" if w.role_run else "TRL computes log-probs with its own chunked head"
            raise BadInput(
                f"{flag} {knobs[field]} with --workload {w.kind}: {who}{' or '.join(map(str, allowed))} ({why})",
                field,
            )
