"""One configuration to estimate: the model, the knobs and the batch split on the GPUs (every term reads it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.config.spec import Knobs
from planner.estimate.freeze import expanded_model
from planner.estimate.heads import task_model, value_head_rm
from planner.frameworks.peft import reached
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
    # image tokens the tower and projector run on, before the text is cut at seq_len (Goal.tower_tokens); 0: image_tokens
    tower_tokens: int = 0
    # a rank's view under sequence or context parallelism (planner.estimate.parallel.view): the whole sequence, which
    # attention spans, where seq_len is the rank's slice; 0: seq_len
    context_len: int = 0
    tensor_parallel: int = 1  # a rank's view: the tensor-parallel ranks behind each of gpus_per_node
    gpu: str = ""  # catalog GPU kind: its measured priors (planner.estimate.calibration), where a run wrote them
    # rows packed into micro_batch's one text row whose images one tower call still runs, all of them (an RL role's
    # remove-padding micro-batch, planner.estimate.roles.packed_rows); 0: the micro-batch's own rows
    packed_rows: int = 0
    # terms the other terms ask for many times a candidate, each computed once (planner.estimate.memory text_shape,
    # trained.*): not a field of equality or hash, and dataclasses.replace starts a new Setup with none kept
    memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):  # the model the task trains: a score head or none in place of the vocabulary head, and
        model = task_model(self.model, self.knobs.task, self.knobs.num_labels, value_head_rm(self.knobs))
        if self.knobs.lora_rank and self.knobs.lora_targets == "all-linear":  # an MoE's reach is the line's PEFT's
            model = reached(model, self.knobs.framework, self.knobs.release, self.knobs.peft_release)
        object.__setattr__(self, "model", expanded_model(model, self.knobs))  # ms-swift's LLaMA-Pro blocks

    @classmethod
    def of(cls, model: ModelSpec, knobs: Knobs, micro_batch: int, grad_accum: int, hw, goal) -> Setup:
        """A batch split of `goal` (planner.config.spec.Goal) on `hw` (Hardware)."""
        images = (goal.image_tokens, goal.tower_tokens)
        return cls(
            model, knobs, micro_batch, grad_accum, goal.seq_len, hw.gpus_per_node, hw.nodes, *images, gpu=hw.gpu.name
        )

    @property
    def tower_image_tokens(self) -> int:
        """The image tokens the vision tower runs on: all the processor made, however far the text is cut."""
        return max(self.tower_tokens, self.image_tokens)

    @property
    def image_rows(self) -> int:
        """Rows whose images one tower call runs: the packed rows of a micro-batch packed into one, else its rows."""
        return self.packed_rows or self.micro_batch

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def node_ranks(self) -> int:
        """Processes on a node (host RAM per node is theirs together): gpus_per_node, or in a rank's view under
        tensor parallel T its gpus_per_node x T."""
        return self.gpus_per_node * self.tensor_parallel

    @property
    def context(self) -> int:
        """Tokens a row's attention spans."""
        return self.context_len or self.seq_len

    @property
    def lora(self) -> bool:
        return self.knobs.lora_rank > 0
