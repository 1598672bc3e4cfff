"""One training command into a reading: the processes a node and the nodes its launcher starts (torchrun, deepspeed,
accelerate launch and its config, a bare python), then its script's flags or config file through the framework's
reader. A framework's CLI goes where its folder declares (Framework.tools: the launcher it wraps, the reader of its
runs), a config file to the reader of its format (Framework.reads), a script's own flags to the script-flags reader
(Framework.script_flags, TrainingArguments names); no framework is named here.
"""

from __future__ import annotations

import re
from pathlib import Path

from planner.errors import BadInput
from planner.frameworks import ARGS, FRAMEWORKS, PLAIN, Tool, by_trainer, cli, entry, reader
from planner.frameworks.accelerate.reader import read_env_version
from planner.intake import configs, launch, others, releases, scriptargs, world
from planner.intake.collect import (
    Collector,
    known,
    show,
)
from planner.intake.flags import Flag, from_mapping
from planner.intake.flags import parse as parse_flags
from planner.intake.shell import read_script
from planner.intake.shellvars import find_file

ACCELERATE_OPTS = (
    "accelerate_config",
    "config_file",
    "num_processes",
    "num_machines",
    "mixed_precision",
    "gpu_ids",
    "multi_gpu",
    "use_deepspeed",
    "use_fsdp",
    "zero_stage",
    "offload_optimizer_device",
    "offload_param_device",
    "deepspeed_config_file",
)
# the options of a launcher a framework's CLI runs that its command line takes among its own (Tool.launcher_options)
LAUNCHER_OPTIONS = {"accelerate": ACCELERATE_OPTS}
LAUNCHERS = (
    "torchrun, python -m torch.distributed.run, deepspeed, accelerate launch, python X.py, llamafactory-cli "
    "train, swift sft / rlhf, trl, axolotl train"
)


def read_script_file(path: Path, text: str) -> Collector:
    """A launch script's first training command (others are unplanned lines), with the files it sources."""
    script = read_script(path, text)
    found, skipped = others.split(launch.runs(script), script)  # an unread framework's, or one that trains nothing
    if not found:
        raise others.refusal(path, skipped, LAUNCHERS)
    c = read_run(found[0])
    if str(path.resolve()) in c.files:  # a framework's own entry point read with its flags (training._entry)
        c.files.remove(str(path.resolve()))
    c.files.insert(0, str(path.resolve()))
    for f in script.files:
        c.add_file(f)
    for line in script.notes:
        c.note(line)
    for other in skipped:
        c.note(f"{other.says()} (not planned; {found[0].where} is read)")
    seen = {tuple(w.text for w in found[0].command.words)}
    for other in found[1:]:
        if tuple(w.text for w in other.command.words) not in seen:
            seen.add(tuple(w.text for w in other.command.words))
            c.note(
                f"{other.where} another training command ({other.tool} {show(other.target)}; only the first, "
                f"{found[0].where}, is read)"
            )
    return c


def read_run(run: launch.Run) -> Collector:
    name, tool = cli(run.tool) or ("", None)  # the framework whose CLI launched it (Framework.tools), if one did
    if tool is not None and tool.reads == "run":  # its reader reads the whole command (a recipe runner)
        c = reader(name).read_run(run)
        read_allocator(c, run.command.env, run.where)
        return c
    if run.target in launch.RL_MODULES:
        return rl_run(run)
    flags, lead = parse_flags(run.args, run.command.path)
    if tool is not None and tool.launcher_options:  # the CLI hands these to the launcher it runs (Tool.wraps)
        run.opts |= {k: flags.pop(k) for k in LAUNCHER_OPTIONS[tool.wraps] if k in flags}
    cfg_path = _config_arg(run, tool, lead, flags)
    data = configs.load(cfg_path) if cfg_path else None
    fmt = configs.kind(data) if data is not None else None
    if cfg_path is not None:  # a file that is no training configuration memplan reads (configs.refuse)
        configs.refuse(fmt, cfg_path)
    # a CLI whose reader reads its flags and file (Tool.reads "cli"), by its name or its entry script under a launcher
    own = (name, tool, run.target) if tool is not None and tool.reads == "cli" else entry(run.target)
    trainer = PLAIN if own else _trainer(run, tool, flags, data)
    if fmt is None and not own and (found := _entry(run, flags)) is not None:  # its own flags, no config file
        fmt, data, cfg_path = found, {}, run.command.path
    told = releases.planned_for(releases.folders(run)) if trainer == PLAIN and not own and fmt is None else None
    if told is not None and "sft" in FRAMEWORKS[told[0]].trainers:  # memplan's files of a TRL SFT plan
        trainer = "sft"
    framework = own[0] if own else configs.framework(fmt, trainer) if fmt else by_trainer(trainer)
    c = Collector(framework)
    why = f" ({told[1]})" if told is not None and trainer == "sft" else ""
    c.fact("framework", framework, f"{run.where} {run.tool} {show(run.target)}{why}", run.tool)
    read_allocator(c, run.command.env, run.where)
    read_env_version(c, run.command.env, run.where)
    if tool is None or tool.wraps:
        world.read(c, run)
    elif tool.reads != "cli":  # the CLI starts its own processes: its reader reads how many
        reader(name).read_launcher(c, run.command.env, run.where)
    for w in lead:
        if not known(w.text):
            c.note(
                f"{run.command.path.name}:{w.line} {show(w.raw)} (arguments the script computes when it runs, an "
                "array or a command's output, are not read)"
            )
    _framework(c, run, tool, flags, lead, own, trainer, fmt, data, cfg_path)
    return c


def rl_run(run: launch.Run) -> Collector:
    """A launched RL trainer (`python -m M`, M in a framework's Framework.launched: verl's main_ppo, OpenRLHF's
    train_ppo_ray and train_dpo), read whole by that framework's reader (read_launched): the GPUs are the trainer's own
    settings (Ray places the roles), not a launcher's."""
    name = next(f.name for f in FRAMEWORKS.values() if run.target in f.launched)
    c = Collector(name)
    c.fact("framework", name, f"{run.where} {run.tool} -m {run.target}", run.tool)
    read_allocator(c, run.command.env, run.where)
    reader(name).read_launched(c, run)
    return c


def read_allocator(c: Collector, env: dict[str, str], where: str) -> None:
    """expandable_segments from the command's environment: PYTORCH_CUDA_ALLOC_CONF, or PYTORCH_ALLOC_CONF, the name
    torch 2.9 added (c10/core/AllocatorConfig.cpp reads either), as comma-separated key:value options."""
    for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"):
        opts = dict(o.split(":", 1) for o in env.get(name, "").replace(" ", "").split(",") if ":" in o)
        if "expandable_segments" in opts:
            value = opts["expandable_segments"].lower() == "true"
            c.set("expandable_segments", value, f"{where} {name}={env[name]}", name)
            return


def _framework(
    c: Collector,
    run: launch.Run,
    tool: Tool | None,
    flags: dict[str, Flag],
    lead: list,
    own: tuple | None,
    trainer: str,
    fmt: str | None,
    data: dict | None,
    cfg_path: Path | None,
) -> None:
    near, vars = run.command.path, run.command.vars
    if own:  # the CLI's reader: (framework, tool, subcommand); its own CLI launched it, or a launcher ran its script
        reader(own[0]).read_cli(c, run, own[2], flags, data, cfg_path, launcher=run.tool in own[1].names)
        return
    if fmt is not None:
        keys = (from_mapping(data, cfg_path) if data else {}) | flags
        releases.for_entry(c, c.framework, keys, releases.folders(run), (run.tool, run.target))
        configs.read(c, fmt, data, cfg_path, flags=flags, words=lead[1:], script=near, trainer=trainer, vars=vars)
    else:
        flags = scriptargs.with_defaults(c, releases.script_of(run), flags)
        releases.for_run(c, run, trainer, flags)
        strict = tool is not None and tool.strict
        why = f"{run.where} {run.tool} {run.target}"
        reader(ARGS).read(c, flags, near, trainer, strict=strict, vars=vars, why=why)
    reader(ARGS).read_forks(c, run, flags, trainer, flags_only=fmt is None)


def _entry(run: launch.Run, flags: dict[str, Flag]) -> str | None:
    """The configuration format of the framework whose own entry point the run starts with its flags alone, where a
    flag of that framework's vocabulary is among them (LLaMA-Factory's `python src/train_bash.py --stage sft ...`:
    Framework.entry_points, Framework.vocabulary), else None."""
    for fw in FRAMEWORKS.values():
        if fw.reads and set(fw.vocabulary) & set(flags) and releases.entry_point(fw, (run.tool, run.target)):
            return fw.reads[0]
    return None


def _config_arg(run: launch.Run, tool: Tool | None, lead: list, flags: dict[str, Flag]) -> Path | None:
    """The config file a command runs with: its first argument (`train.py x.yaml`), or the flag its CLI names it with
    (Tool.config_flag: `--config x.yaml`)."""
    key = tool.config_flag if tool is not None else ""
    ref = flags.pop(key).value if key and key in flags else (lead[0].text if lead else None)
    if not ref or not known(ref) or not re.search(r"\.(ya?ml|json)$", str(ref)):
        return None
    found = find_file(str(ref), run.command.vars, run.command.path)
    if found is None:
        raise BadInput(
            f"--config {run.command.path}: line {run.command.line} names {ref}, which is not found next to "
            "the script or in the folders above it: pass it too, or run from its folder",
            "config",
        )
    return found


def _trainer(run: launch.Run, tool: Tool | None, flags: dict[str, Flag], data: dict | None) -> str:
    if tool is not None and tool.trainers:  # the CLI's subcommand names it (`trl grpo`)
        return tool.trainer(run.target)
    hint = f"{run.target} {run.tool}"
    return configs.trainer_of(data, hint) if data is not None else reader(ARGS).trainer_of(flags, hint)
