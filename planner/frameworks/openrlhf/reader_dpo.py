"""OpenRLHF 0.11.2's DPO run (`deepspeed --module openrlhf.cli.train_dpo`) read: its flags (dotted, and the flat names
of its policy's model before 0.10.2), the batch split over the deepspeed launcher's GPUs, ZeRO, offload,
checkpointing, precision and attention; defaults cited from cli/train_dpo.py (0.11.2)."""

from __future__ import annotations

from planner.frameworks.openrlhf.keys import KEYS, T
from planner.frameworks.openrlhf.reader_flags import (
    OLD,
    ORL,
    attention,
    dotted,
    get,
    on,
    precision,
    split_batch,
    zero_buckets,
)
from planner.intake.collect import Collector, as_int, default, one
from planner.intake.flags import Flag
from planner.intake.models import read_model

DPO = "cli/train_dpo.py"
# train_dpo's flat names whose dotted name is its policy's (`--model.*`, cli/train_dpo.py:192,300 in 0.11.2), not the
# PPO actor's: `--pretrain` and `--gradient_checkpointing` were its model's flags (OpenRLHF#384, a 2024-07 command)
DPO_OLD = OLD | {
    "pretrain": "model.model_name_or_path",
    "gradient_checkpointing": "model.gradient_checkpointing_enable",
}
DPO_DEFAULTS = {
    KEYS.key("micro_batch"): (8, 189),
    KEYS.key("global_batch"): (128, 190),
    KEYS.key("seq_len"): (512, 319),
}


def read_dpo(c: Collector, flags: dict[str, Flag], near) -> None:
    """OpenRLHF 0.11.2's DPO (`deepspeed --module openrlhf.cli.train_dpo`): the policy trained by DeepSpeed ZeRO, the
    reference a DeepSpeed inference copy, chosen and rejected rows in one forward (trainer/dpo_trainer.py:306-323);
    the GPUs are the deepspeed launcher's (read before this)."""
    f = dotted(c, flags, DPO_OLD)

    def val(key: str) -> tuple[object, str]:
        if key in f:
            return one(f[key].value), f[key].source
        value, line = DPO_DEFAULTS[key]
        return value, default(ORL, f"{DPO}:{line}", f"--{key} {value}")

    c.set("workload.kind", "dpo", default(ORL, DPO, "DPO"), "openrlhf.cli.train_dpo")
    if "model.model_name_or_path" in f:
        k = f["model.model_name_or_path"]
        read_model(c, str(one(k.value)), k.source, "--model.model_name_or_path", near)
    length, ls = val(KEYS.key("seq_len"))
    c.number("workload.max_length", length, ls, KEYS.flag("seq_len"), minimum=2)
    micro, ms = val(KEYS.key("micro_batch"))
    c.number("micro_batch", micro, ms, KEYS.flag("micro_batch"))
    batch, bs = val(KEYS.key("global_batch"))
    split_batch(c, as_int(micro) or 8, as_int(batch) or 128, bs, KEYS.flag("global_batch"))
    stage, ss = get(f, KEYS.key("zero_stage"))
    c.number("zero_stage", stage, ss, KEYS.flag("zero_stage"), minimum=0)
    zero_buckets(c, f, as_int(stage) or 0)
    if on(f, KEYS.key("offload")):
        c.set("offload", "optimizer", f[KEYS.key("offload")].source, KEYS.flag("offload"))
    ckpt = on(f, "model.gradient_checkpointing_enable")
    src = f["model.gradient_checkpointing_enable"].source if ckpt else default(ORL, f"{DPO}:192", "no checkpointing")
    c.set("checkpointing", "full" if ckpt else "off", src, "--model.gradient_checkpointing_enable")
    precision(c, f, DPO)
    attention(c, f, f"{T}:342-347")
    if on(f, KEYS.key("packing")):
        c.fact("rows_fill_cap", True, f["ds.packing_samples"].source, KEYS.flag("packing"))
        c.note(f"{f['ds.packing_samples'].source} (packed DPO rows are not planned; planned padded)")
