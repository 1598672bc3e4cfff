"""The core's typed requests and results: what `suggest`, `check` and a probe take (every face's flags, the API's
JSON bodies, plan files) and what `--json` prints. Field bounds live here; knob combinations in
`planner.config.spec.Knobs`; the workload's rules in `planner.config.workload`. planner.advise answers them.
"""

from __future__ import annotations

from threading import Lock
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, create_model, model_validator

from planner.config.knobfields import (  # noqa: F401 - SUGGEST_CHECKPOINTING re-exported for the faces
    FIXED,
    KNOBS,
    SEARCHED,
    SUGGEST_CHECKPOINTING,
    request_fields,
)
from planner.config.release import in_memplan_terms
from planner.config.spec import (
    DEFAULT_HOST_RAM_GIB,
    DEFAULT_INTER_NODE_GBPS,
    DEFAULT_MARGIN,
    MAX_GLOBAL_BATCH,
    MAX_GPUS_PER_NODE,
    MAX_GRAD_ACCUM,
    MAX_MICRO_BATCH,
    MAX_NODES,
    MAX_SEQ_LEN,
    MIN_INTER_NODE_GBPS,
    Plan,
)
from planner.frameworks import adapter

APPROXIMATE_MARGIN = 0.15  # default margin for a family counted with the generic formula (not exact)
MAX_SUGGESTIONS = 5
EvidenceMode = Literal["analytic", "sim", "auto"]
ModelRef = str | dict
DATA_DOC = (
    "a dataset file (.jsonl/.json/.csv/.parquet or a datasets folder; inside the server's data directories, "
    "for the API): plan for its longest row"
)
MODEL_DOC = (
    "a catalog name (GET /v1/models), a config.json path (inside the server's model directories, "
    "for the API), or the config.json object itself"
)


class _Space(BaseModel):
    """The knob values a search tries: the searched knobs (knobfields.SEARCHED) as lists, their product searched;
    every other knob one value. The suggest request's knob part, with its defaults (`Space.of(request)`)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", populate_by_name=True)

    @classmethod
    def of(cls, req) -> Space:
        """The request's knobs; an attention it leaves unset stays unset (release_attention)."""
        unset = () if "attention" in req.model_fields_set else ("attention",)
        return cls(**{k: getattr(req, k) for k in KNOBS if k not in unset})

    def release_attention(self) -> str | None:
        """Where the request named no attention: the one its framework's release runs by default (the release's
        declared Default, Framework.at), when not the default list's, else None. The search tries it where it refuses
        every plan with the default (planner.search.search.families): LLaMA-Factory 0.5's flash_attn False (eager),
        OpenRLHF 0.8's --flash_attn off, torchtitan's flash."""
        if "attention" in self.model_fields_set:
            return None
        declared = adapter(self.framework, self.release).defaults.get("attention")
        return declared.value if declared is not None and declared.value not in self.attention else None


Space = create_model(
    "Space", __base__=_Space, __module__=__name__, **request_fields(tuple(SEARCHED), many=True), **request_fields(FIXED)
)


class _Request(BaseModel):
    # zero or zero_stage (knobfields.ALIASES)
    model_config = ConfigDict(defer_build=True, extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _framework_release(cls, data: object) -> object:
        """`framework` NAME@RELEASE: the request in that release's terms, made memplan's (planner.config.release)."""
        return in_memplan_terms(data) if isinstance(data, dict) else data


class _Target(_Request):
    """What every request names: the model, the hardware, the sequence and the fixed knobs."""

    model: ModelRef = Field(description=MODEL_DOC)
    gpu: str = Field(min_length=1, max_length=64, description="catalog GPU (GET /v1/gpus) or 'local'")
    gpus_per_node: int | None = Field(
        default=None, ge=1, le=MAX_GPUS_PER_NODE, description="GPUs per node (default 1; with 'local', every local GPU)"
    )
    nodes: int = Field(default=1, ge=1, le=MAX_NODES, description="nodes, each with gpus_per_node GPUs")
    seq_len: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SEQ_LEN,
        description=("tokens per sample (text + image tokens); or `data`, to plan for its longest row"),
    )
    data: str | None = Field(default=None, min_length=1, max_length=4096, description=DATA_DOC)
    tokenizer: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="with data: a local tokenizer folder (inside the data directories, for the API)",
    )
    image_rule: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description=(
            "image tokens per image, with data or with images alone: qwen2-vl, qwen3-vl, internvl[:N], llava, "
            "llava-next, llava-onevision, gemma3[:pan-and-scan], idefics3, mllama or fixed:N; default the model "
            "family's"
        ),
    )
    min_pixels: int | None = Field(
        default=None, ge=1, le=1 << 30, description="the qwen2-vl / qwen3-vl rules' min_pixels (the processor's)"
    )
    max_pixels: int | None = Field(
        default=None, ge=1, le=1 << 30, description="the qwen2-vl / qwen3-vl rules' max_pixels (the processor's)"
    )
    max_length: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SEQ_LEN,
        description="with data: cut rows to this many tokens (the answer counts the rows cut)",
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=2**31 - 1,
        description=("the bundled trainer's sampler seed: with data, names the step that would draw a row too long"),
    )
    max_tokens_per_micro_batch: int | None = Field(
        default=None,
        ge=1,
        le=1 << 30,
        description=(
            "token-budget batching: micro-batches of samples x padded width <= this, the global batch still in samples"
        ),
    )
    image_tokens: int | None = Field(
        default=None, ge=0, le=MAX_SEQ_LEN, description="VLMs: image tokens per sample (part of seq_len)"
    )
    images: int | None = Field(
        default=None,
        ge=0,
        le=MAX_SEQ_LEN,
        description="images per sample: with tokens_per_image, or alone (each at its image rule's worst case)",
    )
    tokens_per_image: int | None = Field(
        default=None, ge=0, le=MAX_SEQ_LEN, description="VLMs: tokens per image (with images)"
    )
    images_within_length: bool = Field(
        default=False,
        description=(
            "images alone: a row whose images pass seq_len (GRPO: the prompt's length) is deleted, not cut, so a "
            "row's images share that many tokens (the framework's own deletion, read from its files)"
        ),
    )
    videos: int | None = Field(
        default=None,
        ge=0,
        le=64,
        description=(
            "Qwen2-VL / Qwen2.5-VL: videos per sample, each at the worst case of the video settings (frames from "
            "video_seconds and fps up to max_frames, each frame at most video_max_pixels)"
        ),
    )
    video_seconds: float | None = Field(default=None, gt=0, le=86_400, description="the longest video, in seconds")
    fps: float = Field(default=2.0, gt=0, le=240, description="frames sampled a second (the video processor's fps)")
    max_frames: int = Field(default=768, ge=2, le=100_000, description="the video processor's max_frames")
    video_min_pixels: int | None = Field(default=None, ge=1, le=1 << 30, description="per frame (size shortest_edge)")
    video_max_pixels: int | None = Field(default=None, ge=1, le=1 << 30, description="per frame (size longest_edge)")
    video_pixel_cap: bool = Field(
        default=False,
        description="frames share a budget of 90% of 128,000 tokens (cap_pixels_per_frame, qwen-vl-utils' behaviour)",
    )
    margin: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description=(
            f"fraction of the card kept free; default {DEFAULT_MARGIN}, {APPROXIMATE_MARGIN} for a model family "
            "counted approximately"
        ),
    )
    inter_node_gbps: float = Field(
        default=DEFAULT_INTER_NODE_GBPS,
        ge=MIN_INTER_NODE_GBPS,
        le=1e5,
        description="network bandwidth per node in Gb/s (200: HDR InfiniBand)",
    )
    host_ram_gb: float = Field(default=DEFAULT_HOST_RAM_GIB, gt=0, le=1e6, description="host RAM per node in GiB")
    evidence: EvidenceMode = Field(
        default="auto",
        description=(
            "analytic: formulas only; sim: simulate what no record covers; auto: stored measured, then simulated "
            "records, else analytic"
        ),
    )
    verify: bool = Field(default=False, description="probe the chosen plan before answering (a probe job's work)")


Target = create_model("Target", __base__=_Target, __module__=__name__, __doc__=_Target.__doc__, **request_fields(FIXED))


class _Suggest(Target):
    global_batch: int = Field(ge=1, le=MAX_GLOBAL_BATCH, description="sequences per optimizer step across all GPUs")
    top: int = Field(default=10, ge=1, le=100, description="plans to show, the best first")


SuggestRequest = create_model(
    "SuggestRequest",
    __base__=_Suggest,
    __module__=__name__,
    __doc__="Ranked plans: the searched knobs are lists (knobfields.SEARCHED).",
    **request_fields(tuple(SEARCHED), many=True),
)


def _check_request() -> type[BaseModel]:
    class _Check(Target):
        micro_batch: int = Field(ge=1, le=MAX_MICRO_BATCH)
        grad_accum: int = Field(default=1, ge=1, le=MAX_GRAD_ACCUM)

    return create_model(
        "CheckRequest",
        __base__=_Check,
        __module__=__name__,
        __doc__="One configuration: every knob one value (precision None: bf16, or fp16).",
        **request_fields(tuple(SEARCHED), auto_precision=True),
    )


class _Result(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built at first use: a command builds only its own models

    # (ModelSpec, Hardware, Goal) the answer was made for: the faces' titles, charts and exports (not JSON)
    _context: tuple = PrivateAttr(default=())

    @property
    def context(self) -> tuple:
        return self._context


def _probe_request() -> type[BaseModel]:
    class _Probe(_Request):
        """One probe of one configuration (planner probe, planner profile, POST /v1/probes)."""

        model: ModelRef = Field(description=MODEL_DOC)
        micro_batch: int = Field(ge=1, le=1 << 12)
        grad_accum: int = Field(default=1, ge=1, le=1 << 12)
        seq_len: int | None = Field(default=None, ge=1, le=1 << 20, description="sft: required; dpo / grpo: derived")
        backend: Literal["sim", "cpu", "cuda"] = "sim"
        timeout_s: int | None = Field(default=None, ge=1, le=24 * 3600)

    return create_model(
        "ProbeRequest", __base__=_Probe, __module__=__name__, __doc__=_Probe.__doc__, **request_fields(KNOBS)
    )


VIDEOS_DOC = "videos: the worst case of the video settings per video, the frames sampled at it (part of image_tokens)"
IMAGES_DOC = (
    "images alone (no tokens_per_image, no data): the image rule, the worst case its settings admit per image and an "
    "image size that gives it; with check, for a configuration that does not fit then, the largest square image it "
    "fits (fits_up_to, null when none); shared_length where a longer row is deleted (images_within_length) and the "
    "worst case passes it: the images of a row that runs planned at that many tokens together"
)
NEAREST_DOC = (
    "when nothing fits: the requests one change away that do (every knob allowed, a fused optimizer, LoRA, "
    "more host RAM, twice the GPUs per node or the nodes, half the sequence), each with its best plan"
)


class Nearest(BaseModel):
    """One change to a request that does not fit (in words, and as the request's changed fields) and the best plan
    the changed request gives (planner.search.nearest)."""

    model_config = ConfigDict(defer_build=True)  # built at first use: a command builds only its own models

    change: str
    changes: dict
    plan: Plan
    keys: list[str] = Field(
        default_factory=list,
        description=("the change as `key: value` lines of the plan's framework (its --framework, other than memplan)"),
    )
    _context: tuple = PrivateAttr(default=())  # (model, hardware, goal) the changed request was planned for


class SuggestResult(_Result):
    model: dict
    hardware: dict
    goal: dict
    plans: list[Plan]
    rejected: list[Plan]
    verified: dict | None = None
    data: dict | None = None
    images: dict | None = Field(default=None, description=IMAGES_DOC)
    videos: dict | None = Field(default=None, description=VIDEOS_DOC)
    nearest: list[Nearest] = Field(default_factory=list, description=NEAREST_DOC)


def _check_result() -> type[BaseModel]:
    class CheckResult(_Result):
        model: dict
        hardware: dict
        goal: dict
        plan: Plan
        suggestions: list[Plan]
        verified: dict | None = None
        data: dict | None = None
        images: dict | None = Field(default=None, description=IMAGES_DOC)
        videos: dict | None = Field(default=None, description=VIDEOS_DOC)
        limits: dict | None = Field(
            default=None,
            description=(
                "dpo / grpo: the longest completion (and prompt, images) at which the configuration still fits"
            ),
        )
        nearest: list[Nearest] = Field(default_factory=list, description=NEAREST_DOC)
        open_length: dict | None = Field(
            default=None,
            description=(
                "check --config whose files set no length (and no --data, --seq-len), or leave it at the framework's "
                "default of the model's context: the longest rows (what: rows) or GRPO prompts (what: prompts) this "
                "configuration fits (fits_up_to_tokens, the plan is made there) under that context (context); the "
                "data decides"
            ),
        )
        capped_length: dict | None = Field(
            default=None,
            description=(
                "check --config whose files set an SFT, DPO or KTO row length that the framework's collator treats as "
                "a cap (each micro-batch padded to its longest row, not packed: padding says where) and that does not "
                "fit: the longest rows that do (fits_up_to_tokens, 0 for none; a VLM's rows each holding image_tokens) "
                "under the cap (cap; field, and key, the files' own); the verdict stays the cap's, the data decides"
            ),
        )
        text_only: bool = Field(
            default=False,
            description="a VLM planned without a single image token: no image is in the plan (give image tokens or data)",
        )
        media: dict | None = Field(
            default=None,
            description=(
                "check --config whose files leave a row's images or videos to the dataset, no --images, --videos or "
                "--data given: the media the plan assumed a row holds (images_per_row, tokens_per_image: at most; "
                "videos), where that was read (source) and the verdict's condition in a line (condition)"
            ),
        )
        config: dict | None = Field(
            default=None,
            description=(
                "check --config: what the configuration files said (framework, files, settings field by field with "
                "their source and the framework's key, and the settings memplan cannot plan yet)"
            ),
        )

    CheckResult.__qualname__ = "CheckResult"  # as where it was a module-level class (repr, pickling, schema names)
    return CheckResult


# the models `suggest` does not use, built on first use (module __getattr__): a command builds only its own
LAZY = {"CheckRequest": _check_request, "ProbeRequest": _probe_request, "CheckResult": _check_result}
_BUILDING = Lock()


def __getattr__(name: str):
    if name not in LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _BUILDING:  # one class per name, whichever thread asks first
        if name not in globals():
            globals()[name] = LAZY[name]()
    return globals()[name]
