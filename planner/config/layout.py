"""The layout a plan runs on, and every rule that needs it: GPUs per node, nodes and the model's experts.

`planner.config.spec.Knobs` owns the rules between knobs alone; what the hardware or the model must allow (as
torchtitan's ParallelDims owns its degrees' rules) lives here, once, and every face asks it: the search prunes
with it, `check`, probes and the trainer's run files refuse with it. Each rule returns a BadInput naming its field,
or None; `check_*` raise it.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.config.spec import OPTIMIZER_IN_BACKWARD_SPLIT, Knobs
from planner.config.workload import Workload
from planner.errors import BadInput


@dataclass(frozen=True)
class Layout:
    gpus_per_node: int = 1
    nodes: int = 1
    experts: int | None = None  # the model's routed experts; None: a dense model
    model_name: str = "the model"
    vision: bool = True  # the model has a vision tower (unknown model: not refused here)
    images: bool = True  # the samples hold image tokens (unknown: not refused here)

    @classmethod
    def of(cls, hw, model=None, goal=None) -> Layout:
        """The layout of a planner.config.spec.Hardware and (optionally) a planner.model.modelspec.ModelSpec and the
        planner.config.spec.Goal's image tokens."""
        if model is None:
            return cls(hw.gpus_per_node, hw.nodes)
        moe = model.text.moe
        images = goal is None or goal.image_tokens > 0
        return cls(
            hw.gpus_per_node, hw.nodes, moe.experts if moe else None, model.name, model.vision is not None, images
        )

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes

    def knob_error(self, k: Knobs) -> BadInput | None:
        """Knobs this layout cannot run, whatever the batch split."""
        if k.fsdp == "hybrid" and self.nodes == 1:
            return BadInput(
                "--fsdp hybrid shards within a node and replicates across nodes: it needs --nodes 2 or "
                "more (on one node, use --fsdp full)",
                "fsdp",
            )
        if k.optimizer_in_backward and self.world_size > 1:
            return BadInput(OPTIMIZER_IN_BACKWARD_SPLIT, "optimizer_in_backward")
        if k.frozen != "none" and not self.vision:
            return BadInput(f"--frozen {k.frozen}: {self.model_name} has no vision tower", "frozen")
        if k.frozen.startswith("language") and self.vision and not self.images:
            return BadInput(
                f"--frozen {k.frozen}: only the tower and projector train, and the samples hold no image tokens "
                "(give --image-tokens, --images or --data with images)",
                "frozen",
            )
        if k.vit_checkpointing == "off" and not self.vision:
            return BadInput(f"--vit-checkpointing off: {self.model_name} has no vision tower", "vit_checkpointing")
        return self.expert_error(k.expert_parallel)

    def expert_error(self, n: int) -> BadInput | None:
        """Expert parallelism needs a routed model whose experts and world size it divides."""
        if n == 1:
            return None
        if self.experts is None:
            return BadInput(
                f"--expert-parallel {n}: {self.model_name} has no experts (a dense model)", "expert_parallel"
            )
        if self.experts % n or self.world_size % n:
            return BadInput(
                f"--expert-parallel {n} must divide the {self.experts} experts of {self.model_name} and "
                f"the world size {self.world_size}",
                "expert_parallel",
            )
        return None

    def split_error(self, k: Knobs, micro_batch: int, grad_accum: int) -> BadInput | None:
        """A micro-batch x accumulation split these knobs cannot run here (the knobs' own layout rules first)."""
        if k.optimizer_in_backward and grad_accum > 1:
            return BadInput(OPTIMIZER_IN_BACKWARD_SPLIT, "optimizer_in_backward")
        why = k.workload.split_error(micro_batch, grad_accum, self.world_size)  # TRL's GRPO groups
        return BadInput(f"--micro-batch {micro_batch}: {why}", "micro_batch") if why else None

    def global_batch_error(self, w: Workload, global_batch: int) -> BadInput | None:
        """A global batch no split can give: the world size must divide it; GRPO samples whole groups."""
        if global_batch % self.world_size:
            lo = global_batch // self.world_size * self.world_size
            near = [x for x in (lo, lo + self.world_size) if x > 0]
            return BadInput(
                f"--global-batch {global_batch} is not divisible by world size {self.world_size}; "
                f"nearest valid global batches: {', '.join(map(str, near))}",
                "global_batch",
            )
        if w.kind == "grpo" and w.steps_per_generation is None and global_batch % w.num_generations:
            return BadInput(
                f"--global-batch {global_batch} is not divisible by --num-generations "
                f"{w.num_generations}: TRL samples whole groups of completions",
                "global_batch",
            )
        return None

    def check_knobs(self, k: Knobs) -> Knobs:
        raise_if(self.knob_error(k))
        return k

    def check_split(self, k: Knobs, micro_batch: int, grad_accum: int) -> None:
        raise_if(self.knob_error(k) or self.split_error(k, micro_batch, grad_accum))


def raise_if(error: BadInput | None) -> None:
    if error is not None:
        raise error
