"""Launch scripts and command lines: which command of a script trains (the launchers torchrun, `python -m
torch.distributed.run`, deepspeed, accelerate launch, python X.py; a framework's CLI and the subcommands that train, as
its folder declares them: Framework.tools, e.g. `llamafactory-cli train`, `swift sft`, `tune run`; behind sudo, srun,
docker or ssh wrappers, and in scripts it runs with bash), how many processes a node and how many nodes its launcher
starts, and the framework reader its script and flags go to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from planner.frameworks import ARGS, CLIS, FRAMEWORKS, MODULES, cli
from planner.intake import limits
from planner.intake.collect import accepted, show
from planner.intake.flags import Flag, is_flag, norm
from planner.intake.shell import Command, Script, Word, read_script, read_text
from planner.intake.shellvars import find_file

# the launchers and shells, and the frameworks' CLIs (Framework.tools)
TOOLS = {"torchrun", "deepspeed", "accelerate", "bash", "sh", *CLIS}
BOOL_OPTS = {
    "standalone",
    "no_python",
    "run_path",
    "module",
    "m",
    "no_local_rank",
    "force_multi",
    "save_pid",
    "elastic_training",
    "bind_cores_to_rank",
    "no_ssh",
    "no_ssh_check",
    "multi_gpu",
    "use_deepspeed",
    "use_fsdp",
    "use_megatron_lm",
    "use_xpu",
    "cpu",
    "tpu",
    "debug",
    "quiet",
    "q",
    "same_network",
    "enable_cpu_affinity",
    "downcast_bf16",
    "u",
    "B",
    "O",
    "E",
    "s",
    "I",
}
# each launcher's short forms and second names, as its own argparse spells them, -> the name read: DeepSpeed 0.19.8
# deepspeed/launcher/runner.py:51-95 (-H, -i, -e, --num_accelerators), torch 2.13 torch/distributed/run.py:530-575 (-m,
# -r, -t; the dashed and underscored spellings are one name after flags.norm), accelerate 1.16
# accelerate/commands/launch.py:166-170, 307-309, 354-356 (-q, -t, -m)
ALIASES = {
    "deepspeed": {"H": "hostfile", "i": "include", "e": "exclude", "num_accelerators": "num_gpus"},
    "torchrun": {"m": "module", "r": "redirects", "t": "tee"},
    "accelerate": {"m": "module", "q": "quiet", "t": "tee"},
}
TORCHRUN_MODULES = {"torch.distributed.run", "torch.distributed.launch"}
# RL runs whose readers are their own: verl's and OpenRLHF's Ray-launched PPO (their own GPU counts), OpenRLHF's DPO
# the python modules whose runs a framework's reader reads whole (Framework.launched: verl's and OpenRLHF's RL trainers)
RL_MODULES = tuple(m for f in FRAMEWORKS.values() for m in f.launched)
# a word of a string that is a launcher (what _tool finds in any of its words, found in one pass over the string)
_TOOL_IN = re.compile(rf"(?:^|\s)(?:\S*/)?(?:{'|'.join(map(re.escape, sorted(TOOLS)))}|python[0-9.]*)/*(?=\s|$)")
TRAINING_NAME = re.compile(r"train|sft|dpo|grpo|ppo|orpo|kto|finetun|fine_tun|lora|pretrain|^rl|_rl")


@dataclass
class Run:
    tool: str  # torchrun, deepspeed, accelerate, python, or a framework's CLI (Framework.tools)
    opts: dict[str, Flag]  # the launcher's own options
    target: str  # the script, module or subcommand it runs
    args: list[Word]  # the words after it
    command: Command
    before: list[Word] = field(default_factory=list)  # the words before the launcher (srun and its options, sudo)

    @property
    def where(self) -> str:
        return f"{self.command.path.name}:{self.command.line}"


def _tool(text: str) -> str | None:
    name = Path(text).name
    if name in TOOLS:
        return name
    return "python" if re.fullmatch(r"python[0-9.]*", name) else None


def _names_a_tool(text: str) -> bool:
    """A word of `text` is a launcher (_tool): substrings first, the pattern only where one is there."""
    return any(name in text for name in (*TOOLS, "python")) and _TOOL_IN.search(text) is not None


def _options(words: list[Word], path: Path, tool: str) -> tuple[dict[str, Flag], list[Word]]:
    """A launcher's options up to its first argument that is no option, under the names ALIASES gives them."""
    opts, i = {}, 0
    while i < len(words) and is_flag(words[i].text):
        name, eq, value = words[i].text.partition("=")
        key = ALIASES.get(tool, {}).get(norm(name), norm(name))
        if (
            not eq
            and key not in BOOL_OPTS
            and i + 1 < len(words)
            and not is_flag(words[i + 1].text)
            and not words[i + 1].text.endswith(".py")
        ):
            value, i = words[i + 1].text, i + 1
        got = value if (eq or value) else True
        opts[key] = Flag(key, got, f"{path.name}:{words[i].line} {name}{'' if got is True else ' ' + show(got)}", name)
        i += 1
    return opts, words[i:]


def runs(script: Script, depth: int = 0) -> list[Run]:
    """The training commands of a script, in order (scripts it runs with bash, strings it hands to ssh, included)."""
    found = []
    for cmd in script.commands:
        found += _runs_of(cmd, depth)
    return found


def _runs_of(cmd: Command, depth: int) -> list[Run]:
    """The training commands of one command, each with the words before its launcher (an `srun -N 4` that starts
    it, also where it starts a `bash -c` string)."""
    start = next((k for k, w in enumerate(cmd.words) if _tool(w.text)), None)
    if start is None:
        nested = [w for w in cmd.words if " " in w.text and _names_a_tool(w.text)]
        return [r for w in nested for r in _nested(w.text, cmd, depth)] if depth < limits.MAX_RUN_DEPTH else []
    found = _launched(cmd, start, depth)
    for r in found:
        r.before = r.before or cmd.words[:start]
    return found


def _launched(cmd: Command, start: int, depth: int) -> list[Run]:
    words = cmd.words
    tool, rest = _tool(words[start].text), words[start + 1 :]
    if tool in ("bash", "sh"):
        return _shell(rest, cmd, depth)
    owned = cli(tool)
    if owned is not None:  # a framework's CLI: its subcommand, then (Tool.options) a launcher's options and the target
        t = owned[1]
        if not rest or rest[0].text not in t.trains:
            return []
        if not t.options:
            return [Run(tool, {}, rest[0].text, rest[1:], cmd)]
        opts, rest = _options(rest[1:], cmd.path, t.options)
        return [Run(tool, opts, rest[0].text, rest[1:], cmd)] if rest else []
    if tool == "accelerate":
        if not rest or rest[0].text != "launch":
            return []
        rest = rest[1:]
    opts, rest = _options(rest, cmd.path, tool)
    module = opts.get("m") or opts.get("module")
    if tool == "python" and module is not None:
        name = show(module.value) if module.value is not True else (rest.pop(0).text if rest else "")
        if name in TORCHRUN_MODULES:
            return _runs_of(
                Command(
                    [Word("torchrun", cmd.line, "torchrun"), *rest], cmd.env, cmd.prefix, cmd.line, cmd.path, cmd.vars
                ),
                depth,
            )
        known = name.startswith((*MODULES, *RL_MODULES))
        return [Run(tool, opts, name, rest, cmd)] if known or _trains(name, rest) else []
    if not rest or "c" in opts or (tool == "python" and not _trains(rest[0].text, rest[1:])):
        return []
    return [Run(tool, opts, rest[0].text, rest[1:], cmd)]


def _trains(script: str, args: list[Word]) -> bool:
    """A python command that trains: its script's name says so, or it takes a trainer's arguments."""
    if TRAINING_NAME.search(Path(script).name.lower()):
        return True
    return any(is_flag(w.text) and norm(w.text.split("=")[0]) in accepted(ARGS) for w in args)


def _nested(text: str, cmd: Command, depth: int) -> list[Run]:
    """A command string handed to ssh, `bash -c` or docker: read as a script of its own."""
    script = read_text(text, cmd.path, cmd.vars.copy(), depth + 1)
    for c in script.commands:
        c.line = cmd.line
        for w in c.words:
            w.line = cmd.line
    return runs(script, depth + 1)


def _shell(rest: list[Word], cmd: Command, depth: int) -> list[Run]:
    if not rest or depth >= limits.MAX_RUN_DEPTH:
        return []
    if rest[0].text == "-c" and len(rest) > 1:
        return _nested(rest[1].text, cmd, depth)
    found = find_file(rest[0].text, cmd.vars, cmd.path)
    if found is None or found.suffix not in (".sh", ".bash", ""):
        return []
    try:
        return runs(read_script(found), depth + 1)
    except (OSError, UnicodeDecodeError):
        return []
