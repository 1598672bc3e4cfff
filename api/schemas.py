"""Request bodies: the CLI's flags in snake_case, lists as JSON arrays, every size bounded.
Responses are the CLI's JSON objects (planner.spec.Plan inside)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.spec import MIN_INTER_NODE_GBPS, Checkpointing, Offload, Optimizer, Plan, Precision

Evidence = Literal["analytic", "sim", "auto"]   # planner.evidence.MODES
MAX_GLOBAL_BATCH = 1 << 24
ModelRef = str | dict
MODEL_DOC = ("a catalog name (GET /v1/models), a config.json path inside the server's model directories, "
             "or the config.json object itself")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Target(_Body):
    model: ModelRef = Field(description=MODEL_DOC)
    gpu: str = Field(min_length=1, max_length=64, description="catalog GPU (GET /v1/gpus) or 'local'")
    gpus_per_node: int | None = Field(default=None, ge=1, le=64)
    nodes: int = Field(default=1, ge=1, le=4096)
    seq_len: int = Field(ge=1, le=1 << 21)
    image_tokens: int | None = Field(default=None, ge=0, le=1 << 21)
    optimizer: Optimizer = "adamw"
    lora_rank: int = Field(default=0, ge=0, le=4096)
    margin: float = Field(default=0.05, ge=0, lt=1)
    inter_node_gbps: float = Field(default=200.0, ge=MIN_INTER_NODE_GBPS, le=1e5)
    host_ram_gb: float = Field(default=512.0, gt=0, le=1e6)
    evidence: Evidence = "auto"


class PlansRequest(Target):
    global_batch: int = Field(ge=1, le=MAX_GLOBAL_BATCH)
    precision: list[Precision] = Field(default_factory=list, max_length=4)
    checkpointing: list[Checkpointing] = Field(default_factory=lambda: ["off", "full"], min_length=1, max_length=2)
    zero: list[Literal[0, 1, 2, 3]] = Field(default_factory=lambda: [0, 1, 2, 3], min_length=1, max_length=4)
    offload: list[Offload] = Field(default_factory=lambda: ["none", "optimizer", "optimizer+params"],
                                   min_length=1, max_length=3)
    top: int = Field(default=10, ge=1, le=100)


class CheckRequest(Target):
    micro_batch: int = Field(ge=1, le=1 << 16)
    grad_accum: int = Field(ge=1, le=1 << 16)
    precision: Precision
    checkpointing: Checkpointing
    zero: Literal[0, 1, 2, 3] = 0
    offload: Offload = "none"

    @model_validator(mode="after")
    def _bounded_global_batch(self) -> CheckRequest:
        world = (self.gpus_per_node or 1) * self.nodes
        if self.micro_batch * self.grad_accum * world > MAX_GLOBAL_BATCH:
            raise ValueError(f"micro_batch x grad_accum x world size must be at most {MAX_GLOBAL_BATCH}")
        return self


class ProbeRequest(_Body):
    model: ModelRef = Field(description=MODEL_DOC)
    micro_batch: int = Field(ge=1, le=1 << 12)
    grad_accum: int = Field(default=1, ge=1, le=1 << 12)
    seq_len: int = Field(ge=1, le=1 << 20)
    precision: Precision = "bf16"
    checkpointing: Checkpointing = "off"
    zero: Literal[0, 1, 2, 3] = 0
    offload: Offload = "none"
    optimizer: Optimizer = "adamw"
    lora_rank: int = Field(default=0, ge=0, le=4096)
    backend: Literal["sim", "cpu", "cuda"] = "sim"
    timeout_s: int | None = Field(default=None, ge=1, le=24 * 3600)
    inject_fault: Literal["oom", "crash", "hang"] | None = Field(default=None, description="tests only")


class PlansResponse(BaseModel):
    model: dict
    hardware: dict
    goal: dict
    plans: list[Plan]
    rejected: list[Plan]


class CheckResponse(BaseModel):
    model: dict
    hardware: dict
    goal: dict
    plan: Plan
    suggestions: list[Plan]


JobStatus = Literal["queued", "running", "done", "cancelled", "interrupted"]


class Job(BaseModel):
    id: str
    status: JobStatus
    outcome: Literal["ok", "oom", "crash", "timeout"] | None = None
    model: str
    backend: str
    device: str | None = None
    request: dict
    record: dict | None = None
    created: float
    started: float | None = None
    finished: float | None = None
