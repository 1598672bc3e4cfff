"""The optional dependencies a command needs, checked before it does anything: a missing one is refused in one
line that names the extra to install (`pip install 'memplan[sim]'`; exit code 2, nothing written). Found with
importlib.util.find_spec: nothing is imported here, so the check costs no start-up time."""

from __future__ import annotations

import importlib.util

from planner.errors import BadInput


def steps(lora: bool = False, rl: bool = False, deepspeed: bool = False) -> dict[str, str]:
    """The modules, each with the extra that installs it, that simulated or real training steps need (the
    probes, the bundled trainer): torch and transformers; PEFT under LoRA; TRL for DPO / GRPO; DeepSpeed for
    the bundled trainer's ZeRO stages (a one-process probe runs ZeRO without it)."""
    need = {"torch": "sim", "transformers": "sim"}
    if lora:
        need["peft"] = "sim"
    if rl:
        need["trl"] = "trl"
    if deepspeed:
        need["deepspeed"] = "deepspeed"
    return need


def for_knobs(knobs, trainer: bool = False) -> dict[str, str]:
    """steps() for a plan's knobs (planner.config.spec.Knobs): in a probe, or in the bundled trainer (`trainer`)."""
    return steps(knobs.lora_rank > 0, knobs.workload.rl, trainer and knobs.zero_stage > 0)


def require(what: str, modules: dict[str, str]) -> None:
    """Refuse `what` (the command, as the user typed it) when any of `modules` (module -> extra) is missing:
    "planner train needs torch and transformers: pip install 'memplan[sim]'"."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    names = " and ".join(filter(None, [", ".join(missing[:-1]), missing[-1]]))
    wanted = ",".join(dict.fromkeys(modules[m] for m in missing))
    raise BadInput(f"{what} needs {names}: pip install 'memplan[{wanted}]'")
