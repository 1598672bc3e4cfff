"""One configuration to estimate: the model, the knobs and the batch split on the GPUs (every term reads it)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.config.spec import Knobs
from planner.model.modelspec import ModelSpec


@dataclass(frozen=True)
class Setup:
    model: ModelSpec
    knobs: Knobs
    micro_batch: int
    grad_accum: int
    seq_len: int
    gpus_per_node: int = 1
    nodes: int = 1
    image_tokens: int = 0
    gpu: str = ""  # catalog GPU kind: its measured priors (planner.estimate.calibration), where a run wrote them

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def lora(self) -> bool:
        return self.knobs.lora_rank > 0
