"""One training command into a reading: the processes a node and the nodes its launcher starts (torchrun, deepspeed,
accelerate launch and its config, a bare python), then its script's flags or config file through the framework's
reader (swift, LLaMA-Factory, axolotl, TRL, or transformers' TrainingArguments names).
"""

from __future__ import annotations

import re
from importlib import import_module
from pathlib import Path

from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS
from planner.frameworks.hf import reader as hfargs
from planner.frameworks.llamafactory import reader as llamafactory
from planner.frameworks.swift import reader as swift
from planner.frameworks.trl import reader_vlmr1 as vlmr1
from planner.intake import configs, launch, releases, scriptargs, world
from planner.intake.collect import (
    Collector,
    known,
    section,
    show,
)
from planner.intake.flags import Flag, from_mapping
from planner.intake.flags import parse as parse_flags
from planner.intake.shell import read_script
from planner.intake.shellvars import find_file

TRL_TRAINERS = {"sft": "sft", "dpo": "dpo", "grpo": "grpo"}
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
LAUNCHERS = (
    "torchrun, python -m torch.distributed.run, deepspeed, accelerate launch, python X.py, llamafactory-cli "
    "train, swift sft / rlhf, trl, axolotl train"
)


def read_script_file(path: Path, text: str) -> Collector:
    """A launch script's first training command (others are unplanned lines), with the files it sources."""
    script = read_script(path, text)
    found = launch.runs(script)
    if not found:
        raise BadInput(f"--config {path}: no training command found (accepted: {LAUNCHERS})", "config")
    c = read_run(found[0])
    if str(path.resolve()) in c.files:  # a framework's own entry point read with its flags (training._entry)
        c.files.remove(str(path.resolve()))
    c.files.insert(0, str(path.resolve()))
    for f in script.files:
        c.add_file(f)
    for line in script.notes:
        c.note(line)
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
    if run.tool == "tune":  # torchtune's recipe and its YAML (planner.frameworks.torchtune.reader)
        from planner.frameworks.torchtune import reader as torchtune

        c = torchtune.read_run(run)
        read_allocator(c, run.command.env, run.where)
        return c
    if run.target in launch.RL_MODULES:
        return rl_run(run)
    flags, lead = parse_flags(run.args, run.command.path)
    if run.tool == "trl":  # the TRL CLI hands these to `accelerate launch` (trl/cli/accelerate_config.py:19-47)
        run.opts |= {k: flags.pop(k) for k in ACCELERATE_OPTS if k in flags}
    cfg_path = _config_arg(run, lead, flags)
    data = configs.load(cfg_path) if cfg_path else None
    fmt = configs.kind(data) if data is not None else None
    if cfg_path is not None and fmt in (None, "model", "lf-v1"):
        configs.refuse(fmt, cfg_path)
    swift_sub = run.target if run.tool == "swift" else _swift_script(run.target)
    trainer = "hf" if swift_sub else _trainer(run, flags, data)
    if fmt is None and not swift_sub and (own := _entry(run, flags)) is not None:  # its own flags, no config file
        fmt, data, cfg_path = own, {}, run.command.path
    framework = (
        "swift" if swift_sub else configs.framework(fmt, trainer) if fmt else ("trl" if trainer != "hf" else "hf")
    )
    c = Collector(framework)
    c.fact("framework", framework, f"{run.where} {run.tool} {show(run.target)}", run.tool)
    read_allocator(c, run.command.env, run.where)
    if run.tool in ("llamafactory-cli", "lmf"):
        llamafactory.read_launcher(c, run.command.env, run.where)
    elif run.tool != "swift":
        world.read(c, run)
    for w in lead:
        if not known(w.text):
            c.note(
                f"{run.command.path.name}:{w.line} {show(w.raw)} (arguments the script computes when it runs, an "
                "array or a command's output, are not read)"
            )
    _framework(c, run, flags, lead, swift_sub, trainer, fmt, data, cfg_path)
    return c


def rl_run(run: launch.Run) -> Collector:
    """A launched RL trainer (`python -m M`, M in a framework's Framework.launched: verl's main_ppo, OpenRLHF's
    train_ppo_ray and train_dpo), read whole by that framework's reader (read_launched): the GPUs are the trainer's own
    settings (Ray places the roles), not a launcher's."""
    name = next(f.name for f in FRAMEWORKS.values() if run.target in f.launched)
    c = Collector(name)
    c.fact("framework", name, f"{run.where} {run.tool} -m {run.target}", run.tool)
    read_allocator(c, run.command.env, run.where)
    import_module(f"planner.frameworks.{name}.reader").read_launched(c, run)
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
    flags: dict[str, Flag],
    lead: list,
    swift_sub: str | None,
    trainer: str,
    fmt: str | None,
    data: dict | None,
    cfg_path: Path | None,
) -> None:
    env, near, vars = run.command.env, run.command.path, run.command.vars
    if swift_sub:
        releases.by_flags(c, "swift", run, swift.release_hint(flags))
        mapping = from_mapping(data, cfg_path) if data else {}
        env = env | {str(k): str(v) for k, v in section(data, "ENV").items() if k not in env}
        swift.read(c, mapping | flags, env, swift_sub, run.where, near, vars, launcher=run.tool == "swift")
    elif fmt is not None:
        keys = (from_mapping(data, cfg_path) if data else {}) | flags
        releases.for_entry(c, c.framework, keys, releases.folders(run), (run.tool, run.target))
        configs.read(c, fmt, data, cfg_path, flags=flags, words=lead[1:], script=near, trainer=trainer, vars=vars)
    else:
        flags = scriptargs.with_defaults(c, releases.script_of(run), flags)
        releases.for_run(c, run, trainer, flags)
        hfargs.read(
            c, flags, near, trainer, strict=run.tool == "trl", vars=vars, why=f"{run.where} {run.tool} {run.target}"
        )
    if vlmr1.is_vlm_r1(trainer, f"{vars.cwd or ''}/{run.target}"):
        vlmr1.read(c, flags, run.where, run.target)
    elif trainer == "grpo" and c.facts.get("release", ("",))[0] == "r1-v":
        for key in sorted({"max_pixels", "min_pixels"} & set(flags)):
            c.note(
                f"{flags[key].source} (R1-V's trainer sizes each image within it and cuts the prompt, image tokens "
                "included, at max_prompt_length: Deep-Agent/R1-V bbbbe3d src/r1-v/src/open_r1/trainer/"
                "grpo_trainer.py:236-237, 377-379; the tower's patches are not planned yet)"
            )
    elif (
        fmt is None
        and not swift_sub
        and (caps := [flags[k].source for k in ("max_pixels", "min_pixels") if k in flags])
    ):
        c.note(
            f"{'; '.join(caps)} (the script's own pixel caps on its processor: memplan reads them for VLM-R1's scripts "
            "only, so no image is planned from them: give --max-pixels with --images)"
        )


def _entry(run: launch.Run, flags: dict[str, Flag]) -> str | None:
    """The configuration format of the framework whose own entry point the run starts with its flags alone, where a
    flag of that framework's vocabulary is among them (LLaMA-Factory's `python src/train_bash.py --stage sft ...`:
    Framework.entry_points, Framework.vocabulary), else None."""
    for fw in FRAMEWORKS.values():
        if fw.reads and set(fw.vocabulary) & set(flags) and releases.entry_point(fw, (run.tool, run.target)):
            return fw.reads[0]
    return None


def _config_arg(run: launch.Run, lead: list, flags: dict[str, Flag]) -> Path | None:
    """The config file a command runs with: its first argument (`train.py x.yaml`), or `--config x.yaml`."""
    ref = flags.pop("config").value if "config" in flags and run.tool == "trl" else (lead[0].text if lead else None)
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


def _swift_script(target: str) -> str | None:
    m = re.search(r"swift/cli/(sft|pt|rlhf)\.py$", target)
    return m.group(1) if m else None


def _trainer(run: launch.Run, flags: dict[str, Flag], data: dict | None) -> str:
    if run.tool == "trl":
        return TRL_TRAINERS.get(run.target, "sft")
    hint = f"{run.target} {run.tool}"
    return configs.trainer_of(data, hint) if data is not None else hfargs.trainer_of(flags, hint)
