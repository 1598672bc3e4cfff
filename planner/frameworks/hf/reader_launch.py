"""What an HF / TRL argument file given alone leaves open: the processes its launch starts (issue 47 item 8), asked for
in the note every reader of a file alone writes (dispatch.ASKS "gpus": the flag answers it)."""

from __future__ import annotations

from pathlib import Path

from planner.intake.collect import ASK_GPUS

TRL_CLI = ("distillation", "dpo", "grpo", "kto", "reward", "rloo", "sft")  # trl 1.16.0 cli/commands/__init__.py:24-31


def alone_note(path: Path, trainer: str) -> str:
    """What an argument file given alone leaves open: `trl TRAINER --config FILE` (trl 1.16.0 cli/commands/__init__.py:
    24-31) launches accelerate over its processes; a JSON or a trainer TRL's CLI lacks is read by a script whose
    launch is not among the files."""
    if path.suffix in (".yaml", ".yml") and trainer in TRL_CLI:
        how = (
            f"`trl {trainer} --config {path.name}` launches accelerate (trl 1.16.0 trl/cli/accelerate_launcher.py:45-47), "
            "one process a visible GPU where no accelerate config names them (accelerate 1.16.0 "
            "commands/launch.py:1363-1364"
        )
    else:
        how = (
            "the script that reads it and the launch that starts it are not among the files (they decide the processes"
        )
    return f"{path.name} alone: {how}: {ASK_GPUS}"
