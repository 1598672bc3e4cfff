"""ms-swift's flags for GaLore and Muon (what reader_optim.py reads): --use_galore with --galore_rank,
--galore_proj_type and --galore_target_modules over --optim adamw_torch or adamw_bnb_8bit
(optimizers/galore/utils.py:189-214), or --optimizer muon / muonclip; torch's optimizers as --optim."""

from __future__ import annotations

from planner.export import export
from planner.frameworks.swift.keys import KEYS
from planner.model.shapes import ATTENTION_LINEARS


def optimizer_flags(plan) -> list[tuple[str, object]]:
    if plan.optimizer in ("muon", "muonclip"):
        return [("optimizer", plan.optimizer)]
    if plan.optimizer not in ("galore-adamw", "galore-adamw-8bit"):
        return [KEYS.pair("optimizer", export.HF_OPTIM[plan.optimizer])]
    out = [
        ("use_galore", True),
        ("galore_rank", plan.optimizer_rank),
        KEYS.pair("optimizer", "adamw_bnb_8bit" if plan.optimizer == "galore-adamw-8bit" else "adamw_torch"),
    ]
    if plan.optimizer_projection != "std":  # --galore_proj_type (trainers/arguments.py:198)
        out.append(("galore_proj_type", export.proj_type(plan)))
    if plan.optimizer_targets != "all-linear":  # none: every linear (pipelines/train/tuner.py:418-420)
        t = plan.optimizer_targets
        out.append(("galore_target_modules", list(ATTENTION_LINEARS) if t == "attention" else t.split(",")))
    return out
