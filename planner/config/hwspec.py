"""The hardware and goal records a plan is made for (planner.config.spec re-exports them): one catalog GPU kind and
what it cannot run, the GPUs and nodes of a run with their network and host RAM, and the goal (global batch, sequence
length, image tokens, margin)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.errors import BadInput

# Below this the step-time model's bandwidth underflows to zero (found by schemathesis: 5e-324 Gb/s).
MIN_INTER_NODE_GBPS = 0.001
DEFAULT_INTER_NODE_GBPS = 200.0  # one HDR InfiniBand HCA per node
DEFAULT_HOST_RAM_GIB = 512.0
MIB = 2**20


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
    pixels: tuple[int, int] | None = Field(
        default=None,
        description="(min_pixels, max_pixels) each image was planned within, a pixel rule's (qwen2-vl, qwen3-vl): "
        "the given bounds or the rule's defaults; None where no image was sized by a pixel budget. The written "
        "files set them where the framework takes them (planner.export)",
    )
    tiles: int | None = Field(
        default=None, description="the tile cap each image was planned at, a tiling rule's (internvl:N); else None"
    )
    video: tuple[int, int, float, int] | None = Field(
        default=None,
        description="(min_pixels, max_pixels, fps, frames) each video's frames were planned within (--videos: "
        "search.videofit), frames the most sampled; None without videos. Written where the framework takes them",
    )
    images: int | None = Field(
        default=None,
        ge=0,
        description="the images a row was planned to hold (--images N); None where no count was given (--image-tokens, "
        "--data). Written where a framework caps a row's images (vLLM's limit_mm_per_prompt: planner.frameworks.mmlimit)",
    )
    videos: int | None = Field(
        default=None, ge=0, description="the videos a row was planned to hold (--videos N), as images; None without"
    )

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
