"""ms-swift 4.6's GaLore and Muon -> optimizer, optimizer_rank and optimizer_targets: --use_galore (or --optimizer
galore: arguments/sft_args.py:217-218) with --galore_rank (128) and --galore_target_modules (every linear:
pipelines/train/tuner.py:418-420), GaLoreAdamW over the AdamWs and GaLoreAdamW8bit over the 8-bit ones
(optimizers/galore/utils.py:189-214); --galore_optim_per_parameter still steps every optimizer in the trainer's step
(utils.py:66-71), so the gradients are held as without it; --galore_quantization is Q-GaLore (refused). --optimizer
muon is Moonlight's Muon (optimizers/muon.py:9-52), --optimizer muonclip ms-swift 4's MuonClip (optimizers/muonclip.py,
planner.estimate.muonclip), whose --optim_args (momentum, qk_clip_tau, ...) change no memory."""

from __future__ import annotations

from planner.intake import tuners
from planner.intake.collect import Collector, as_bool, default, one
from planner.intake.flags import Flag

ARGS = "swift/trainers/arguments.py"


def read_matrix_optimizer(c: Collector, f: dict[str, Flag], plugin: str) -> bool:
    """Whether the file runs GaLore or Muon (the fields set); False for every other optimizer."""
    if plugin in ("muon", "muonclip"):
        c.set("optimizer", plugin, f["optimizer"].source, "--optimizer")
        return True
    on = f.get("use_galore")
    if plugin != "galore" and (on is None or not as_bool(on.value)):
        return False
    quant = f.get("galore_quantization")
    if quant is not None and as_bool(quant.value):
        tuners.refuse(quant.source, tuners.UNPLANNED_OPTIMIZERS["q_galore"])
    source = on.source if on is not None else f["optimizer"].source
    eight = "8bit" in str(one(f["optim"].value)).lower() if "optim" in f else False
    c.set("optimizer", "galore-adamw-8bit" if eight else "galore-adamw", source, "--use_galore")
    if eight and "paged" in str(one(f["optim"].value)).lower():  # optimizers/galore/utils.py:214: is_paged
        c.note(tuners.PAGED_GALORE_NOTE.format(source=f["optim"].source))
    rank, target = f.get("galore_rank"), f.get("galore_target_modules")
    tuners.low_rank_fields(
        c,
        (rank.value, rank.source, rank.raw) if rank else None,
        (target.value, target.source, target.raw) if target else None,
    )
    if rank is None:
        c.fill("optimizer_rank", 128, default("ms-swift 4.6", f"{ARGS}:195", "galore_rank 128"), "--galore_rank")
    kind = f.get("galore_proj_type")  # trainers/arguments.py:198 -> optimizers/galore/utils.py:233
    if kind is not None:
        tuners.low_rank_projection(c, one(kind.value), kind.source, kind.raw)
    return True
