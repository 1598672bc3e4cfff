"""ms-swift 4.6.0 (`swift sft|rlhf`): LoRA by default, full-layer checkpointing on by default, the ViT and aligner
frozen, Liger's fused loss, packing, ZeRO presets and FSDP2; SFT, DPO, GRPO, GKD, and PPO read (reader_ppo.py). Files
cited are in the 4.6.0 wheel.

Releases (github.com/modelscope/ms-swift tags): 3.x names the tuner `--train_type` (v3.12.0
swift/llm/argument/base_args/base_args.py:98), 4.x `--tuner_type` (v4.0.0 swift/arguments/base_args/base_args.py:72),
keeping `--train_type` as a deprecated alias through 4.0.x (:73, 151-153; removed at v4.1.0); checkpointing
(swift/trainers/arguments.py:101 at v3.12.0, :130 at v4.0.0) and the micro-batch of 1 (:96, :125) are the same in
both."""

from planner.frameworks.base import (
    Default,
    Framework,
    Release,
    Rule,
    autotp_rule,
    full_dpo_precomputed,
    kind,
    only_expert_targets,
)
from planner.frameworks.rl import RoleEngine
from planner.frameworks.rules import hf_ppo_rules
from planner.frameworks.swift.keys import KEYS
from planner.frameworks.tool import Signs, Tool

# Where a row's image tokens go against --max_length (MEANINGS "swift_max_length_counts"): up to 3.3 the row is
# checked (and cut or deleted) on its text, each image still one placeholder token, and the image's tokens are
# inserted after (v2.5.2 swift/llm/utils/template.py:957-966 then 1597-1620; v3.0.0 swift/llm/template/base.py:
# 626-634 then template/qwen.py:211-239; v3.3.0 base.py:962, qwen.py:227-255), so a row runs max_length plus its
# images; from 3.4 the check is on the encoded row, images included (v3.4.0 base.py:421-425; v4.0.0
# swift/template/base.py:1298-1299), and a longer row is deleted (truncation_strategy 'delete').
TEXT_ONLY_CUT = {"swift_max_length_counts": "text"}
# ms-swift 3's transformers pins (requirements/framework.txt): <4.48 at v3.0.0, <4.53 at v3.4.1 .. v3.6.0, <4.56 at
# v3.7.0, <4.58 at v3.10.0; the Trainer's optim default was adamw_torch (torch's foreach AdamW) through 4.53 (4.47.0
# training_args.py:1273, 4.53.0 :1281), adamw_torch_fused on torch >= 2.8 from 4.54: 3.0-3.6 ran foreach, and 3.7 on
# may run either (planned as foreach, the hungrier: its step's temporary, planner.estimate.zero)
FOREACH_3 = Default(
    "adamw",
    "ms-swift 3.x pins transformers <4.48 .. <4.58 (requirements/framework.txt): optim adamw_torch to 4.53 "
    "(4.47.0 training_args.py:1273)",
)
# GRPO on a multimodal model (Framework.vlm_logprobs): from v3.2 (GRPO's first release) to v3.6.x ms-swift calls the
# model without logits_to_keep, slices the completion's logits and scores them with TRL's selective_log_softmax
# (v3.2.2 swift/trainers/rlhf_trainer/grpo_trainer.py:1013-1026, v3.3.0 :1101-1117, v3.4.1 :1181-1197, v3.6.4
# :1299-1318; v3.2.0-3.2.1 do not divide by the temperature, whose copy only their no-grad pass lacks: the line is
# read the hungrier way); v3.7.0 passes logits_to_keep + 1 where the model's forward takes it (:1469-1470):
# Qwen2.5-VL's does from transformers 4.54.0 (modeling_qwen2_5_vl.py:1429; none through 4.53.0), which v3.7.0
# allow (<4.56) beside 4.53 and older: the 3.7 line can run either, and is planned with the fused head
WHOLE_LOGITS = "whole"
# GRPO's generation batch: ms-swift 3.2-3.3's GRPOTrainer keeps TRL's _prepare_inputs (v3.3.0 swift/trainers/
# rlhf_trainer/grpo_trainer.py defines none; trl <0.17 at v3.3.0 requirements/framework.txt), which generates each
# micro-step's rows as that micro-step comes (trl 0.16.1 trainer/grpo_trainer.py:643-651); from v3.4 ms-swift's own
# generates the micro-batch x accumulation rows at once (v3.4.1 grpo_trainer.py:1016-1018)
# DPO padding-free and under Ulysses (Runs.dpo_runs): --padding_free from v3.6.0 (v3.6.0 swift/llm/argument/rlhf_args.py:
# 324 lists dpo), --sequence_parallel_size from v3.7.0 (v3.7.0 :364-369); the lines before 3.7 are planned padded
DPO_36 = (
    "ms-swift before v3.7.0: padding_free for DPO from v3.6.0, sequence parallel from v3.7.0 (rlhf_args.py:359-369)"
)
DPO_37 = {
    "packed": "v3.7.0 swift/llm/argument/rlhf_args.py:358-363 (padding_free: grpo, dpo, gkd)",
    "sequence_parallel": "v3.7.0 swift/llm/argument/rlhf_args.py:364-369 (sequence_parallel: grpo, dpo)",
}
# KTO padding-free (Runs.kto_runs) from v3.9.0 (v3.9.0 swift/llm/argument/rlhf_args.py:368 adds kto), inside the 3.7
# line; sequence parallel never (:376 grpo, dpo)
KTO_NO_SP = "ms-swift splits GRPO and DPO rows only (swift/arguments/rlhf_args.py:719-725; v3.9.0 :376)"
KTO_39 = {
    "kto_runs": {},
    "kto_why": {
        "packed": "ms-swift runs KTO padding_free from v3.9.0 (rlhf_args.py:368)",
        "sequence_parallel": KTO_NO_SP,
    },
}
NO_DPO_SPLITS = {"dpo_runs": {}, "dpo_why": dict.fromkeys(("packed", "sequence_parallel"), DPO_36), **KTO_39}
PER_MICRO_STEP = Default(
    1, "ms-swift v3.3.0 keeps trl 0.16's GRPOTrainer._prepare_inputs (trl 0.16.1 trainer/grpo_trainer.py:643-651)"
)


def _any(knobs: dict, where: object) -> bool:
    return True


# The FSDP file writer.py writes (`--fsdp swift_fsdp.json`, FSDP2) is swift's own from v3.12.0 (TrainArguments.fsdp
# and _init_fsdp, swift/llm/argument/train_args.py:204,246,291 at v3.12.0); before it --fsdp is transformers'
# TrainingArguments.fsdp, a list of FSDPOption words, so the 3.x lines write no FSDP plan (3.0.3, 3.4.1 and 3.7.3's
# own parsers refuse the file: tests/planner/export/test_old_releases_parse.py)
FSDP_FILE = Rule(
    "fsdp",
    "ms-swift takes --fsdp as an FSDP2 file from v3.12.0 (swift/llm/argument/train_args.py:291 _init_fsdp): give "
    "--zero N or --framework swift@4",
    lambda k, w: k.get("fsdp", "off") != "off",
    "written",
)
# GRPO came in v3.1.1 (rlhf_type Literal[..., 'grpo'], swift/llm/argument/rlhf_args.py:76; v3.0.3 and v3.1.0 :53 have
# none), inside the 3 line (3.0-3.3): its GRPO script is read, not written
GRPO_LATER = Rule(
    "workload",
    "ms-swift 3's GRPO scripts are read, not written: rlhf_type takes grpo from v3.1.1 (swift/llm/argument/"
    "rlhf_args.py:76): give --framework swift@3.4",
    lambda k, w: kind(k) == "grpo",
    "written",
)

# ms-swift loads Qwen2.5-Omni whole (Qwen2_5OmniForConditionalGeneration, 4.5.2 swift/model/models/qwen.py:1582-1591:
# its modules under thinker.*, the talker and fp32 token2wav beside it unless ENABLE_AUDIO_OUTPUT=0): memplan plans the
# thinker alone (planner.model.qwenomni; the one catalog model with an audio tower), so it writes no ms-swift plan for
# it; a user's own script is still read
OMNI_WHOLE = Rule(
    "framework",
    "ms-swift loads Qwen2.5-Omni whole (swift/model/models/qwen.py:1582-1591: thinker, talker and token2wav), and "
    "memplan plans its thinker alone: give --framework llamafactory (which keeps the thinker, loader.py:173-174)",
    lambda k, w: w is not None and any(t.role == "audio" for t in getattr(w.model, "tensors", ())),  # an audio tower
    "written",
)


RELEASES = (
    Release(
        "2",
        (2, 0),
        "ms-swift v2.5.2 (swift/llm/utils/argument.py:610-899 SftArguments: --sft_type, --model_id_or_path)",
        keys=KEYS.release_keys("2", ("lora", "micro_batch", "model")),
        meaning=TEXT_ONLY_CUT,
        # ms-swift 2.x pins transformers <4.48 (v2.5.2 requirements/framework.txt) and Qwen2-VL came in 4.45: its
        # tower's SDPA is 4.45.2 modeling_qwen2_vl.py:398-404 (the same at 4.47.1), the mask over every patch
        adapter={"tower_sdpa": "masked-3d", **NO_DPO_SPLITS},
        notes=("2.x: --sft_type, --model_id_or_path, --batch_size; max_length 2048 by default",),
        # users' 2.x scripts are read and planned; none is written (writer.py writes 3.x/4.x flags), so the search
        # ranks no plan at this line
        rules=(
            Rule(
                "release",
                "ms-swift 2.x scripts are read, not written: give --framework swift@3 or swift",
                _any,
                "written",
            ),
        ),
    ),
    Release(
        "3",
        (3, 0),
        "ms-swift v3.0.0 .. v3.3.x (swift/llm/argument/base_args/base_args.py train_type; the length check before "
        "the images' tokens, template/base.py:626-634 at v3.0.0)",
        keys=KEYS.release_keys("3", ("lora",)),
        defaults={"optimizer": FOREACH_3},
        meaning=TEXT_ONLY_CUT,
        # 3.0-3.2.x pin transformers <4.48 .. <4.51, whose Qwen2-VL and Qwen2.5-VL towers still call SDPA on 3-D
        # tensors over a mask of every patch (4.49.0 modeling_qwen2_vl.py:414-420, modeling_qwen2_5_vl.py:314-320;
        # 4.50.3 :419, :319); 3.3.x allows 4.51-4.52, which pass 4-D ones (4.51.3 modeling_qwen2_vl.py:389-391): the
        # line is read the hungrier way, as for its images
        adapter={"tower_sdpa": "masked-3d", "vlm_logprobs": WHOLE_LOGITS, **NO_DPO_SPLITS},
        workload={"steps_per_generation": PER_MICRO_STEP},
        notes=("3.x: the tuner is --train_type (4.x: --tuner_type)",),
        rules=(FSDP_FILE, GRPO_LATER),
    ),
    Release(
        "3.4",
        (3, 4),
        "ms-swift v3.4.0 .. v3.6.x (the length check on the encoded row, swift/llm/template/base.py:421-425 at "
        "v3.4.0; a multimodal model's GRPO log-probs from its whole logits, trainers/rlhf_trainer/grpo_trainer.py:"
        "1181-1197 at v3.4.1)",
        keys=KEYS.release_keys("3.4", ("lora",)),
        defaults={"optimizer": FOREACH_3},
        # 3.5.0-3.6.4 score the reference inside GRPO's loss, after the policy's forward (v3.5.0 grpo_trainer.py:
        # 1091, 1095-1100); 3.4.x before the micro-step (:1055-1058 at v3.4.1): the line is read the hungrier way.
        # Its transformers are 3.3.x's, >=4.33,<4.53 (requirements/framework.txt:31 at v3.4.0, :34 at v3.5.0 and
        # v3.6.4), Qwen2.5-VL from 4.49 (v3.4.1 swift/llm/model/model/qwen.py:676): 4.49-4.50's masked 3-D tower
        # SDPA read the hungrier way, as for the 3 line. Its GRPO samples the rank's whole accumulated batch at once
        # (trl 0.17's dataloader, trl 0.17.0 trainer/grpo_trainer.py:717; v3.4.1 grpo_trainer.py:373-381), through
        # PtEngine with no batch limit (:321; v3.4.1 swift/llm/infer/infer_engine/pt_engine.py:537): one tower call
        # over every prompt image of micro-batch x accumulation rows
        adapter={"tower_sdpa": "masked-3d", "vlm_logprobs": WHOLE_LOGITS, "grpo_reference": "in-step", **NO_DPO_SPLITS},
        notes=("3.x: the tuner is --train_type (4.x: --tuner_type)",),
        rules=(FSDP_FILE,),
    ),
    Release(
        "3.7",
        (3, 7),
        "ms-swift v3.7.0 .. v3.12.x (swift/llm/argument/base_args/base_args.py:98 train_type at v3.12.0; a "
        "multimodal model's forward given logits_to_keep where it takes it, trainers/rlhf_trainer/grpo_trainer.py:"
        "1469-1470 at v3.7.0)",
        keys=KEYS.release_keys("3.7", ("lora",)),
        defaults={"optimizer": FOREACH_3},
        adapter={"dpo_runs": DPO_37, **KTO_39},
        notes=("3.x: the tuner is --train_type (4.x: --tuner_type)",),
        rules=(FSDP_FILE,),
    ),
    Release("4", (4, 0), "ms-swift v4.0.0 .. 4.6.0 (swift/arguments/base_args/base_args.py:72 tuner_type)"),
)

# keys of an ms-swift argument file that, beside `model` (or an ENV section), tell it from the other formats
SIGN_KEYS = {"tuner_type", "train_type", "rlhf_type", "target_modules", "torch_dtype", "attn_impl", "freeze_vit"}
FRAMEWORK = Framework(
    name="swift",
    image_knobs=("MAX_PIXELS", "MAX_NUM"),  # qwen_vl_utils' pixel cap; its InternVL template's tiles
    reads=("swift",),
    signs=(Signs("swift", lambda k, d: "model" in k and bool(k & SIGN_KEYS or "ENV" in k), 70),),
    # `swift sft|pt|rlhf`, or its entry script under another launcher; its reader reads the flags and the file
    # (reader.read_cli), and NPROC_PER_NODE where swift's own CLI starts the processes
    tools=(
        Tool(
            "swift",
            trains=("sft", "pt", "rlhf"),
            script=r"swift/cli/(sft|pt|rlhf)\.py$",
            modules=("swift",),
            reads="cli",
        ),
    ),
    package="ms-swift",  # its pinned version decides the release (planner.intake.releases)
    writes=True,  # writer.py (planner.export.launch dispatches to it)
    label="ms-swift",
    version="ms-swift 4.6.0",
    gkd_loss="chunked",
    # KTO: the KL batch's and the rows' whole logits (rlhf_trainers/kto_trainer.py:53,59-61,128, ms-swift 4.6.0)
    kto_logprobs="full",  # rlhf_trainers/gkd_loss.py:94-148, 224-271 (planner.estimate.gkd)
    every=(  # every value of these (closed by default: planner.frameworks.base.Framework.runs)
        "num_labels",
        "negatives",
        "precision",
        "zero_stage",
        "offload",
        "attention",
        "optimizer",
        "client_optimizer",  # a DeepSpeed config without an optimizer entry (deepspeed reader)
        "zero_buckets",  # the bucket sizes a DeepSpeed JSON sets itself (deepspeed reader)
        "lora_rank",
        "quant",
        "quant_absmax",
        "lora_targets",
        "lora_train_embeddings",
        "lora_dropout",
        "lora_variant",
        "lora_base_fp32",
        "lora_vision",
        "frozen",
        "vit_checkpointing",
        "tensor_parallel",
        "sequence_parallel",
        "cp_attention",
        "device_map",
        "eval_batch",
        "eval_logits_steps",
        "save_weights",
    ),
    runs={
        # several visible GPUs to a process are its device_map (reader._device_map), never nn.DataParallel
        "dataparallel": (False,),
        "checkpointing": ("off", "full"),
        "loss": ("standard", "chunked", "fused"),  # chunked: CELOSS_PARALLEL_SIZE, under sequence parallel only
        "batching": ("padded", "packed"),
        "fsdp": ("off", "full"),
        "optimizer_in_backward": (False,),
        "expert_parallel": ("off",),
        "workload": (
            "sft",
            "dpo",
            "grpo",
            "gkd",
            "kto",
            "ppo",
        ),  # ppo: read (rules: not written); gkd: swift rlhf --rlhf_type gkd (rlhf_trainers/gkd_trainer.py); kto: --rlhf_type
        # kto (rlhf_trainers/kto_trainer.py: the KL batch without grad first, :53, then the rows, :58-61)
        # --task_type (ms-swift 4.6 swift/arguments/base_args/model_args.py:72; decision is not planned)
        "task": ("causal-lm", "seq-cls", "embedding", "reranker", "generative-reranker"),
        "context_parallel": ("off",),  # ring attention comes inside --sequence_parallel_size, with flash-attn
    },
    defaults={
        "lora_rank": Default(8, "swift/arguments/tuner_args.py:133 (tuner_type lora, base_args.py:56-58)"),
        "lora_targets": Default("all-linear", "swift/arguments/tuner_args.py:126"),
        "checkpointing": Default("full", "swift/trainers/arguments.py:135: gradient_checkpointing True"),
        "frozen": Default("vision+projector", "swift/arguments/tuner_args.py:122-124: freeze_vit, freeze_aligner True"),
        "micro_batch": Default(1, "swift/trainers/arguments.py:130: per_device_train_batch_size 1"),
        "grad_accum": Default("ceil(16 / micro / world)", "swift/trainers/arguments.py:289-292"),
        "optimizer": Default("adamw-fused", "transformers training_args.py: optim adamw_torch_fused on torch >= 2.8"),
        "precision": Default(
            "bf16", "swift/model/utils.py:247-266: torch_dtype from the config, bf16 on GPUs that have it"
        ),
    },
    sft_head="swift-sp",
    # DPO padding-free (--padding_free, or --packing which sets it: swift/arguments/sft_args.py:186-197, flash-attn
    # only) and under --sequence_parallel_size (swift/rlhf_trainers/rlhf_mixin.py:66-67 splits, :178-179 gathers the
    # per-token log-probs)
    dpo_runs={
        "packed": "swift/arguments/rlhf_args.py:710-717 (padding_free/packing: grpo, dpo, kto, gkd)",
        "sequence_parallel": "swift/arguments/rlhf_args.py:719-725 (sequence_parallel: grpo, dpo)",
    },
    # KTO padding-free (its rows one packed row, its KL rows another: template/base.py:1884-1893), no Ulysses for it
    kto_runs={"packed": "swift/arguments/rlhf_args.py:710-717 (padding_free/packing: grpo, dpo, kto, gkd)"},
    kto_why={"sequence_parallel": KTO_NO_SP},
    keys=KEYS.shown(  # the frameworks table's keys, named by the key table
        "micro_batch grad_accum checkpointing zero_stage offload=zero_stage fsdp optimizer loss attention "
        "precision lora lora_rank quant seq_len batching=packing model frozen=frozen_vision vit_checkpointing "
        "sequence_parallel tensor_parallel",
        loss=f"{KEYS.flag('loss')} (fused), CELOSS_PARALLEL_SIZE (chunked)",
    ),
    notes=("LoRA, checkpointing and a frozen ViT by default; accumulation defaults to a total batch of 16",),
    releases=RELEASES,
    rules=(
        OMNI_WHOLE,
        Rule(
            "loss",
            "--loss chunked is CELOSS_PARALLEL_SIZE, which chunks its loss under --sequence_parallel_size only "
            "(swift/trainers/seq2seq_trainer.py:162-167): give --sequence-parallel 2 or more",
            lambda k: k["loss"] == "chunked" and k["sequence_parallel"] < 2,
        ),
        Rule(
            "batching",
            "--batching packed needs --attention flash (packing and padding_free need flash attention, "
            "swift/arguments/sft_args.py:186-197)",
            lambda k: k["batching"] == "packed" and k["attention"] != "flash",
        ),
        autotp_rule("swift/arguments/sft_args.py:158-160"),
        Rule(
            "tensor_parallel",
            "--deepspeed_autotp_size is for full fine-tuning only (swift/arguments/sft_args.py:158-160): --lora-rank 0",
            lambda k: k["tensor_parallel"] > 1 and k["lora_rank"] > 0,
        ),
        Rule(
            "workload",
            "full DPO keeps a reference model (swift/arguments/rlhf_args.py:290-299): no precompute_ref_log_probs",
            full_dpo_precomputed,
        ),
        Rule(
            "lora_targets",
            "needs --target_modules beside stacked experts' --target_parameters (its default, all-linear, would "
            "adapt every linear): name a module too",
            only_expert_targets,
        ),
        *hf_ppo_rules(
            "--rlhf_type ppo",
            "trl 0.29.1 experimental/ppo/ppo_trainer.py:679-692",
            "swift sft and rlhf dpo / grpo / gkd",
        ),
    ),
    # --rlhf_type ppo (swift/rlhf_trainers/ppo_trainer.py, reader_ppo.py): TRL's PPOTrainer, every role in every
    # process; its GRPO is TRL's (planner.estimate.rl), not by roles
    role_engine=RoleEngine(
        defaults={"remove_padding": False},  # padded rows (left-padded queries, swift/arguments/rlhf_args.py)
        grpo=False,
        generate_gathers=True,  # unwrap_model_for_generation over policy and value model (ppo_trainer.py:679-684)
        keeps_scores=True,  # batch_generation's output_scores, kept through the step (planner.estimate.trl_ppo)
        joint_value_update=True,  # PolicyAndValueWrapper: one forward and backward of both (ppo_trainer.py:284-295)
    ),
    # swift/model/register.py:161,253,295: ModelLoader.default_trust_remote_code True, config and model loaded with
    # it; model/models/internlm.py:105-264: OpenGVLab/InternVL2_5-*, InternVL3-* register InternVLLoader with
    # architectures InternVLChatModel (the repository's code), :320-363 only the -hf ids the native classes
    remote_code=True,
    # its weight sync to a vLLM server gathers --move_model_batches groups of layers (planner.estimate.weight_sync)
    sync_groups=True,
    # --deepspeed zero0..zero3_offload name swift/config/<word>.json (swift/arguments/sft_args.py:261-264)
    deepspeed_words=("zero0", "zero1", "zero2", "zero3", "zero2_offload", "zero3_offload"),
    # --target_modules all-linear on a VLM: the LLM's linears only, freeze_vit and freeze_aligner True by default
    # (swift/utils/transformers_utils.py:208-215)
    all_linear_vision=False,
)
