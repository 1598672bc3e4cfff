"""Typed records that flow through the planner: knobs, hardware, goal, memory breakdown, plan.

Field names are the CLI/JSON contract (README: JSON fields); byte counts are integers in bytes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from planner.config import zerobuckets
from planner.config.knobfields import (  # noqa: F401 - the knob types and bounds, re-exported where faces import them
    KNOBS,
    LORA_TARGETS_PATTERN,
    MAX_EXPERT_PARALLEL,
    MAX_LORA_RANK,
    ROLE_FRAMEWORKS,
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
from planner.config.stepspec import StepBreakdown
from planner.config.tasks import check_task_knobs, task_text
from planner.config.workload import check_rl_knobs
from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS, adapter

Evidence = Literal["analytic", "simulated", "measured"]

# Below this the step-time model's bandwidth underflows to zero (found by schemathesis: 5e-324 Gb/s).
MIN_INTER_NODE_GBPS = 0.001
DEFAULT_INTER_NODE_GBPS = 200.0  # one HDR InfiniBand HCA per node
DEFAULT_HOST_RAM_GIB = 512.0
DEFAULT_MARGIN = 0.05  # keep 5% of the card free for what no model sees (other processes, drift)
PRECISIONS: tuple[str, ...] = choices("precision")
CHECKPOINTING: tuple[str, ...] = choices("checkpointing")
LOSSES: tuple[str, ...] = choices("loss")
ATTENTIONS: tuple[str, ...] = choices("attention")
BATCHINGS: tuple[str, ...] = choices("batching")
# The recipe knobs (planner/estimate/recipe_terms.py owns their terms): Knobs fields a Plan carries under the same names
LORA_FIELDS: tuple[str, ...] = (
    "quant",
    "lora_targets",
    "lora_train_embeddings",
    "lora_variant",
    "lora_dropout",
    "lora_vision",
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
EXPERT_PARALLEL_NEEDS_FSDP = (
    "--expert-parallel splits the experts with transformers' own FSDP2 + expert parallelism "
    "(DistributedConfig ep_size, torchtitan's layout): it needs --fsdp full, grad-op or "
    "hybrid (DeepSpeed's expert parallelism needs its own MoE layers, not transformers')"
)
ZERO_STAGES: tuple[int, ...] = choices("zero_stage")
OFFLOADS: tuple[str, ...] = choices("offload")
OPTIMIZERS: tuple[str, ...] = choices("optimizer")
QUANTS: tuple[str, ...] = choices("quant")
FSDP_MODES: tuple[str, ...] = choices("fsdp")

OPTIMIZER_IN_BACKWARD_SPLIT = (
    "--optimizer-in-backward frees each gradient as it steps: it needs --grad-accum 1 on "
    "one GPU (no gradient is kept to accumulate or all-reduce)"
)
GIB = 2**30
MIB = 2**20

# Bounds every face enforces (CLI, API, plan files, the trainer), through the request models of
# planner/advise.py and the fields below: past them a search hangs or a number means nothing.
MAX_GLOBAL_BATCH = 1 << 24
MAX_MICRO_BATCH = 1 << 16
MAX_GRAD_ACCUM = 1 << 16
MAX_SEQ_LEN = 1 << 21
MAX_GPUS_PER_NODE = 64
MAX_NODES = 4096
PROBE_BACKENDS: tuple[str, ...] = ("sim", "cpu", "cuda")


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class GPU(_Frozen):
    """One catalog GPU kind; every figure carries its source in `sources`."""

    name: str
    aliases: tuple[str, ...] = ()
    memory_mib: int = Field(gt=0, description="device memory as the driver reports it (MiB)")
    bf16_tflops: float = Field(ge=0, description="dense bf16 tensor TFLOP/s; 0 = no bf16")
    fp16_tflops: float = Field(gt=0, description="dense fp16 tensor TFLOP/s (fp32 accumulate)")
    fp32_tflops: float = Field(gt=0, description="fp32 (non-tensor) TFLOP/s")
    memory_bandwidth_gbs: float = Field(gt=0, description="HBM/GDDR bandwidth, GB/s")
    link: str = Field(description="intra-node interconnect")
    link_gbs: float = Field(gt=0, description="intra-node bandwidth per direction per GPU, GB/s")
    pcie_gbs: float = Field(gt=0, description="host link per direction, GB/s")
    compute_capability: str = Field(pattern=r"^\d{1,2}\.\d$", description="CUDA compute capability, e.g. 8.9")
    sources: dict[str, str]

    @property
    def capacity_bytes(self) -> int:
        return self.memory_mib * MIB

    @property
    def nvlink(self) -> bool:
        """GPUs joined by NVLink (SXM boards, bridged pairs), not by PCIe alone: NCCL runs more channels over it."""
        return self.link.startswith("NVLink")

    @property
    def flash_attention_2(self) -> bool:
        """flash-attn 2 runs on compute capability 8.0 and newer: its README lists Ampere, Ada and Hopper and sends
        Turing (T4, 7.5) to FlashAttention 1.x; Volta (7.0) has neither. Blackwell builds (sm_100, sm_120) are in
        its FLASH_ATTN_CUDA_ARCHS."""
        major, minor = (int(x) for x in self.compute_capability.split("."))
        return (major, minor) >= (8, 0)

    def knob_error(self, precision: str, attention: str) -> BadInput | None:
        """What this card cannot run, in one line naming the flag: bf16 without bf16 units (V100, T4), flash-attn 2
        below compute capability 8.0."""
        if precision.startswith("bf16") and self.bf16_tflops == 0:
            return BadInput(f"--precision {precision}: {self.name} has no bf16 support; use fp16 or fp32", "precision")
        if attention == "flash" and not self.flash_attention_2:
            return BadInput(
                f"--attention flash: {self.name} (compute capability {self.compute_capability}) cannot run "
                "FlashAttention 2, which needs 8.0 or newer; use --attention sdpa",
                "attention",
            )
        return None


class Hardware(_Frozen):
    gpu: GPU
    gpus_per_node: int = Field(ge=1)
    nodes: int = Field(ge=1)
    inter_node_gbps: float = Field(ge=MIN_INTER_NODE_GBPS, description="network per node, Gb/s")
    host_ram_gib: float = Field(gt=0, description="host RAM per node available to training, GiB")

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes


class Goal(_Frozen):
    global_batch: int = Field(ge=1)
    seq_len: int = Field(ge=1)
    image_tokens: int = Field(ge=0, default=0, description="LLM-side image tokens per sample, part of seq_len")
    tower_tokens: int = Field(
        ge=0,
        default=0,
        description="image tokens a sample's images make before its text is cut at seq_len: the vision tower and "
        "projector run on all of them (0: image_tokens)",
    )
    margin: float = Field(ge=0, lt=1, default=0.05)

    @model_validator(mode="after")
    def _images_within_sequence(self) -> Goal:
        if self.image_tokens > self.seq_len:
            raise ValueError(f"image_tokens {self.image_tokens} exceeds seq_len {self.seq_len}")
        if self.tower_tokens and self.tower_tokens < self.image_tokens:
            raise ValueError(f"tower_tokens {self.tower_tokens} is under image_tokens {self.image_tokens}")
        return self

    def shorter(self, seq_len: int) -> Goal:
        """The goal for rows of `seq_len` tokens (a search for the longest that fits): rows that short hold at most
        that many image tokens; a cut the goal already has (tower_tokens) stays."""
        return self.model_copy(update={"seq_len": seq_len, "image_tokens": min(self.image_tokens, seq_len)})


def saves_full_weights(k: KnobFields) -> bool:
    """Whether a checkpoint save gathers the full weights of a ZeRO-3 or FSDP run; "auto" is what memplan exports,
    ZeRO-3 gathers and FSDP saves shards (Knobs resolves it, a model_copy may not)."""
    return k.save_weights == "full" or (k.save_weights == "auto" and k.fsdp == "off")


class Knobs(KnobFields):
    """What a plan sets, apart from the batch split: the one configuration object of every face.

    Its fields are declared in planner.config.knobfields (KnobFields); its validator owns every rule between knobs alone
    (`_combination_rules`; what the hardware or the model must allow is planner.config.layout's). Build it with
    `Knobs.make(...)` to get a BadInput naming the field instead of a ValidationError."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    @model_validator(mode="after")
    def _combination_rules(self) -> Knobs:
        if self.release:  # the release line's name ("" for the newest); BadInput naming what is accepted
            object.__setattr__(self, "release", FRAMEWORKS[self.framework].line(self.release))
        refused = adapter(self.framework, self.release).cannot(
            self.__dict__
        )  # the field values, read only (dict(self) copies)
        if refused:
            raise BadInput(refused[1], refused[0])
        self._lora_rules()
        if self.save_weights == "auto" and (self.zero_stage == 3 or self.fsdp != "off"):  # what memplan exports
            object.__setattr__(self, "save_weights", "full" if saves_full_weights(self) else "sharded")
        if self.eval_logits_steps and not self.eval_batch:
            raise BadInput(
                f"--eval-logits-steps {self.eval_logits_steps} needs a run that evaluates: give --eval-batch N",
                "eval_logits_steps",
            )
        if self.expert_parallel > 1 and self.fsdp == "off":
            raise BadInput(EXPERT_PARALLEL_NEEDS_FSDP, "expert_parallel")
        if self.workload.role_run and self.framework not in ROLE_FRAMEWORKS:
            raise BadInput(
                f"--workload {self.workload.kind} is planned by its roles (actor, critic, reference, reward model and "
                f"rollout) as a framework that runs it does: give --framework {' or '.join(ROLE_FRAMEWORKS)}",
                "workload",
            )
        if self.workload.roles.move_model_batches is not None and not FRAMEWORKS[self.framework].sync_groups:
            raise BadInput(
                "--move-model-batches is ms-swift's --move_model_batches (its weight sync's groups): give --framework "
                + " or ".join(n for n, f in FRAMEWORKS.items() if f.sync_groups),
                "move_model_batches",
            )
        if self.zero_buckets:  # planner.config.zerobuckets: its one canonical text (the plan's cache key)
            try:
                object.__setattr__(self, "zero_buckets", zerobuckets.canonical(zerobuckets.parse(self.zero_buckets)))
            except ValueError as e:
                raise BadInput(str(e), "zero_buckets") from None
        check_task_knobs(self)
        check_rl_knobs(
            self.workload, {f: self.__dict__[f] for f in ("checkpointing", "loss", "batching", "optimizer_in_backward")}
        )
        if self.optimizer_in_backward:
            self._optimizer_in_backward_rules()
        self._parallel_rules()
        if self.fsdp != "off":
            return self._fsdp_rules()
        if self.offload != "none" and self.zero_stage == 0:
            raise BadInput(
                "--offload optimizer needs DeepSpeed: use --zero 1, 2 or 3 (or --fsdp full with --offload optimizer+params)"
                if self.offload == "optimizer"
                else "--offload optimizer+params needs DeepSpeed or FSDP: use --zero 3 or --fsdp full",
                "offload",
            )
        if self.offload == "optimizer+params" and self.zero_stage != 3:
            raise BadInput(
                "--offload optimizer+params needs --zero 3 (parameter offload is a ZeRO-3 feature)", "offload"
            )
        if self.precision == "bf16-pure" and self.zero_stage != 0:
            raise BadInput(
                "--precision bf16-pure runs without DeepSpeed (--zero 0); DeepSpeed keeps fp32 master weights",
                "precision",
            )
        return self

    def _dora_rules(self) -> None:
        """DoRA's terms (planner.estimate.lora) are pinned on a 16-bit or fp32 base's decoder linears, under DDP, ZeRO
        (ZeRO-3 gathers the base weight its norm reads as an external parameter of the DoRA module: deepspeed 0.19.8
        runtime/zero/parameter_offload.py:80-89) or FSDP (the unit's unsharded weight). Not on a quantized base (the
        norm dequantizes each weight: another transient, unmeasured), nor on tower adapters (the towers' linears are not
        traced with DoRA), nor under selective-op checkpointing (the sim's trace of torch's selective checkpointing fails
        on DoRA's weight norm: its recompute finds no saved copy); PEFT runs no DoRA on stacked experts (peft 0.21.2
        tuners/lora/layer.py:2371-2372)."""
        if self.lora_variant != "dora":
            return
        for bad, what in (
            (self.quant != "none", f"--quant {self.quant}"),
            (self.lora_vision, "--lora-vision"),
            (self.lora_base_fp32, "--lora-base-fp32"),
            (self.checkpointing == "selective-op", "--checkpointing selective-op"),
            (".experts" in self.lora_targets or "experts." in self.lora_targets, f"--lora-targets {self.lora_targets}"),
        ):
            if bad:
                raise BadInput(
                    f"--lora-variant dora with {what} is not planned (DoRA is planned on a 16-bit or fp32 base's "
                    "decoder linears, under DDP, ZeRO or FSDP; no quantized base or tower adapters): does plain LoRA's "
                    "plan answer you (DoRA only adds to its memory)? then give --lora-variant lora",
                    "lora_variant",
                )

    def _lora_rules(self) -> None:
        if self.frozen != "none" and self.lora_rank:
            raise BadInput(
                f"--frozen {self.frozen} is for full fine-tuning: LoRA (--lora-rank {self.lora_rank}) "
                "already freezes every base weight",
                "frozen",
            )
        if self.lora_rank == 0:
            for field, default in (
                ("quant", "none"),
                ("quant_absmax", "8bit"),
                ("lora_targets", "all-linear"),
                ("lora_train_embeddings", False),
                ("lora_variant", "lora"),
                ("lora_dropout", 0.0),
                ("lora_base_fp32", False),
                ("lora_vision", False),
            ):
                if getattr(self, field) != default:
                    flag = "--" + field.replace("_", "-")
                    raise BadInput(f"{flag} {getattr(self, field)} needs LoRA adapters: give --lora-rank > 0", field)
        if self.vit_checkpointing == "off" and self.checkpointing in ("off", "offload"):
            raise BadInput(
                f"--vit-checkpointing off: the tower checkpoints only beside the decoder's checkpointing (--checkpointing "
                f"{self.checkpointing} has none to leave out)",
                "vit_checkpointing",
            )
        if self.lora_vision and self.lora_targets != "all-linear":
            raise BadInput(
                f"--lora-vision adapts every linear of the tower and projector, as PEFT's all-linear does: with "
                f"--lora-targets all-linear, not {self.lora_targets}",
                "lora_vision",
            )
        self._dora_rules()
        if self.lora_base_fp32 and (self.zero_stage or self.precision not in ("bf16", "fp16")):
            raise BadInput(
                "--lora-base-fp32 is for bf16/fp16 mixed precision under torch AMP or FSDP: DeepSpeed casts the base to "
                f"half (--zero {self.zero_stage}), and --precision {self.precision} sets the base's dtype itself",
                "lora_base_fp32",
            )
        sharded = self.zero_stage == 3 or self.fsdp != "off"
        if self.quant_absmax != "8bit" and self.quant not in ("nf4", "fp4"):
            raise BadInput(
                f"--quant-absmax {self.quant_absmax} is how a 4-bit base stores its block constants: give --quant nf4 "
                "or fp4",
                "quant_absmax",
            )
        if self.quant in ("int8", "gptq", "awq") and sharded:
            why = (
                "FSDP drops bitsandbytes' int8 state, LLaMA-Factory refuses it"
                if self.quant == "int8"
                else "gptqmodel keeps the weights in buffers, which FSDP and ZeRO-3 do not shard"
            )
            raise BadInput(
                f"--quant {self.quant} cannot be sharded ({why}): use --zero 0, 1 or 2 with --fsdp off, or a "
                "bitsandbytes 4-bit base (--quant nf4)",
                "quant",
            )
        if self.quant == "awq" and self.precision != "fp16":
            raise BadInput(
                f"--quant awq with --precision {self.precision}: transformers runs AWQ models in fp16 on CUDA "
                "(quantizers/quantizer_awq.py:54-62); use --precision fp16",
                "quant",
            )
        if self.quant == "gptq" and self.precision == "fp32":
            raise BadInput("--quant gptq computes in fp16 or bf16: use --precision fp16 or bf16", "quant")
        fsdp_four_bit = self.quant in ("nf4", "fp4") and self.fsdp != "off"  # planner.estimate.fsdp: packed shards
        if self.quant != "none" and sharded and self.offload == "optimizer+params" and not fsdp_four_bit:
            raise BadInput(
                f"--quant {self.quant} with --offload optimizer+params: a quantized base offloaded to the host is "
                "planned under FSDP with a 4-bit base only; use --offload none or optimizer",
                "quant",
            )

    def _parallel_rules(self) -> None:
        """Sequence, context and tensor parallelism between knobs alone (planner.config.layout: with the model and GPUs)."""
        if self.cp_attention != "ring" and self.context_parallel == 1:
            raise BadInput(f"--cp-attention {self.cp_attention} needs --context-parallel 2 or more", "cp_attention")
        splits = self.sequence_parallel * self.context_parallel
        if splits > 1 and self.attention == "eager":
            raise BadInput(
                "--attention eager with --sequence-parallel or --context-parallel: the split attention runs sdpa or "
                "flash kernels (DeepSpeed's Ulysses refuses eager); use --attention sdpa or flash",
                "attention",
            )
        if self.tensor_parallel > 1 and self.quant != "none":
            raise BadInput(
                f"--tensor-parallel {self.tensor_parallel} with --quant {self.quant}: a quantized base's packed weights "
                "are not split by torch's tensor-parallel plan; use --tensor-parallel 1",
                "tensor_parallel",
            )
        dpo_sp = self.workload.kind == "dpo" and self.parallel == self.sequence_parallel  # Ulysses alone: planned
        if self.parallel > 1 and self.workload.rl and not dpo_sp:
            raise BadInput(
                f"--workload {self.workload.kind} with tensor, sequence or context parallelism: RL roles split this way "
                "are not planned yet; plan it without them",
                "workload",
            )
        if self.device_map > 1:
            self._device_map_rules()
        if self.dataparallel:
            self._dataparallel_rules()
        if self.parallel > 1 and self.expert_parallel > 1:
            raise BadInput(
                "--expert-parallel with tensor, sequence or context parallelism is not planned: give one of them",
                "expert_parallel",
            )

    @property
    def parallel(self) -> int:
        """GPUs that share one sample: tensor x sequence x context parallel, or one process's device_map GPUs (the
        data-parallel size is the world size over this)."""
        return self.tensor_parallel * self.sequence_parallel * self.context_parallel * self.device_map

    def _one_process_others(self, device_map: bool) -> str:
        """What a one-process placement (device_map, nn.DataParallel) does not combine with: the splits and sharding
        set, with device_map's own where `device_map`, else an RL workload; "" for none."""
        others = [
            f"--{f.replace('_', '-')} {v}"
            for f, v, off in (
                ("zero", self.zero_stage, 0),
                ("fsdp", self.fsdp, "off"),
                ("offload", self.offload, "none"),
                ("tensor_parallel", self.tensor_parallel, 1),
                ("sequence_parallel", self.sequence_parallel, 1),
                ("context_parallel", self.context_parallel, 1),
                ("expert_parallel", self.expert_parallel, 1),
                *((("device_map", self.device_map, 1),) if device_map else ()),
            )
            if v != off
        ]
        return ", ".join(others) or (f"--workload {self.workload.kind}" if self.workload.rl else "")

    def _device_map_rules(self) -> None:
        """One process over several GPUs: DeepSpeed and FSDP place the model themselves (transformers refuses a
        device_map under ZeRO-3, and DeepSpeed moves the whole module to its rank's device), and the other splits
        are not combined with it."""
        what = self._one_process_others(device_map=False)
        if what:
            raise BadInput(
                f"--device-map {self.device_map} with {what}: one process over several GPUs is planned under DDP, "
                "without ZeRO, FSDP, offload, other splits or an RL workload",
                "device_map",
            )

    def _dataparallel_rules(self) -> None:
        """torch's nn.DataParallel: HF's Trainer wraps the model in it only without DeepSpeed, FSDP or a launcher
        (transformers 4.40.2 trainer.py:1628-1629, n_gpu > 1), so it takes none of the other splits."""
        what = self._one_process_others(device_map=True)
        if what:
            raise BadInput(
                f"--dataparallel with {what}: torch's nn.DataParallel is one process replicating the whole model, "
                "planned without ZeRO, FSDP, offload, other splits or an RL workload",
                "dataparallel",
            )

    def _optimizer_in_backward_rules(self) -> None:
        if self.zero_stage or self.fsdp != "off":
            raise BadInput(
                "--optimizer-in-backward steps each parameter in its own backward hook: it runs without "
                "DeepSpeed or FSDP (--zero 0 --fsdp off), on one GPU",
                "optimizer_in_backward",
            )
        if self.precision == "fp16":
            raise BadInput(
                "--optimizer-in-backward with --precision fp16: a loss scaler cannot skip a step whose "
                "parameters are already updated; use bf16 or fp32",
                "optimizer_in_backward",
            )

    def _fsdp_rules(self) -> Knobs:
        if self.zero_stage:
            raise BadInput(
                f"--fsdp {self.fsdp} with --zero {self.zero_stage}: a plan uses ZeRO or FSDP, not both", "fsdp"
            )
        if self.offload == "optimizer":
            raise BadInput(
                "--offload optimizer with --fsdp: FSDP2's CPUOffloadPolicy moves parameters, gradients and "
                "optimizer states together; use --offload optimizer+params",
                "offload",
            )
        if self.precision == "fp16":
            raise BadInput(
                "--precision fp16 with --fsdp: FSDP plans run bf16 (fp32 shards, bf16 compute), bf16-pure or fp32",
                "precision",
            )
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
        if backend not in PROBE_BACKENDS:
            raise BadInput(f"--backend {backend!r}: accepted values are {', '.join(PROBE_BACKENDS)}", "backend")
        if self.expert_parallel > 1:
            raise BadInput(
                "--expert-parallel: a probe traces one rank's step without the all-to-all; expert-parallel "
                "plans are analytic",
                "expert_parallel",
            )
        if self.parallel > 1:
            raise BadInput(
                "--tensor-parallel, --sequence-parallel, --context-parallel, --device-map: a probe traces one process "
                "on one device without their collectives; such plans are analytic",
                "device_map"
                if self.device_map > 1
                else "tensor_parallel"
                if self.tensor_parallel > 1
                else "sequence_parallel",
            )
        if self.fsdp != "off":  # one rank's trace: FSDP2 runs the module in the compute dtype (bf16-pure's)
            if backend != "sim":
                raise BadInput(f"--backend {backend} runs one process; for FSDP plans use --backend sim", "fsdp")
            return Knobs(
                precision="fp32" if self.precision == "fp32" else "bf16-pure",
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


class OverheadTerm(_Frozen):
    """One part of a plan's overhead (planner.estimate.overheads): its bytes, whether this GPU kind measured it or a
    prior stands in, and where the figure comes from."""

    name: Literal["context", "driver", "nccl", "fragmentation", "probe"]
    bytes: int = Field(ge=0)
    measured: bool = Field(description="measured on this GPU kind (its calibration file, or this plan's probe)")
    basis: str = Field(description="a few words for the human output: 'measured', 'prior: H100 measurement'")
    source: str = Field(description="where the figure comes from: a file of this repository or a published page")
    per_allocated: float = Field(
        default=0.0, ge=0, description="bytes per byte of the peak allocated (fragmentation); 0: a fixed size"
    )


class MemoryBreakdown(BaseModel):
    """Per-rank memory at the step's peak moment.

    peak_allocated = params + grads + optimizer + activations + temp (what max_memory_allocated reports);
    device_total = peak_allocated + overhead (allocator reserve, CUDA context, NCCL buffers).
    """

    model_config = ConfigDict(defer_build=True)  # built at first use: a command builds only its own models

    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    temp_bytes: int
    peak_allocated_bytes: int
    overhead_bytes: int
    overhead_source: Literal["assumed", "measured"] = "assumed"  # measured: the GPU kind's calibration file
    overheads: tuple[OverheadTerm, ...] = ()  # overhead_bytes term by term, each measured or a prior, with its source
    device_total_bytes: int
    capacity_bytes: int
    headroom_bytes: int
    peak_phase: Literal[
        "forward",
        "backward",
        "end-of-backward",
        "optimizer-step",
        "evaluation",
        "load",
        "checkpoint-save",
        "generation",
        "reference-forward",
        "old-logps",
        "rollout",
        "weight-sync",
        "reward-scoring",
        "critic-values",
        "critic-update",
        "actor-update",
    ]
    host_bytes_per_node: int = 0  # the largest of host_phases
    host_phases: dict[str, int] | None = None  # host RAM per node: load, training (offload), checkpoint-save
    # bitsandbytes' paged optimizer states in CUDA unified memory: outside the allocator's peak, paged to host RAM
    # when the card is full (planner.estimate.memory.paged_optimizer_bytes)
    paged_bytes: int = 0
    detail: dict[str, int] = {}
    phases: dict[str, int] | None = None  # peak allocated bytes of each phase (DPO / GRPO: planner.estimate.rl)
    peak_term: str | None = None  # DPO / GRPO: the largest term of the peak phase

    def terms_sum(self) -> int:
        return self.params_bytes + self.grads_bytes + self.optimizer_bytes + self.activations_bytes + self.temp_bytes


class TokenBatches(BaseModel):
    """What a token budget (--max-tokens-per-micro-batch) makes of a step (planner.search.batching): micro-batches of
    samples x padded width <= the budget, the global batch still in samples. `source` data: every micro-batch
    of the first epoch as the trainer cuts it; assumed: no data, every sample at seq_len for speed and the
    worst shapes the budget admits for memory."""

    model_config = ConfigDict(defer_build=True)  # built at first use: a command builds only its own models

    max_tokens_per_micro_batch: int
    source: Literal["data", "assumed"]
    shapes: list[tuple[int, int]] = Field(description="(samples, padded width) micro-batches memory is planned for")
    micro_steps_max: int = Field(description="most micro-steps in a step (all ranks run the most any rank needs)")
    micro_steps_mean: float
    padded_tokens_per_micro_step: float = Field(description="mean samples x padded width of a micro-batch")
    tokens_per_step: float = Field(description="mean real tokens of a global batch, all ranks")
    fill_ratio: float = Field(description="real tokens / (micro-steps run x ranks x budget)")


class Launch(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built at first use: a command builds only its own models

    hf_args: dict
    deepspeed_config: dict | None
    command: str
    note: str | None = None
    accelerate_config: dict | None = None  # FSDP plans: an accelerate config file's contents
    peft_config: dict | None = None  # LoRA plans: PEFT LoraConfig fields
    quantization_config: dict | None = None  # quantized bases: the fields of transformers' quantization_class
    quantization_class: str | None = None  # BitsAndBytesConfig, GPTQConfig or AwqConfig
    framework_files: dict[str, str] | None = None  # LLaMA-Factory / ms-swift / axolotl plans: {file name: text}


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
            f"LoRA on {self.lora_targets}" if self.lora_targets != "all-linear" else "",
            "trained embeddings" if self.lora_train_embeddings else "",
            "DoRA" if self.lora_variant == "dora" else "",
            f"LoRA dropout {self.lora_dropout:g}" if self.lora_dropout else "",
            "LoRA on the tower" if self.lora_vision else "",
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
