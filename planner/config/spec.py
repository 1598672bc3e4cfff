"""Typed records that flow through the planner: the knobs (Knobs, its rules between knobs in
planner.config.spec_rules) and the plan (a batch split, its knobs, memory and launch material); the hardware and goal
(planner.config.hwspec) and the memory records (planner.config.memspec) are re-exported here, where every face imports
them.

Field names are the CLI/JSON contract (README: JSON fields); byte counts are integers in bytes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from planner.config import spec_rules
from planner.config.hwspec import (  # noqa: F401 - re-exported where faces import them
    DEFAULT_HOST_RAM_GIB,
    DEFAULT_INTER_NODE_GBPS,
    GPU,
    MIB,
    MIN_INTER_NODE_GBPS,
    Goal,
    Hardware,
)
from planner.config.knobfields import (  # noqa: F401 - the knob types and bounds, re-exported where faces import them
    KNOBS,
    LORA_TARGETS_PATTERN,
    MAX_EXPERT_PARALLEL,
    MAX_LORA_RANK,
    Attention,
    Batching,
    Checkpointing,
    Fsdp,
    KnobFields,
    Loss,
    Offload,
    Optimizer,
    Precision,
    Quant,
    choices,
)
from planner.config.memspec import Launch, MemoryBreakdown, OverheadTerm, TokenBatches  # noqa: F401 - re-exported
from planner.config.spec_rules import (  # noqa: F401 - re-exported where faces import them
    EXPERT_PARALLEL_NEEDS_FSDP,
    PROBE_BACKENDS,
    saves_full_weights,
)
from planner.config.stepspec import StepBreakdown
from planner.config.tasks import task_text
from planner.errors import BadInput

Evidence = Literal["analytic", "simulated", "measured"]

DEFAULT_MARGIN = 0.05  # keep 5% of the card free for what no model sees (other processes, drift)
LOSSES: tuple[str, ...] = choices("loss")
# The recipe knobs (planner/estimate/recipe_terms.py owns their terms): Knobs fields a Plan carries under the same names
LORA_FIELDS: tuple[str, ...] = (
    "quant",
    "lora_targets",
    "lora_train_embeddings",
    "lora_ends",
    "lora_variant",
    "lora_dropout",
    "lora_vision",
    "lora_tower_full",
)
# Mixture-of-experts knobs (planner/estimate/moe.py): experts split over N ranks, the busiest expert's share of the tokens
MOE_FIELDS: tuple[str, ...] = ("expert_parallel", "expert_imbalance")
RECIPE_FIELDS: tuple[str, ...] = (
    "loss",
    "attention",
    "batching",
    "optimizer_in_backward",
    *LORA_FIELDS,
    "workload",
    *MOE_FIELDS,
)
OFFLOADS: tuple[str, ...] = choices("offload")
OPTIMIZERS: tuple[str, ...] = choices("optimizer")
FSDP_MODES: tuple[str, ...] = choices("fsdp")

OPTIMIZER_IN_BACKWARD_SPLIT = (
    "--optimizer-in-backward frees each gradient as it steps: it needs --grad-accum 1 on "
    "one GPU (no gradient is kept to accumulate or all-reduce)"
)
GIB = 2**30

# Bounds every face enforces (CLI, API, plan files, the trainer), through the request models of
# planner/advise.py and the fields below: past them a search hangs or a number means nothing.
MAX_GLOBAL_BATCH = 1 << 24
MAX_MICRO_BATCH = 1 << 16
MAX_GRAD_ACCUM = 1 << 16
MAX_SEQ_LEN = 1 << 21
MAX_GPUS_PER_NODE = 64
MAX_NODES = 4096


def bad_input(e: ValidationError) -> BadInput:
    """A pydantic error as one line naming the field (as its CLI flag) and the value."""
    err = e.errors()[0]
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, BadInput):
        return cause
    loc = [str(x) for x in err["loc"] if not isinstance(x, int)]
    field = loc[0] if loc else None
    msg = err["msg"].removeprefix("Value error, ")
    if field is None:
        return BadInput(msg)
    shown = err.get("input")
    value = "" if shown is None or isinstance(shown, dict) else f" {shown!r}"
    return BadInput(f"--{field.replace('_', '-')}{value}: {msg}", field)


class Knobs(KnobFields):
    """What a plan sets, apart from the batch split: the one configuration object of every face.

    Its fields are declared in planner.config.knobfields (KnobFields); its validator owns every rule between knobs alone
    (`_combination_rules`, planner.config.spec_rules; what the hardware or the model must allow is
    planner.config.layout's). Build it with `Knobs.make(...)` to get a BadInput naming the field instead of a
    ValidationError."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    @model_validator(mode="after")
    def _combination_rules(self) -> Knobs:
        spec_rules.combination_rules(self)
        return self

    @classmethod
    def make(cls, **fields) -> Knobs:
        """Validated knobs; a broken rule or value is a BadInput naming its field."""
        try:
            return cls(**fields)
        except ValidationError as e:
            raise bad_input(e) from None

    def with_valid_values(self, **fields) -> Knobs:
        """These knobs with `fields` changed to values that each passed their field's validation already (a Space's:
        planner.search.search families): a copy with the combination rules run, the per-field validation not run again
        (it was half of a search's cost). A broken rule is a BadInput naming its field, as with make."""
        k = self.model_copy(update=fields)
        k._combination_rules()
        return k

    @classmethod
    def allowed(cls, **fields) -> bool:
        try:
            cls(**fields)
        except ValidationError:
            return False
        return True

    def for_probe(self, backend: str) -> Knobs:
        """The knobs a probe of `backend` runs and is stored under (one key for every face). The sim
        traces DeepSpeed stages and offload as one trace without DeepSpeed's optimizer; cpu and cuda
        probes run one process, so zero 0 only."""
        spec_rules.probe_rules(self, backend)
        if self.fsdp != "off":  # one rank's trace: FSDP2 runs the module in the compute dtype
            if backend != "sim":
                raise BadInput(f"--backend {backend} runs one process; for FSDP plans use --backend sim", "fsdp")
            # bf16's policy casts every parameter to bf16, PEFT's fp32 adapters too (probes.sim.as_fsdp_casts): its
            # own key, one for every sharding; fp32 and bf16-pure run without a policy, as one process does
            return Knobs(
                precision=self.precision,
                fsdp="full" if self.precision == "bf16" else "off",
                checkpointing=self.checkpointing,
                optimizer=self.optimizer,
                lora_rank=self.lora_rank,
                **self.recipe(),
            )
        if backend != "sim":
            if self.zero_stage:
                raise BadInput(
                    f"--backend {backend} runs zero 0 (one process); for ZeRO stages use --backend sim", "zero"
                )
            return self
        if self.zero_stage == 0:
            return self
        return Knobs(
            precision=self.precision,
            checkpointing=self.checkpointing,
            zero_stage=1,
            offload="none",
            optimizer="adamw",
            lora_rank=self.lora_rank,
            **self.recipe(),
        )

    def recipe(self) -> dict:
        """The recipe knobs (RECIPE_FIELDS) as keyword arguments."""
        return {f: getattr(self, f) for f in RECIPE_FIELDS}


class _Split(BaseModel):
    model_config = ConfigDict(defer_build=True)

    micro_batch: int
    grad_accum: int
    world_size: int
    global_batch: int


class Plan(KnobFields, _Split):
    """A batch split, its knobs (planner.config.knobfields, as Knobs has them), its memory, speed and launch material."""

    model_config = ConfigDict(defer_build=True, extra="ignore")

    memory: MemoryBreakdown
    fits: bool
    reason: str | None = None
    step_time_s: float
    tokens_per_s: float
    speed: StepBreakdown | None = None  # step_time_s by kind, and what each micro-step pays again
    evidence: Evidence = "analytic"
    launch: Launch | None = None
    token_batches: TokenBatches | None = Field(
        default=None,
        description=(
            "with a token budget: micro_batch x grad_accum is the global batch's fixed split (what HF runs); the "
            "bundled trainer cuts the same samples by tokens instead, and memory is planned for these shapes"
        ),
    )

    @field_validator("fsdp", mode="before")
    @classmethod
    def _fsdp_off(cls, v):
        return "off" if v is None else v  # plan files written before fsdp had one representation ("off")

    @property
    def data_parallel(self) -> int:
        """Ranks that see different samples: the world size over tensor x sequence x context parallel (an RL run's
        actor on a group of its own: that group's, Knobs.data_parallel)."""
        return self.data_parallel_of(self.world_size)

    @property
    def split_text(self) -> str:
        """`micro 2 x accum 4 x world 8`, or where ranks share samples `... x data-parallel 2 of 8 GPUs`: the factors
        of the global batch."""
        ranks = f"world {self.world_size}"
        if self.data_parallel != self.world_size:
            ranks = f"data-parallel {self.data_parallel} of {self.world_size} GPUs"
        return f"micro {self.micro_batch} x accum {self.grad_accum} x {ranks}"

    @model_validator(mode="after")
    def _exact_global_batch(self) -> Plan:
        share = self.tensor_parallel * self.sequence_parallel * self.context_parallel * self.device_map
        if self.world_size % share:
            raise ValueError(f"tensor x sequence x context parallel x device_map ({share}) must divide world_size")
        if self.micro_batch * self.grad_accum * self.data_parallel != self.global_batch:
            raise ValueError("micro_batch x grad_accum x data-parallel size must equal global_batch")
        if self.optimizer_in_backward and (self.grad_accum > 1 or self.world_size > 1):
            raise ValueError(OPTIMIZER_IN_BACKWARD_SPLIT)
        return self

    @property
    def sharding(self) -> str:
        """DDP, ZeRO-N or FSDP <mode>: what shards this plan's states (tables and headlines)."""
        if self.dataparallel:
            return "DataParallel"
        return f"FSDP {self.fsdp}" if self.fsdp != "off" else f"ZeRO-{self.zero_stage}" if self.zero_stage else "DDP"

    @property
    def recipe(self) -> str:
        """The recipe knobs away from their defaults, for tables ("-" when none)."""
        parts = [
            task_text(self) if self.task != "causal-lm" else "",
            f"{self.loss} loss" if self.loss != "standard" else "",
            self.attention if self.attention != "sdpa" else "",
            "packed" if self.batching == "packed" else "",
            "optimizer in backward" if self.optimizer_in_backward else "",
            f"{self.quant} base" if self.quant != "none" else "",
            "fp32 base" if self.lora_base_fp32 else "",
            f"{ {'oft': 'OFT', 'boft': 'BOFT'}.get(self.lora_variant, 'LoRA') } on {self.lora_targets}"
            if self.lora_targets != "all-linear"
            else "",
            "trained embeddings" if self.lora_train_embeddings else "",
            "whole-model load" if self.fsdp_load == "whole" else "",
            f"PEFT {self.peft_release}" if self.peft_release != "line" and self.lora_rank else "",
            {
                "embed": "LoRA on the embedding",
                "head": "LoRA on the head",
                "both": "LoRA on the embedding and head",
            }.get(self.lora_ends, ""),
            {
                "dora": "DoRA",
                "oft": f"OFT block {self.lora_rank}",
                "boft": f"BOFT block {self.lora_rank}",
                "adalora": "AdaLoRA",
                "vera": "VeRA",
                "adapter": f"adapter {self.lora_rank}",
            }.get(self.lora_variant, ""),
            f"LoRA dropout {self.lora_dropout:g}" if self.lora_dropout else "",
            "LoRA on the tower" if self.lora_vision else "",
            "tower trained in full" if self.lora_tower_full else "",
            "tower not checkpointed" if self.vit_checkpointing == "off" else "",
            self.workload.kind.upper() if self.workload.rl else "",
            f"steps_per_generation {self.workload.steps_per_generation}" if self.workload.steps_per_generation else "",
            f"expert parallel {self.expert_parallel}" if self.expert_parallel > 1 else "",
            f"frozen {self.frozen}" if self.frozen != "none" else "",
            f"TP {self.tensor_parallel}" if self.tensor_parallel > 1 else "",
            f"device_map {self.device_map}" if self.device_map > 1 else "",
            f"Ulysses SP {self.sequence_parallel}" if self.sequence_parallel > 1 else "",
            f"CP {self.context_parallel} {self.cp_attention}" if self.context_parallel > 1 else "",
        ]
        return ", ".join(p for p in parts if p) or "-"

    @property
    def knobs(self) -> Knobs:
        return Knobs(**{f: getattr(self, f) for f in KNOBS})
