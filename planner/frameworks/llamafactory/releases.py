"""LLaMA-Factory's release lines (planner.frameworks.llamafactory builds its Framework from them): each Release with
its defaults and keys, the keys only some releases take (SPANS), and the rules a line runs by (RULES).

`RELEASES`: the lines people run, each read at its tag in github.com/hiyouga/LLaMA-Factory (`git show TAG:PATH`).
What moved between them:
- lora_target had no default before v0.6.0: LoRA without it stopped (v0.5.3 src/llmtuner/hparams/parser.py:141-142
  "Please specify `lora_target`"); "all" from v0.6.0 (hparams/finetuning_args.py:55-56).
- cutoff_len 1024 through v0.9.0 (src/llamafactory/hparams/data_args.py:44-45), 2048 from v0.9.1 (:48-49).
- an image's cap: image_resolution, its longer side (512) at v0.9.0 (model_args.py:59-60, data/mm_plugin.py:58-60),
  its pixels (512 * 512) at v0.9.1 (model_args.py:61-62); image_max_pixels 768 * 768 from v0.9.2 (:219-220).
- each line's range is exact (v0.6.0 .. v0.6.3 the 0.6 line, v0.7.0 alone the 0.7 line: its flash_attn's words under
  train_bash.py), checked against every tag by tests/planner/frameworks/llamafactory/test_release_ranges.py.
- the entry point: src/train_bash.py through v0.7.0; src/train.py and `llamafactory-cli` (setup.py:56) from v0.7.1;
  the package llmtuner through v0.7.1, llamafactory from v0.8.0.
- the transformers it pins, whose Trainer's optim default decides the optimizer step's temporary: >=4.37.2 (v0.5 ..
  v0.7.1 requirements.txt:1-2), >=4.41.2 (v0.8), <=4.45.0 (v0.9.0), <=4.46.1 (v0.9.1), <=4.49.0 (v0.9.2), <=4.52.4 (v0.9.3), all
  releases whose default is adamw_torch (torch's foreach AdamW: transformers 4.47.0 training_args.py:1273, 4.53.0
  :1281); v0.9.4 4.51.0-4.57.1 (pyproject.toml:44), which pip resolves to 4.57.1 (tools/fwenv_old.sh lf-0.9.4), whose
  default is adamw_torch_fused on torch >= 2.8 (4.57.1 training_args.py:1292-1299): the newest's; a file whose keys
  show a transformers before 4.53 (evaluation_strategy: frameworks.hf.old_optim_default) runs adamw_torch; v0.9.5
  >=4.55.0 (pyproject.toml:43) the same. The guard: tests/planner/frameworks/llamafactory/test_line_defaults.py.
  Each line's newest pin (`transformers_newest`) decides Llama-4's loss (Traits.half_loss: the composite loader.py
  loads, v0.9.3 :161-167, v0.9.5 :160-161, in the logits' dtype from 4.51.0 until 5.17.0): 4.52.4 (v0.9.3), 4.57.1
  (v0.9.4), 5.6.0 (v0.9.5), a bf16 loss each; before v0.9.3 none with Llama-4 (<=4.49.0) or unsaid (NO_LLAMA4).
- keys renamed: dpo_beta / dpo_loss became pref_beta / pref_loss at v0.8.0 (keys.py renames), sft_packing became
  packing at v0.6.0; flash_attn took a bool through v0.6.3 (False: eager), off/sdpa/fa2/auto from v0.7.0, disabled
  for off from v0.8.3 (keys.py OLD_FLASH_ATTN, read and written); the keys only some releases take (SPANS) narrow the
  releases a file allows.
Adding a release is one Release in RELEASES."""

from planner.frameworks.base import Default, Release, Rule, expert_targets, full_dpo_precomputed
from planner.frameworks.keys import whole_line
from planner.frameworks.llamafactory.keys import KEYS
from planner.frameworks.llamafactory.lines import with_rules
from planner.frameworks.rules import (
    VLM_LORA_ENDS,
    hf_ppo_rules,
    stacked_experts_prequant,
    thinker_alone,
    torchao_line_rules,
)

TAG = "LLaMA-Factory {} src/{}/hparams/"
FOREACH = Default(
    "adamw", "{}: optim adamw_torch, torch's foreach AdamW (transformers 4.47.0 training_args.py:1273, 4.53.0 :1281)"
)


def _at(tag: str, pins: str, cut: str = "", targets: Default | None = None) -> dict[str, Default]:
    """The defaults of a line read at `tag`: the optimizer its transformers pin (`pins`; "": the newest's, fused)
    runs, cutoff_len 1024 at data_args.py:`cut`, and lora_target's where it differs from "all"."""
    pkg = "llmtuner" if tag < "v0.8" else "llamafactory"
    out = {"optimizer": Default(FOREACH.value, FOREACH.source.format(f"LLaMA-Factory {tag} {pins}"))} if pins else {}
    if cut:
        out["seq_len"] = Default(1024, f"{TAG.format(tag, pkg)}data_args.py:{cut}: cutoff_len 1024")
    if targets is not None:
        out["lora_targets"] = targets
    return out


def _renamed(line: str) -> dict[str, str]:
    """Release.keys of line `line`: each field whose key it names otherwise (keys.py renames)."""
    return KEYS.release_keys(line, [f for f, row in KEYS.rows.items() if line in row.renames])


REQUIRED = Default(
    None,
    f"{TAG.format('v0.5.3', 'llmtuner')}finetuning_args.py:55-56: lora_target None; src/llmtuner/hparams/parser.py:"
    "141-142 refuses LoRA without it",
)
# flash_attn unset through v0.6.3: False, eager (keys.py OLD_FLASH_ATTN), the attention the search tries for those
# lines (planner.config.requests Space.release_attention); "auto" (transformers' own choice) from v0.7.0
EAGER = Default(
    "eager",
    f"{TAG.format('v0.5.3', 'llmtuner')}model_args.py:56-59: flash_attn False; src/llmtuner/model/patcher.py:114 eager",
)
EAGER_06 = Default(
    "eager",
    f"{TAG.format('v0.6.3', 'llmtuner')}model_args.py:64-67: flash_attn False; src/llmtuner/model/patcher.py:64-76 "
    "eager (v0.6.0-v0.6.2 patcher.py:118-120, :76-78 the same)",
)
# the Qwen2-VL and Qwen2.5-VL towers' SDPA (Framework.tower_sdpa, planner.estimate.vision.masked_tower_bytes): 3-D
# q, k, v over a mask of every patch of the call in transformers 4.45-4.50 (4.45.2 modeling_qwen2_vl.py:398-404,
# 4.49.0 modeling_qwen2_5_vl.py:314-320), 4-D from 4.51. The lines that can run only those: v0.9.0, the 0.8 line's
# one release with Qwen2-VL (its template, data/template.py; none at v0.8.3), pins transformers<=4.45.0 (Qwen2-VL
# came in 4.45.0); v0.9.1 <=4.46.1; v0.9.2 <=4.49.0 (requirements.txt:1; Qwen2.5-VL came in 4.49.0). v0.9.3 allows
# 4.51-4.52.4 (requirements.txt:1), v0.9.4 4.51.0 on (pyproject.toml:44): not these.
MASKED_TOWER = {"tower_sdpa": "masked-3d"}
# the lines whose transformers pin allows releases through 4.45 only (>=4.37.2 to v0.7.1, when 4.40-4.41 were current;
# <=4.45.0 at v0.8-v0.9.0): their forward returns fp32 logits (Framework.returned_logits)
FP32_LOGITS = {"returned_logits": "fp32"}
# the lines before v0.9.3: pins <=4.49.0, before Llama-4 (v0.9.0 .. v0.9.2 requirements.txt:1), or open (>=4.37.2,
# >=4.41.2): their transformers_newest unsaid, HF's fp32 loss (not the newest's 5.6.0)
NO_LLAMA4 = {"transformers_newest": ()}
# the pixel cap's key at the lines that name it image_resolution (keys.py RES)
RESOLUTION = {**MASKED_TOWER, "image_knobs": (KEYS.key("max_pixels", "0.8"), "")}
RELEASES = (
    Release(
        "0.5",
        (0, 5),
        "LLaMA-Factory v0.5.0 .. v0.5.3 (src/train_bash.py; llmtuner)",
        transformers="4.38.2",  # pip's, in tools/fwenv_old.sh lf-0.5.3: HF's optim default (line_defaults.optimizer_at)
        defaults={
            **_at("v0.5.3", "requirements.txt:2 transformers>=4.37.2", "27-28", REQUIRED),
            "attention": EAGER,
        },
        keys=_renamed("0.5"),
        notes=("0.5: src/train_bash.py; lora_target has no default (LoRA stops without it); cutoff_len 1024",),
        adapter={**FP32_LOGITS, **NO_LLAMA4},
    ),
    Release(
        "0.6",
        (0, 6),
        "LLaMA-Factory v0.6.0 .. v0.6.3 (src/train_bash.py; lora_target all, hparams/finetuning_args.py:55-56)",
        transformers="4.40.1",  # pip's, in tools/fwenv_old.sh lf-0.6.3: HF's optim default (line_defaults.optimizer_at)
        defaults={**_at("v0.6.3", "requirements.txt:2 transformers>=4.37.2", "27-28"), "attention": EAGER_06},
        keys=_renamed("0.6"),
        notes=("0.6: src/train_bash.py; cutoff_len 1024; dpo_beta for pref_beta; flash_attn a bool (False: eager)",),
        adapter={**FP32_LOGITS, **NO_LLAMA4},
    ),
    Release(  # v0.7.0 alone: flash_attn's words (model_args.py:68-71) under train_bash.py, before v0.7.1's cli
        "0.7",
        (0, 7),
        "LLaMA-Factory v0.7.0 (src/train_bash.py; flash_attn off/sdpa/fa2/auto, hparams/model_args.py:68-71)",
        transformers="4.40.1",  # pip's, in tools/fwenv_old.sh lf-0.7.0: HF's optim default (line_defaults.optimizer_at)
        defaults=_at("v0.7.0", "requirements.txt:2 transformers>=4.37.2", "27-28"),
        keys=_renamed("0.7"),
        notes=("0.7.0: src/train_bash.py; cutoff_len 1024; dpo_beta for pref_beta",),
        adapter={**FP32_LOGITS, **NO_LLAMA4},
    ),
    Release(
        "0.7.1",
        (0, 7, 1),
        "LLaMA-Factory v0.7.1 (src/train.py, llamafactory-cli: setup.py:56; llmtuner)",
        transformers="4.41.2",  # pip's, in tools/fwenv_old.sh lf-0.7.1: HF's optim default (line_defaults.optimizer_at)
        defaults=_at("v0.7.1", "requirements.txt:1 transformers>=4.37.2", "27-28"),
        keys=_renamed("0.7.1"),
        notes=("0.7.1: cutoff_len 1024; dpo_beta for pref_beta",),
        adapter={**FP32_LOGITS, **NO_LLAMA4},
    ),
    Release(
        "0.8",
        (0, 8),
        "LLaMA-Factory v0.8.0 .. v0.9.0 (src/llamafactory; setup.py:57 llamafactory-cli)",
        transformers="4.45.0",  # pip's, in tools/fwenv_old.sh lf-0.9.0: HF's optim default (line_defaults.optimizer_at)
        keys=_renamed("0.8"),
        defaults={
            **_at("v0.9.0", "requirements.txt:1 transformers>=4.41.2,<=4.45.0", "44-45"),
            "max_pixels": Default(
                262144,
                f"{TAG.format('v0.9.0', 'llamafactory')}model_args.py:59-60: image_resolution 512, the longer side "
                "(data/mm_plugin.py:58-60): 512 x 512 pixels",
            ),
            "max_frames": Default(64, f"{TAG.format('v0.9.0', 'llamafactory')}model_args.py:72: video_maxlen 64"),
            "video_max_pixels": Default(
                16384, f"{TAG.format('v0.9.0', 'llamafactory')}model_args.py:64: video_resolution 128, the longer side"
            ),
        },
        notes=("0.8-0.9.0: cutoff_len 1024; image_resolution (0.9.0) caps an image's longer side",),
        # KTO's forward returns the log-probs only, no logits to index (v0.8.0 train/kto/trainer.py:118-121, 133-136)
        adapter={**RESOLUTION, **FP32_LOGITS, **NO_LLAMA4, "kto_keeps_logits": False},
    ),
    Release(
        "0.9.1",
        (0, 9, 1),
        "LLaMA-Factory v0.9.1 (cutoff_len 2048: src/llamafactory/hparams/data_args.py:48-49)",
        transformers="4.46.1",  # pip's, in tools/fwenv_old.sh lf-0.9.1: HF's optim default (line_defaults.optimizer_at)
        keys=_renamed("0.9.1"),
        defaults={
            **_at("v0.9.1", "requirements.txt:1 transformers>=4.41.2,<=4.46.1"),
            "max_pixels": Default(
                262144,
                f"{TAG.format('v0.9.1', 'llamafactory')}model_args.py:61-62: image_resolution 512 * 512 pixels",
            ),
            "max_frames": Default(64, f"{TAG.format('v0.9.1', 'llamafactory')}model_args.py:74: video_maxlen 64"),
            "video_max_pixels": Default(
                16384, f"{TAG.format('v0.9.1', 'llamafactory')}model_args.py:66: video_resolution 128 * 128"
            ),
        },
        notes=("0.9.1: image_resolution caps an image's pixels",),
        adapter={**RESOLUTION, **NO_LLAMA4},
    ),
    Release(
        "0.9.2",
        (0, 9, 2),
        "LLaMA-Factory v0.9.2 (image_max_pixels 768 * 768: src/llamafactory/hparams/model_args.py:219-220; "
        "requirements.txt:1 transformers<=4.49.0, not 4.46-4.48)",
        transformers="4.49.0",  # pip's, in tools/fwenv_old.sh lf-0.9.2: HF's optim default (line_defaults.optimizer_at)
        defaults=_at("v0.9.2", "requirements.txt:1 transformers>=4.41.2,<=4.49.0"),
        adapter={**MASKED_TOWER, **NO_LLAMA4},
    ),
    Release(
        "0.9.3",
        (0, 9, 3),
        "LLaMA-Factory v0.9.3 (requirements.txt:1 transformers>=4.45.0,<=4.52.4, not 4.46-4.48.0 or 4.52.0)",
        transformers="4.52.4",  # pip's, in tools/fwenv_old.sh lf-0.9.3: HF's optim default (line_defaults.optimizer_at)
        defaults=_at("v0.9.3", "requirements.txt:1 transformers>=4.45.0,<=4.52.4"),
        adapter={"transformers_newest": (4, 52, 4)},  # requirements.txt:1 <=4.52.4 (:2 <=4.51.3 on darwin)
    ),
    Release(
        "0.9.4",
        (0, 9, 4),
        "LLaMA-Factory v0.9.4 (pyproject.toml:44 transformers>=4.51.0,<=4.57.1)",
        # pyproject.toml:44 transformers>=4.51.0,<=4.57.1: pip's 4.57.1 runs the newest's adamw_torch_fused
        transformers="4.57.1",  # pip's, in tools/fwenv_old.sh lf-0.9.4: HF's optim default (line_defaults.optimizer_at)
        defaults=_at("v0.9.4", ""),
        adapter={"transformers_newest": (4, 57, 1)},  # pyproject.toml:44 <=4.57.1
    ),
    Release("0.9.5", (0, 9, 5), "LLaMA-Factory v0.9.5 (pyproject.toml:43 transformers>=4.55.0,<=5.6.0)"),
)
# the keys only some releases take (each tag's src/*/hparams/*_args.py dataclass fields, v0.5.0 .. v0.9.5):
# key -> (the first version taking it, the first no longer taking it; None: open)
V = {"0.5": (0, 5), "0.6": (0, 6), "0.7": (0, 7), "0.7.1": (0, 7, 1), "0.8": (0, 8), "0.9": (0, 9), "0.9.2": (0, 9, 2)}
SPANS = {
    **dict.fromkeys(("dpo_beta", "dpo_loss", "dpo_ftx"), (None, V["0.8"])),
    **dict.fromkeys(("pref_beta", "pref_loss", "pref_ftx", "freeze_vision_tower", "simpo_gamma"), (V["0.8"], None)),
    "sft_packing": (None, V["0.6"]),
    **dict.fromkeys(("packing", "pure_bf16", "use_galore", "loraplus_lr_ratio"), (V["0.6"], None)),
    **dict.fromkeys(("name_module_trainable", "num_layer_trainable"), (None, V["0.7.1"])),
    **dict.fromkeys(("freeze_trainable_layers", "freeze_trainable_modules"), (V["0.7.1"], None)),
    "visual_inputs": (V["0.7"], V["0.9"]),
    "train_mm_proj_only": (V["0.8"], V["0.9.2"]),
    **dict.fromkeys(("image_resolution", "video_resolution"), (V["0.9"], V["0.9.2"])),
    **dict.fromkeys(
        (
            "image_max_pixels",
            "image_min_pixels",
            "video_max_pixels",
            "freeze_multi_modal_projector",
            "freeze_language_model",  # v0.9.2 hparams/finetuning_args.py:428 (none at v0.9.1)
            "use_apollo",
        ),
        (V["0.9.2"], None),
    ),
    **dict.fromkeys(("enable_liger_kernel", "use_unsloth_gc", "use_adam_mini"), (V["0.9"], None)),
    **dict.fromkeys(("neat_packing", "quantization_method"), ((0, 8, 3), None)),
    "use_dora": ((0, 5, 3), None),
    # finetuning_type oft and its keys: v0.9.4 (hiyouga/LLaMA-Factory#8623, 2025-08-18), hparams/finetuning_args.py
    **dict.fromkeys(("oft_block_size", "oft_rank", "oft_target", "module_dropout"), ((0, 9, 4), None)),
    # transformers' own key, renamed from evaluation_strategy at 4.41.0 (training_args.py); LLaMA-Factory requires
    # transformers>=4.41.2 from v0.8.0 (requirements.txt:1; >=4.37.2 to v0.7.1), and its examples say eval_strategy from
    # v0.8.0 (evaluation_strategy at v0.5.3-v0.7.1, e.g. examples/extras/badam/llama3_lora_sft.yaml)
    "eval_strategy": (V["0.8"], None),
    # v0.9.2 hparams/model_args.py:166; before, the loader passed trust_remote_code=True itself (v0.9.1
    # model/loader.py:55, v0.5.3 src/llmtuner/model/loader.py:38) and the key was refused as unknown
    "trust_remote_code": (V["0.9.2"], None),
    "use_badam": ((0, 6, 3), None),
    "use_muon": ((0, 9, 3), None),
    "moe_aux_loss_coef": ((0, 6, 2), None),  # v0.6.2 src/llmtuner/hparams/model_args.py:76 (none at v0.6.1)
    **dict.fromkeys(("use_dft_loss", "fp8", "use_kt"), ((0, 9, 4), None)),
    **dict.fromkeys(("use_eaft_loss", "use_asft_loss"), ((0, 9, 5), None)),
    # HF's TrainingArguments key gone at transformers 4.53 (planner.frameworks.hf OLD_OPTIM_KEYS); v0.9.5 pins >=4.55
    "evaluation_strategy": (None, (0, 9, 5)),
    # flash_attn's values as the releases took them (reader.py flash_words: the value, not the key, narrows): a bool
    # through v0.6.3 (v0.6.3 hparams/model_args.py:64-67), a word from v0.7.0 (model_args.py:68-71, and
    # model/utils/attention.py raises on any other), "off" through v0.8.2, "disabled" from v0.8.3
    "flash_attn=bool": (None, V["0.7"]),
    "flash_attn=off": (V["0.7"], (0, 8, 3)),
    "flash_attn=disabled": ((0, 8, 3), None),
    **dict.fromkeys(("flash_attn=sdpa", "flash_attn=fa2", "flash_attn=auto"), (V["0.7"], None)),
}
TRAIN_BASH = ("0.5", "0.6", "0.7")
DATAPARALLEL_LINES = ("0.5", "0.6", "0.7", "0.7.1")  # one process over the visible GPUs (rules: dataparallel)
RULES = (
    VLM_LORA_ENDS,
    stacked_experts_prequant("llamafactory"),
    # reader_media.thinker_alone refuses the same in a user's file
    thinker_alone("LLaMA-Factory", "src/llamafactory/model/loader.py:173-174"),
    *torchao_line_rules("llamafactory"),
    Rule(
        "optimizer_in_backward",
        "a step inside backward is galore_layerwise or apollo_layerwise (train/trainer_utils.py:248-275): it needs "
        "--optimizer galore-adamw, galore-adamw-8bit or apollo-adamw",
        lambda k: (
            k["optimizer_in_backward"] and k["optimizer"] not in ("galore-adamw", "galore-adamw-8bit", "apollo-adamw")
        ),
    ),
    Rule(
        "workload",
        "full DPO always loads a reference model (hparams/finetuning_args.py:574): no precompute_ref_log_probs",
        full_dpo_precomputed,
    ),
    Rule(
        "lora_targets",
        "lora_target names modules: it has no PEFT target_parameters for stacked experts (give module names)",
        lambda k: bool(expert_targets(k)),
    ),
    *hf_ppo_rules("stage ppo", "train/ppo/trainer.py:348", "LLaMA-Factory's sft and dpo stages"),
    Rule(  # stage rm: trl's value-head model over chosen and rejected rows (train/rm/workflow.py:45, rm/trainer.py:98-109)
        "task",
        "stage rm is LLaMA-Factory's seq-cls: a reward model's one value over chosen and rejected rows (give "
        "--num-labels 1 --negatives 1)",
        lambda k: k.get("task") == "seq-cls" and (k.get("negatives") != 1 or k.get("num_labels") != 1),
    ),
    Rule(  # v0.7.1 cli.py:64-65 ran run_exp in its own process, HF's Trainer then nn.DataParallel
        "dataparallel",
        "--dataparallel is one process over the visible GPUs, which LLaMA-Factory ran before v0.8.0 only "
        "(v0.8.0 src/llamafactory/cli.py:74-87 starts torchrun; v0.8.3 hparams/parser.py:195 refuses one process "
        "over several GPUs): give --framework llamafactory@0.7.1 or older",
        lambda k: bool(k.get("dataparallel")) and str(k.get("release", "")) not in DATAPARALLEL_LINES,
    ),
)


def takes(key: str, line: str = "") -> bool:
    """Whether every version of release line `line` ("": the newest) takes YAML key `key` (SPANS: keys.whole_line)."""
    return whole_line(RELEASES, SPANS, key, line)


def writes_pixels(line: str) -> bool:
    """Whether the line's YAML takes an image's cap in pixels: image_max_pixels from v0.9.2, image_resolution at
    v0.9.1 (keys.py RES); the 0.8 line's image_resolution is a side, and older lines have none."""
    return takes("image_max_pixels", line) or line == "0.9.1"


RELEASES = with_rules(RELEASES, RULES, takes, SPANS)  # lines.py: the settings a line has no key or word for
TRAIN_PY = tuple(r.name for r in RELEASES if r.name not in TRAIN_BASH)
