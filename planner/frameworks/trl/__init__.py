"""TRL (1.16.0): HF's Trainer with packing, DPO and GRPO; its configs turn checkpointing and bf16 on by default, and its
SFT trainer computes the loss through a fused log-prob head on every model (trl/trainer/sft_trainer.py:1142-1147,
1610-1618): no full logits, and no Liger loss (refused in SFT, :1127-1140).

`RELEASES`: the lines people run, each read at its tag in github.com/huggingface/trl (`git show TAG:PATH`), and the
GRPO forks that froze an early one (R1-V and VLM-R1's first trainer, Qwen2VLGRPOTrainer; VLM-R1's VLMGRPOTrainer).
What moved between them:
- GRPO's per_device_train_batch_size counted prompts, each sampling num_generations completions (v0.14.0
  grpo_config.py:159-165, grpo_trainer.py:335,417); since PR #2776 (cf97133d5, first in v0.15.0) it counts completions.
- beta 0.04 (a reference model) through 0.18; 0.0 from v0.19.0 (grpo_config.py:412-413).
- gradient checkpointing off (GRPOConfig subclassed TrainingArguments, whose default is False) until v0.22.0
  (grpo_config.py:247-248 True; later base_config.py:62).
- no mixed precision by default (TrainingArguments' bf16=False, fp16=False) until v0.19.0, whose GRPOConfig and
  SFTConfig turn bf16 on where fp16 is off (grpo_config.py:219-225, 530; sft_config.py:111-117, 252).
- GRPO's own flags came and went (KEY_SPANS, read in each tag's grpo_config.py and sft_config.py): a run's flags
  narrow the releases its files allow.
- max_completion_length 256 until PR #6264 (286d19fc7, 1.10.0.dev0) made it 512.
- SFT's loss: the full logits before 1.7 (the trl-0 adapter: v0.29.1 sft_trainer.py:1234-1236; loss_type nll through
  v1.6.x), chunked_nll 1.7 .. 1.14.x (the 1.7, 1.10 and 1.14 lines), TRL's fused log-prob head from 1.15, which alone refuses Liger's loss and scores
  KTO without the whole logits (releases.py ONE_X_RUNS, KTO_WHOLE; 1.7's and 1.10's whole-logits KTO planned,
  planner.estimate.kto_entropy; 1.14's refused); accelerate's ParallelismConfig reached HF's
  Trainer after 0.x (transformers PR#40205).
Adding a release is one Release in RELEASES (planner.frameworks.trl.releases); a fork of TRL, one in FORKS (.forks)."""

from dataclasses import replace

from planner.frameworks.base import NO_SPLITS, ForkSigns, Framework
from planner.frameworks.hf import HF_EVERY, HF_KEYS, HF_SPLIT_RULES
from planner.frameworks.rules import kto_two_rows, stacked_experts_prequant, torchao_line_rules, transformers_5_quant
from planner.frameworks.tool import Tool
from planner.frameworks.trl.forks import FORKS
from planner.frameworks.trl.lines import with_fsdp1_only, with_rules
from planner.frameworks.trl.releases import (  # noqa: F401 - re-exported (accelerate's, axolotl's adapters import them)
    NO_DPO_SPLIT,
    NO_KTO_SPLITS,
    NO_PADDING_FREE,
    RELEASES,
    TRL_DEFAULTS,
    TRL_RUNS,
    TRL_ZEROES_DROPOUT,
    WHOLE,
)

GRPO_SPANS = {
    **dict.fromkeys(("log_completions", "sync_ref_model", "reward_weights"), ((0, 15), None)),
    **dict.fromkeys(
        ("num_iterations", "epsilon", "scale_rewards", "vllm_server_host", "top_p", "top_k", "min_p"), ((0, 16), None)
    ),
    **dict.fromkeys(("loss_type", "mask_truncated_completions", "disable_dropout"), ((0, 17), None)),
    **dict.fromkeys(
        ("steps_per_generation", "generation_batch_size", "vllm_mode", "vllm_tensor_parallel_size"), ((0, 18), None)
    ),
    "importance_sampling_level": ((0, 20), None),
    **dict.fromkeys(("vllm_dtype", "vllm_max_model_len"), ((0, 15), (0, 18))),
    "vllm_enable_prefix_caching": ((0, 16), (0, 18)),
    "vllm_device": (None, (0, 18)),
    "use_liger_loss": ((0, 17), (0, 28)),
    "max_prompt_length": (None, (0, 28)),
}
SFT_SPANS = {
    "max_seq_length": (None, (0, 20)),
    **dict.fromkeys(("max_length", "padding_free"), ((0, 16), None)),
    **dict.fromkeys(("completion_only_loss", "eos_token", "pad_token"), ((0, 17), None)),
    "activation_offloading": ((0, 18), None),
    "use_liger": (None, (0, 18)),
    **dict.fromkeys(("assistant_only_loss", "packing_strategy"), ((0, 19), None)),
}
# GRPO forks that froze a TRL release, by their trainer classes (the releases "r1-v" and "vlm-r1"), by a flag only
# their script takes and by their files where the script is not among the user's (planner.intake.releases reads them)
FORK_CLASSES = (("VLMGRPOTrainer", "vlm-r1"), ("Qwen2VLGRPOTrainer", "r1-v"))
# GRPO forks by a flag only their script takes: Video-R1 (59d65c3) src/r1-v/src/open_r1/grpo.py:55-60 --temporal,
# --len_control; its trainer (:286 Qwen2VLGRPOVLLMTrainerModified with vLLM, else Qwen2VLGRPOTrainer) is R1-V's,
# repeating each prompt num_generations times (trainer/vllm_grpo_trainer_modified.py:615): its batch counts prompts
VIDEO_R1 = "Video-R1's flag, src/r1-v/src/open_r1/grpo.py:55-60; its trainer is R1-V's Qwen2VLGRPOTrainer's copy"
FORK_FLAGS = (("temporal", "r1-v", VIDEO_R1), ("len_control", "r1-v", VIDEO_R1))
# GRPO forks by their files' names, first match wins: VLM-R1's grpo_jsonl.py came with VLMGRPOTrainer (4081ec3); its
# grpo_rec.py ran Qwen2VLGRPOTrainer, each prompt sampled num_generations times, until 0586aee (2025-03-03; 1af6d4a
# grpo_trainer.py:336-341 num_return_sequences, 717-723 one row a prompt), then VLMGRPOTrainer (fd242e0
# grpo_rec.py:35, counting completions: grpo_trainer.py:828-841); R1-V's first layout was src/open-r1-multimodal too
# (the R1-V issue #61 script `cd`s there). A name more than one trainer ran allows each (the first planned).
FORK_PATHS = (
    ("grpo_jsonl.py", ("vlm-r1",)),
    ("grpo_rec.py", ("vlm-r1", "r1-v")),
    ("open-r1-multimodal", ("vlm-r1", "r1-v")),
    ("VLM-R1", ("vlm-r1", "r1-v")),
    ("r1-v", ("r1-v",)),
)


TRANSFORMERS_5 = transformers_5_quant("trl")  # the 1.x lines refuse a compressed-tensors or HQQ base


FRAMEWORK = Framework(
    name="trl",
    image_knobs=("--max_pixels", "--max_anyres_num"),  # the GRPO scripts' own flags (VLM-R1's)
    package="trl",
    forks=ForkSigns(FORK_CLASSES, FORK_FLAGS, FORK_PATHS),
    # `trl sft|dpo|grpo ...`: the CLI runs `accelerate launch` and takes its options among its own
    # (trl/cli/accelerate_config.py:19-47); `--config x.yaml` is TrlParser's file; its parser refuses a name it lacks
    tools=(
        Tool(
            "trl",
            trains=("sft", "dpo", "grpo", "kto", "rloo", "reward", "online_dpo", "xpo", "nash_md"),
            modules=("trl",),
            wraps="accelerate",
            launcher_options=True,
            config_flag="config",
            trainers=("sft", "dpo", "grpo", "kto"),  # `trl kto` (trl/cli/commands/__init__.py:28)
            strict=True,
            # f2cd57710 trl/cli/commands/vllm_serve.py:24, env.py:24
            idle=(("vllm-serve", "an inference server (vLLM) for a GRPO run started apart"), ("env", "nothing")),
        ),
    ),
    trainers=("sft", "dpo", "grpo", "gkd", "kto", "reward"),  # the script-flags reader's names of TRL's trainers
    calls="reader_unsloth",  # unsloth's FastLanguageModel / FastVisionModel over TRL's trainers
    label="TRL (SFT, DPO, GRPO trainers)",
    version="trl 1.16.0",
    low_rank_head=True,  # transformers' all-linear optim_target_modules (trainer_optimizer.py:133-149)
    every=(*HF_EVERY, "device_map"),
    # GKD: trl/experimental/gkd/gkd_trainer.py (planner.estimate.gkd); KTO: trl/trainer/kto_trainer.py, its KL batch
    # through the fused log-prob head (kto_trainer.py:1364-1365; the earlier lines' whole logits: releases.py); the
    # 0.x lines' ZERO runs keep GKD out; KTO: the 0.19 and 0.22 lines plan it, 0.14 and 0.15 refuse it (kto_zero.py),
    # the 1.6 and 1.14 lines refuse it (KTO_WHOLE, KTO_FUSED_ENTROPY), 1.0, 1.7 and 1.10 plan it
    runs={**TRL_RUNS, "loss": ("standard",), "workload": (*TRL_RUNS["workload"], "gkd", "kto")},
    gkd_loss="whole",
    dpo_why={"packed": NO_PADDING_FREE, "sequence_parallel": NO_DPO_SPLIT},
    kto_why=NO_KTO_SPLITS,  # no KTO line packs or splits its rows (releases.py)
    grpo_sp_why=(
        "its GRPOConfig refuses parallelism_config's cp_size or sp_size above 1: GRPO builds its inputs after "
        "generation, which sequence sharding cannot split (trl 1.16.0 trl/trainer/grpo_config.py:1068-1075; the "
        "lines before parallelism_config have no sequence parallel)"
    ),
    pads_per_batch=(  # max_length is a cap: each collator pads to the batch's longest row
        "TRL pads each micro-batch to its longest row: v1.9.0 trl/trainer/sft_trainer.py:1197, :489-493 "
        "(DataCollatorForLanguageModeling), dpo_trainer.py:746, :191 (DataCollatorForPreference), utils.py:155 (pad: "
        "the batch's longest); v0.19.0 trl/trainer/utils.py:71, :138 (DataCollatorForCompletionOnlyLM); v0.14.0 "
        "sft_trainer.py:260 (transformers' DataCollatorForLanguageModeling, rows tokenized padding=False)"
    ),
    defaults=TRL_DEFAULTS,
    keys={**HF_KEYS, "batching": "packing", "lora_rank": "lora_r"},
    notes=("checkpointing and bf16 on by default; SFT's loss is TRL's fused log-prob head (no full logits)",),
    rules=(
        *HF_SPLIT_RULES,
        TRANSFORMERS_5,
        *torchao_line_rules("trl"),
        stacked_experts_prequant("trl"),
        kto_two_rows("trl/trainer/kto_trainer.py:844-847"),
    ),
    sft_head="fused-logprob",
    zeroes_dropout=TRL_ZEROES_DROPOUT,
    releases=with_rules(RELEASES, GRPO_SPANS, (*HF_SPLIT_RULES, TRANSFORMERS_5, *torchao_line_rules("trl")))
    + with_fsdp1_only(FORKS),  # lines.py: the keys a line has none of
    key_spans={"grpo": GRPO_SPANS, "sft": SFT_SPANS},
)
# `--framework trl-0`: TRL 0.22 .. 0.29 (read at 0.29.1, the last 0.x; VLM-R1 and many recipes pin a 0.x), kept as a
# name of its own for the plans and docs that use it: trl@0.22 under that name
TRL0 = replace(
    FRAMEWORK.at("0.22"),
    name="trl-0",
    label="TRL 0.x (before the fused head)",
    version="trl 0.29.1",
    every=(*(k for k in HF_EVERY if k not in NO_SPLITS), "device_map"),  # the splits it runs off only
    notes=("as trl, but SFT's loss from the full logits (and Liger's loss allowed)",),
    releases=(),
    key_spans={},
    same_as="trl@0.22",
    package="",  # its release is trl's (--framework trl-0 is given, never read from a pin)
    forks=None,
    tools=(),  # trl's CLI and trainers are trl's (its release read from the files), never trl-0's
    trainers=(),
    calls="",
)
