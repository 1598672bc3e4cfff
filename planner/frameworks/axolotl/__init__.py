"""axolotl 0.19.0 (`axolotl train x.yaml`): checkpointing off by default (true, or offload to host RAM), Liger's or
cut cross-entropy, the chunked loss, sample packing, ZeRO and FSDP1/2; SFT, DPO, GRPO (rl gdpo as GRPO) and KTO
(TRL's KTOTrainer, planned with an adapter from v0.17.0: kto.py). Files cited are in the 0.19.0 wheel
(axolotl/utils/schemas/...). `RELEASES`: the lines people run, read at each tag (releases.py), each with the knobs it
runs (`adapter`): no GRPO before v0.7.0, no ring attention before v0.8.0 (sequence_parallel_degree) nor
tensor_parallel_size before v0.12.0, no offloaded checkpointing or Liger/chunked loss at v0.4.0."""

from dataclasses import replace

from planner.frameworks.axolotl import kto
from planner.frameworks.axolotl.keys import KEYS
from planner.frameworks.axolotl.releases import EXPANDABLE, NEWEST_TRANSFORMERS, SPANS
from planner.frameworks.axolotl.releases import RELEASES as LINES
from planner.frameworks.base import Default, Framework, Rule, kind, workload_of
from planner.frameworks.rules import VLM_LORA_ENDS, stacked_experts_prequant, thinker_alone, torchao_line_rules
from planner.frameworks.runs import (
    TORCH_OPTIMIZERS,
    TRANSFORMERS_LOW_RANK,
    TRANSFORMERS_ONE_STATE,
    TRANSFORMERS_TORCHAO,
)
from planner.frameworks.tool import Signs, Tool
from planner.frameworks.trl.releases import TRL_ZEROES_DROPOUT

# utils/freeze.py:16-26: the first components of the parameter names freeze_mm_modules freezes
MM_PREFIXES = (
    "vision_tower",
    "vision_model",
    "vision_encoder",
    "embed_vision",
    "multi_modal_projector",
    "visual",
    "audio_tower",
    "audio_model",
    "embed_audio",
)


def _unnamed_vision(k: dict, w) -> bool:
    """A frozen tower freeze_mm_modules cannot name: a module of the model's tower or projector outside MM_PREFIXES."""
    v = getattr(w.model, "vision", None)
    if k["frozen"] == "none" or v is None:
        return False
    return not all(m.split(".")[0] in MM_PREFIXES for m in v.tower_modules + v.projector_modules)


def _partial_groups(k: dict, w) -> bool:
    """GRPO whose generation batch does not hold num_generations completions for every rank."""
    g = workload_of(k)
    if g is None or kind(k) != "grpo":
        return False
    return g.generation_batch(w.micro_batch, w.grad_accum, w.world_size) < g.num_generations * w.world_size


EVERY = (  # every value of these (closed by default: planner.frameworks.base.Framework.runs)
    "precision",
    "zero_stage",
    "offload",
    "attention",
    "optimizer_rank",  # optim_args rank=
    "optimizer_targets",  # optim_target_modules (utils/schemas/training.py:132)
    "optimizer_projection",  # optim_args proj_type=
    "client_optimizer",  # a DeepSpeed config without an optimizer entry (deepspeed reader)
    "zero_buckets",  # the bucket sizes a DeepSpeed JSON sets itself (deepspeed reader)
    "lora_rank",
    "quant_absmax",
    "lora_targets",
    "lora_train_embeddings",
    "lora_ends",  # LoRA on embed_tokens / lm_head (its target list: intake.loraargs.END_NAMES)
    "lora_dropout",
    "lora_base_fp32",
    "frozen",
    "tensor_parallel",
    "context_parallel",
    "eval_batch",
    "eval_logits_steps",
    "save_weights",
)
RUNS = {
    "fsdp_load": ("sharded",),  # its FSDP loads shards or a unit at a time (Knobs.fsdp_load)
    "lora_dropout_kept": (False,),  # no disable_dropout key: TRL's default
    "lora_tower_full": (False,),
    # transformers' optim values pass through (utils/schemas/training.py:122); optimizer: muon (v0.8.0+, PR #2367
    # ae6637415; v0.18.0 utils/schemas/enums.py:92) runs axolotl-contribs-mit's MuonOptimizerFactory, its DistMuon
    # where a device mesh is built (v0.18.0 core/builders/base.py:314-329): Framework.muon_vectors below
    # adopt: axolotl's own adopt_adamw (utils/schemas/enums.py CustomSupportedOptimizers, since v0.5.2)
    "optimizer": (
        *TORCH_OPTIMIZERS,
        *TRANSFORMERS_LOW_RANK,
        "muon",
        *TRANSFORMERS_TORCHAO,
        *TRANSFORMERS_ONE_STATE,
        "adopt",
    ),
    "device_map": ("off",),  # one process a GPU
    "dataparallel": (False,),  # torch's nn.DataParallel: HF's Trainer alone
    # reward_model: true (from v0.5.0) is TRL's RewardTrainer, a one-label score head over chosen and rejected rows
    # (reader_task.py); process_reward_model and a classifier without it: not planned (named in a line)
    "num_labels": (1,),
    "negatives": (0, 1),
    "task": ("causal-lm", "seq-cls"),
    "trained_layout": ("last",),  # LLaMA-Pro's interleaved blocks: not run here
    "trained_layers": (0,),  # freeze tuning (LLaMA-Factory's finetuning_type freeze): not run here
    "lora_vision": (False,),  # adapters on the tower: not planned in this framework's keys yet
    "lora_variant": (
        "lora",
        "dora",
    ),  # adapter lora / qlora with peft_use_dora (0.21 utils/schemas/peft.py:41): no OFT, AdaLoRA or VeRA
    "vit_checkpointing": ("on",),  # HF's gradient_checkpointing_enable reaches the tower; no key leaves it out
    # offload-inputs: each layer's input in host RAM (Unsloth's checkpointer, or torch's checkpoint under TRL's
    # offloader); offload: every saved tensor, 0.19.0's adapter runs alone (reader_training.offload_mode)
    "checkpointing": ("off", "full", "offload", "offload-inputs"),
    "loss": ("standard", "fused", "chunked"),
    "batching": ("padded", "packed"),
    "fsdp": ("off", "full", "grad-op"),
    "optimizer_in_backward": (False,),
    "expert_parallel": ("off",),
    "quant": ("none", "nf4", "fp4", "int8", "gptq"),  # loaders/model.py:768 (gptq: true); no AWQ loader
    # kto: TRL's KTOTrainer (v0.18.0 core/builders/rl.py:77-78, 149-159; v0.5.0 core/trainer_builder.py:1919-1926,
    # 1982), planned from v0.17.0 with an adapter (kto.py); gdpo (v0.14.0+) is GRPO's trainer with multi_objective_aggregation (v0.18.0 core/builders/rl.py:53, 173-176)
    "workload": ("sft", "dpo", "grpo", "kto"),
    "sequence_parallel": ("off",),  # its sequence_parallel_degree is ring attention: context_parallel_size
    "cp_attention": ("ring",),
}
# before v0.12.0: no tensor_parallel_size (v0.12.0 utils/schemas/config.py:696); before v0.8.0 no
# sequence_parallel_degree (v0.8.0 config.py:255, ring-flash-attn); before v0.7.0 no rl grpo (v0.7.0
# core/trainer_builder.py:1014); v0.4.0 no "unsloth" checkpointing (v0.5.0 utils/models.py:380-381) and no Liger
NO_TP, NO_CP = {"tensor_parallel": ("off",)}, {"context_parallel": ("off",)}
NO_MUON = {
    "optimizer": (*TORCH_OPTIMIZERS, *TRANSFORMERS_LOW_RANK, *TRANSFORMERS_TORCHAO, *TRANSFORMERS_ONE_STATE, "adopt")
}  # v0.7.1: no muon
INPUTS_ONLY = {"checkpointing": ("off", "full", "offload-inputs")}  # no offload without a checkpoint before v0.18.0
OLDER = {"0.12": INPUTS_ONLY, "0.8": {**NO_TP, **INPUTS_ONLY}, "0.7": {**NO_TP, **NO_CP, **NO_MUON, **INPUTS_ONLY}}
OLDER["0.5"] = {**OLDER["0.7"], "workload": ("sft", "dpo", "kto")}  # KTOTrainer from v0.5.0 (trainer_builder.py:1919)
# v0.4.0: rl kto_pair alone, DPOTrainer's loss_type (core/trainer_builder.py:1047-1048), no KTOTrainer
OLDER["0.4"] = {**OLDER["0.5"], "checkpointing": ("off", "full"), "loss": ("standard",), "workload": ("sft", "dpo")}
OLDER["0.4"] |= {"task": ("causal-lm",), "negatives": (0,)}  # reward_model came at v0.5.0 (v0_4_1/__init__.py:590)
# transformers 4.37.0 (v0.4.0's pin) has no GaLore or APOLLO among its OptimizerNames (training_args.py:139-157)
# nor adopt_adamw, which came at v0.5.2 (core/trainer_builder.py); the 0.5 line's first release, v0.5.0, lacks it too
OLDER["0.4"] |= {"optimizer": tuple(o for o in NO_MUON["optimizer"] if o not in (*TRANSFORMERS_LOW_RANK, "adopt"))}
OLDER["0.5"] |= {"optimizer": tuple(o for o in NO_MUON["optimizer"] if o != "adopt")}


RULES = (  # every line's; the KTO it plans (kto.PLANNED_RULES) the newest's alone
    VLM_LORA_ENDS,
    stacked_experts_prequant("axolotl"),
    *torchao_line_rules("axolotl"),
    thinker_alone(  # loaders/model.py loads a VLM with AutoModelForImageTextToText
        "axolotl",
        "AutoModelForImageTextToText maps the Omni thinker's model_type alone: transformers 5.25 "
        "models/auto/modeling_auto.py:1286, 1291",
    ),
    Rule(
        "context_parallel",
        "context_parallel_size is ring-flash-attn's ring attention: it needs --attention flash "
        "(utils/schemas/validation.py:1804-1809)",
        lambda k: k["context_parallel"] > 1 and k["attention"] != "flash",
    ),
    Rule(  # AutoTP beside DeepSpeed (utils/schemas/validation.py:1282-1311), or accelerate's ParallelismConfig tp_size
        # with transformers' tp_plan beside FSDP2 (utils/distributed.py:322-344, loaders/model.py:972-973)
        "tensor_parallel",
        "tensor_parallel_size runs through DeepSpeed's AutoTP beside ZeRO 1 or 2, or transformers' tensor-parallel "
        "plan beside FSDP2 (utils/distributed.py:322-344): give --zero 1 or 2, or --fsdp full or grad-op",
        lambda k: (
            k["tensor_parallel"] > 1
            and not (k["zero_stage"] in (1, 2) and k["fsdp"] == "off")
            and k["fsdp"] not in ("full", "grad-op")
        ),
    ),
    Rule(  # reader_task.py: its one score head is reward_model's, over chosen and rejected rows
        "negatives",
        "trains a score head only as a reward model (reward_model: true, TRL's RewardTrainer over chosen and "
        "rejected rows: core/builders/causal.py:160-161, 515-516): give --negatives 1",
        lambda k: k["task"] == "seq-cls" and k["negatives"] != 1,
    ),
    Rule(  # v0.18.0 loaders/model.py:357-369: full fine-tuning keeps the checkpoint wrap under the offloader
        "checkpointing",
        "offloads every saved tensor without a checkpoint for adapter runs alone (activation_offloading, "
        "loaders/model.py:357-369): give --lora-rank, or --checkpointing offload-inputs",
        lambda k: k["checkpointing"] == "offload" and not k["lora_rank"],
    ),
    Rule(
        "frozen",
        "freezes a VLM's vision modules with their projector only (freeze_mm_modules, utils/freeze.py:16-26): "
        "use --frozen vision+projector",
        lambda k: k["frozen"] in ("vision", "language", "language+vision"),
    ),
    Rule(
        "optimizer",
        "runs Muon under FSDP2 on several GPUs as DistMuon (axolotl-contribs-mit 0.0.6 muon/dist_muon.py: whole "
        "matrices exchanged all-to-all for Newton-Schulz), whose step memplan has not measured: plan it on one GPU "
        "or with --fsdp off",
        lambda k, w: k["optimizer"] == "muon" and k["fsdp"] != "off" and w.world_size > 1,
        scope="layout",
    ),
    Rule(
        "optimizer",
        "refuses bitsandbytes 8-bit AdamW under FSDP2 (utils/schemas/validation.py:1249-1262)",
        lambda k: k["fsdp"] != "off" and k["optimizer"] == "adamw-8bit",
    ),
    Rule(
        "frozen",
        lambda k, w: f"freeze_mm_modules does not name {w.model.name}'s vision modules (utils/freeze.py:16-26)",
        _unnamed_vision,
        scope="layout",
    ),
    Rule(
        "global_batch",
        lambda k, w: (
            f"GRPO needs a generation batch of at least --num-generations x world size = "
            f"{k['workload'].num_generations * w.world_size} completions, each rank sampling whole groups (utils/"
            f"schemas/validation.py:829-903); this split samples "
            f"{k['workload'].generation_batch(w.micro_batch, w.grad_accum, w.world_size)}"
        ),
        _partial_groups,
        scope="split",
    ),
)


def _older(r):
    """Release `r` running only what its tag had (OLDER): those knobs out of EVERY, their values in RUNS. A line before
    the newest plans no KTO: RULES without kto.PLANNED_RULES, then the line's refusal (kto.REFUSED)."""
    if r is LINES[-1]:
        return r
    own = (kto.refused(r.name),) if r.name in kto.REFUSED else ()
    r = replace(r, adapter={**r.adapter, "rules": RULES}, rules=(*r.rules, *own))
    if r.name not in OLDER:
        return r
    every = tuple(k for k in EVERY if k not in OLDER[r.name])
    return replace(r, adapter={**r.adapter, "every": every, "runs": {**RUNS, **OLDER[r.name]}})


RELEASES = tuple(_older(r) for r in LINES)

# its other commands, which train nothing (067b021c8 src/axolotl/cli/main.py:58-357, click's dashed names)
IDLE = (
    ("preprocess", "dataset preprocessing"),
    ("inference", "inference"),
    ("evaluate", "evaluation"),
    ("merge-lora", "a LoRA merge"),
    ("merge-sharded-fsdp-weights", "a merge of FSDP shards"),
    ("vllm-serve", "an inference server (vLLM)"),
    ("quantize", "quantisation"),
    ("fetch", "a download of examples"),
)
FRAMEWORK = Framework(
    name="axolotl",
    reads=("axolotl",),
    signs=(Signs("axolotl", lambda k, d: "base_model" in k, 40),),
    tools=(
        Tool("axolotl", trains=("train",), modules=("axolotl.cli.train",), wraps="accelerate", idle=IDLE),
    ),  # accelerate launch
    writes=True,  # writer.py (planner.export.launch dispatches to it)
    label="axolotl",
    version="axolotl 0.19.0",
    package="axolotl",  # its pinned version decides the release (planner.intake.releases)
    releases=RELEASES,
    key_spans={"train": SPANS},
    every=EVERY,
    runs=RUNS,
    defaults={
        "checkpointing": Default("off", "axolotl/utils/schemas/config.py:606: gradient_checkpointing False"),
        "optimizer": Default("adamw-fused", "axolotl/utils/schemas/training.py:122: adamw_torch_fused"),
        "precision": Default("bf16", "axolotl/utils/schemas/config.py: bf16 auto (bf16 where the GPU has it)"),
        "expandable_segments": Default(True, EXPANDABLE),
    },
    keys=KEYS.shown(  # the frameworks table's keys, named by the key table
        "micro_batch grad_accum checkpointing zero_stage offload=zero_stage fsdp optimizer loss attention "
        "precision=bf16 lora_rank quant=quant_4bit context_parallel tensor_parallel seq_len batching model task num_labels",
        loss="chunked_cross_entropy / liger plugin",
        attention="flash_attention",
    ),
    notes=("checkpointing off by default; unknown keys are dropped silently by its validator",),
    rules=(*RULES, *kto.PLANNED_RULES),
    # utils/schemas/model.py:79-82: trust_remote_code None, loaders/model.py:689,951 pass it as False: only
    # transformers' classes load
    remote_code=False,
    # DPO's and GRPO's log-probs from the whole logits: the TRL every line pins computes them so (trl v0.12.0
    # dpo_trainer.py:1274 .. v1.9.0 dpo_trainer.py:1201, grpo_trainer.py:1521; each line's `workload` cites its pin)
    # its collator pads a micro-batch to its longest row, rounded up to 64 tokens, unless pad_to_sequence_len (the
    # reader's rows_fill_cap): sequence_len is then a cap
    pads_per_batch=(
        "axolotl pads each micro-batch to its longest row (a multiple of 64 tokens): v0.18.0 "
        "src/axolotl/core/builders/causal.py:383-395 (DataCollatorForSeq2Seq padding=True, pad_to_multiple_of 64 "
        "unless pad_to_sequence_len)"
    ),
    pad_multiple=64,  # pad_to_multiple_of 64 where pad_to_sequence_len is unset (v0.18.0 causal.py:386, 391-395)
    dpo_why={"packed": "axolotl refuses sample_packing with rl (utils/schemas/validation.py:705-708)"},
    kto_why={"packed": "axolotl refuses sample_packing with rl kto (v0.18.0 utils/schemas/validation.py:695-698)"},
    logprobs="full",
    # its DPO and KTO are TRL's trainers with TRL's disable_dropout default (v0.18.0 src/ sets none)
    zeroes_dropout={k: TRL_ZEROES_DROPOUT[k] for k in ("dpo", "kto")},
    # KTO: TRL 1.8.0 / 1.9.0's KTOTrainer (v0.18.0 pyproject.toml:23, 0.19.0's metadata; v0.17.0's 1.5.1 alike):
    # TRL's 1.7 and 1.0 lines' terms (planner.estimate.kto_entropy; kto.py)
    kto_entropy_copy=True,
    transformers_newest=NEWEST_TRANSFORMERS,  # 0.19.0's pin (each line's: releases.py)
    peft_newest=(0, 20, 0),  # 0.19.0's Requires-Dist peft==0.20.0 (.fwenv/axolotl's METADATA)
    all_linear_names=True,  # lora_target_linear: loaders/adapter.py:54 find_all_linear_names (:175)
    # kept as planner.intake.settle had it (not re-read: loaders/adapter.py:174-182 names every Linear's leaf name)
    all_linear_vision=False,
    # axolotl-contribs-mit 0.0.6 (v0.14.0 .. 0.19.0's pin): MuonOptimizerFactory skips every parameter under 2-D
    # (muon/muon.py:217-219) where no device mesh is built (one GPU: v0.18.0 utils/distributed.py:299-317, 350-353);
    # DistMuonOptimizerFactory (muon/dist_muon.py:626-640) gives them AdamW's momentum and variance (:156-163)
    muon_vectors="dropped-one-gpu",
    muon_newton_schulz="compiled",  # @torch.compile (contribs 0.0.3-0.0.5 muon.py:13, 0.0.6 muon/muon.py:13)
    muon_fsdp=True,  # v0.14.0+ (validation.py:891-903); v0.8.0-v0.13.x refuse it (releases.py)
    low_rank_head=True,  # transformers' all-linear optim_target_modules (trainer_optimizer.py:133-149)
)
