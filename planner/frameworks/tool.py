"""What planner.intake knows a framework's runs and files by, declared in its folder: a command line it owns
(Framework.tools, Tool: its CLI as a launch line names it, the entry scripts and modules a launcher runs in its place,
the launcher it wraps, and which of its folder's readers a run of it goes to), and how a configuration file in its
format is told from its content (Framework.signs, Signs). planner.intake.launch finds training commands by these names,
planner.intake.training dispatches a run through them and planner.intake.configs.kind tells a file's format by the
signs; the launchers proper (torchrun, deepspeed, accelerate launch, python) stay in planner.intake."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# what a framework's reader reads of a run of its CLI (Tool.reads)
READS = (
    # the config file or flags, through the format readers (Framework.reads) or the script-flags reader
    # (Framework.script_flags)
    "config",
    # the CLI's flags and the config file it is given: reader.read_cli(c, run, sub, flags, data, path), its reader
    # reading the processes too where its own CLI launched the run
    "cli",
    # the whole command: reader.read_run(run) -> Collector (its recipe, config and processes)
    "run",
)


@dataclass(frozen=True)
class Tool:
    """One CLI of a framework. `name` and `aliases`: the executable a launch line names (`lmf` is llamafactory-cli);
    `trains`: its subcommands that train (the word after the name); `options`: the launcher whose options stand
    between the subcommand and the target (`tune run [torchrun options] RECIPE`), "" where the subcommand is the
    target; `script`: a pattern on the script another launcher runs in the CLI's place (group 1: the subcommand);
    `modules`: the `python -m` module prefixes that train with it; `wraps`: the launcher the CLI runs (its processes
    are read as that launcher's), "" for its own (read by its reader: reader.read_launcher(c, env, where) unless
    `reads` is "cli"); `launcher_options`: its command line takes the wrapped launcher's options among its own;
    `config_flag`: the flag naming its config file ("" the first positional word); `trainers`: the subcommands that
    name a script-flags trainer (planner.intake: any other subcommand is the first); `strict`: its parser refuses a
    flag it lacks (each is an unplanned line); `idle`: its subcommands that run no training, each with what it runs
    instead (`swift infer`: inference), said in one line where a script has nothing else to plan
    (planner.intake.others)."""

    name: str = ""
    trains: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    options: str = ""
    script: str = ""
    modules: tuple[str, ...] = ()
    wraps: str = ""
    reads: str = "config"
    launcher_options: bool = False
    config_flag: str = ""
    trainers: tuple[str, ...] = ()
    strict: bool = False
    idle: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        assert self.reads in READS, (self.name, self.reads)
        assert not self.script or re.compile(self.script).groups == 1, (self.name, self.script)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases) if self.name else ()

    def entry(self, target: str) -> str | None:
        """The subcommand a script another launcher runs stands for (`swift/cli/sft.py`: sft), else None."""
        m = re.search(self.script, target) if self.script else None
        return m.group(1) if m else None

    def trainer(self, sub: str) -> str:
        """The script-flags trainer its subcommand names (`trl grpo`: grpo; any other: the first)."""
        return sub if sub in self.trainers else self.trainers[0]


@dataclass(frozen=True)
class Signs:
    """How a configuration file in a framework's format is told from its content (planner.intake.configs.kind):
    `test(keys, data)` on the mapping's top-level keys (as strings) and the mapping; `rank`: the order the formats are
    tried in, lowest first (a file with the keys of two is the lower's; a model's own config.json is told at
    planner.intake.configs.MODEL_RANK); `listed`: the format is also told by any name of its generated key list
    (planner/intake/presets/keys_<format>.txt, the names its package's parser takes); `refused`: for a format known
    and not read, the one-line reason (no reader sees it)."""

    format: str
    test: Callable[[set[str], dict], bool]
    rank: int
    listed: bool = False
    refused: str = ""
