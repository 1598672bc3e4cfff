"""The core's typed requests and results: what `suggest`, `check` and a probe take (every face's flags, the API's
JSON bodies, plan files) and what `--json` prints. Field bounds live here; knob combinations in
`planner.spec.Knobs`; the workload's rules in `planner.workload`. planner.advise answers them.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from planner import hardware
from planner.search import DEFAULT_MARGIN
from planner.spec import (
    CHECKPOINTING,
    FSDP_MODES,
    LORA_TARGETS_PATTERN,
    MAX_EXPERT_PARALLEL,
    MAX_GLOBAL_BATCH,
    MAX_GPUS_PER_NODE,
    MAX_GRAD_ACCUM,
    MAX_LORA_RANK,
    MAX_MICRO_BATCH,
    MAX_NODES,
    MAX_SEQ_LEN,
    MIN_INTER_NODE_GBPS,
    Attention,
    Batching,
    Checkpointing,
    Fsdp,
    Loss,
    Offload,
    Optimizer,
    Plan,
    Precision,
    Quant,
)
from planner.workload import Workload

# suggest's default checkpointing choices: every mode (each needs no extra package); every-N at N = 2 and 4
SUGGEST_CHECKPOINTING = ("off", "selective-op", "every-4", "every-2", "full", "offload")
APPROXIMATE_MARGIN = 0.15   # default margin for a family counted with the generic formula (not exact)
MAX_SUGGESTIONS = 5
EvidenceMode = Literal["analytic", "sim", "auto"]   # planner.evidence.MODES
ModelRef = str | dict
DATA_DOC = ("a dataset file (.jsonl/.json/.csv/.parquet or a datasets folder; inside the server's data directories, "
            "for the API): plan for its longest row")
MODEL_DOC = ("a catalog name (GET /v1/models), a config.json path (inside the server's model directories, "
             "for the API), or the config.json object itself")


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Target(_Request):
    """What every request names: the model, the hardware, the sequence and the fixed knobs."""

    model: ModelRef = Field(description=MODEL_DOC)
    gpu: str = Field(min_length=1, max_length=64, description="catalog GPU (GET /v1/gpus) or 'local'")
    gpus_per_node: int | None = Field(default=None, ge=1, le=MAX_GPUS_PER_NODE)
    nodes: int = Field(default=1, ge=1, le=MAX_NODES)
    seq_len: int | None = Field(default=None, ge=1, le=MAX_SEQ_LEN, description=(
        "tokens per sample (text + image tokens); or `data`, to plan for its longest row"))
    data: str | None = Field(default=None, min_length=1, max_length=4096, description=DATA_DOC)
    tokenizer: str | None = Field(default=None, min_length=1, max_length=4096,
                                  description="with data: a local tokenizer folder (inside the data directories, for the API)")
    image_rule: str = Field(default="qwen2-vl", min_length=1, max_length=64,
                            description="with data: image tokens per image, qwen2-vl, internvl[:N] or fixed:N")
    max_length: int | None = Field(default=None, ge=1, le=MAX_SEQ_LEN,
                                   description="with data: cut rows to this many tokens (the answer counts the rows cut)")
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description=(
        "the bundled trainer's sampler seed: with data, names the step that would draw a row too long"))
    max_tokens_per_micro_batch: int | None = Field(default=None, ge=1, le=1 << 30, description=(
        "token-budget batching: micro-batches of samples x padded width <= this, the global batch still in samples"))
    image_tokens: int | None = Field(default=None, ge=0, le=MAX_SEQ_LEN)
    images: int | None = Field(default=None, ge=0, le=MAX_SEQ_LEN, description="with tokens_per_image")
    tokens_per_image: int | None = Field(default=None, ge=0, le=MAX_SEQ_LEN)
    optimizer: Optimizer = "adamw"
    lora_rank: int = Field(default=0, ge=0, le=MAX_LORA_RANK)
    optimizer_in_backward: bool = Field(default=False, description=(
        "step each parameter as its gradient arrives and free the gradient (accumulation 1, one GPU, no ZeRO/FSDP)"))
    quant: Quant = Field(default="none", description="QLoRA: the base's linears in 4 bits (nf4 or fp4), with lora_rank")
    lora_targets: str = Field(default="all-linear", max_length=512, pattern=LORA_TARGETS_PATTERN, description=(
        "linears LoRA adapts: all-linear, attention, or a comma list of module names (q_proj,v_proj)"))
    lora_train_embeddings: bool = Field(default=False, description="train the embedding and head beside the adapters")
    lora_dropout: float = Field(default=0.0, ge=0, lt=1)
    expert_parallel: int = Field(default=1, ge=1, le=MAX_EXPERT_PARALLEL, description=(
        "MoE models: experts split over this many ranks with all-to-all dispatch (transformers' FSDP2 + "
        "DistributedConfig ep_size); divides the experts and the world size"))
    expert_imbalance: float = Field(default=2.0, ge=1.0, le=1024.0, description=(
        "MoE models: the busiest expert receives this many times its fair share of tokens (the worst case "
        "planned where experts are split over ranks)"))
    margin: float | None = Field(default=None, ge=0, lt=1, description=(
        f"fraction of the card kept free; default {DEFAULT_MARGIN}, {APPROXIMATE_MARGIN} for a model family "
        "counted approximately"))
    inter_node_gbps: float = Field(default=hardware.DEFAULT_INTER_NODE_GBPS, ge=MIN_INTER_NODE_GBPS, le=1e5)
    host_ram_gb: float = Field(default=hardware.DEFAULT_HOST_RAM_GIB, gt=0, le=1e6)
    evidence: EvidenceMode = "auto"
    verify: bool = Field(default=False, description="probe the chosen plan before answering (a probe job's work)")
    workload: Workload = Field(default_factory=Workload, description=(
        "sft (default), or TRL's dpo / grpo with their inputs (GRPOConfig / DPOConfig names); the global batch "
        "counts completions (grpo) or pairs (dpo)"))


class SuggestRequest(Target):
    global_batch: int = Field(ge=1, le=MAX_GLOBAL_BATCH)
    precision: list[Precision] = Field(default_factory=list, max_length=4)
    checkpointing: list[Checkpointing] = Field(default_factory=lambda: list(SUGGEST_CHECKPOINTING), min_length=1,
                                               max_length=len(CHECKPOINTING))
    zero: list[Literal[0, 1, 2, 3]] = Field(default_factory=lambda: [0, 1, 2, 3], min_length=1, max_length=4)
    offload: list[Offload] = Field(default_factory=lambda: ["none", "optimizer", "optimizer+params"],
                                   min_length=1, max_length=3)
    fsdp: list[Fsdp] = Field(default_factory=lambda: list(FSDP_MODES), min_length=1, max_length=4, description=(
        "FSDP2 sharding to consider beside the ZeRO stages (off = ZeRO or DDP only; hybrid needs nodes > 1)"))
    loss: list[Loss] = Field(default_factory=lambda: ["standard", "chunked"], min_length=1, max_length=3, description=(
        "losses to consider; fused (Liger's kernel on the GPU host) only when asked"))
    attention: list[Attention] = Field(default_factory=lambda: ["sdpa"], min_length=1, max_length=3, description=(
        "attention implementations to consider; flash (flash-attn on the GPU host) only when asked"))
    batching: list[Batching] = Field(default_factory=lambda: ["padded"], min_length=1, max_length=2)
    top: int = Field(default=10, ge=1, le=100)


class CheckRequest(Target):
    micro_batch: int = Field(ge=1, le=MAX_MICRO_BATCH)
    grad_accum: int = Field(default=1, ge=1, le=MAX_GRAD_ACCUM)
    precision: Precision | None = Field(default=None, description="default bf16, or fp16 on GPUs without bf16")
    checkpointing: Checkpointing = "off"
    zero: Literal[0, 1, 2, 3] = 0
    offload: Offload = "none"
    fsdp: Fsdp = Field(default="off", description="FSDP2 full / grad-op / hybrid sharding instead of ZeRO")
    loss: Loss = "standard"
    attention: Attention = "sdpa"
    batching: Batching = "padded"


class _Result(BaseModel):
    # (ModelSpec, Hardware, Goal) the answer was made for: the faces' titles, charts and exports (not JSON)
    _context: tuple = PrivateAttr(default=())

    @property
    def context(self) -> tuple:
        return self._context


class ProbeRequest(_Request):
    """One probe of one configuration (planner probe, planner profile, POST /v1/probes)."""

    model: ModelRef = Field(description=MODEL_DOC)
    micro_batch: int = Field(ge=1, le=1 << 12)
    grad_accum: int = Field(default=1, ge=1, le=1 << 12)
    seq_len: int | None = Field(default=None, ge=1, le=1 << 20, description="sft: required; dpo / grpo: derived")
    precision: Precision = "bf16"
    checkpointing: Checkpointing = "off"
    zero: Literal[0, 1, 2, 3] = 0
    offload: Offload = "none"
    optimizer: Optimizer = "adamw"
    lora_rank: int = Field(default=0, ge=0, le=MAX_LORA_RANK)
    loss: Loss = "standard"
    attention: Attention = "sdpa"
    batching: Batching = "padded"
    optimizer_in_backward: bool = False
    quant: Quant = "none"
    lora_targets: str = Field(default="all-linear", max_length=512, pattern=LORA_TARGETS_PATTERN)
    lora_train_embeddings: bool = False
    lora_dropout: float = Field(default=0.0, ge=0, lt=1)
    backend: Literal["sim", "cpu", "cuda"] = "sim"
    timeout_s: int | None = Field(default=None, ge=1, le=24 * 3600)
    workload: Workload = Field(default_factory=Workload)


NEAREST_DOC = ("when nothing fits: the requests one change away that do (every knob allowed, a fused optimizer, LoRA, "
               "more host RAM, twice the GPUs per node or the nodes, half the sequence), each with its best plan")


class Nearest(BaseModel):
    """One change to a request that does not fit (in words, and as the request's changed fields) and the best plan
    the changed request gives (planner.nearest)."""

    change: str
    changes: dict
    plan: Plan


class SuggestResult(_Result):
    model: dict
    hardware: dict
    goal: dict
    plans: list[Plan]
    rejected: list[Plan]
    verified: dict | None = None
    data: dict | None = None
    nearest: list[Nearest] = Field(default_factory=list, description=NEAREST_DOC)


class CheckResult(_Result):
    model: dict
    hardware: dict
    goal: dict
    plan: Plan
    suggestions: list[Plan]
    verified: dict | None = None
    data: dict | None = None
    limits: dict | None = Field(default=None, description=(
        "dpo / grpo: the longest completion (and prompt, images) at which the configuration still fits"))
    nearest: list[Nearest] = Field(default_factory=list, description=NEAREST_DOC)
