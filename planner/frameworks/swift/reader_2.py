"""ms-swift 2.x's `swift sft|rlhf` flags read as the 4.x names planner.frameworks.swift.reader reads, with 2.x's own defaults
where they differ from 4.x's. Cited at v2.5.2 (github.com/modelscope/ms-swift, swift/llm/utils/argument.py:
SftArguments :606-899 and its __post_init__; swift/llm/utils/model.py). Flags 2.x takes that do not change memory are
one line each, never "swift refuses it" (that is 4.x's word).
"""

from __future__ import annotations

from planner.errors import BadInput
from planner.frameworks.swift import reader_keys as swift_keys
from planner.frameworks.swift.keys import KEYS
from planner.intake.collect import Collector, accepted, as_bool, default, one
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


# 2.x's apply_liger (v2.4.0 .. v2.6.1; v2.5.2 swift/llm/tuner.py:66-87, before the tuner): the first of these its
# model_type (ms-swift 2.x's own name, --model_type, else the one it maps the model id to) contains picks Liger's
# apply_liger_kernel_to_<arch>() with its defaults (the fused head and loss among them), which patches that
# architecture's classes alone; no match raises ValueError (:81)
LIGER_2 = (("llama3", "llama"), ("mistral", "mistral"), ("mixtral", "mixtral"), ("gemma", "gemma"), ("qwen2", "qwen2"))
LIGER_2_CITE = "v2.5.2 swift/llm/tuner.py:66-87"


def liger(c: Collector, f: dict[str, Flag], hint: tuple[str, str] | None) -> dict[str, Flag]:
    """`f` after 2.x's --use_liger (read as --use_liger_kernel): kept where the patch 2.x picks (LIGER_2) is the
    model's architecture, gone with a note where it patches another's classes (a gemma2 or qwen2_vl model: its loss
    unfused), refused in one line where 2.x raises. `hint`: --model_type's value and source."""
    flag = f.get(KEYS.key("loss"))
    if flag is None or not as_bool(one(flag.value)):
        return f
    model = f.get(KEYS.key("model"))
    name, src = hint or (str(one(model.value)) if model else "", model.source if model else flag.source)
    said = name.lower().replace("-", "").replace(".", "").replace("_", "")  # Meta-Llama-3.1-8B: metallama318b
    arch = next((a for key, a in LIGER_2 if key.replace("_", "") in said), None)
    if arch is None:
        raise BadInput(
            f"{flag.source}: {WHO}'s apply_liger takes a model_type naming {', '.join(k for k, _ in LIGER_2)}, "
            f"not {name} ({src}; {LIGER_2_CITE}: ValueError)",
            "loss",
        )
    own = str(c.model.config.get("model_type", "")) if c.model is not None else arch
    if own != arch:
        c.note(
            f"{flag.source} ({WHO} patches {arch}'s classes for {name}, the model is {own}: its loss unfused, "
            f"{LIGER_2_CITE})"
        )
        return {k: v for k, v in f.items() if k != KEYS.key("loss")}
    return f
