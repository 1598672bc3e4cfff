"""The bundled trainer's run settings: RunConfig, one training process's run (the plan's knobs, its shapes, the
run's own settings), as `planner train` writes it to the run file and trainer.main reads it back."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from planner.config.spec import Knobs
from planner.search.batching import check_budget

GRAD_CLIP = 1.0  # as the exported DeepSpeed config (gradient_clipping) and HF's max_grad_norm


@dataclass
class RunConfig:
    """One training process's run: the plan's knobs (planner.config.spec.Knobs, the one configuration object, so
    every rule of it holds here too), its shapes, and the run's own settings."""

    model: str
    micro_batch: int
    grad_accum: int
    seq_len: int
    knobs: Knobs = field(default_factory=lambda: Knobs(precision="fp32"))
    data: str = "synthetic"
    tokenizer: str | None = None
    processor: str | None = None  # a VLM's local processor folder: --data rows with images (trainer/vlm.py)
    max_steps: int = 10
    lr: float = 1e-3
    seed: int = 0
    log: str | None = None
    device: str | None = None
    save_dir: str | None = None
    save_every: int = 0
    resume: bool = False
    store: str | None = None
    deepspeed_config: dict | None = None
    eval_every: int = 0
    eval_batch: int = 8
    max_tokens_per_micro_batch: int | None = None  # token-budget micro-batches (planner.search.batching)
    grad_clip: float = GRAD_CLIP  # max gradient norm; 0: none (always none with --optimizer-in-backward)
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.knobs, dict):  # as read back from the run file
            self.knobs = Knobs.make(**self.knobs)
        if self.max_tokens_per_micro_batch is not None:
            check_budget(self.max_tokens_per_micro_batch, self.seq_len)

    def to_json(self) -> dict:
        return {**asdict(self), "knobs": self.knobs.model_dump()}
