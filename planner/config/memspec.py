"""The memory records of a plan (planner.config.spec re-exports them): the per-rank breakdown at the step's peak with
its overhead terms, the micro-batches a token budget makes, and the launch material written for it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.config.hwspec import _Frozen


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
        "kl-forward",
        "teacher-forward",
        "teacher-logps",
        "chord-sft",
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
    # when the card is full (planner.estimate.state_terms.paged_optimizer_bytes)
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
