"""OpenRLHF's SFT (`deepspeed --module openrlhf.cli.train_sft`): the flags of train_sft in 0.11.2's dotted names (cli/train_sft.py in
the 0.11.2 wheel) or the flat names of 0.10.1 and before (v0.5.7 cli/train_sft.py, github.com/OpenRLHF/OpenRLHF), read
into one trainer's fields: the policy trained by DeepSpeed ZeRO (its DeepSpeed config names Adam: FusedAdam or
DeepSpeedCPUAdam), the GPUs the deepspeed launcher starts (read before this). train_sft's defaults are the same at
both releases (micro-batch 8, batch 128, max_len 2048, ZeRO-2, no checkpointing), cited at each."""

from __future__ import annotations

from planner.frameworks.openrlhf.keys import KEYS
from planner.frameworks.openrlhf.reader_flags import ORL, attention, dotted, on, split_batch, zero_buckets
from planner.intake.collect import Collector, as_int, default, one
from planner.intake.flags import Flag
from planner.intake.models import read_model

SFT = "cli/train_sft.py"
OLD_SFT = "v0.5.7 cli/train_sft.py"
# train_sft's flat names (<= 0.10.1) -> its dotted names (0.10.2 on): v0.5.7 cli/train_sft.py:157-220, 0.11.2
# cli/train_sft.py:166-284; --bf16 has no dotted rename (0.11.2 takes --ds.param_dtype, read apart); the --flash_attn
# switch of 0.8.9 and before (v0.8.9 cli/train_sft.py:181) and 0.8.10's --attn_implementation (:182) are
# --ds.attn_implementation's (planner.frameworks.openrlhf.reader_flags.attention)
FLAT = {
    "pretrain": "model.model_name_or_path",
    "max_len": "data.max_len",
    "micro_train_batch_size": "train.micro_batch_size",
    "train_batch_size": "train.batch_size",
    "gradient_checkpointing": "model.gradient_checkpointing_enable",
    "zero_stage": "ds.zero_stage",
    "adam_offload": "ds.adam_offload",
    "packing_samples": "ds.packing_samples",
    "lora_rank": "ds.lora.rank",
    "load_in_4bit": "ds.load_in_4bit",
    "max_epochs": "train.max_epochs",
    "flash_attn": "ds.attn_implementation",
    "attn_implementation": "ds.attn_implementation",
    # 0.9.10 .. 0.10.1's --param_dtype (v0.10.1 cli/train_sft.py; keys.py renames)
    KEYS.key("precision", "0.10"): KEYS.key("precision"),
}
# dotted name -> (default, 0.11.2 line, v0.5.7 line)
DEFAULTS = {
    "train.micro_batch_size": (8, 166, 157),
    "train.batch_size": (128, 167, 158),
    "ds.zero_stage": (2, 178, 163),
    "data.max_len": (2048, 284, 220),
}


def _val(f: dict[str, Flag], key: str, flat: bool) -> tuple[object, str]:
    if key in f:
        return one(f[key].value), f[key].source
    value, line, old = DEFAULTS[key]
    cite = f"{OLD_SFT}:{old}" if flat else f"{SFT}:{line}"
    return value, default(ORL if not flat else "openrlhf 0.5.7", cite, f"--{key} {value}")


def read_sft(c: Collector, flags: dict[str, Flag], near) -> None:
    """train_sft's fields; flat flag names are read as their dotted names and said (planner.frameworks.openrlhf
    .reader_flags.dotted)."""
    flat = any(k in FLAT or k == "bf16" for k in flags)
    f = dotted(c, {k: v for k, v in flags.items() if k != "bf16"}, FLAT)
    c.set("workload.kind", "sft", default(ORL, SFT, "SFT"), "openrlhf.cli.train_sft")
    if "model.model_name_or_path" in f:
        k = f["model.model_name_or_path"]
        read_model(c, str(one(k.value)), k.source, "--pretrain" if flat else "--model.model_name_or_path", near)
    length, ls = _val(f, "data.max_len", flat)
    c.number("seq_len", length, ls, "--data.max_len")
    micro, ms = _val(f, "train.micro_batch_size", flat)
    c.number("micro_batch", micro, ms, "--train.micro_batch_size")
    batch, bs = _val(f, "train.batch_size", flat)
    split_batch(c, as_int(micro) or 8, as_int(batch) or 128, bs, "--train.batch_size")
    stage, ss = _val(f, "ds.zero_stage", flat)
    c.number("zero_stage", stage, ss, "--ds.zero_stage", minimum=0)
    zero_buckets(c, f, as_int(stage) or 0)
    c.set("fsdp", "off", default(ORL, SFT, "DeepSpeed only"), "--ds.zero_stage")
    if on(f, "ds.adam_offload"):
        c.set("offload", "optimizer", f["ds.adam_offload"].source, "--ds.adam_offload")
    ckpt = on(f, "model.gradient_checkpointing_enable")
    off = default(ORL, f"{OLD_SFT}:160" if flat else f"{SFT}:168", "no checkpointing")
    c.set(
        "checkpointing",
        "full" if ckpt else "off",
        f["model.gradient_checkpointing_enable"].source if ckpt else off,
        "--model.gradient_checkpointing_enable",
    )
    _precision(c, flags, f, flat)
    _adapters(c, f)
    if on(f, "ds.packing_samples"):
        c.fact("rows_fill_cap", True, f["ds.packing_samples"].source, "--ds.packing_samples")
        c.note(
            f"{f['ds.packing_samples'].source} (rows packed into one of up to micro x max_len tokens: planned as "
            "micro rows of max_len, the same tokens)"
        )


def _precision(c: Collector, flags: dict[str, Flag], f: dict[str, Flag], flat: bool) -> None:
    """0.11.2: --ds.param_dtype (bf16 by default, :180); the flat releases: --bf16 (else DeepSpeed's fp32: v0.5.7 :164,
    utils/deepspeed/deepspeed_utils.py bf16.enabled), 0.9.10 .. 0.10.1's --param_dtype read as the dotted name. The
    attention as the release line the reading targets has it (reader_flags.attention: 0.8.9's --flash_attn off is
    eager, 0.11.2's default flash_attention_2 :188-193)."""
    attention(c, f, f"{SFT}:188-193")
    release = str(c.facts.get("release", ("",))[0] or "")
    if flat and "ds.param_dtype" not in f and ("bf16" in flags or release in ("0.5", "0.8", "0.9")):
        bf16 = "bf16" in flags  # 0.10's --param_dtype is bf16 unset (v0.10.1 cli/train_sft.py:182): the dotted reading
        src = flags["bf16"].source if bf16 else default("openrlhf 0.5.7", f"{OLD_SFT}:164", "--bf16 off: fp32")
        c.set("precision", "bf16" if bf16 else "fp32", src, "--bf16")
        return
    dtype = str(one(f["ds.param_dtype"].value)) if "ds.param_dtype" in f else "bf16"
    src = f["ds.param_dtype"].source if "ds.param_dtype" in f else default(ORL, f"{SFT}:180", "--ds.param_dtype bf16")
    c.set("precision", dtype if dtype in ("bf16", "fp16") else "bf16", src, "--ds.param_dtype")


def _adapters(c: Collector, f: dict[str, Flag]) -> None:
    rank = f.get("ds.lora.rank")
    if rank is not None and (as_int(one(rank.value)) or 0) > 0:
        c.number("lora_rank", one(rank.value), rank.source, "--ds.lora.rank")
    if on(f, "ds.load_in_4bit"):
        c.set("quant", "nf4", f["ds.load_in_4bit"].source, "--ds.load_in_4bit")
