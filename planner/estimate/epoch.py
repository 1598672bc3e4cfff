"""An epoch as HF's Trainer cuts it (transformers 5.25.0, accelerate 1.16.0): how many micro-batches each rank's
dataloader yields, how many optimizer steps that makes and how many micro-steps the last one has, and the epoch's
predicted seconds at a plan's step time.

- The train dataloader batches the shuffled rows by the per-device micro-batch (drop_last: dataloader_drop_last,
  False by default) and accelerate shards the batches over the data-parallel ranks (BatchSamplerShard, split_batches
  off, even_batches on: accelerate data_loader.py:161-174): each rank yields ceil(batches / ranks), the last
  ranks topped up from the epoch's start.
- Steps per epoch: len(dataloader) // accumulation, one more for a remainder (transformers trainer.py:2558-2562);
  the last step fetches only the remaining micro-batches (trainer.py:1907-1916) and scales its loss by their
  count (current_gradient_accumulation_steps, trainer.py:1920).
- Each micro-step is one fetch from the dataloader (get_batch_samples, trainer.py:2326-2341), the step's batches
  fetched before its first forward; with HF's default dataloader_num_workers 0 the collation runs on the training
  process. What a fetch costs beyond its rows is inside the efficiency curve's fixed share
  (planner.estimate.speed.fixed_seconds_per_micro_step); benchmarks/data_fetch.py measures it.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil


@dataclass(frozen=True)
class Epoch:
    """One epoch of `rows` rows on `ranks` data-parallel ranks at micro-batch x accumulation."""

    rows: int
    ranks: int
    micro_batch: int
    grad_accum: int
    drop_last: bool = False

    def __post_init__(self):
        for name in ("rows", "ranks", "micro_batch", "grad_accum"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} {getattr(self, name)}: an epoch needs at least 1")

    @property
    def micro_batches_per_rank(self) -> int:
        """len(train_dataloader) on each rank (accelerate data_loader.py:161-174)."""
        batches = self.rows // self.micro_batch if self.drop_last else ceil(self.rows / self.micro_batch)
        return batches // self.ranks if self.drop_last else ceil(batches / self.ranks)

    @property
    def steps(self) -> int:
        """num_update_steps_per_epoch (trainer.py:2558-2562)."""
        return max(ceil(self.micro_batches_per_rank / self.grad_accum), 1)

    @property
    def last_step_micro_steps(self) -> int:
        """The micro-batches the epoch's last optimizer step runs (trainer.py:1907-1916)."""
        return self.micro_batches_per_rank - (self.steps - 1) * self.grad_accum

    def seconds(self, step_s: float) -> float:
        """The epoch at a plan's predicted step: every step whole but the last, which runs its share of the
        micro-steps."""
        return (self.steps - 1 + self.last_step_micro_steps / self.grad_accum) * step_s
