"""Issue 47 ("another trainer's defaults are never borrowed silently") at each TRL release line: what memplan fills
where a user's `trl sft|dpo|grpo` command leaves a field out, read at the line its version pin names, equals that
release's own config classes' defaults (SFTConfig, DPOConfig, GRPOConfig in the line's venv of tools/fwenv_old.sh,
with the transformers it was read at); a default the line did not move names the newest release it was taken from as
the line's (`trl@0.22 default, as at trl 1.16: ...`). The venv's classes are read with dataclasses.fields, never
instantiated (TrainingArguments' __post_init__ wants a GPU for bf16). A GRPO field the reading leaves unset is planned
at planner.config.workload.Workload's default, which must then be the line's. The trl@0.19 case failed before that
line's optimizer default was set: it filled transformers 5.23's adamw_torch_fused where 4.53.1 runs adamw_torch."""

from pathlib import Path

import pytest

from planner.config.workload import Workload
from tests.planner.frameworks.linedefaults import own_defaults, read_pinned, venv_or_skip

LINES = [
    ("0.14", "0.14.0"),
    ("0.15", "0.15.2"),
    ("0.19", "0.19.1"),
    ("0.22", "0.22.2"),
    ("1.0", "1.0.0"),
    ("1.10", "1.10.0"),
]
KEYS = (
    "optim",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "gradient_checkpointing",
    "max_length",
    "max_seq_length",
    "beta",
    "max_completion_length",
)
PROBE = f"""
import dataclasses, json
from trl import SFTConfig, DPOConfig, GRPOConfig
print(json.dumps({{c.__name__: {{f.name: f.default for f in dataclasses.fields(c) if f.name in {KEYS!r}}}
                  for c in (SFTConfig, DPOConfig, GRPOConfig)}}, default=str))
"""
OPTIM = {"adamw_torch": "adamw", "adamw_torch_fused": "adamw-fused"}
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


def _read(tmp_path: Path, version: str, trainer: str) -> dict:
    """memplan's reading of a `trl TRAINER` command that names the model alone, beside `trl==VERSION`."""
    command = f"trl {trainer} --model_name_or_path {MODEL} --output_dir out\n"
    r = read_pinned(tmp_path / trainer, f"trl=={version}", "run.sh", command)
    return {s.field: s for s in r.settings}


def _expected(own: dict, trainer: str) -> dict:
    c = own[{"sft": "SFTConfig", "dpo": "DPOConfig", "grpo": "GRPOConfig"}[trainer]]
    out = {
        "optimizer": OPTIM[c["optim"]],
        "micro_batch": c["per_device_train_batch_size"],
        "grad_accum": c["gradient_accumulation_steps"],
        "checkpointing": "full" if c["gradient_checkpointing"] in (True, "True") else "off",
    }
    length = c.get("max_length") if c.get("max_length") is not None else c.get("max_seq_length")
    if trainer == "sft":  # trl 0.14's None: SFTTrainer takes min(model_max_length, 1024) (sft_trainer.py:240-242)
        out["seq_len"] = 1024 if length is None else length
    if trainer == "dpo" and length is not None:
        out["workload.max_length"] = length
    if trainer == "grpo":
        out |= {"workload.beta": float(c["beta"]), "workload.max_completion_length": c["max_completion_length"]}
    return out


@pytest.mark.parametrize(("line", "version"), LINES, ids=[f"trl@{line}" for line, _ in LINES])
def test_each_line_fills_its_own_releases_defaults(tmp_path, line, version):
    venv = venv_or_skip(f"trl-{version}")
    own = own_defaults(venv, PROBE)
    for trainer in ("sft", "dpo", "grpo"):
        s = _read(tmp_path, version, trainer)
        assert s["framework"].value in (f"trl@{line}", "trl"), (trainer, s["framework"])
        for field, want in _expected(own, trainer).items():
            got = s.get(field)
            if got is None:  # a workload field the reading leaves to the plan: the Workload's own default is planned
                assert Workload.model_fields[field.split(".")[1]].default == want, (trainer, field, want)
                continue
            assert got.value == want, (trainer, field, got.value, got.source, want)
            if s["framework"].value != "trl" and "default" in got.source:  # an older line names itself
                assert got.source.startswith(f"trl@{line} default"), (trainer, field, got.source)
