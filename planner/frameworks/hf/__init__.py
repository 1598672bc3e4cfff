"""Hugging Face Trainer (transformers 5.23.0) with PEFT and bitsandbytes in the user's script: full-layer
checkpointing, Liger's fused loss, no packing, supervised fine-tuning only (DPO and GRPO are TRL's).

Releases (`HF_RELEASES`, read in the wheels): the Trainer's optimizer default was adamw_torch through 4.53
(training_args.py:1281 at 4.53.0; 1284-1293 at 4.49.0, the release VLM-R1 pins) and adamw_torch_fused on torch >= 2.8
from 4.54 (training_args.py:1286-1291 at 4.54.0); 5.24 renamed gradient_checkpointing to activation_checkpointing
(training_args.py:302-315, the old name a deprecated alias), after the 5.23 this adapter writes."""

from planner.frameworks.base import Default, Framework, Release, Rule, autotp_rule, transformers_5_quant
from planner.frameworks.rules import stacked_experts_prequant
from planner.frameworks.runs import (
    TORCH_OPTIMIZERS,
    TRANSFORMERS_LOW_RANK,
    TRANSFORMERS_ONE_STATE,
    TRANSFORMERS_TORCHAO,
)
from planner.frameworks.tool import Signs

TF = "transformers 5.23.0 training_args.py"
HF_RUNS = {
    "fsdp_load": ("sharded",),  # its FSDP loads shards or a unit at a time (Knobs.fsdp_load)
    "lora_dropout_kept": (False,),  # TrainingArguments has no disable_dropout; TRL's configs do (TRL_RUNS)
    "lora_tower_full": (False,),  # no TRL or HF key trains the tower in full beside LoRA
    # TRL's ModelConfig writes LoRA or DoRA alone (use_dora: trl/trainer/model_config.py:142); AdaLoRA and VeRA
    # need a script's own PEFT config and, for AdaLoRA, its update_and_allocate in the loop: not written; OFT from a
    # script's OFTConfig is planned and not written (the rule below)
    "lora_variant": ("lora", "dora", "oft", "boft"),
    # a script loads AutoModelForSequenceClassification (transformers 5.25 modeling_layers.py
    # GenericForSequenceClassification: score = Linear(hidden, num_labels, bias=False)); TRL 1.16 RewardTrainer the same
    # with num_labels 1 (trl/trainer/reward_trainer.py)
    "task": ("causal-lm", "seq-cls"),
    "trained_layout": ("last",),  # LLaMA-Pro's interleaved blocks: not run here
    "trained_layers": (0,),  # freeze tuning (LLaMA-Factory's finetuning_type freeze): not run here
    "checkpointing": ("off", "full"),
    "loss": ("standard", "fused"),
    "batching": ("padded",),
    # optim galore_adamw_layerwise, galore_adamw_8bit_layerwise, apollo_adamw_layerwise (trainer_optimizer.py:164-184)
    "optimizer_in_backward": (False, True),
    # no muon among transformers 5.25's OptimizerNames (training_args.py:144-157 GaLore's and APOLLO's)
    "optimizer": (*TORCH_OPTIMIZERS, *TRANSFORMERS_LOW_RANK, *TRANSFORMERS_TORCHAO, *TRANSFORMERS_ONE_STATE),
    # transformers' own FSDP2 with DistributedConfig(fsdp_size, ep_size) in the user's script (transformers 5.25
    # distributed/configuration_utils.py:64-79: ep_size divides fsdp_size x tp_size, all-to-all dispatch)
    "expert_parallel": ("off", "on"),
    "workload": ("sft",),
    "vit_checkpointing": ("on",),  # gradient_checkpointing_enable reaches the tower's layers; no flag leaves them out
    "cp_attention": ("ring", "all-gather"),  # accelerate's cp_comm_strategy alltoall and allgather
    # python train.py over several visible GPUs: nn.DataParallel (transformers 4.40.2 trainer.py:1628-1629, 5.6.0 :2426)
    "dataparallel": (False, True),
}
ACCELERATE = "accelerate 1.15.0"
# accelerate's ParallelismConfig, which HF's Trainer (and TRL's) takes: sp_size on DeepSpeed (ALST), cp_size on FSDP2,
# not both; tensor parallel through DeepSpeed's AutoTP (accelerate 1.15's FSDP2 + TP path imports transformers'
# ReplicateParallel, which transformers 5.24 no longer has: accelerator.py:1618)
HF_SPLIT_RULES = (
    Rule(
        "optimizer_in_backward",
        "a step inside backward is transformers' optim *_layerwise, GaLore's and APOLLO's only (transformers 5.25 "
        "trainer_optimizer.py:164-184): it needs --optimizer galore-adamw, galore-adamw-8bit or apollo-adamw",
        lambda k: k["optimizer_in_backward"] and k["optimizer"] not in TRANSFORMERS_LOW_RANK,
    ),
    Rule(
        "sequence_parallel",
        f"--sequence-parallel is accelerate's sp_size, which runs on DeepSpeed only ({ACCELERATE} accelerator.py:"
        "2394-2405): give --zero 1, 2 or 3",
        lambda k: k["sequence_parallel"] > 1 and (k["zero_stage"] == 0 or k["fsdp"] != "off"),
    ),
    Rule(
        "context_parallel",
        f"--context-parallel is accelerate's cp_size, which needs FSDP2 ({ACCELERATE} state.py:998-1008): give --fsdp "
        "full or grad-op",
        lambda k: k["context_parallel"] > 1 and k["fsdp"] == "off",
    ),
    Rule(
        "context_parallel",
        f"--context-parallel with --sequence-parallel: accelerate runs one or the other ({ACCELERATE} "
        "parallelism_config.py:329-334)",
        lambda k: k["context_parallel"] > 1 and k["sequence_parallel"] > 1,
    ),
    autotp_rule("transformers' deepspeed integration; accelerate's FSDP2 + TP path is broken at 1.15"),
    Rule(  # a user's script with PEFT's OFTConfig runs it (planner/intake/pyscript.py reads it); no flag spells it
        "lora_variant",
        lambda k, w: (
            f"--lora-variant {k['lora_variant']} is PEFT's {k['lora_variant'].upper()}Config in a training script: "
            "TRL's CLI and the Trainer's flags have none, so no file is written for it (a script that builds it is "
            "read and planned)"
        ),
        lambda k, w: k.get("lora_variant") in ("oft", "boft") and bool(k.get("lora_rank")),
        "written",
    ),
    Rule(  # the Trainer sees a model placed over several GPUs (hf_device_map) and runs it without DDP
        "device_map",
        lambda k, w: (
            f"--device-map {k['device_map']} under HF's Trainer is one process over the visible GPUs (python train.py, "
            f"the model loaded with device_map='auto'): it needs --gpus-per-node {k['device_map']} on one node, not "
            f"{w.world_size} GPUs"
        ),
        lambda k, w: k["device_map"] > 1 and w.world_size != k["device_map"],
        scope="layout",
    ),
)
HF_KEYS = {
    "micro_batch": "per_device_train_batch_size",
    "grad_accum": "gradient_accumulation_steps",
    "checkpointing": "gradient_checkpointing",
    "zero_stage": "deepspeed",
    "offload": "deepspeed",
    "fsdp": "fsdp",
    "optimizer": "optim",
    "loss": "use_liger_kernel",
    "attention": "attn_implementation",
    "precision": "bf16",
    "lora_rank": "LoraConfig(r=...)",
    "quant": "BitsAndBytesConfig(load_in_4bit=True)",
    "seq_len": "max_length",
    "model": "model_name_or_path",
    "sequence_parallel": "parallelism_config_sp_size",
    "context_parallel": "parallelism_config_cp_size",
    "tensor_parallel": "tensor_parallel.autotp_size",
}
HF_DEFAULTS = {
    "checkpointing": Default("off", f"{TF}: gradient_checkpointing=False"),
    "optimizer": Default("adamw-fused", f"{TF}:806-812: optim adamw_torch_fused on torch >= 2.8"),
    "micro_batch": Default(8, f"{TF}: per_device_train_batch_size=8"),
    "grad_accum": Default(1, f"{TF}: gradient_accumulation_steps=1"),
    "precision": Default("fp32", f"{TF}: bf16=False, fp16=False"),
}
ADAMW_4 = Default("adamw", "transformers 4.49.0 training_args.py:1284-1293: optim adamw_torch; 4.53.0: :1281")
# transformers 4.x reads no fsdp_config "version" (reading.MEANINGS), and runs FSDP2's hybrid_shard as a full shard
IGNORED = {"fsdp_config_version": "ignored", "fsdp2_hybrid": "full"}
FSDP1_UNSAID = {"fsdp_config_version": "default 1", "fsdp2_hybrid": "full"}  # 5.0-5.9: read, FSDP1 where it names none
# FSDP2's hybrid shard (HSDP) at the 4 line runs with accelerate >= 1.10.1, which the written requirements pin
# (launchenv.ACCELERATE_HSDP; the line's month ran 1.8.1, whose fully_shard takes no mesh: utils/fsdp_utils.py:615-659):
# transformers 4.53.0's Trainer builds Accelerator(**args) with no parallelism_config (trainer.py:5192-5209), and
# accelerate 1.10.1 then builds ParallelismConfig() from ACCELERATE_USE_PARALLELISM_CONFIG and the PARALLELISM_CONFIG_*
# sizes (accelerator.py:454-459) and the dp_replicate x dp_shard mesh (:474-476), as the 4.56 Trainer does for HSDP.
# Measured (docs/tests.md): 4.53.0's Trainer on 4 gloo ranks from the written files, accelerate 1.10.1, holds the 2x2
# mesh; fully_shard over it leaves each rank half the parameters (tests/planner/export/test_hsdp_export.py, sweep)
# sequence and context parallel reach HF's Trainer as TrainingArguments.parallelism_config (planner.export.parallel),
# a field from transformers 4.56 (4.56.2 training_args.py:1279; 4.54.1's and 4.55.4's parsers refuse the file:
# tests/planner/export/test_parallelism_pin.py): none at the 4 line (4.0 .. 4.53), whose pin cannot reach it
NO_PARALLELISM_4 = Rule(
    "context_parallel",
    "transformers 4.53's TrainingArguments has no parallelism_config (a field from 4.56: 4.56.2 training_args.py:1279), "
    "which carries --context-parallel and --sequence-parallel: give --framework hf@4.54 or later",
    lambda k, w: k["context_parallel"] > 1 or k["sequence_parallel"] > 1,
    scope="written",
)
# Ulysses (ALST) needs the Trainer's own part, from transformers 5 (5.6.0 trainer.py:500-503 the loss's token count,
# 1632-1635 deepspeed_ulysses_dl_adapter; 4.57.1's trainer.py has neither) and accelerate's sp_size (v1.12.0
# parallelism_config.py:75; none at 1.11.0): the 4.54 line's Trainer would run each rank on the whole sequence
ULYSSES_4 = Rule(
    "sequence_parallel",
    "transformers 4.x's Trainer runs no Ulysses (ALST) split (5.6.0 trainer.py:1632-1635 deepspeed_ulysses_dl_adapter; "
    "none at 4.57.1): give --framework hf@5 or later",
    lambda k, w: k["sequence_parallel"] > 1,
    scope="written",
)
# each line's newest transformers (Framework.transformers_newest), which decides Llama-4's loss (Traits.half_loss:
# Llama4ForConditionalGeneration's in the logits' dtype from 4.51.0, the class's first, until 5.17.0): 4.53.x, 4.57.x
# and 5.9.x a bf16 loss; 5.23.0, the newest line's, an fp32 one (a script of 5.10-5.16 is planned the hungrier way)
HF_RELEASES = (
    # the 4 line's forward returned fp32 logits through 4.45 (Framework.returned_logits): planned the hungrier way
    Release(
        "4",
        (4, 0),
        "transformers 4.49.0, 4.53.0",
        defaults={"optimizer": ADAMW_4},
        meaning=IGNORED,
        adapter={"returned_logits": "fp32", "rules": HF_SPLIT_RULES, "transformers_newest": (4, 53, 0)},
        rules=(NO_PARALLELISM_4,),
    ),
    Release(
        "4.54",
        (4, 54),
        "transformers 4.54.0",
        meaning=IGNORED,
        # a compressed-tensors or HQQ base trains on 4.x (transformers_5_quant); 4.57.1 the newest 4.x read
        adapter={"rules": HF_SPLIT_RULES, "transformers_newest": (4, 57, 1)},
        rules=(ULYSSES_4,),
        defaults={
            "optimizer": Default(
                "adamw-fused", "transformers 4.54.0 training_args.py:1286-1291: adamw_torch_fused on torch >= 2.8"
            )
        },
    ),
    # 5.0-5.9 read fsdp_config's "version" as 5.10 on do, FSDP1 where it names none (reading.MEANINGS); the rest is
    # the newest line's (optim adamw_torch_fused on torch >= 2.8: 5.9.0 training_args.py:811-816;
    # per_device_train_batch_size 8 :782)
    Release(
        "5",
        (5, 0),
        "transformers 5.0.0 .. 5.9.x (training_args.py:2812 at 5.9.0)",
        meaning=FSDP1_UNSAID,
        adapter={"transformers_newest": (5, 9, 0)},
    ),
    Release(
        "5.10",
        (5, 10),
        "transformers 5.10.0 .. 5.23.0 (training_args.py:2736 at 5.10.0: version 2 unsaid)",
    ),
)
# keys of TrainingArguments that only releases whose optim default was adamw_torch (torch's foreach AdamW) take: the
# file that sets one targets such a release. evaluation_strategy: 4.45.2 training_args.py:1381 (default optim :1267),
# 4.47.0 :1402 (:1273), gone at 4.53.0 (default optim adamw_torch through 4.53: :1281; fused from 4.54)
OLD_OPTIM_KEYS = {"evaluation_strategy": "transformers 4.47.0 training_args.py:1273,1402 (no such key from 4.53)"}


def old_optim_default(keys) -> tuple[str, str] | None:
    """(HF's optim default, its citation) where the file's keys show a transformers release before 4.53, else None."""
    for key, cite in OLD_OPTIM_KEYS.items():
        if key in keys:
            return "adamw_torch", f"{cite}: the file's {key} is a key of transformers releases before 4.53"
    return None


# what HF's Trainer runs at every value (closed by default: planner.frameworks.base.Framework.runs); TRL, accelerate
# and DeepSpeed run on it
HF_EVERY = (
    "num_labels",
    "negatives",
    "precision",
    "zero_stage",
    "offload",
    "fsdp",
    "attention",
    "optimizer_rank",  # optim_args rank=
    "optimizer_targets",  # optim_target_modules
    "optimizer_projection",  # optim_args proj_type= (trainer_optimizer.py:373, 402)
    "client_optimizer",  # a DeepSpeed config without an optimizer entry (deepspeed reader)
    "zero_buckets",  # the bucket sizes a DeepSpeed JSON sets itself (deepspeed reader)
    "lora_rank",
    "quant",
    "quant_absmax",
    "lora_targets",
    "lora_train_embeddings",
    "lora_ends",  # LoRA on embed_tokens / lm_head (its target list: intake.loraargs.END_NAMES)
    "lora_dropout",
    "lora_vision",
    "lora_base_fp32",
    "frozen",
    "tensor_parallel",
    "sequence_parallel",
    "context_parallel",
    "eval_batch",
    "eval_logits_steps",
    "save_weights",
)


FRAMEWORK = Framework(
    name="hf",
    one_process_dataparallel=True,
    reads=("hf",),  # TRL's configs too: the trainer the file names decides its defaults (reader.trainer_of)
    # told last: any transformers / TRL argument name (Signs.listed: presets/keys_hf.txt), or an FSDP pair
    signs=(Signs("hf", lambda k, d: {"fsdp", "fsdp_config"} <= k, 80, listed=True),),
    script_flags=True,  # a training script's own TrainingArguments flags (reader.trainer_of, read, read_forks)
    trainers=("hf",),  # reader.trainer_of's name for transformers' plain Trainer; TRL's trainers are trl's
    package="transformers",  # its pinned version decides the release (planner.intake.releases)
    label="Hugging Face Trainer",
    version="transformers 5.23.0",
    transformers_newest=(5, 23, 0),  # the newest line's: Llama-4's loss upcast (HF_RELEASES)
    low_rank_head=True,  # transformers' all-linear optim_target_modules (trainer_optimizer.py:133-149)
    every=(*HF_EVERY, "device_map"),
    runs=HF_RUNS,
    defaults=HF_DEFAULTS,
    keys=HF_KEYS,
    notes=("checkpointing off by default; no packing; freezing modules is the script's job",),
    rules=(*HF_SPLIT_RULES, transformers_5_quant("hf"), stacked_experts_prequant("hf")),
    releases=HF_RELEASES,
    # the Trainer's keys only some lines take (OLD_OPTIM_KEYS): one narrows the lines a script allows; a script that
    # pins none is planned at each line it allows (planner.intake.releases.decide), the hungrier verdict answered
    key_spans={"hf": {"evaluation_strategy": ((4, 0), (4, 53))}},
)
