"""LoRA and 4-bit arguments as TRL's ModelConfig names them (use_peft, lora_r, lora_dropout, lora_target_modules,
load_in_4bit, bnb_4bit_quant_type), from flags, YAML or a script's LoraConfig / BitsAndBytesConfig; and the LoRA target
list every reader maps into memplan's (a regex, or no targets at all, are named as such).
"""

from __future__ import annotations

from planner.frameworks.memory import DROPOUT_KEPT_BY_FLAG
from planner.intake import tuners, vocab
from planner.intake.collect import TRL, Collector, as_bool, as_float, as_names, default, one
from planner.intake.flags import Flag


def read_lora(c: Collector, flags: dict[str, Flag], trl: bool) -> None:
    """TRL's ModelConfig: LoRA only with use_peft (trl/trainer/model_config.py:103), its rank, dropout, targets (PEFT's
    default for the model's family where none are named) and a 4-bit base (`trl`: a TRL trainer parses the flags, so
    TRL's defaults apply; else transformers' BitsAndBytesConfig's)."""
    peft = flags.get("use_peft")
    if not (peft and c.flag(peft.value, peft.source)):
        if "lora_r" in flags:
            c.note(f"{flags['lora_r'].source} (without --use_peft TRL trains the full model: lora_r not read)")
        return
    if "peft_oft" in flags:
        return read_oft(c, flags, peft)
    if "peft_boft" in flags:
        return read_boft(c, flags, peft)
    r = flags.get("lora_r")
    if r:
        c.number("lora_rank", r.value, f"{peft.source}; {r.source}", r.raw)
    else:
        c.set(
            "lora_rank", 16, peft.source + "; " + default(TRL, "trl/trainer/model_config.py:107", "lora_r 16"), "lora_r"
        )
    drop = flags.get("lora_dropout")
    value = as_float(drop.value) if drop else 0.05
    c.set(
        "lora_dropout",
        value,
        drop.source if drop else default(TRL, "trl/trainer/model_config.py:115", "lora_dropout 0.05"),
        drop.raw if drop else "lora_dropout",
    )
    dora = flags.get("use_dora")  # trl/trainer/model_config.py:142
    if dora and c.flag(dora.value, dora.source):
        c.set("lora_variant", "dora", dora.source, dora.raw)
    _saved_and_targets(c, flags, peft)
    if "load_in_4bit" in flags and c.flag(flags["load_in_4bit"].value, flags["load_in_4bit"].source):
        kind = str(one(flags["bnb_4bit_quant_type"].value)).lower() if "bnb_4bit_quant_type" in flags else "nf4"
        c.set("quant", kind if kind in ("nf4", "fp4") else "nf4", flags["load_in_4bit"].source, "load_in_4bit")
        _quant_storage(c, flags.get("bnb_4bit_quant_storage"), trl)
        nested = flags.get("use_bnb_nested_quant")
        if nested:
            c.set("quant_absmax", "8bit" if as_bool(nested.value) else "fp32", nested.source, nested.raw)
        else:  # neither TRL's ModelConfig nor transformers' BitsAndBytesConfig double-quantizes by default
            cite = (
                default(TRL, "trl/trainer/model_config.py:164", "use_bnb_nested_quant False")
                if trl
                else "transformers utils/quantization_config.py:450 (BitsAndBytesConfig bnb_4bit_use_double_quant False)"
            )
            c.set("quant_absmax", "fp32", cite, "use_bnb_nested_quant")
    if "load_in_8bit" in flags and as_bool(flags["load_in_8bit"].value):
        c.set("quant", "int8", flags["load_in_8bit"].source, "load_in_8bit")


def _quant_storage(c: Collector, given: Flag | None, trl: bool) -> None:
    """The dtype the 4-bit packed weight is stored in (planner.intake.settle._sharded_quant checks it under FSDP1):
    TRL's ModelConfig leaves it None (trl 1.16.0 trl/trainer/model_config.py:168-171), which BitsAndBytesConfig makes
    uint8 (transformers 5.25.0 utils/quantization_config.py:477-478)."""
    if given is not None:
        c.fact("quant_storage", str(one(given.value)).lower().removeprefix("torch."), given.source, given.raw)
        return
    cite = "trl 1.16.0 trl/trainer/model_config.py:168-171 bnb_4bit_quant_storage None; " if trl else ""
    cite += "transformers 5.25.0 "
    c.fact("quant_storage", "uint8", cite + "utils/quantization_config.py:477-478: uint8", "bnb_4bit_quant_storage")


# the ends' module names in a target list (PEFT's embed_tokens and lm_head; ms-swift's all-embedding, every
# nn.Embedding: a text model's embed_tokens): Knobs.lora_ends, planner.estimate.lora_ends
END_NAMES = {"embed_tokens": "embed", "all-embedding": "embed", "lm_head": "head"}


def lora_targets(c: Collector, value: object, source: str, key: str) -> None:
    """The decoder linears a target list names (--lora-targets) and, apart, the embedding and head it names too
    (--lora-ends); a list naming only the ends is planned beside all-linear, a `not planned:` line saying so."""
    names = as_names(value)
    ends = {END_NAMES[n] for n in names if n in END_NAMES}
    if ends:
        c.set("lora_ends", "both" if len(ends) == 2 else ends.pop(), source, key)
        value = [n for n in names if n not in END_NAMES]
        if not value:  # axolotl's lora_target_linear may add the linears; else planned above what PEFT builds
            c.note(f"{source} (LoRA on the ends alone: planned beside all-linear's adapters, more than it trains)")
            return
    mapped = vocab.lora_targets(value)
    if mapped:
        c.set("lora_targets", mapped, source, key)
    else:
        c.note(f"{source} (LoRA targets memplan cannot name, a pattern or over 512 characters; planned as all-linear)")


# settings of PEFT's OFT and BOFT planned at one value alone: (flag, the value planned, what another value is)
OFT_FIXED = (
    ("oft_r", 0, "OFT by its block count (r) sizes each linear's blocks by its width; give oft_block_size and r=0"),
    ("oft_module_dropout", 0, "OFT's module_dropout (whole blocks set to the identity)"),
)
BOFT_FIXED = (
    ("boft_block_num", 0, "BOFT by its block count sizes each linear's blocks by its width; give boft_block_size"),
    ("boft_n_butterfly_factor", 1, "BOFT with more than one butterfly factor (PEFT's fbd_cuda path, unmeasured)"),
    ("boft_dropout", 0, "BOFT's boft_dropout (whole blocks set to the identity)"),
)


def refuse_unplanned(flags: dict[str, Flag], fixed: tuple[tuple[str, float, str], ...]) -> None:
    """A flag of `fixed` given at another value than the one planned, refused in one line."""
    for key, planned, why in fixed:
        value = as_float(one(flags[key].value)) if key in flags else None
        if value is not None and value != planned:
            tuners.refuse(flags[key].source, why)


def read_oft(c: Collector, flags: dict[str, Flag], peft: Flag) -> None:
    """A script's OFTConfig: --lora-variant oft with its block size (PEFT's default 32: peft v0.20.0 tuners/oft/
    config.py:88); a block count r (each linear's blocks sized by its width) and module_dropout are refused."""
    _read_blocks(c, flags, peft, ("oft", OFT_FIXED, "oft_block_size", 32, "peft tuners/oft/config.py:88"))


def read_boft(c: Collector, flags: dict[str, Flag], peft: Flag) -> None:
    """A script's BOFTConfig: --lora-variant boft with its block size (PEFT's default 4: peft v0.20.0 tuners/boft/
    config.py:72-73); a block count, more than one butterfly factor (PEFT's fbd_cuda path: unmeasured) and
    boft_dropout are refused."""
    _read_blocks(c, flags, peft, ("boft", BOFT_FIXED, "boft_block_size", 4, "peft tuners/boft/config.py:72-73"))


def _read_blocks(c: Collector, flags: dict[str, Flag], peft: Flag, tuner: tuple) -> None:
    """OFT's or BOFT's config: (variant, its fixed settings, its block-size key, PEFT's default, where)."""
    variant, fixed, key, fallback, cite = tuner
    refuse_unplanned(flags, fixed)
    c.set("lora_variant", variant, peft.source, peft.raw)
    block = flags.get(key)
    if block:
        c.number("lora_rank", block.value, block.source, block.raw)
    else:
        c.set("lora_rank", fallback, f"{peft.source}; {cite} ({key} {fallback})", key)
    _saved_and_targets(c, flags, peft)


def _saved_and_targets(c: Collector, flags: dict[str, Flag], peft: Flag) -> None:
    """The config's modules_to_save (TRL's lora_modules_to_save, model_config.py:127) and its target modules (PEFT's
    own for the model's family where it names none)."""
    if "lora_modules_to_save" in flags:  # model_config.py:127
        save = flags["lora_modules_to_save"]
        tuners.modules_to_save(c, save.value, save.source, save.raw)
    targets = flags.get("lora_target_modules")
    if targets:
        lora_targets(c, targets.value, targets.source, targets.raw)
    else:
        peft_targets(c, peft.source)


def peft_targets(c: Collector, source: str) -> None:
    """PEFT's own targets when a LoraConfig names none (peft/utils/constants.py:67), for the model's family."""
    model_type = str((c.model.config if c.model is not None else {}).get("model_type", ""))
    value, cite = vocab.peft_default_targets(model_type)
    if value:
        c.set("lora_targets", value, f"{source}; {cite}", "target_modules")
    else:
        c.note(
            f"{source} without target_modules (PEFT's default for model_type {model_type or '?'} is not known to "
            "memplan: planned as all-linear)"
        )


def read_disable_dropout(c: Collector, flag: Flag | None, zeroed: dict[str, str]) -> None:
    """TRL's `disable_dropout` (ms-swift's `--disable_dropout`) where it differs from what the trainer of the run's
    workload does by default (`zeroed`: Memory.zeroes_dropout): true zeroes LoRA's dropout (every nn.Dropout's p set
    to 0: trl v1.9.0 trl/trainer/utils.py:182-185), read as lora_dropout 0; false keeps it where the trainer would zero
    it (lora_dropout_kept; TRL's PPOTrainer zeroes it whatever its config says)."""
    if flag is None or not c.get("lora_rank") or not c.get("lora_dropout"):
        return
    on, kind = c.flag(flag.value, flag.source), str(c.get("workload.kind", "sft"))
    if on and kind not in zeroed:
        why = "TRL's disable_dropout_in_model sets every nn.Dropout's p to 0: trl v1.9.0 trl/trainer/utils.py:182-185"
        c.set("lora_dropout", 0.0, f"{flag.source} ({why})", flag.raw)
    elif on is False and kind in zeroed and kind in DROPOUT_KEPT_BY_FLAG:
        c.set("lora_dropout_kept", True, f"{flag.source} (the trainer's dropout left as set)", flag.raw)
