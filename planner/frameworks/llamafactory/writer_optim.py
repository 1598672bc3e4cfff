"""LLaMA-Factory's entries for GaLore, APOLLO and Muon (the keys reader_optim.py reads): use_galore / use_apollo with
their rank, target, proj_type and layerwise keys over optim adamw_torch (or an 8-bit AdamW for GaLore's 8-bit states), use_muon."""

from __future__ import annotations

from planner.export import export

OPTIM = {"galore-adamw": "adamw_torch", "galore-adamw-8bit": "adamw_bnb_8bit", "apollo-adamw": "adamw_torch"}


def matrix_optimizer_entries(plan) -> list[tuple[str, object, str]] | None:
    """The entries in place of `optim`, or None for torch's optimizers."""
    if plan.optimizer == "muon":
        return [("use_muon", True, "Muon for the hidden matrices, AdamW for the rest")]
    if plan.optimizer not in OPTIM:
        return None
    name = plan.optimizer.split("-")[0]
    target = "all" if plan.optimizer_targets == "all-linear" else plan.optimizer_targets
    out = [
        (f"use_{name}", True, ""),
        (f"{name}_rank", plan.optimizer_rank, ""),
        (f"{name}_target", target, ""),
        ("optim", OPTIM[plan.optimizer], "GaLore / APOLLO wrap adamw_torch (train/trainer_utils.py:239-246)"),
    ]
    if plan.optimizer_projection != "std":  # galore_proj_type / apollo_proj_type (finetuning_args.py:291, 334)
        out.append((f"{name}_proj_type", export.proj_type(plan), "the side each target is projected on"))
    if plan.optimizer_in_backward:
        out.append((f"{name}_layerwise", True, "one optimizer per parameter, stepped in backward"))
    return out
