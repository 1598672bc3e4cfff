"""unsloth scripts (github.com/unslothai/unsloth 015bdef0d9, unsloth 2026.8.19): `FastLanguageModel` /
`FastVisionModel` / `FastModel` `.from_pretrained(...)` and `.get_peft_model(...)`, then TRL's SFTTrainer (unsloth
patches TRL's trainers; the run is TRL's underneath, so it is read on TRL's names and planned as TRL). pyscript finds
the calls in the syntax tree and hands their keyword arguments here; what unsloth adds to TRL's reading:

- The model: `model_name=` (or the first argument); a 4-bit QLoRA base unless the script says otherwise (load_in_8bit,
  load_in_16bit or full_finetuning turn it off: models/vision.py:1162-1172):
  `load_in_4bit=True` by default (unsloth/models/loader.py:414, 1171), nf4 with double quantization
  (models/llama.py:2620-2626, models/vision.py:1232).
- The weights in `dtype`: None is bfloat16 where the GPU has it, else float16 (models/llama.py:2434-2435,
  models/vision.py:1068-1069).
- The length: `max_seq_length` (2048 by default, loader.py:412); unsloth's patched trainer gives it to the trainer's
  arguments where they leave theirs unset (models/rl.py:2509-2524).
- LoRA from get_peft_model: r 16, lora_dropout 0, and the seven attention and MLP projections (models/llama.py:
  3061-3076); FastVisionModel's targets are every linear of the parts its finetune_* switches select (models/
  vision.py:1855-1866, 1934-1937: get_peft_regex), the vision tower included unless finetune_vision_layers=False.
- Gradient checkpointing: `use_gradient_checkpointing="unsloth"` by default (loader.py:423, llama.py:3079,
  vision.py:1869) patches torch's checkpoint (models/_utils.py:374-381 -> unsloth_zoo 2026.8.13 ce232d6c
  gradient_checkpointing.py:1116-1126, reentrant forced :1074-1078) with UnslothCheckpointFunction, which copies each
  layer's input hidden states to pinned host buffers (:808-854), runs the layer under no_grad (:882-883) and recomputes
  it in backward: memplan's `offload-inputs` (the last layer's input stays on the device, :753-769: one layer's input
  more than planned); below max_seq_length 512 it is plain checkpointing (models/_utils.py:374-378).
"""

from __future__ import annotations

from planner.errors import BadInput
from planner.intake import releases
from planner.intake.collect import GIVEN_FIELDS, Collector, as_bool, as_int, default, is_default, known, one
from planner.intake.flags import Flag
from planner.model import catalog

CLASSES = {"FastLanguageModel", "FastVisionModel", "FastModel"}
WHO = "unsloth 2026.8.19"
# from_pretrained / get_peft_model keyword -> TRL's name (planner.frameworks.hf.reader, planner.intake.loraargs)
LOAD = {
    "model_name": "model_name_or_path",
    "max_seq_length": "max_seq_length",
    "load_in_4bit": "load_in_4bit",
    "load_in_8bit": "load_in_8bit",
    "dtype": "dtype",
}
PEFT = {
    "r": "lora_r",
    "target_modules": "lora_target_modules",
    "lora_dropout": "lora_dropout",
    "modules_to_save": "lora_modules_to_save",
}
# memory-relevant keywords memplan does not plan: each set one (to other than its default) is a `not planned:` line
UNPLANNED = {
    "load_in_fp8": "an fp8 base",
    "fast_inference": "unsloth's vLLM engine beside the model",
    "gpu_memory_utilization": "the vLLM engine's share of the GPU",
    "float8_kv_cache": "vLLM's fp8 KV cache",
    "max_lora_rank": "vLLM's LoRA slots",
    "offload_embedding": "the input embedding kept on the host",
    "unsloth_tiled_mlp": "unsloth's tiled MLP",
    "float32_mixed_precision": "float32 mixed precision",
    "qat_scheme": "quantization-aware training",
    "finetune_language_layers": "adapters only on some parts of the model",
    "finetune_attention_modules": "adapters only on some parts of the model",
    "finetune_mlp_modules": "adapters only on some parts of the model",
    "finetune_last_n_layers": "adapters only on the last layers",
    "layers_to_transform": "adapters only on some layers",
    "loftq_config": "LoftQ initialisation",
    "target_parameters": "adapters on MoE expert parameters",
}
NOT_SET = (None, False, {}, "", 0)
KERNELS = (
    "unsloth's own kernels (its fused cross-entropy, RoPE, RMSNorm and LoRA MLP Triton kernels) are not planned: "
    "planned as TRL's trainer on the plain model"
)


class Seen:
    """What a script's unsloth calls said: the flags for TRL's reader, their where, and the unsloth-only settings."""

    def __init__(self) -> None:
        self.where = ""  # the first call, "train.py:12 FastLanguageModel.from_pretrained(...)"
        self.vision = False
        self.flags: dict[str, Flag] = {}
        self.checkpointing: Flag | None = None
        self.finetune_vision: Flag | None = None
        self.dtype_given = False
        self.half_base: Flag | None = None  # load_in_8bit, load_in_16bit or full_finetuning on: no 4-bit base
        self.notes: list[str] = []


def is_unsloth(owner: str, method: str) -> bool:
    return owner in CLASSES and method in ("from_pretrained", "get_peft_model")


def take(seen: Seen, owner: str, method: str, kwargs: dict[str, Flag], where: str) -> None:
    """One unsloth call's keyword arguments (kwargs: pyscript's Flags, keyed by the script's own names; a model given
    as the first argument under `model_name`)."""
    seen.where = seen.where or f"{where} {owner}.{method}(...)"
    seen.vision = seen.vision or owner != "FastLanguageModel"
    table = LOAD if method == "from_pretrained" else PEFT
    for key, f in kwargs.items():
        if key in table:
            seen.flags[table[key]] = Flag(table[key], f.value, f.source, f.raw)
            seen.dtype_given = seen.dtype_given or (key == "dtype" and f.value is not None)
        elif key == "use_gradient_checkpointing":
            seen.checkpointing = f
        elif key == "finetune_vision_layers":
            seen.finetune_vision = f
        elif key in ("load_in_16bit", "full_finetuning") and as_bool(f.value):
            seen.half_base = f
        elif key in UNPLANNED and known(f.value) and not _unset(key, f.value):
            seen.notes.append(f"{f.source} ({UNPLANNED[key]} is not planned yet)")
    if method == "get_peft_model":  # its own default "unsloth" (llama.py:3079, vision.py:1869) replaces the load's
        seen.checkpointing = kwargs.get("use_gradient_checkpointing")
        seen.flags["use_peft"] = Flag("use_peft", True, f"{where} {owner}.get_peft_model(...)", "get_peft_model")


def _unset(key: str, value: object) -> bool:
    """The keyword left at what unsloth does anyway (the finetune_* switches are on by default)."""
    if key.startswith("finetune_") and key != "finetune_last_n_layers":
        return as_bool(value) is not False
    return value in NOT_SET


def flags(seen: Seen) -> dict[str, Flag]:
    """The flags for TRL's reader, with unsloth's own defaults where the script leaves them: its 4-bit base, its
    length, its LoRA dropout and targets."""
    out = dict(seen.flags)
    eight = out.get("load_in_8bit")
    if seen.half_base is not None or (eight is not None and as_bool(eight.value)):
        why = f"{(seen.half_base or eight).source} (no 4-bit base with it: unsloth/models/vision.py:1162-1172)"
        out["load_in_4bit"] = Flag("load_in_4bit", False, why, "load_in_4bit")
    elif "load_in_4bit" not in out:
        out["load_in_4bit"] = Flag(
            "load_in_4bit", True, _default("models/loader.py:414", "load_in_4bit True"), "load_in_4bit"
        )
    if out.get("load_in_4bit") and as_bool(out["load_in_4bit"].value) and "use_bnb_nested_quant" not in out:
        cite = _default("models/llama.py:2620-2626", "nf4, bnb_4bit_use_double_quant True")
        out["use_bnb_nested_quant"] = Flag("use_bnb_nested_quant", True, cite, "bnb_4bit_use_double_quant")
    if "max_seq_length" not in out:
        out["max_seq_length"] = Flag(
            "max_seq_length",
            2048,
            _default("models/loader.py:412, models/rl.py:2509-2524", "max_seq_length 2048"),
            "max_seq_length",
        )
    if "use_peft" in out:
        if "lora_r" not in out:
            out["lora_r"] = Flag("lora_r", 16, _default("models/llama.py:3063", "r 16"), "r")
        if "lora_dropout" not in out:
            out["lora_dropout"] = Flag(
                "lora_dropout", 0.0, _default("models/llama.py:3074", "lora_dropout 0"), "lora_dropout"
            )
        if "lora_target_modules" not in out:
            targets = "all-linear" if seen.vision else ["q_proj", "k_proj", "v_proj", "o_proj"]
            targets = targets if seen.vision else [*targets, "gate_proj", "up_proj", "down_proj"]
            cite = "models/vision.py:1934-1937 get_peft_regex" if seen.vision else "models/llama.py:3064-3072"
            out["lora_target_modules"] = Flag(
                "lora_target_modules", targets, _default(cite, "target_modules"), "target_modules"
            )
    return out


def _default(cite: str, what: str) -> str:
    return default(WHO, f"unsloth/{cite}", what)


def release(c: Collector, seen: Seen) -> None:
    """trl@unsloth (planner.frameworks.trl FORKS): TRL's trainer as unsloth runs it, unless --framework names another
    release; before TRL's reader, whose defaults are the release's."""
    releases.decide(c, "trl", [], told=("unsloth", f"{seen.where}: unsloth over TRL's trainer"))


def read(c: Collector, seen: Seen) -> None:
    """What unsloth changes in TRL's reading (after hfargs.read): its checkpointing, its weights' dtype, the vision
    tower's adapters; and the lines for what is not planned."""
    _checkpointing(c, seen)
    _precision(c, seen)
    _grpo_batch(c)
    if c.facts.get("quant_storage", ("",))[0] == "uint8":  # its own BitsAndBytesConfig, not TRL's ModelConfig
        why = _default("models/llama.py:2620-2626", "BitsAndBytesConfig without bnb_4bit_quant_storage: uint8")
        c.fact("quant_storage", "uint8", why, "load_in_4bit")
    if seen.half_base is not None and not c.has("quant"):
        h = seen.half_base
        c.set("quant", "none", f"{h.source} (a half-precision base: unsloth/models/vision.py:1162-1172)", h.raw)
    fv = seen.finetune_vision
    if seen.vision and fv is not None and as_bool(fv.value) is False:
        c.fact("freeze_vision", True, fv.source, fv.raw)
    for line in seen.notes:
        c.note(line)
    c.note(f"{seen.where} ({KERNELS})")


def _precision(c: Collector, seen: Seen) -> None:
    """unsloth's half type: bfloat16 where the GPU has it, else float16, for the weights (dtype None: models/llama.py:
    2434-2435) and for mixed precision where the script sets neither bf16 nor fp16 (its patched trainer, models/
    rl.py:2414-2418); the GPU is check's --gpu (bf16 where none is given)."""
    half = "bf16" if _has_bf16(GIVEN_FIELDS.get().get("gpu")) else "fp16"
    why = f"{half}: the GPU's" if half == "fp16" else "bfloat16, float16 on a GPU without it"
    if not seen.dtype_given:
        c.fact("weights", half, _default("models/llama.py:2434-2435", f"dtype None: {why}"), "dtype")
    amp = c.facts.get("amp")
    if half == "fp16" and (amp is None or is_default(amp[1])):
        c.fact("amp", "fp16", _default("models/rl.py:2414-2418", "bf16 and fp16 unset: fp16 without bfloat16"), "fp16")


def _grpo_batch(c: Collector) -> None:
    """unsloth's patched GRPOConfig: where per_device_train_batch_size x gradient_accumulation_steps x WORLD_SIZE (1
    in a script run by python) is no multiple of num_generations, the micro-batch becomes num_generations (models/
    rl.py:3466-3482), where TRL itself would refuse the run."""
    mb, n = as_int(c.get("micro_batch")), as_int(c.get("workload.num_generations"))
    ga = as_int(c.get("grad_accum", 1)) or 1
    if c.get("workload.kind") != "grpo" or not mb or not n or (mb * ga) % n == 0:
        return
    s = c.setting("micro_batch")
    why = f"unsloth/models/rl.py:3466-3482: {mb} x {ga} is no multiple of num_generations {n}"
    key = s.key if s else "per_device_train_batch_size"
    c.set("micro_batch", n, f"{s.source if s else key} ({WHO} makes it {n}: {why})", key)


def _has_bf16(name: object) -> bool:
    try:
        return not isinstance(name, str) or catalog.gpu(name).bf16_tflops > 0
    except BadInput:  # an unknown or ambiguous name: check refuses it in its own words
        return True


def _checkpointing(c: Collector, seen: Seen) -> None:
    f = seen.checkpointing
    value = one(f.value) if f is not None and known(f.value) else "unsloth"
    source = (
        f.source
        if f is not None
        else _default(
            "models/vision.py:1869" if seen.vision else "models/llama.py:3079", 'use_gradient_checkpointing "unsloth"'
        )
    )
    if str(value).lower() == "unsloth":
        given = seen.flags.get("max_seq_length")  # the model's (from_pretrained), not the trainer's max_length
        seq = as_int(one(given.value)) if given is not None and known(given.value) else 2048
        if seq is not None and seq < 512:
            c.set(
                "checkpointing",
                "full",
                f"{source} (below 512 tokens unsloth checkpoints plainly: unsloth/models/_utils.py:374-378)",
                "use_gradient_checkpointing",
            )
        else:
            c.set(
                "checkpointing",
                "offload-inputs",
                f"{source} (each layer's input kept on the host, the layer recomputed in backward: unsloth_zoo "
                "gradient_checkpointing.py:808-854, 882-883 UnslothCheckpointFunction)",
                "use_gradient_checkpointing",
            )
        return
    on = as_bool(value)
    if on is None:
        c.note(f'{source} (not a value unsloth takes: True, False or "unsloth"; planned as TRL\'s default)')
        return
    c.set("checkpointing", "full" if on else "off", source, "use_gradient_checkpointing")
