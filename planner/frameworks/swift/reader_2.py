"""ms-swift 2.x's `swift sft|rlhf` flags read as the 4.x names planner.frameworks.swift.reader reads, with 2.x's own defaults
where they differ from 4.x's. Cited at v2.5.2 (github.com/modelscope/ms-swift, swift/llm/utils/argument.py:
SftArguments :606-899 and its __post_init__; swift/llm/utils/model.py). Flags 2.x takes that do not change memory are
one line each, never "swift refuses it" (that is 4.x's word).
"""

from __future__ import annotations

from planner.frameworks.swift import reader_keys as swift_keys
from planner.frameworks.swift.keys import KEYS
from planner.intake.collect import Collector, accepted, default, one
from planner.intake.flags import Flag

WHO = "ms-swift 2.x"
A = "v2.5.2 swift/llm/utils/argument.py"
# 2.x name -> 4.x name (the value means the same, or VALUES translates it): the table's "2" renames, each cited
# in planner.frameworks.swift.keys (sft_type, model_id_or_path, batch_size, dtype, lora_target_modules,
# lora_dropout_p, use_flash_attn: True flash_attention_2, False eager, unset the default)
RENAMED = KEYS.renamed("2")
VALUES = {
    # argument.py:964-968: 2.x's DeepSpeed preset names
    "deepspeed": {"default-zero2": "zero2", "default-zero3": "zero3", "zero2-offload": "zero2_offload"}
    | {"zero3-offload": "zero3_offload"},
    # argument.py:930 ALL: every linear; :921-927 DEFAULT/AUTO: the model type's, for a VLM the language model's
    # linears (model.py:7232-7235 get_regex_for_mm_default_lora)
    "target_modules": {"ALL": "all-linear", "DEFAULT": "all-linear", "AUTO": "all-linear"},
    "attn_impl": {"true": "flash_attn", "false": "eager", "True": "flash_attn", "False": "eager"},
    "torch_dtype": {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"},
}
# 2.x defaults that differ from 4.x's: (4.x name, value, where). 2.x sets every memory default HF's Trainer would
# otherwise fill itself and passes it to Seq2SeqTrainingArguments (v2.5.2 argument.py:1207-1265: batch_size,
# gradient_accumulation_steps, optim, gradient_checkpointing, bf16/fp16, deepspeed, fsdp): its optim adamw_torch at
# every tag (v2.0.0 argument.py:168, :515; v2.5.2 :793, :1234), so a transformers pin moves none of them; what a pin
# moves is the attention from_pretrained picks where --use_flash_attn is unset (reader.py, hf/reader_attn.py)
DEFAULTS = (
    ("max_length", 2048, f"{A}:661"),
    ("optim", "adamw_torch", f"{A}:793"),
    ("freeze_vit", False, f"{A}:620"),
)
# 2.x flags that change no memory: data, evaluation, hub and template choices
NO_MEMORY = {
    "model_type",
    "template_type",
    "tuner_backend",
    "check_dataset_strategy",
    "train_dataset_sample",
    "val_dataset_sample",
    "dataset_test_ratio",
    "custom_train_dataset_path",
    "custom_val_dataset_path",
    "check_model_is_latest",
    "evaluation_strategy",
    "truncation_strategy",
    "self_cognition_sample",
    "model_name",
    "model_author",
}


def translate(c: Collector, f: dict[str, Flag]) -> dict[str, Flag]:
    """`f` with 2.x's names and values as 4.x's, 2.x's differing defaults filled in, and 2.x-only flags noted; a flag
    no 2.x tag takes is one note and goes (2.x raises on it, v2.5.2 swift/utils/run_utils.py:23-27, unless
    --ignore_args_error: reader_keys.takes)."""
    for key in sorted(k for k in f if not swift_keys.takes("2", k)):
        c.note(f"{f[key].source} (not an {WHO} argument: swift refuses it, v2.5.2 swift/utils/run_utils.py:23-27)")
    out = {k: flag for k, flag in f.items() if swift_keys.takes("2", k)}
    for old, new in RENAMED.items():
        if old in out and new not in out:
            flag = out.pop(old)
            out[new] = Flag(new, flag.value, f"{flag.source} ({WHO}'s name of --{new})", flag.raw)
    # ALL: every Linear of the model by its name, the ViT's too (v2.5.2 swift/llm/tuner.py:29-31, utils/utils.py:500-540
    # find_all_linears); DEFAULT: the language model's alone (model.py:7232-7235)
    every = "target_modules" in out and str(one(out["target_modules"].value)) == "ALL"
    for key, table in VALUES.items():
        if key in out and str(one(out[key].value)) in table:
            flag = out[key]
            out[key] = Flag(key, table[str(one(flag.value))], flag.source, flag.raw)
    if "attn_impl" in out and out["attn_impl"].value == "AUTO":
        out.pop("attn_impl")
    if "torch_dtype" in out and out["torch_dtype"].value == "AUTO":
        out.pop("torch_dtype")
    if "max_length" in out and str(one(out["max_length"].value)) == "-1":  # :60-61: no limit
        c.note(f"{out.pop('max_length').source} (-1: no limit in {WHO}; planned at the model's context)")
    tuner = str(one(out["tuner_type"].value)) if "tuner_type" in out else "lora"  # :617, lora by default
    for key, value, cite in DEFAULTS:
        if key == "freeze_vit" and tuner != "full":  # :1037-1050: LoRA reads no freeze_vit (full: :1051-1056)
            if every and key not in out:  # the tower's linears adapted, as an unfrozen ViT's under 4.x's all-linear
                t = out["target_modules"]
                out[key] = Flag(key, False, f"{t.source} (ALL in {WHO}: find_all_linears takes the ViT's too)", t.raw)
            continue
        if key not in out:
            out[key] = Flag(key, value, default(WHO, cite, f"{key} {value}"), f"--{key}")
    for key in sorted(set(out) - accepted("swift") - {KEYS.key("lora", "3")}):
        if key in NO_MEMORY:
            c.note(f"{out.pop(key).source} ({WHO}: does not change memory)")
        elif key not in RENAMED:
            c.note(f"{out.pop(key).source} (an {WHO} argument memplan does not plan)")
    return out
