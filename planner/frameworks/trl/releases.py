"""TRL's release lines (planner.frameworks.trl re-exports them; what moved between the lines: its docstring; the
GRPO forks that froze an early one and unsloth: forks.py): each Release with its defaults, GRPO's meanings and the config keys it runs, read
at its tag in github.com/huggingface/trl; TRL's runs and defaults over HF's Trainer (TRL_RUNS, TRL_DEFAULTS)."""

from planner.frameworks.base import NO_SPLITS, Default, Release, Rule
from planner.frameworks.hf import HF_RUNS
from planner.frameworks.rules import kind
from planner.frameworks.trl.kto_zero import KL_HELD, ROWS_UNCUT, WRITTEN_UNCUT

BASE = "trl 1.16.0 trl/trainer/base_config.py"
# TRL's trainers that zero every dropout before training (Memory.zeroes_dropout): DPO's and KTO's disable_dropout
# (True by default: v1.9.0 trl/trainer/dpo_config.py:178, dpo_trainer.py:913-916; kto_config.py:153; v0.8.6
# dpo_trainer.py:168, :342-345 and kto_trainer.py:468-470 alike), GKD's (True: trl/experimental/gkd/gkd_config.py:92,
# gkd_trainer.py:203-204; v0.11.4 gkd_trainer.py:80-81) and PPO's, always (trl/experimental/ppo/ppo_trainer.py:489-491;
# v0.9.6 ppov2_trainer.py:137); GRPO's disable_dropout is False by default (grpo_config.py:447)
TRL_DISABLE_DROPOUT = "TRL's disable_dropout_in_model sets every nn.Dropout's p to 0"
TRL_ZEROES_DROPOUT = {
    "dpo": f"{TRL_DISABLE_DROPOUT}: DPOConfig.disable_dropout True (v1.9.0 trl/trainer/dpo_config.py:178, "
    "dpo_trainer.py:913-916)",
    "kto": f"{TRL_DISABLE_DROPOUT}: KTOConfig.disable_dropout True (v1.9.0 trl/trainer/kto_config.py:153, "
    "kto_trainer.py:932-935)",
    "gkd": f"{TRL_DISABLE_DROPOUT}: GKDConfig.disable_dropout True (v1.9.0 trl/experimental/gkd/gkd_trainer.py:203-204)",
    "ppo": f"{TRL_DISABLE_DROPOUT}: PPOTrainer zeroes every model's (v1.9.0 trl/experimental/ppo/ppo_trainer.py:489-491)",
}
TRL_RUNS = {
    "fsdp_load": ("sharded",),  # its FSDP loads shards or a unit at a time (Knobs.fsdp_load)
    **HF_RUNS,
    "batching": ("padded", "packed"),
    "workload": ("sft", "dpo", "grpo"),
    "lora_dropout_kept": (False, True),  # DPOConfig / KTOConfig / GKDConfig disable_dropout false (hf/reader.py)
}
TRL_DEFAULTS = {
    "checkpointing": Default("full", f"{BASE}:62: gradient_checkpointing=True"),
    "precision": Default("bf16", f"{BASE}:68,107-108: bf16=None becomes not fp16"),
    "optimizer": Default("adamw-fused", "transformers 5.23.0 training_args.py:806-812"),
    "seq_len": Default(1024, "trl 1.16.0 trl/trainer/sft_config.py:202: max_length=1024"),
    "batching": Default("padded", "trl 1.16.0 trl/trainer/sft_config.py:222: packing=False"),
    "micro_batch": Default(8, "transformers 5.23.0 training_args.py: per_device_train_batch_size=8"),
}
# before 1.0: SFT's loss from the full logits (Liger's allowed), no ParallelismConfig in HF's Trainer
ZERO = {"runs": {**TRL_RUNS, **NO_SPLITS}, "sft_head": "recipe", "rules": ()}
G = "trl/trainer/grpo_config.py"
# DPOTrainer's padding_free (Runs.dpo_runs): v0.14-v0.28 flatten chosen and rejected rows into one row with
# position_ids (a warning, not a refusal, without flash_attention_2); v0.29.0 on set it back to False, padding the
# rows; no DPO line splits a row over ranks (DPOTrainer reads accelerate's parallelism_config for tp_size alone,
# trl 1.16.0 dpo_trainer.py:971-972). tag -> (dpo_config.py padding_free, dpo_trainer.py flatten line)
PADDING_FREE = {"v0.14.0": (243, 1183), "v0.15.0": (243, 1186), "v0.19.0": (281, 1285)}
NO_PADDING_FREE = (
    "TRL 0.29+ DPOTrainer sets padding_free back to False and pads (trl 1.16.0 trl/trainer/dpo_trainer.py:732-739, "
    "v0.29.1 :575-582); v0.14-v0.28 ran it: give --framework trl@0.19"
)
NO_DPO_SPLIT = "TRL's DPOTrainer splits no row over ranks (trl 1.16.0 dpo_trainer.py:971-972 reads parallelism_config's tp_size alone)"
# KTOTrainer (Runs.kto_runs): no KTOConfig from v0.7 to 1.16 has padding_free or packing (trl/trainer/kto_config.py,
# trl/experimental/kto/kto_config.py at each tag), and it reads parallelism_config's tp_size alone
NO_KTO_SPLITS = {
    "packed": "TRL's KTOConfig has no padding_free or packing at any release (trl 1.16.0 trl/trainer/kto_config.py)",
    "sequence_parallel": "TRL's KTOTrainer splits no row over ranks (trl 1.16.0 kto_trainer.py:981-982 reads tp_size alone)",
}


def _packs(tag: str) -> dict:
    c, f = PADDING_FREE[tag]
    return {"packed": f"trl {tag} trl/trainer/dpo_config.py:{c}, dpo_trainer.py:{f}: one row, position_ids"}


def _off(tag: str, where: str) -> Default:
    return Default(
        "off",
        f"trl {tag} {where}: GRPOConfig(TrainingArguments) (SFTConfig and DPOConfig alike), gradient_checkpointing=False",
    )


# DPO's and GRPO's log-probs from the whole logits (selective_log_softmax, log_softmax before 0.15) through v1.9.0;
# the chunked head came after it (huggingface/trl#7063, #7077 merged 2026-09-05): tag -> (dpo_trainer, grpo_trainer)
WHOLE = {
    "v0.14.0": (1214, 438),
    "v0.15.0": (1217, 487),
    "v0.19.0": (1519, 872),
    "v0.22.0": (1562, 823),
    "v1.9.0": (1201, 1521),
}


def _whole(tag: str) -> Default:
    d, g = WHOLE[tag]
    return Default(
        "full", f"trl {tag} trl/trainer/dpo_trainer.py:{d}, grpo_trainer.py:{g}: log-probs of the whole logits"
    )


# SFT's head by line: through v1.6.x loss_type "nll" (v1.0.0 sft_config.py:255-256; v1.6.0 sets None to "nll",
# :297-308) runs the model's own loss over the whole logits (v1.0.0 sft_trainer.py:1275, then entropy_from_logits at
# :1282): the recipe's head; v1.7.0 .. 1.14.x default to "chunked_nll" (v1.7.0 sft_config.py:335-336, unless Liger;
# 1.14.0 :334), the lm_head over the unmasked tokens in checkpointed chunks (v1.9.0 sft_trainer.py:117-215, patched at
# :1319): planned with the newest's fused log-prob head (a chunk's logits at a time, not measured at 1.7-1.14); 1.15
# on fuses the head (FUSED_HEAD; trl 1.16.0 sft_trainer.py:1142-1147)
NLL = "SFT's loss from the whole logits (loss_type nll: trl v1.0.0 sft_config.py:255-256)"
CHUNKED_NLL = (
    "SFT's loss_type chunked_nll by default: the lm_head in checkpointed chunks (v1.7.0 sft_config.py:335-336)"
)
# what v1.0.0 .. v1.14.x run that the newest refuses or runs otherwise (planner.frameworks.trl's FRAMEWORK; the wheels
# of 1.10.0, 1.12.0 and 1.14.0 have no fused head, 1.15.0's adds it: FUSED_HEAD):
# - Liger's loss with SFT: under use_liger_kernel loss_type None becomes "nll" (v1.7.0 sft_config.py:335-336; v1.0.0
#   has nll alone, :255-256) and the trainer hands Liger the labels (v1.0.0 sft_trainer.py:1254-1262, v1.9.0
#   :1718-1724); 1.16's fused head refuses it (sft_trainer.py:1127-1140): the newest's loss runs without its override;
# - KTO scores the whole logits, the KL batch's too (v1.0.0 trl/experimental/kto/kto_trainer.py:953, 1072; v1.9.0
#   trl/trainer/kto_trainer.py:1324, 1506), and what else it holds moved (CPU steps of each release's own trainer,
#   fp32, micro 2 x accum 2, the tiny Llama of tests/probes/test_rl.py at vocabulary 4,096; bytes at training,
#   kl-forward, reference-forward: tests/planner/frameworks/trl/test_kto_entropy.py RELEASE_STEPS):
#   v1.0.0 .. v1.5.x keep index copies of the policy's whole logits through the reference's passes (v1.0.0 :977-978,
#   v1.5.1 :838-839), no entropy: 1.0.0 and 1.5.1 within 5% of the entropy copy's terms, planned with them on the 1.0
#   line; v1.6.x adds .contiguous() copies of the shifted logits (v1.6.0 :1231, 1272) beside them (:1249-1250), +8.1%
#   over trl@1.7's plan at the reference forward: the 1.6 line refuses KTO (KTO_WHOLE). v1.7.x drops those
#   (c6d2f3ae3, #6046), keeping the index copies (v1.7.0 trl/experimental/kto/kto_trainer.py:1341-1342, no entropy;
#   1.7.1 identical): within 5% of the trl@1.7 plan. v1.8.0 .. 1.13.x take the entropy from a flattened copy of the
#   policy's logits with the reference's live (v1.8.0 trl/trainer/kto_trainer.py:1588, v1.9.0 :1544, 1597, 1.13.0
#   :1571, 1624; planner.estimate.kto_entropy): planned (kto_entropy_copy) on the 1.7 and 1.10 lines, the
#   non-Liger _compute_loss and _compute_kl_logps of 1.10.0 .. 1.13.0 those of 1.9.0 but the token count under tensor
#   parallelism (1.13.0 :1470, 1638). 1.14.x takes log-probs and entropy in one call after the policy's forward
#   (1.14.0 trl/trainer/kto_trainer.py:1471-1476), TRL's Triton kernel on CUDA (trl/kernels/logprob_entropy.py;
#   trl/trainer/utils.py:507-512): not measured, refused (KTO_FUSED_ENTROPY). 1.15+ runs the fused head (trl 1.16.0
#   kto_trainer.py:1364-1365)
FUSED_HEAD = "trl 1.15.0 trl/trainer/sft_trainer.py:1118-1140, kto_trainer.py:1292,1300"
ONE_X_RUNS = {**TRL_RUNS, "workload": (*TRL_RUNS["workload"], "gkd", "kto")}
KTO_WHOLE = Rule(
    "workload",
    "TRL v1.6.x's KTOTrainer keeps .contiguous() copies of the shifted logits (v1.6.0 "
    "trl/experimental/kto/kto_trainer.py:1231, 1272) beside index copies of the whole logits (:1249-1250), its CPU "
    "step 8.1% over trl@1.7's plan at the reference forward (v1.0.0 .. v1.5.x and v1.7.x, without them, within 5%): "
    "not planned; give --framework trl (1.15+'s fused head), trl@1.0, trl@1.7 or trl@1.10 (planned)",
    lambda k: kind(k) == "kto",
)
KTO_FUSED_ENTROPY = Rule(
    "workload",
    "TRL 1.14.x's KTOTrainer takes log-probs and entropy from the whole logits in one call (1.14.0 "
    "trl/trainer/kto_trainer.py:1471-1476), on CUDA TRL's Triton kernel (trl/kernels/logprob_entropy.py, "
    "trl/trainer/utils.py:507-512), a path not measured: not planned; give --framework trl (1.15+'s fused head) or "
    "trl@1.10 (1.10.0 .. 1.13.x, planned)",
    lambda k: kind(k) == "kto",
)
# TRL 0.x's KTOTrainer (planner.frameworks.trl.kto_zero): v0.17.0 .. v0.29.1 run v1.0.0's structure, planned with the
# 1.0 line's terms on the 0.19 and 0.22 lines (rows past max_length refused); v0.12.0 .. v0.16.x keep the KL pass's
# logits through the policy's forward, refused on the 0.14 and 0.15 lines (which read 0.17.x .. 0.18.x too)
ZERO_KTO = {**ZERO, "runs": {**ZERO["runs"], "workload": (*ZERO["runs"]["workload"], "kto")}}
KTO_ZERO = {**ZERO_KTO, "kto_entropy_copy": True}
# the lines of SFT's nll (v1.0.0 .. v1.6.x): the recipe's head, GKD over the completion's positions (below)
ONE_O = {"sft_head": "recipe", "runs": ONE_X_RUNS, "gkd_loss": "completion"}
# the lines of chunked_nll (v1.7.0 .. 1.14.x), before the fused head; KTO planned with its entropy copy (1.8 .. 1.13)
CHUNKED = {"adapter": {"runs": ONE_X_RUNS, "kto_entropy_copy": True}, "notes": (CHUNKED_NLL,)}
# GKD: v1.0.0 .. v1.6.x run the JSD over the completion's positions (v1.0.0 trl/experimental/gkd/gkd_trainer.py:374-377,
# the logits sliced from the padded prompt's width; v1.6.0 :380-383); v1.7.0 on over every token (v1.7.0 :405-407)
ONE_X = {
    "max_completion_length": Default(256, f"trl v1.9.0 {G}:488-489: max_completion_length=256"),
    "logprobs": _whole("v1.9.0"),
}
# the lines released before transformers 5.0, whose TrainingArguments read no fsdp_config "version" (reading.MEANINGS;
# trl v0.19.0 pyproject transformers>=4.51.0, and VLM-R1 pins 4.49.0); v0.22.0 .. v0.29.1 and 1.x run 4.56.2 or 5.x
# (their wheels' Requires-Dist transformers>=4.56.2): the newest's meaning, the version read
TRANSFORMERS_4 = {"fsdp_config_version": "ignored"}
# the lines before 1.10 are read at a transformers before 5.10 (Release.transformers: the venvs of tools/fwenv_old.sh,
# trl 0.19.1 with 4.53.1, 0.22.2 with 4.56.2, 1.0.0 with 5.6.0), which runs --fsdp hybrid_shard under FSDP2 as a full
# shard (reading.MEANINGS); 1.10's 5.19 refuses it. Their wheels take 5.10+ too (Requires-Dist transformers>=4.51.0 at
# 0.19.1, >=4.55.0 at 0.22.2, >=4.56.2 at 1.0.0; no bound above), where SFTConfig refuses it (trl 0.19.1 and 0.22.2
# with transformers 5.10.4, measured: training_args.py:2837 "only available with FSDP1"): a transformers pin decides
HYBRID_FULL = {"fsdp2_hybrid": "full"}


def _grpo(tag: str, beta: tuple, mcl: str, vllm: str, counts: str = "completions", old: bool = True) -> dict:
    """The keyword arguments of a 0.x GRPO line read at `tag`: beta (value, lines), max_completion_length's lines, and
    where vLLM generates when `use_vllm` names no mode (`vllm`: the line and what it says): on GPUs of its own before
    1.0 (vllm_device 'auto', the next GPU, through 0.15; `trl vllm-serve` from 0.16; vllm_mode='server' 0.18-0.29),
    colocated from 1.0 (the newest's default, planner.frameworks.hf.keys); `old`: a line of transformers 4.x only
    (TRANSFORMERS_4)."""
    return {
        "workload": {
            "beta": Default(beta[0], f"trl {tag} {G}:{beta[1]}: beta={beta[0]}"),
            "max_completion_length": Default(256, f"trl {tag} {G}:{mcl}: max_completion_length=256"),
            "generation": Default("vllm-server", f"trl {tag} {G}:{vllm} (with use_vllm)"),
            "logprobs": _whole(tag),
        },
        "meaning": {"grpo_batch_counts": counts, **(TRANSFORMERS_4 if old else {}), **HYBRID_FULL},
        "adapter": {**ZERO, "dpo_runs": _packs(tag)} if tag in PADDING_FREE else ZERO,
    }


PROMPTS = "GRPO's per_device_train_batch_size counts prompts, each sampling num_generations completions"
# before v0.19.0 neither GRPOConfig nor SFTConfig set bf16: TrainingArguments' False, and no fp16 either
FP32 = Default(
    "fp32",
    "transformers 4.49.0 training_args.py:1068-1080: bf16=False, fp16=False (trl's configs set bf16 from v0.19.0, "
    "grpo_config.py:219-225, 530)",
)
FORKED_014 = {
    "defaults": {
        "checkpointing": _off("v0.14.0", f"{G}:22"),
        "optimizer": Default("adamw", "transformers 4.49.0 training_args.py:1284-1293: optim adamw_torch"),
        "precision": FP32,
    },
    "grpo": {
        "micro_batch": Default(1, f"trl v0.14.0 {G}:159-165: per_device_train_batch_size=1 (prompts)"),
        "grad_accum": Default(8, f"trl v0.14.0 {G}:166-167: gradient_accumulation_steps=8"),
    },
    **_grpo(
        "v0.14.0",
        (0.04, "173-174"),
        "116-117",
        "131: vllm_device='auto', the next GPU after the training processes",
        "prompts",
    ),
}
RELEASES = (
    Release(
        "0.14",
        (0, 14),
        "trl v0.14.0 (grpo_trainer.py:335,417: each prompt sampled num_generations times)",
        notes=(PROMPTS,),
        **{**FORKED_014, "adapter": {**ZERO_KTO, "dpo_runs": _packs("v0.14.0")}},
        rules=(KL_HELD,),
    ),
    Release(
        "0.15",
        (0, 15),
        "trl v0.15.0 (PR #2776, cf97133d5: the batch counts completions)",
        defaults={
            "checkpointing": _off("v0.15.0", f"{G}:22"),
            "optimizer": FORKED_014["defaults"]["optimizer"],
            "precision": FP32,
        },
        **{
            **_grpo(
                "v0.15.0",
                (0.04, "213-214"),
                "149-150",
                "173: vllm_device='auto' (v0.16.0-v0.17.0: `trl vllm-serve` on GPUs of its own)",
            ),
            "adapter": {**ZERO_KTO, "dpo_runs": _packs("v0.15.0")},
        },
        rules=(KL_HELD,),
    ),
    Release(
        "0.19",
        (0, 19),
        "trl v0.19.0",
        transformers="4.53.1",
        defaults={
            "checkpointing": _off("v0.19.0", f"{G}:24"),
            # the fused default came with transformers 4.54 (4.56.2 training_args.py:1296-1303, torch >= 2.8)
            "optimizer": Default("adamw", "transformers 4.53.1 training_args.py:1281-1288: optim adamw_torch"),
        },
        **{
            **_grpo("v0.19.0", (0.0, "412-413"), "267-268", "361-362: vllm_mode='server' (v0.18.0 too)"),
            "adapter": {**KTO_ZERO, "dpo_runs": _packs("v0.19.0")},  # KTO with the 1.0 line's terms (kto_zero)
        },
        rules=(ROWS_UNCUT, WRITTEN_UNCUT),
    ),
    Release(
        "0.22",
        (0, 22),
        "trl v0.22.0 .. v0.29.1 (the trl-0 adapter)",
        transformers="4.56.2",
        defaults={
            "checkpointing": Default(
                "full",
                f"trl v0.22.0 {G}:247-248, sft_config.py:111-116, dpo_config.py:205: gradient_checkpointing=True",
            )
        },
        notes=("as trl, but SFT's loss from the full logits (and Liger's loss allowed)",),
        **{
            **_grpo(
                "v0.22.0",
                (0.0, "460-461"),
                "301-302",
                "401-402: vllm_mode='server' (through v0.29.1; v1.0.0: 'colocate')",
                old=False,
            ),
            "adapter": KTO_ZERO,  # KTO with the 1.0 line's terms (kto_zero)
        },
        rules=(ROWS_UNCUT, WRITTEN_UNCUT),
        aliases=("0",),
    ),
    Release(
        "1.0",
        (1, 0),
        "trl v1.0.0 .. v1.5.x",
        transformers="5.6.0",
        meaning=HYBRID_FULL,
        workload=ONE_X,
        adapter={**ONE_O, "kto_entropy_copy": True},  # KTO's index copies within 5% of these terms (above)
        notes=(NLL,),
    ),
    Release(
        "1.6",
        (1, 6),
        "trl v1.6.x (KTO's .contiguous() copies of the shifted logits: v1.6.0 experimental/kto/kto_trainer.py:1231)",
        transformers="5.6.0",
        meaning=HYBRID_FULL,
        workload=ONE_X,
        adapter=ONE_O,
        notes=(NLL,),
        rules=(KTO_WHOLE,),
    ),
    Release(
        "1.7",
        (1, 7),
        "trl v1.7.0 .. v1.9.0",
        transformers="5.6.0",
        meaning=HYBRID_FULL,
        workload=ONE_X,
        **CHUNKED,  # KTO's entropy copy (planner.estimate.kto_entropy; 1.7.x's index copies within 5%, above)
    ),
    Release("1.10", (1, 10), "trl 1.10 (PR #6264, 286d19fc7: max_completion_length 512) .. 1.13.x", **CHUNKED),
    Release(
        "1.14",
        (1, 14),
        "trl 1.14.0 .. 1.14.x (KTO's log-probs and entropy in one call: 1.14.0 kto_trainer.py:1471-1476)",
        **{**CHUNKED, "adapter": {"runs": ONE_X_RUNS}, "rules": (KTO_FUSED_ENTROPY,)},
    ),
    Release("1.15", (1, 15), f"trl 1.15.0 .. 1.16.0 (TRL's fused log-prob head: {FUSED_HEAD})"),
)
