"""The optional dependencies a command or a probe job needs, checked before it does anything: a missing one is refused
in one line that names the extra to install (`pip install 'memplan[sim]'`). Found with importlib.util.find_spec:
nothing is imported here, so the check costs no start-up time. Both faces use it: the CLI (planner/cli/extras.py) and
the API's probe jobs (probes.ready); pyproject.toml's extras install what each line names (tests/test_extras_venvs.py
runs each extra's docs example in a venv of that extra alone)."""

from __future__ import annotations

import importlib.util

from planner.errors import BadInput

BNB_QUANT = ("nf4", "fp4", "int8")  # a bitsandbytes base (gptq / awq: stand-ins, planner.estimate.quant)
# bitsandbytes' optimizers: 8-bit blockwise states, or 32-bit ones fp32 whatever the parameters
# (planner.estimate.state_terms.optimizer_bytes)
BNB_8BIT = ("adamw-8bit", "paged-adamw-8bit", "lion-8bit", "paged-lion-8bit", "rmsprop-bnb-8bit")
BNB_32BIT = ("paged-adamw", "lion", "paged-lion", "rmsprop-bnb")
BNB_OPTIMIZERS = (*BNB_8BIT, *BNB_32BIT)


def steps(lora: bool = False, rl: bool = False, deepspeed: bool = False, bnb: bool = False) -> dict[str, str]:
    """The modules, each with the extra that installs it, that simulated or real training steps need (the
    probes, the bundled trainer): torch and transformers; PEFT under LoRA; TRL for DPO / GRPO; DeepSpeed for
    the bundled trainer's ZeRO stages (a one-process probe runs ZeRO without it); bitsandbytes for a real step's
    4-bit or 8-bit base or 8-bit / paged optimizer (the sim traces stand-ins)."""
    need = {"torch": "sim", "transformers": "sim"}
    if lora:
        need["peft"] = "sim"
    if rl:
        need["trl"] = "trl"
    if deepspeed:
        need["deepspeed"] = "deepspeed"
    if bnb:
        need["bitsandbytes"] = "qlora"
    return need


def for_knobs(knobs, trainer: bool = False, backend: str = "sim") -> dict[str, str]:
    """steps() for a plan's knobs (planner.config.spec.Knobs): in a probe on `backend`, or in the bundled trainer."""
    real = trainer or backend != "sim"
    bnb = real and (knobs.quant in BNB_QUANT or knobs.optimizer in BNB_OPTIMIZERS)
    return steps(knobs.lora_rank > 0, knobs.workload.rl, trainer and knobs.zero_stage > 0, bnb)


def missing(modules: dict[str, str]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require(what: str, modules: dict[str, str], field: str | None = None) -> None:
    """Refuse `what` (the command, as the user typed it) when any of `modules` (module -> extra) is missing:
    "planner train needs torch and transformers: pip install 'memplan[sim]'"."""
    gone = missing(modules)
    if not gone:
        return
    names = " and ".join(filter(None, [", ".join(gone[:-1]), gone[-1]]))
    wanted = ",".join(dict.fromkeys(modules[m] for m in gone))
    raise BadInput(f"{what} needs {names}: pip install 'memplan[{wanted}]'", field)
