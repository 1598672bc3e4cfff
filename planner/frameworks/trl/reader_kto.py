"""TRL's KTOConfig inputs (trl 1.16 trl/trainer/kto_config.py) as memplan's KTO workload: DPO's max_length (:166, 1024)
and precompute_ref_log_probs (:180) are read as DPO's are (planner.frameworks.hf.reader); desirable_weight (:212) and
undesirable_weight (:219) scale the loss and move no memory; loss_type apo_zero_unpaired (:198) builds no KL batch
(kto_trainer.py:815), a note: planned with the KL pass (its memory an upper bound)."""

from __future__ import annotations

from planner.intake.collect import Collector, one
from planner.intake.flags import Flag

KTO_KEYS = {"desirable_weight", "undesirable_weight"}
# KTOConfig's own fields beyond those presets/keys_hf.txt lists (read from kto_config.py, TRL 1.16)
CONFIG_FIELDS = KTO_KEYS | {"pad_to_multiple_of", "activation_offloading", "router_aux_loss_coef"}
C = "trl/trainer/kto_config.py"


def read_kto(c: Collector, flags: dict[str, Flag]) -> None:
    """What of KTOConfig's own inputs moves the plan: a loss without the KL batch is noted."""
    loss = flags.get("loss_type")
    if loss is not None and str(one(loss.value)) == "apo_zero_unpaired":
        c.note(
            f"{loss.source} (apo_zero_unpaired builds no KL batch, trl/trainer/kto_trainer.py:815: planned with the KL "
            "pass, an upper bound)"
        )
