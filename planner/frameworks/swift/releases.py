"""ms-swift's release lines (planner.frameworks.swift imports RELEASES): each Release with its keys, defaults,
meanings and the rules of what memplan writes at it, read at its tag in github.com/modelscope/ms-swift.

3.x names the tuner `--train_type` (v3.12.0 swift/llm/argument/base_args/base_args.py:98), 4.x `--tuner_type` (v4.0.0
swift/arguments/base_args/base_args.py:72), keeping `--train_type` as a deprecated alias through 4.0.x (:73, 151-153;
removed at v4.1.0); checkpointing (swift/trainers/arguments.py:101 at v3.12.0, :130 at v4.0.0) and the micro-batch of
1 (:96, :125) are the same in both."""

from planner.frameworks.base import Default, Release, Rule, kind
from planner.frameworks.swift.keys import KEYS

# Where a row's image tokens go against --max_length (MEANINGS "swift_max_length_counts"): up to 3.3 the row is
# checked (and cut or deleted) on its text, each image still one placeholder token, and the image's tokens are
# inserted after (v2.5.2 swift/llm/utils/template.py:957-966 then 1597-1620; v3.0.0 swift/llm/template/base.py:
# 626-634 then template/qwen.py:211-239; v3.3.0 base.py:962, qwen.py:227-255), so a row runs max_length plus its
# images; from 3.4 the check is on the encoded row, images included (v3.4.0 base.py:421-425; v4.0.0
# swift/template/base.py:1298-1299), and a longer row is deleted (truncation_strategy 'delete').
TEXT_ONLY_CUT = {"swift_max_length_counts": "text"}
# ms-swift 3's transformers pins (requirements/framework.txt): <4.48 at v3.0.0, <4.53 at v3.4.1 .. v3.6.0, <4.56 at
# v3.7.0, <4.58 at v3.10.0; the Trainer's optim default was adamw_torch (torch's foreach AdamW) through 4.53 (4.47.0
# training_args.py:1273, 4.53.0 :1281), adamw_torch_fused on torch >= 2.8 from 4.54: 3.0-3.6 ran foreach; 3.7 and
# 3.9 run what pip resolves their pins to, 4.55.4 and 4.57.1 (tools/fwenv_old.sh swift-3.7.3, swift-3.12.6): fused
# (guard: tests/planner/frameworks/swift/test_line_defaults.py)
FOREACH_3 = Default(
    "adamw",
    "ms-swift 3.x pins transformers <4.48 .. <4.53 (requirements/framework.txt): optim adamw_torch to 4.53 "
    "(4.47.0 training_args.py:1273)",
)
FUSED = "adamw_torch_fused on torch >= 2.8 (transformers {} training_args.py:{})"
FUSED_37 = Default(
    "adamw-fused", f"v3.7.0 requirements/framework.txt transformers<4.56: {FUSED.format('4.55.4', 1286)}"
)
FUSED_39 = Default(
    "adamw-fused", f"v3.12.6 requirements/framework.txt:37 transformers<4.58: {FUSED.format('4.57.1', 1292)}"
)
# gradient_accumulation_steps: v3.0.0 .. v3.2.1 leave transformers' 1 (v3.0.3 swift/trainers/arguments.py sets none);
# from v3.2.2 None, then ceil(16 / micro-batch / world) (v3.2.2 trainers/arguments.py:84-87): the 3 line is read at
# v3.0.3, its release of tools/fwenv_old.sh
ACCUM_1 = Default(
    1,
    "v3.0.3 keeps transformers 4.48.3's gradient_accumulation_steps 1 (training_args.py:867); ceil(16 / micro-batch / "
    "world) from v3.2.2, swift/trainers/arguments.py:84-87",
)
# GRPO on a multimodal model (Framework.vlm_logprobs): from v3.2 (GRPO's first release) to v3.6.x ms-swift calls the
# model without logits_to_keep, slices the completion's logits and scores them with TRL's selective_log_softmax
# (v3.2.2 swift/trainers/rlhf_trainer/grpo_trainer.py:1013-1026, v3.3.0 :1101-1117, v3.4.1 :1181-1197, v3.6.4
# :1299-1318; v3.2.0-3.2.1 do not divide by the temperature, whose copy only their no-grad pass lacks: the line is
# read the hungrier way); v3.7.0 passes logits_to_keep + 1 where the model's forward takes it (:1469-1470):
# Qwen2.5-VL's does from transformers 4.54.0 (modeling_qwen2_5_vl.py:1429; none through 4.53.0), which v3.7.0
# allow (<4.56) beside 4.53 and older: the 3.7 line can run either, and is planned with the kept logits, divided
# into a copy (Framework.grpo_logprobs "swift-copy": v3.7.0 grpo_trainer.py:1470-1477, v3.12.0 :1573-1599)
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
# KTO padding-free (Runs.kto_runs) from v3.9.0 (v3.9.0 swift/llm/argument/rlhf_args.py:368 adds kto; v3.7.0 :360 and
# v3.8.3 :368 list grpo, dpo, gkd): the 3.9 line; sequence parallel never (v3.8.3 and v3.9.0 :376, grpo, dpo)
KTO_NO_SP = "ms-swift splits GRPO and DPO rows only (swift/arguments/rlhf_args.py:719-725; v3.9.0 :376)"
KTO_38 = {
    "kto_runs": {},
    "kto_why": {
        "packed": "ms-swift runs KTO padding_free from v3.9.0 (rlhf_args.py:368)",
        "sequence_parallel": KTO_NO_SP,
    },
}
KTO_39 = {
    "kto_runs": {
        "packed": "v3.9.0 swift/llm/argument/rlhf_args.py:365-368 (padding_free/packing: grpo, dpo, kto, gkd)"
    },
    "kto_why": {"sequence_parallel": KTO_NO_SP},
}
NO_DPO_SPLITS = {"dpo_runs": {}, "dpo_why": dict.fromkeys(("packed", "sequence_parallel"), DPO_36), **KTO_38}
# GRPO under sequence parallel (Framework.grpo_sp) is planned at the 4 line, read at 4.6.0: 3.5-3.6 patch Ulysses in
# (v3.5.0 swift/trainers/sequence_parallel/ulysses.py:146-160) and 3.7-3.12 score only the completion's tail of the
# slice's logits (v3.8.0 trainers/sequence_parallel/utils.py:554-576), a head memplan does not plan
GRPO_SP_4 = (
    "ms-swift 3.x's GRPO under sequence parallel (from v3.5.0, trainers/sequence_parallel/) is not planned; the 4 "
    "line's is (give --framework swift@4)"
)
# the 3 and 3.4 lines score a text model through TRL's _get_per_token_logps (trl 0.17.0, ms-swift 3.4.1's, trainer/
# grpo_trainer.py:822-833: the kept logits, divided into a copy), ms-swift's own code the 3.7 and 3.9 lines
# (Framework.grpo_logprobs "swift-copy"); a multimodal model's whole logits on the 3 and 3.4 lines (vlm_logprobs)
OLD_GRPO = {
    "grpo_sp": "",
    "grpo_sp_why": GRPO_SP_4,
    "grpo_old_logps": "aligned",
    "grpo_logprobs": "swift-copy",
    "grpo_chord": False,  # CHORD came in v3.9.0 (swift/llm/train/rlhf.py:180): the 3.9 line's, planned as the 4 line's
}
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


def _late_3(name: str, source: str, kto: dict, optimizer: Default, transformers: tuple[str, tuple]) -> Release:
    """ms-swift 3.7-3.12 (the 3.7 and 3.9 lines, apart in KTO and their transformers' optimizer cite): --train_type,
    fused AdamW, DPO padding-free and under Ulysses (DPO_37), no FSDP file; `transformers`: the one read and the
    line's newest pin (HALF_LOSS)."""
    since = tuple(int(p) for p in name.split("."))
    return Release(
        name,
        since,
        source,
        keys=KEYS.release_keys(name, ("lora",)),
        defaults={"optimizer": optimizer},
        transformers=transformers[0],
        # GKD's vLLM rollout from v3.10.0 (Framework.gkd_vllm): the 3.9 line (3.9-3.12) runs it, 3.7-3.8 do not
        adapter={
            "dpo_runs": DPO_37,
            "transformers_newest": transformers[1],
            "gkd_vllm": since >= (3, 9),
            "grpo_teacher": False,  # OPD-RL came in v4.4.0
            **OLD_GRPO,
            # the old policy's pass every generation from v3.11.0 (v3.11.0 trainers/rlhf_trainer/grpo_trainer.py:
            # 845-846; v3.10.0 :815-817 asked old_policy()): the 3.9 line (3.9-3.12) read the hungrier way
            **({"grpo_old_logps": "always", "grpo_chord": True} if since >= (3, 9) else {}),
            **kto,
            **TOWER_HOOK,
        },
        notes=("3.x: the tuner is --train_type (4.x: --tuner_type)",),
        rules=(FSDP_FILE,),
    )


# each line's newest transformers pin (Framework.transformers_newest), which decides Llama-4's loss (Traits.half_loss:
# the composite Llama4ForConditionalGeneration that swift loads, v3.3.0 swift/llm/model/model/llama.py:211-213,
# v4.5.2 swift/model/models/llama.py:281-282, computes it in the logits' dtype from transformers 4.51.0 until
# 5.17.0); the model's own loss under the default loss_type None and loss_scale 'default' (v3.4.0 llm/train/sft.py:
# 98-101, trainers/trainers.py:197-212). requirements/framework.txt: <4.53 at v3.3.1 (:31) and v3.6.4 (:34), 4.52.4
# the newest; <4.57 at v3.8.3 (:35), 4.56.2; <4.58 at v3.12.6 (:37), 4.57.1 as pip resolves it; 4.6.0's METADATA
# Requires-Dist transformers<5.20.0 (5.19.0 read): the fp32 loss. 2.x pins <4.48, before Llama-4.
# the vision tower's input hooked whatever its freezing (Framework.frozen_tower_input_grads): under checkpointing at
# v2.5.0-v2.6.1 (v2.5.2 swift/llm/sft.py:262-272; the model's input alone at v2.4.2, sft.py:252-255), always at
# v3.0.0-v3.4.x (v3.0.0 swift/llm/train/sft.py:46-51, v3.4.0 :44-49), under vit_gradient_checkpointing at
# v3.5.0-v4.1.x (v3.5.0 swift/trainers/mixin.py:338-346, v3.12.6 :839-846), which defaults to gradient_checkpointing
# (v3.5.0 trainers/arguments.py:128-129, v3.12.6 :184-185, v4.1.0 :256-257); from v4.2.0 to not freeze_vit
# (swift/arguments/sft_args.py:211-212): the 4 line, read at 4.6.0, unhooks a frozen tower (v4.5.2 mixin.py:945-955)
TOWER_HOOK = {"frozen_tower_input_grads": True}
HALF_LOSS = {"3": (4, 52, 4), "3.4": (4, 52, 4), "3.7": (4, 56, 2), "3.9": (4, 57, 1), "4": (5, 19, 0)}
RELEASES = (
    Release(
        "2",
        (2, 0),
        "ms-swift v2.5.2 (swift/llm/utils/argument.py:610-899 SftArguments: --sft_type, --model_id_or_path)",
        keys=KEYS.release_keys("2", ("lora", "micro_batch", "model")),
        # pip's resolution of v2.5.2 .. v2.6.1's transformers>=4.33,<4.48 (requirements/framework.txt): a pin beside
        # the files moves the attention it loads (planner.frameworks.hf.reader_attn), never 2.x's own optim
        transformers="4.47.1",
        meaning=TEXT_ONLY_CUT,
        # ms-swift 2.x pins transformers <4.48 (v2.5.2 requirements/framework.txt) and Qwen2-VL came in 4.45: its
        # tower's SDPA is 4.45.2 modeling_qwen2_vl.py:398-404 (the same at 4.47.1), the mask over every patch;
        # under --gradient_checkpointing (2.x's default) v2.5.2 swift/llm/sft.py:262-272 calls the vision tower's
        # enable_input_require_grads whatever its freezing (v2.5.0-v2.6.1; at v2.4.2 sft.py:252-255 the model's alone)
        adapter={
            "gkd_vllm": False,  # GKD's vLLM rollout came in v3.10.0
            "grpo_teacher": False,  # OPD-RL came in v4.4.0
            **OLD_GRPO,
            "tower_sdpa": "masked-3d",
            **NO_DPO_SPLITS,
            "transformers_newest": (),
            **TOWER_HOOK,
        },
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
        defaults={"optimizer": FOREACH_3, "grad_accum": ACCUM_1},
        transformers="4.48.3",  # pip's, in tools/fwenv_old.sh swift-3.0.3 (HF's optim: line_defaults.optimizer_at)
        meaning=TEXT_ONLY_CUT,
        # 3.0-3.2.x pin transformers <4.48 .. <4.51, whose Qwen2-VL and Qwen2.5-VL towers still call SDPA on 3-D
        # tensors over a mask of every patch (4.49.0 modeling_qwen2_vl.py:414-420, modeling_qwen2_5_vl.py:314-320;
        # 4.50.3 :419, :319); 3.3.x allows 4.51-4.52, which pass 4-D ones (4.51.3 modeling_qwen2_vl.py:389-391): the
        # line is read the hungrier way, as for its images
        adapter={
            "gkd_vllm": False,  # GKD's vLLM rollout came in v3.10.0
            "grpo_teacher": False,  # OPD-RL came in v4.4.0
            **OLD_GRPO,
            "tower_sdpa": "masked-3d",
            "vlm_logprobs": WHOLE_LOGITS,
            **NO_DPO_SPLITS,
            "transformers_newest": HALF_LOSS["3"],
            **TOWER_HOOK,
        },
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
        transformers="4.52.4",  # pip's, in tools/fwenv_old.sh swift-3.4.1
        # 3.5.0-3.6.4 score the reference inside GRPO's loss, after the policy's forward (v3.5.0 grpo_trainer.py:
        # 1091, 1095-1100); 3.4.x before the micro-step (:1055-1058 at v3.4.1): the line is read the hungrier way.
        # Its transformers are 3.3.x's, >=4.33,<4.53 (requirements/framework.txt:31 at v3.4.0, :34 at v3.5.0 and
        # v3.6.4), Qwen2.5-VL from 4.49 (v3.4.1 swift/llm/model/model/qwen.py:676): 4.49-4.50's masked 3-D tower
        # SDPA read the hungrier way, as for the 3 line. Its GRPO samples the rank's whole accumulated batch at once
        # (trl 0.17's dataloader, trl 0.17.0 trainer/grpo_trainer.py:717; v3.4.1 grpo_trainer.py:373-381), through
        # PtEngine with no batch limit (:321; v3.4.1 swift/llm/infer/infer_engine/pt_engine.py:537): one tower call
        # over every prompt image of micro-batch x accumulation rows
        adapter={
            "gkd_vllm": False,  # GKD's vLLM rollout came in v3.10.0
            "grpo_teacher": False,  # OPD-RL came in v4.4.0
            **OLD_GRPO,
            "tower_sdpa": "masked-3d",
            "vlm_logprobs": WHOLE_LOGITS,
            "grpo_reference": "in-step",
            **NO_DPO_SPLITS,
            "transformers_newest": HALF_LOSS["3.4"],
            **TOWER_HOOK,
        },
        notes=("3.x: the tuner is --train_type (4.x: --tuner_type)",),
        rules=(FSDP_FILE,),
    ),
    _late_3(
        "3.7",
        "ms-swift v3.7.0 .. v3.8.x (swift/llm/argument/base_args/base_args.py:75 train_type at v3.7.0 and v3.8.3; "
        "a multimodal model's forward given logits_to_keep where it takes it, trainers/rlhf_trainer/grpo_trainer.py:"
        "1469-1470 at v3.7.0; KTO padded, llm/argument/rlhf_args.py:368 at v3.8.3)",
        KTO_38,
        FUSED_37,
        ("4.55.4", HALF_LOSS["3.7"]),  # pip's, in tools/fwenv_old.sh swift-3.7.3
    ),
    # 3.7's in all but KTO: train_type (v3.9.0 base_args.py:75, v3.12.0 :98), checkpointing and the micro-batch of 1
    # (v3.9.0 trainers/arguments.py:32, :27; v3.12.0 :101, :96), transformers <4.58 (v3.9.0 requirements/
    # framework.txt:36, v3.12.6 :37: FUSED_39), padding_free and sequence parallel for DPO (v3.9.0
    # rlhf_args.py:368, 376), a multimodal forward given logits_to_keep + 1 (v3.9.0
    # trainers/rlhf_trainer/grpo_trainer.py:1859-1860), --fsdp still transformers' list until v3.12.0 (FSDP_FILE)
    _late_3(
        "3.9",
        "ms-swift v3.9.0 .. v3.12.x (swift/llm/argument/base_args/base_args.py:98 train_type at v3.12.0; KTO "
        "padding_free from v3.9.0, llm/argument/rlhf_args.py:368)",
        KTO_39,
        FUSED_39,
        ("4.57.1", HALF_LOSS["3.9"]),  # pip's, in tools/fwenv_old.sh swift-3.12.6
    ),
    Release("4", (4, 0), "ms-swift v4.0.0 .. 4.6.0 (swift/arguments/base_args/base_args.py:72 tuner_type)"),
)
