"""TRL's GKDConfig inputs (trl 1.16 trl/experimental/gkd/gkd_config.py) as memplan's GKD workload, from a script's
flags, a config file or a Python script's keyword arguments: the teacher (teacher_model_name_or_path, found offline as
the model is; none: the student's own checkpoint loaded a second time, :78-84), lmbda (:59-65), beta (the JSD's,
:66-73) and max_new_tokens (:74-77, the on-policy completions); SFTConfig's max_length (trl/trainer/sft_config.py:202)
is the rows' length. seq_kd (the teacher generating, :96-103) is a note: not planned."""

from __future__ import annotations

from pathlib import Path

from planner.intake.collect import TRL, Collector, as_float, default, one
from planner.intake.flags import Flag
from planner.intake.models import lookup

GKD_KEYS = {"teacher_model_name_or_path", "lmbda", "seq_kd", "max_new_tokens", "teacher_model_init_kwargs"}
# GKDConfig's own fields over SFTConfig's (gkd_config.py:55-103; trl.experimental is not in presets/keys_hf.txt)
CONFIG_FIELDS = GKD_KEYS | {"temperature", "beta", "disable_dropout"}
C = "trl/experimental/gkd/gkd_config.py"


def read_gkd(c: Collector, flags: dict[str, Flag], near: Path) -> None:
    """The GKD inputs `flags` set, TRL's defaults for the others."""
    teacher = flags.get("teacher_model_name_or_path")
    if teacher is not None:
        name = str(one(teacher.value))
        found = lookup(name, near)
        if found is None:
            c.note(f"{teacher.source} ({name} not found offline: pass its config.json; planned as the student's copy)")
        else:
            c.set("workload.teacher_model", found.ref, f"{teacher.source} ({found.how})", teacher.raw)
    elif c.get("model") is not None:
        src = default(TRL, f"{C}:78-84", "teacher_model_name_or_path None: the model being trained")
        c.set("workload.teacher_model", c.get("model"), src, "teacher_model_name_or_path")
    for key, field, fallback, lines in (("lmbda", "lmbda", 0.5, "59-65"), ("beta", "jsd_beta", 0.5, "66-73")):
        flag = flags.get(key)
        value, src = (
            (flag.value, flag.source) if flag else (fallback, default(TRL, f"{C}:{lines}", f"{key} {fallback}"))
        )
        if as_float(one(value)) is not None:
            c.set(f"workload.{field}", as_float(one(value)), src, key)
    new = flags.get("max_new_tokens")
    value, src = (new.value, new.source) if new else (128, default(TRL, f"{C}:74-77", "max_new_tokens 128"))
    c.number("workload.max_completion_length", value, src, "max_new_tokens")
    if "max_length" not in flags:
        c.fill(
            "workload.max_length", 1024, default(TRL, "trl/trainer/sft_config.py:202", "max_length 1024"), "max_length"
        )
    if "seq_kd" in flags and c.flag(flags["seq_kd"].value, flags["seq_kd"].source):
        c.note(f"{flags['seq_kd'].source} (seq_kd: the teacher's own generation is not planned)")
