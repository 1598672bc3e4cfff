"""axolotl's rl kto at each release line: TRL's KTOTrainer at the TRL the line pins, under axolotl's own subclass,
AxolotlKTOTrainer, whose mixins override no forward and no loss: the RNG state's load, the scheduler, the optimizer's
parameter groups and its init arguments, FSDP's save and the accelerator's distributed type (v0.5.0
core/trainer_builder.py:1067; v0.8.0 core/trainers/trl.py:158; v0.12.0 :31; v0.17.0 :29-41; v0.18.0 :28-40; 0.19.0
axolotl/core/trainers/trl.py:28-40, core/trainers/mixins/). Its builder hands the trainer the model alone, no
reference (0.19.0 core/builders/rl.py:52, 77-78), no use_liger_kernel (axolotl sets it for DPO and GRPO alone:
core/trainers/dpo/__init__.py:41-42, grpo/__init__.py:148) and no precompute_ref_log_probs (DPO alone: dpo/__init__.py:
43-45), and max_length = sequence_len (core/builders/base.py:690-691). So a line plans KTO exactly where TRL's own line
of its pin does (planner.frameworks.trl.releases): v0.17.0 .. 0.19.0 (trl 1.5.1, 1.8.0, 1.9.0: TRL's 1.0 and 1.7
lines, planner.estimate.kto_entropy) with an adapter; every earlier line refuses it (REFUSED), each saying its pin."""

from planner.frameworks.base import Rule, kind, workload_of
from planner.frameworks.rules import kto_two_rows

PLANNED = "give --framework axolotl@0.17 (v0.17.0 .. 0.19.0: trl 1.5.1 .. 1.9.0, planned)"
UNMEASURED = (
    "a KTOTrainer memplan does not plan under axolotl (TRL's own: refused before 0.17, planned at 0.17 .. 0.29.x and "
    "1.0 .. 1.13.x: planner.frameworks.trl.kto_zero, releases)"
)
# TRL's 0.22 line plans its own KTO (planner.frameworks.trl.kto_zero: the earlier 8.1% gap was the probe's rows, cut
# by KTOConfig's default max_prompt_length); axolotl's builder at these pins (its max_prompt_length, its rows) not read
UNTRACED = (
    "TRL's 0.22 line (v0.22.0 .. v0.29.1), planned as trl@0.22 (trl 0.22.2's CPU step within 5%), but axolotl's "
    "builder at these pins (the KTOConfig's max_prompt_length it passes) not read"
)
# line -> (the pins read at its tags, why its KTO is not planned)
REFUSED = {
    "0.5": ("trl==0.12.0 (v0.5.0 requirements.txt:45) .. 0.12.1 (v0.6.0 :48)", UNMEASURED),
    "0.7": ("trl==0.15.0 (v0.7.0 requirements.txt:21) .. 0.15.1 (v0.7.1 :21)", UNMEASURED),
    "0.8": ("trl==0.16.0 (v0.8.0 requirements.txt:20) .. 0.18.2 (v0.11.0 :21)", UNMEASURED),
    "0.12": (
        "trl==0.21.0 (v0.12.0 requirements.txt:22) .. 0.27.0 (v0.13.2 :20)",
        f"{UNMEASURED} at 0.21.0, and from 0.25.0 {UNTRACED}",
    ),
    "0.14": ("trl==0.27.1 (v0.14.0 requirements.txt:19) .. 0.29.0 (v0.15.0 .. v0.16.1 :19)", UNTRACED),
}


def refused(line: str) -> Rule:
    """The line's refusal of rl kto: its TRL pins and why that TRL's KTO is not planned."""
    pins, why = REFUSED[line]
    return Rule(
        "workload",
        f"axolotl {line}'s rl kto runs TRL's KTOTrainer at its pin, {pins}: {why}: not planned; {PLANNED}",
        lambda k: kind(k) == "kto",
    )


# Without an adapter axolotl loads a reference model of its own (0.19.0 train.py:143-164; v0.17.0, v0.18.0
# :137-153) that KTO's builder never hands the trainer (core/builders/rl.py:52, 77-78), and TRL's KTOTrainer, given
# none and no PEFT model, loads another from the model's path with model_init_kwargs unset (trl 1.9.0
# trl/trainer/kto_trainer.py:917-927; v1.8.0 :896-906; v1.5.1 trl/experimental/kto/kto_trainer.py:404-411), in
# create_model_from_path's default dtype, float32 (1.9.0 trl/trainer/utils.py:1144; v1.8.0 :1029; v1.5.1 :1012):
# two references, one in fp32 beside a bf16 policy, which memplan's KTO (one reference in the policy's dtype) does not
# plan. With an adapter TRL wraps the model itself (the peft_config axolotl passes: core/builders/rl.py, build) and
# the adapter disabled is the reference (kto_trainer.py:913-917)
FULL = (
    "axolotl's rl kto without an adapter runs two reference models: one axolotl loads and never hands the trainer "
    "(axolotl/train.py:143-164, core/builders/rl.py:77-78) and one TRL's KTOTrainer loads from the model's path in "
    "float32 (trl 1.9.0 trl/trainer/kto_trainer.py:917-927, trainer/utils.py:1144): not planned; give adapter lora or "
    "qlora (the adapter disabled is the reference)"
)
PLANNED_RULES = (
    Rule("lora_rank", FULL, lambda k: kind(k) == "kto" and not k["lora_rank"]),
    Rule(
        "workload",
        "axolotl hands precompute_ref_log_probs to DPO alone (axolotl/core/trainers/dpo/__init__.py:43-45): KTO's "
        "reference forward runs in every step; plan it without --precompute-ref-log-probs",
        lambda k: kind(k) == "kto" and bool(getattr(workload_of(k), "precompute_ref_log_probs", False)),
    ),
    kto_two_rows("trl 1.9.0 trl/trainer/kto_trainer.py:806-809; v1.5.1 trl/experimental/kto/kto_trainer.py:355-358"),
)
