"""The commands of a launch script that are no training run memplan reads: a framework's it does not read
(planner.frameworks.unread: `megatron sft`, `torchrun pretrain_gpt.py`, `xtuner train`), and a command of a framework
it reads that trains nothing (Tool.idle: `swift infer`, `llamafactory-cli export`, `python -m
verl.trainer.main_generation`). A script with no other command is refused in one line naming the first (an unread
trainer before a command that trains nothing); beside a run memplan reads, each is a note and the run is read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS, cli
from planner.frameworks.unread import Unread, by_cli, by_run
from planner.intake.collect import known, show
from planner.intake.shell import Command, Script

# a read framework's `python -m` modules that train nothing (Framework.idle_modules): what each runs
IDLE_MODULES = {m: what for f in FRAMEWORKS.values() for m, what in f.idle_modules}
# the words that start another command in front of it (a CLI is looked for after them, not in any word: `pip install
# vllm` names no run)
WRAPPERS = {"nohup", "sudo", "srun", "exec", "time", "env", "stdbuf", "numactl", "taskset", "nice", "timeout", "mpirun"}


@dataclass
class Other:
    where: str  # file:line
    text: str  # the command as a line names it: `megatron sft`, `torchrun pretrain_gpt.py`
    unread: Unread | None = None  # the framework memplan does not read, or None (a read framework's command)
    runs: str = ""  # what it runs where it trains nothing ("" for an unread trainer)

    def says(self) -> str:
        if self.runs:
            return f"{self.where} {self.text} runs {self.runs}, not training"
        u = self.unread
        return f"{self.where} {self.text} is {u.name}, {u.what}, which memplan does not read"


def split(found: list, script: Script) -> tuple[list, list[Other]]:
    """(the runs memplan reads, every other command of the script in order of lines): the launchers' runs that are an
    unread framework's or train nothing, and the commands launch does not take as runs (planner.intake.launch)."""
    read, others = [], []
    for run in found:
        other = of_run(run)
        (others if other else read).append(other or run)
    taken = {(str(r.command.path), r.command.line) for r in found}
    for cmd in script.commands:
        if (str(cmd.path), cmd.line) not in taken and (other := of_command(cmd)) is not None:
            others.append(other)
    return read, sorted(others, key=lambda o: _line(o.where))


def of_run(run) -> Other | None:
    """A launcher's run (planner.intake.launch.Run) that is an unread framework's, or trains nothing."""
    module = run.tool == "python" and any(k in run.opts for k in ("m", "module"))
    target = run.target if known(run.target) else next((w.text for w in run.args if w.text.endswith(".py")), "")
    text = f"{run.tool} {'-m ' if module else ''}{show(target or run.target)}"
    if module and run.target in IDLE_MODULES:
        return Other(run.where, text, runs=IDLE_MODULES[run.target])
    u = by_run(run.target, module, [w.text for w in run.args])
    return Other(run.where, text, u, u.runs) if u is not None else None


def of_command(cmd: Command) -> Other | None:
    """A command that names a CLI memplan does not read, or a read CLI's subcommand that trains nothing."""
    words = [w.text for w in cmd.words]
    k = 0
    if words and Path(words[0]).name in WRAPPERS:
        k = next((i for i, w in enumerate(words) if _names_cli(w) or _python(w)), len(words))
    if k >= len(words):
        return None
    name, sub = Path(words[k]).name, words[k + 1] if k + 1 < len(words) else ""
    where = f"{cmd.path.name}:{cmd.line}"
    if _python(words[k]) and sub == "-m" and k + 2 < len(words):
        module = words[k + 2]
        if module in IDLE_MODULES:
            return Other(where, f"{name} -m {module}", runs=IDLE_MODULES[module])
        u = by_run(module, True, words[k + 3 :])
        return Other(where, f"{name} -m {module}", u, u.runs) if u is not None else None
    if (u := by_cli(name)) is not None:
        text = f"{name} {show(sub)}".strip()
        runs = dict(u.idle).get(sub, u.runs) if not u.trains or sub not in u.trains else ""
        return Other(where, text, u, runs)
    owned = cli(name)
    idle = dict(owned[1].idle) if owned is not None else {}
    return Other(where, f"{name} {sub}", runs=idle[sub]) if sub in idle else None


def refusal(path: Path, others: list[Other], accepted: str) -> BadInput:
    """A script with no run memplan reads: its first unread trainer, else its first command that trains nothing, else
    no command at all, in one line."""
    trainer = next((o for o in others if not o.runs), None)
    if trainer is not None:
        return BadInput(f"--config {path}: {trainer.says()} (accepted: {accepted})", "config")
    if others:
        return BadInput(f"--config {path}: {others[0].says()}: nothing to plan", "config")
    return BadInput(f"--config {path}: no training command found (accepted: {accepted})", "config")


def _names_cli(word: str) -> bool:
    name = Path(word).name
    return by_cli(name) is not None or cli(name) is not None


def _python(word: str) -> bool:
    return Path(word).name.startswith("python")


def _line(where: str) -> int:
    return int(where.rpartition(":")[2] or 0)
