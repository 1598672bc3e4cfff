"""The layout a plan runs on, and every rule that needs it: GPUs per node, nodes and the model's experts.

`planner.config.spec.Knobs` owns the rules between knobs alone; what the hardware or the model must allow (as
torchtitan's ParallelDims owns its degrees' rules) lives here, once, and every face asks it: the search prunes
with it, `check`, probes and the trainer's run files refuse with it. Each rule returns a BadInput naming its field,
or None; `check_*` raise it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.config import spec_freeze
from planner.config.release import prompts_error
from planner.config.roles import check_groups
from planner.config.spec import OPTIMIZER_IN_BACKWARD_SPLIT, Knobs
from planner.config.spec_lora import experts_dropout_error, oft_model_error, pattern_tower_error
from planner.config.spec_lora_ends import ends_model_error
from planner.config.spec_rules import projection_model_error
from planner.config.workload import Workload
from planner.errors import BadInput
from planner.frameworks import adapter
from planner.frameworks.base import Where


@dataclass(frozen=True)
class Layout:
    gpus_per_node: int = 1
    nodes: int = 1
    experts: int | None = None  # the model's routed experts; None: a dense model
    model_name: str = "the model"
    vision: bool = True  # the model has a vision tower (unknown model: not refused here)
    images: bool = True  # the samples hold image tokens (unknown: not refused here)
    heads: int | None = None  # attention and KV heads (None: unknown, not refused here)
    kv_heads: int | None = None
    seq_len: int | None = None  # the planned sequence length
    mla: bool = False  # DeepSeek's latent attention
    spec: object = field(default=None, compare=False)  # the ModelSpec, for the frameworks' model rules (None: unknown)

    @classmethod
    def of(cls, hw, model=None, goal=None) -> Layout:
        """The layout of a planner.config.spec.Hardware and (optionally) a planner.model.modelspec.ModelSpec and the
        planner.config.spec.Goal's image tokens."""
        if model is None:
            return cls(hw.gpus_per_node, hw.nodes)
        t = model.text
        images = goal is None or goal.image_tokens > 0
        seq = goal.seq_len if goal is not None else None
        experts = t.moe.experts if t.moe else None
        vision = model.vision is not None
        return cls(
            hw.gpus_per_node,
            hw.nodes,
            experts,
            model.name,
            vision,
            images,
            t.heads,
            t.kv_heads,
            seq,
            t.mla is not None,
            model,
        )

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes

    def knob_error(self, k: Knobs) -> BadInput | None:
        """Knobs this layout cannot run, whatever the batch split."""
        if k.role_run:
            try:
                check_groups(k.workload.kind, k.workload.roles, k.workload.beta, self.world_size)
            except BadInput as e:
                return e
        elif k.workload.generation == "vllm-colocate" and self.world_size % k.workload.roles.rollout_tp:
            return BadInput(  # TRL 1.16 trl/generation/vllm_generation.py:313-318 raises at start
                f"--rollout-tp {k.workload.roles.rollout_tp} (vllm_tensor_parallel_size) does not divide the "
                f"{self.world_size} GPUs the colocated vLLM shares",
                "rollout_tp",
            )
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
        if freeze_error := spec_freeze.model_error(k, self.spec, self.model_name):
            return freeze_error
        if (k.fsdp != "off" or k.device_map > 1) and self.spec is not None and self.spec.resident_params():
            field, shown = ("fsdp", f"--fsdp {k.fsdp}") if k.fsdp != "off" else ("device_map", "a device map")
            return BadInput(
                f"{shown}: where it places {self.model_name}'s resident talker and vocoder (outside the thinker's "
                "units; Qwen2.5-Omni's token2wav fp32) is not planned: use DDP or --zero, or plan the thinker "
                "(ms-swift: ENABLE_AUDIO_OUTPUT=0)",
                field,
            )
        if k.vit_checkpointing == "off" and not self.vision:
            return BadInput(f"--vit-checkpointing off: {self.model_name} has no vision tower", "vit_checkpointing")
        if k.attention == "flash" and self.spec is not None and not self.spec.text.traits.flash:
            return BadInput(
                f"--attention flash: transformers builds {self.model_name} without flash-attention 2 (its class's "
                "_supports_flash_attn is False); use --attention sdpa or eager",
                "attention",
            )
        oft = oft_model_error(k, self.spec) or projection_model_error(k, self.spec) or ends_model_error(k, self.spec)
        oft = oft or experts_dropout_error(k, self.spec) or pattern_tower_error(k, self.spec)
        return oft or self.expert_error(k.expert_parallel) or self.parallel_error(k) or self.framework_error(k)

    def where(self, micro_batch: int | None = None, grad_accum: int | None = None) -> Where:
        images = self.vision and self.images and self.spec is not None
        return Where(self.gpus_per_node, self.nodes, self.spec, images, micro_batch, grad_accum)

    def framework_error(self, k: Knobs, micro_batch: int | None = None, grad_accum: int | None = None):
        """The plan's framework's own rules on these GPUs and this model (planner.frameworks: its validation, the
        exporter's and the bundled trainer's refusals), so that the search never ranks what the framework refuses."""
        refused = adapter(k.framework, k.release).cannot_here(k.__dict__, self.where(micro_batch, grad_accum))
        return BadInput(refused[1], refused[0]) if refused else None

    def parallel_error(self, k: Knobs) -> BadInput | None:
        """Tensor, sequence and context parallelism on these GPUs, this model and this sequence length."""
        tp, sp, cp = k.tensor_parallel, k.sequence_parallel, k.context_parallel
        if k.dataparallel and self.nodes > 1:
            return BadInput(
                f"--dataparallel over {self.nodes} nodes: torch's nn.DataParallel is one process on one node's GPUs "
                "(give --nodes 1)",
                "dataparallel",
            )
        if k.parallel == 1:
            return None
        if k.device_map > 1:
            return self.device_map_error(k)
        field = "tensor_parallel" if tp > 1 else "sequence_parallel" if sp > 1 else "context_parallel"
        shown = " x ".join(f"--{f.replace('_', '-')} {n}" for f, n in zip(PARALLEL, (tp, sp, cp)) if n > 1)
        if self.world_size % k.parallel:
            return BadInput(
                f"{shown} = {k.parallel} GPUs per sample must divide the world size {self.world_size}", field
            )
        if self.gpus_per_node % tp:
            return BadInput(
                f"--tensor-parallel {tp} stays within a node (its collectives run every layer): it must divide "
                f"--gpus-per-node {self.gpus_per_node}",
                "tensor_parallel",
            )
        if tp > 1 and self.experts is not None:
            return BadInput(f"--tensor-parallel {tp}: {self.model_name}'s experts are not split by the plan", field)
        if self.vision and self.images and self.heads is not None:  # a known VLM (heads given) with image tokens
            return BadInput(f"{shown} with images: the vision tower's split is not planned; plan text only", field)
        return self.heads_error(k, shown, field) or self.sequence_error(k, field)

    def device_map_error(self, k: Knobs) -> BadInput | None:
        """One process's GPUs are on one node; the placement is planned for dense models (planner.estimate.devicemap)."""
        if self.gpus_per_node % k.device_map:
            return BadInput(
                f"--device-map {k.device_map}: one process's GPUs are on one node; it must divide --gpus-per-node "
                f"{self.gpus_per_node}",
                "device_map",
            )
        if self.experts is not None:
            return BadInput(
                f"--device-map {k.device_map}: {self.model_name} has experts; device_map placement is planned for "
                "dense models only",
                "device_map",
            )
        return None

    def heads_error(self, k: Knobs, shown: str, field: str) -> BadInput | None:
        tp, sp = k.tensor_parallel, k.sequence_parallel
        if self.heads is None or self.kv_heads is None:
            return None
        if self.mla and tp > 1:
            return BadInput(f"--tensor-parallel {tp}: latent attention (MLA) is not split by the plan", field)
        if self.heads % (tp * sp):
            return BadInput(
                f"{shown}: the {self.heads} attention heads of {self.model_name} must divide by tensor x sequence "
                f"parallel ({tp * sp})",
                field,
            )
        if self.kv_heads % tp:
            return BadInput(
                f"--tensor-parallel {tp}: the {self.kv_heads} KV heads of {self.model_name} must divide by it",
                "tensor_parallel",
            )
        local = self.kv_heads // tp  # Ulysses splits KV heads too, or repeats them when fewer (verl#1226, ALST)
        if sp > 1 and local % sp and sp % local:
            return BadInput(
                f"--sequence-parallel {sp}: each rank's {local} KV heads must divide by it or divide it",
                "sequence_parallel",
            )
        return None

    def sequence_error(self, k: Knobs, field: str) -> BadInput | None:
        """Each rank gets an equal slice; ring attention's load balancing cuts 2 x CP chunks (accelerate pads to
        cp_size x 2). GRPO's rows, a prompt and a completion of any length, are padded to a multiple of the ranks by
        the framework that splits them (ms-swift 4.6.0 swift/sequence_parallel/sequence_parallel.py:385-396), so
        their slice is planned rounded up (planner.estimate.parallel.local_seq)."""
        sp, cp = k.sequence_parallel, k.context_parallel
        chunks = sp * cp * (2 if cp > 1 else 1)
        if self.seq_len is None or self.seq_len % chunks == 0 or k.workload.generates:
            return None
        up = -(-self.seq_len // chunks) * chunks
        return BadInput(
            f"--seq-len {self.seq_len} must divide into {chunks} equal chunks under sequence x context parallel "
            f"(pad to {up})",
            "seq_len",
        )

    def expert_error(self, n: int) -> BadInput | None:
        """Expert parallelism needs a routed model whose experts and world size it divides."""
        if n == 1:
            return None
        if self.experts is None:
            return BadInput(
                f"--expert-parallel {n}: {self.model_name} has no experts (a dense model)", "expert_parallel"
            )
        moe = self.spec.text.moe if self.spec is not None else None
        if (
            moe is not None and moe.dispatch == "dense"
        ):  # Llama4TextExperts views its E x tokens rows by its own experts
            return BadInput(
                f"--expert-parallel {n}: {self.model_name}'s experts run every token (transformers' dense dispatch, "
                "Llama4TextMoe), whose split over ranks memplan does not model; plan it without expert parallelism",
                "expert_parallel",
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
        why = k.workload.split_error(micro_batch, grad_accum, k.data_parallel_of(self.world_size))  # TRL's GRPO groups
        if not why and k.release and k.workload.kind == "grpo":  # a release whose batch counts prompts (trl 0.14)
            why = prompts_error(k.framework, k.release, micro_batch, k.workload.num_generations)
        if why:
            return BadInput(f"--micro-batch {micro_batch}: {why}", "micro_batch")
        return self.framework_error(k, micro_batch, grad_accum)

    def global_batch_error(self, w: Workload, global_batch: int, share: int = 1) -> BadInput | None:
        """A global batch no split can give: the data-parallel size (the world size over the `share` of GPUs per
        sample) must divide it; GRPO samples whole groups."""
        world = self.world_size
        if w.generates:  # an RL run's actor may have a group of its own (planner.config.roles)
            world = w.roles.actor_gpus(world)
        dp = world // share
        if global_batch % dp:
            lo = global_batch // dp * dp
            near = [x for x in (lo, lo + dp) if x > 0]
            size = f"world size {self.world_size}" if share == 1 else f"data-parallel size {dp}"
            return BadInput(
                f"--global-batch {global_batch} is not divisible by {size}; "
                f"nearest valid global batches: {', '.join(map(str, near))}",
                "global_batch",
            )
        if w.role_run and global_batch % w.num_generations:
            return BadInput(
                f"--global-batch {global_batch} is not divisible by --num-generations {w.num_generations}: the actor's "
                "mini-batch is whole prompts with their samples (verl ppo_mini_batch_size x rollout.n)",
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


PARALLEL = ("tensor_parallel", "sequence_parallel", "context_parallel")


def raise_if(error: BadInput | None) -> None:
    if error is not None:
        raise error
