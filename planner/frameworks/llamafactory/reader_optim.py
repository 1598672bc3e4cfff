"""LLaMA-Factory 0.9.5's GaLore, APOLLO and Muon switches -> optimizer, optimizer_rank and optimizer_targets. GaLore
wraps the optim the file names (train/trainer_utils.py:236-245: adamw_torch -> GaLoreAdamW, the 8-bit AdamWs ->
GaLoreAdamW8bit, adafactor -> GaLoreAdafactor, anything else NotImplementedError), APOLLO adamw_torch only (:328-333);
galore_rank / apollo_rank 16 and galore_target / apollo_target "all" (hparams/finetuning_args.py:270-281, 309-320:
find_all_linear_modules, the decoder's linears); use_muon runs its third_party Muon (trainer_utils.py:498-524)."""

from __future__ import annotations

from planner.intake import tuners
from planner.intake.collect import LF, Collector, as_bool, default
from planner.intake.flags import Flag

ARGS = "hparams/finetuning_args.py"
WRAPPED = {  # the file's optim -> the GaLore / APOLLO optimizer LF builds on it
    "galore": {
        "adamw_torch": "galore-adamw",
        "adamw_bnb_8bit": "galore-adamw-8bit",
        "adamw_8bit": "galore-adamw-8bit",
        "paged_adamw_8bit": "galore-adamw-8bit",
    },
    "apollo": {"adamw_torch": "apollo-adamw"},
}


def read_matrix_optimizer(c: Collector, f: dict[str, Flag]) -> None:
    """use_galore, use_apollo (with their rank, target and layerwise keys) or use_muon, where the file turns one on."""
    if "use_muon" in f and as_bool(f["use_muon"].value):
        c.set("optimizer", "muon", f["use_muon"].source, "use_muon")
        return
    for name in ("galore", "apollo"):
        on = f.get(f"use_{name}")
        if on is None or not as_bool(on.value):
            continue
        layerwise = f.get(f"{name}_layerwise")  # one optimizer per parameter, stepped in its gradient's hook
        if layerwise is not None and as_bool(layerwise.value):  # (trainer_utils.py:248-275): no full gradient set
            c.set("optimizer_in_backward", True, layerwise.source, layerwise.raw)
        optim = str(f["optim"].value).strip().lower() if "optim" in f else "adamw_torch"
        if "optim" not in f:
            c.note(
                f"{on.source} (LLaMA-Factory builds GaLore / APOLLO on optim adamw_torch: on torch >= 2.8 transformers' "
                "default adamw_torch_fused raises NotImplementedError, trainer_utils.py:239-246; set optim: adamw_torch)"
            )
        if optim not in WRAPPED[name]:
            tuners.refuse(f["optim"].source, f"{name} over optim {optim} (trainer_utils.py:236-245, 328-333)")
        c.set("optimizer", WRAPPED[name][optim], on.source, f"use_{name}")
        if optim.startswith("paged"):
            c.note(tuners.PAGED_GALORE_NOTE.format(source=f["optim"].source))
        if f"{name}_proj" in f:  # apollo_proj random or svd (finetuning_args.py:330-333)
            tuners.apollo_projector(f[f"{name}_proj"].source, name, f[f"{name}_proj"].value)
        kind = f.get(f"{name}_proj_type")  # galore_proj_type, apollo_proj_type (finetuning_args.py:291-294, 334-337)
        if kind is not None:
            tuners.low_rank_projection(c, kind.value, kind.source, kind.raw)
        rank, target = f.get(f"{name}_rank"), f.get(f"{name}_target")
        tuners.low_rank_fields(
            c,
            (rank.value, rank.source, rank.raw) if rank else None,
            (target.value, target.source, target.raw) if target else None,
        )
        if rank is None:
            c.fill("optimizer_rank", 16, default(LF, f"{ARGS}:279-281", f"{name}_rank 16"), f"{name}_rank")
