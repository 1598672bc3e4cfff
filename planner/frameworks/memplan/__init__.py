"""memplan's bundled trainer (`planner train`): it runs every knob the planner has but prequantized GPTQ/AWQ bases
(it builds the model from its config with random weights, and gptqmodel is not among its dependencies), expert
parallelism, and the splits its loop refuses (trainer/setup.py, trainer/step.py, recipe/parallel.py): its rules
here prune the search so that `suggest` never ranks a plan `planner train` then refuses."""

from planner.frameworks.base import Framework, Rule
from planner.frameworks.runs import TORCH_OPTIMIZERS, TRANSFORMERS_ONE_STATE


def _split(k: dict) -> bool:
    return k["sequence_parallel"] > 1 or k["tensor_parallel"] > 1


FRAMEWORK = Framework(
    name="memplan",
    label="the bundled trainer, planner train",
    version="this checkout",
    every=(  # every value of these (closed by default: planner.frameworks.base.Framework.runs)
        "precision",
        "optimizer_rank",  # GaLore's and APOLLO's, inert under the optimizers it runs
        "optimizer_targets",
        "optimizer_projection",
        "checkpointing",
        "zero_stage",
        "offload",
        "fsdp",
        "loss",
        "attention",
        "batching",
        "lora_rank",
        "optimizer_in_backward",
        "quant_absmax",
        "lora_targets",
        "lora_train_embeddings",
        "lora_ends",  # recipe.lora_config: target_modules with embed_tokens / lm_head
        "lora_dropout",
        "lora_variant",
        "lora_vision",
        "lora_tower_full",  # recipe.model._train_tower
        "lora_base_fp32",
        "frozen",
        "trained_layers",  # freeze tuning (planner.estimate.freeze)
        "vit_checkpointing",
        "expert_parallel",
        "tensor_parallel",
        "sequence_parallel",
        "eval_batch",
        "eval_logits_steps",
        "save_weights",
        "zero_buckets",  # a DeepSpeed JSON's own bucket sizes (its export writes them)
    ),
    # context parallel: torch's context_parallel shards only CUDA's SDPA kernels (torch 2.13
    # distributed/tensor/experimental/_context_parallel/_attention.py:918-945), so the trainer cannot run it on gloo
    runs={
        "fsdp_load": ("sharded",),  # its FSDP loads shards or a unit at a time (Knobs.fsdp_load)
        "lora_dropout_kept": (False,),  # its DPO keeps dropout as set (no trainer zeroes it)
        # last, first, LLaMA-Pro's interleaved blocks, and LLaMA-Pro's blocks inserted at load as ms-swift's
        # --tuner_type llamapro does (recipe/model.py _insert_blocks: copies of the layer before, o_proj and
        # down_proj zeroed, after the checkpoint is loaded)
        "trained_layout": ("last", "interleaved", "first", "inserted"),
        # recipe.make_optimizer builds torch's and bitsandbytes' optimizers only: AdamW's kinds, SGD, Adafactor, and
        # since stop 74 the one-state ones (Lion, RMSprop, Adagrad: tests/trainer/test_one_state_train.py)
        "optimizer": (*TORCH_OPTIMIZERS, *TRANSFORMERS_ONE_STATE),
        # a user's DeepSpeed JSON without an optimizer: the trainer steps its torch optimizer as DeepSpeed's client
        # (it always does: recipe/dist.py:19-25 drops the optimizer block; its own export names one, counted as fused)
        "client_optimizer": (False, True),
        "workload": ("sft", "dpo", "grpo", "ppo", "rloo", "reinforce++"),  # no gkd: trainer/rl.py builds no GKDTrainer
        "device_map": ("off",),  # one process a GPU
        "dataparallel": (False,),  # torch's nn.DataParallel: HF's Trainer alone
        "num_labels": (1,),  # causal-lm only: the task's knobs at their defaults
        "negatives": (0,),
        "task": ("causal-lm",),  # planner train builds AutoModelForCausalLM
        "quant": ("none", "nf4", "fp4", "int8"),
        "context_parallel": ("off",),
        "cp_attention": ("ring",),
    },
    rules=(
        Rule(  # recipe.lora_config builds PEFT's tuners alone (recipe/__init__.py)
            "lora_variant",
            "--lora-variant adapter is ms-swift's own AdapterModule (swift/tuners/adapter.py), which the bundled "
            "trainer does not build: give --framework swift",
            lambda k: k["lora_variant"] == "adapter",
        ),
        Rule(  # planner/cli/train.py: the bundled trainer runs data parallelism only
            "expert_parallel",
            "--expert-parallel: the bundled trainer runs data parallelism only; the plan is transformers' own FSDP2 "
            "with DistributedConfig(ep_size=N) in your script: give --framework hf",
            lambda k: k["expert_parallel"] > 1,
        ),
        Rule(
            "tensor_parallel",
            "--tensor-parallel shards each layer with torch's DTensor plan, beside FSDP2 over the other ranks "
            "(torchtitan's 2-D mesh): give --fsdp full or grad-op",
            lambda k: k["tensor_parallel"] > 1 and k["fsdp"] not in ("full", "grad-op"),
        ),
        Rule(
            "tensor_parallel",
            "--tensor-parallel splits the model's own linears: full fine-tuning only (--lora-rank 0)",
            lambda k: k["tensor_parallel"] > 1 and k["lora_rank"] > 0,
        ),
        Rule(
            "batching",
            "--batching packed with --sequence-parallel: the bundled trainer's Ulysses attention is causal over each "
            "padded row, without the packed rows' document masks",
            lambda k: k["batching"] == "packed" and k["sequence_parallel"] > 1,
        ),
        Rule(  # trainer/step.py:69-76, raised in every rank after init_process_group
            "loss",
            "the chunked and fused losses run outside the FSDP root's forward in the bundled trainer: with --fsdp, "
            "give --loss standard (or DDP or ZeRO for that loss)",
            lambda k: k["fsdp"] != "off" and k["loss"] != "standard",
        ),
        Rule(  # trainer/setup.py refuse_parallel: --eval-every with sequence or tensor parallel
            "eval_batch",
            "--eval-batch with --sequence-parallel or --tensor-parallel: the bundled trainer does not evaluate split "
            "ranks yet",
            lambda k: k["eval_batch"] > 0 and _split(k),
        ),
        Rule(  # recipe/parallel.py shard_tensor_parallel: one weight cannot be both vocabulary- and column-parallel
            "tensor_parallel",
            lambda k, w: (
                f"--tensor-parallel with {w.model.name}'s tied input and output embeddings: the bundled "
                "trainer splits them as two weights"
            ),
            lambda k, w: k["tensor_parallel"] > 1 and w.model is not None and w.model.text.tied,
            scope="layout",
        ),
        Rule(  # trainer/setup.py:43-47 (trainer.router.RouterAux: an MoE config with output_router_logits)
            "sequence_parallel",
            lambda k, w: f"--sequence-parallel with {w.model.name}'s router aux loss: not run by the bundled trainer",
            lambda k, w: (
                k["sequence_parallel"] > 1
                and w.model is not None
                and w.model.text.moe is not None
                and w.model.text.moe.aux_loss_coef > 0
            ),
            scope="layout",
        ),
    ),
    keys={"micro_batch": "--micro-batch", "grad_accum": "--grad-accum", "seq_len": "--seq-len"},
    fsdp_reduce="fp32",  # recipe/__init__.py shard_fsdp: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)
    loop="bundled",
    notes=(
        (
            "every knob but GPTQ/AWQ bases and expert parallel: selective-op and every-N checkpointing, the chunked "
            "loss (not under FSDP), optimizer in backward, token budgets"
        ),
    ),
)
