"""The one place a plan becomes launch material, for every face: the `Launch` a plan carries (HF arguments,
DeepSpeed/accelerate/PEFT configs, the command, the note on what HF cannot run), and the files that command
names (`files`), which `suggest --emit`, autotune and the API's clients write as they are. A plan for LLaMA-Factory,
ms-swift or axolotl (`--framework`) gets that framework's config files and command (its writer,
planner/frameworks/<name>/writer.py); every other plan the HF/DeepSpeed/accelerate material of planner/export/:
export.py (HF's and TRL's arguments), configs.py (the config files) and commands.py (the command, the Slurm script).
Also the check that --emit's folder is usable (check_emit_dir)."""

from __future__ import annotations

import json
import os
from importlib import import_module
from pathlib import Path

from planner.config.knobfields import CT_FP8, CT_QUANTS
from planner.config.spec import Goal, Hardware, Launch, Plan
from planner.export import commands, configs, export
from planner.export.configs import DS_CONFIG_NAME, FSDP_CONFIG_NAME
from planner.frameworks import FRAMEWORKS
from planner.frameworks.hf import launchenv
from planner.frameworks.reading import PLANNED_FOR
from planner.frameworks.trl.forks import FORK_TILES
from planner.model.modelspec import ModelSpec

LAUNCH_NAME = "launch.sh"
# the version pin written beside a plan's files, so that `check --config` reads them at the release planned
# (planner.intake.releases.pins reads requirements.txt beside the launch script)
PIN_NAME = "requirements.txt"


def pinned(plan: Plan) -> dict[str, str]:
    """{PIN_NAME: text} pinning the plan's framework package at the release it was planned for (Framework.package):
    the newest line at the adapter's own version, an older line as the range of its versions (`>=first,<the next
    line's first`, the versions its files were written for; an FSDP plan's from the release whose Trainer runs FSDP2,
    and that accelerate: launchenv); {} for a framework without a package (memplan's own trainer) or a fork that froze
    a release (no version of the package of its own)."""
    fw = FRAMEWORKS.get(plan.framework)
    if fw is None or not fw.package:
        return {}
    r = fw.release(plan.release)
    if r is not None and r.first is None:
        return {}
    if r is None or r is fw.newest:
        name, pin = fw.version.split()[-1], f"=={fw.version.split()[-1]}"
    else:
        later = sorted(x.first for x in fw.releases if x.first is not None and x.first > r.first)
        first = launchenv.pinned_first(plan, fw.package, r.first)
        # a writer's files may run at the line's first releases alone (its pin_before: ms-swift 3.4.x's vLLM words)
        end = min(later[0], getattr(exporter(plan.framework), "pin_before", lambda p: later[0])(plan) or later[0])
        name, pin = r.name, f">={_version(first)},<{_version(end)}"
    text = f"# {PLANNED_FOR} {fw.label} {name}\n{fw.package}{pin}\n{launchenv.requirements(plan)}"
    return {PIN_NAME: text}


def _version(first: tuple[int, ...]) -> str:
    return ".".join(map(str, (*first, 0, 0)[: max(3, len(first))]))


def exporter(framework: str):
    """The writer its framework's folder declares (Framework.writes: planner/frameworks/<name>/writer.py), imported on
    first use so that a plan HF's command runs imports none; None for HF's command and files."""
    fw = FRAMEWORKS.get(framework)
    return import_module(f"planner.frameworks.{framework}.writer") if fw is not None and fw.writes else None


def budget_note(plan: Plan) -> str | None:
    """What HF runs of a token-budget plan (it has no token-budget batching)."""
    if plan.token_batches is None:
        return None
    return (
        f"HF has no token-budget batching: these arguments run the fixed split micro {plan.micro_batch} x accum "
        f"{plan.grad_accum}; the bundled trainer cuts micro-batches by tokens with "
        f"--max-tokens-per-micro-batch {plan.token_batches.max_tokens_per_micro_batch}"
    )


def prequantized_note(plan: Plan) -> str | None:
    """A GPTQ or AWQ checkpoint trains only with gptqmodel's trainable kernels; a compressed-tensors or HQQ one only
    under transformers 4.x (planner.estimate.quant)."""
    if plan.quant in CT_FP8:  # PEFT <= 0.18 makes the adapter float8; 0.19 upcasts it (planner.estimate.quant)
        return (
            f"the {plan.quant} checkpoint is planned as transformers 4.57 loads it (compressed-tensors <= 0.14) with "
            "PEFT >= 0.19, which trains the adapter in fp32 (older PEFT makes it float8): transformers 5 cannot train it"
        )
    if plan.quant in (*CT_QUANTS, "hqq"):
        return (
            f"the {plan.quant} checkpoint is planned as transformers 4.57 loads it (compressed-tensors <= 0.14 with "
            "PEFT <= 0.17, hqq 0.2): transformers 5 cannot train it"
        )
    if plan.quant not in ("gptq", "awq"):
        return None
    cls = configs.quantization_config_class(plan)
    return (
        f"load the {plan.quant.upper()} checkpoint with quantization_config={cls}(bits=4, group_size=128, "
        'backend="auto_trainable") and a CUDA device_map: gptqmodel\'s default kernels cannot train, and this plan '
        "counts its trainable torch kernels"
    )


def device_map_note(plan: Plan) -> str | None:
    """A device_map plan's model is placed by from_pretrained in the user's script (planner.estimate.devicemap)."""
    if plan.device_map == 1:
        return None
    return (
        f'load the model with from_pretrained(..., device_map="auto"): one process spreads its layers over the '
        f"{plan.device_map} visible GPUs, which work in turn"
    )


def pixels_note(plan: Plan, goal: Goal | None) -> str | None:
    """Where the command cannot carry the images as planned (Goal.pixels, image_tokens): a GRPO fork's script takes
    the pixel bounds (commands.fork_images), not a token count; HF's and TRL's own scripts take neither, so the
    user's script sets them; a framework's writer where its `writes_pixels(plan)` says so. None for a plan without
    images and files that carry them."""
    if goal is None or not goal.image_tokens:
        return None
    fw = exporter(plan.framework)
    if fw is not None:
        if goal.pixels is None or getattr(fw, "writes_pixels", lambda plan: False)(plan):
            return None
        where = f"{plan.framework}@{plan.release}" if plan.release else plan.framework
        return (
            f"each image is planned within max_pixels {goal.pixels[1]:,}: {where}'s files here set no pixel cap, so "
            "its own cap applies (set it to this one)"
        )
    if commands.fork_grpo(plan):
        if goal.pixels or (goal.tiles and commands.fork_grpo(plan) in FORK_TILES):
            return None
        return (
            f"{plan.framework}@{plan.release}'s script sizes each image within its --max_pixels (default 12,845,056: "
            f"up to 16,384 tokens), not the {goal.image_tokens:,} image tokens planned: plan with --images N and "
            "--max-pixels to write the cap"
        )
    if goal.pixels is None:
        return None
    return (
        f"each image is planned within min_pixels {goal.pixels[0]:,} and max_pixels {goal.pixels[1]:,}: the command "
        "has no flag for them; set them on the processor in your script (image_processor.min_pixels / max_pixels), "
        "whose own bounds may give more image tokens"
    )


def caps_note(plan: Plan, goal: Goal | None) -> str | None:
    """Where the files take no key for an image's tile cap (Goal.tiles: ms-swift's MAX_NUM, VLM-R1's
    --max_anyres_num) or a video's caps (Goal.video: LLaMA-Factory's video_* keys, ms-swift's VIDEO_* environment),
    asked of the writer (`writes_tiles(plan)`, `writes_video(plan)`): the framework's own caps then apply."""
    if goal is None or not (goal.tiles or goal.video):
        return None
    fw = exporter(plan.framework)
    fork = commands.fork_grpo(plan) in FORK_TILES
    said = []
    if goal.tiles and not fork and not getattr(fw, "writes_tiles", lambda plan: False)(plan):
        said.append(f"each image is planned within {goal.tiles} tiles")
    if goal.video and not getattr(fw, "writes_video", lambda plan: False)(plan):
        _, high, fps, frames = goal.video
        said.append(f"each video at {frames} frames ({fps:g} a second) of at most {high:,} pixels")
    where = f"{plan.framework}@{plan.release}" if plan.release else plan.framework
    return f"{' and '.join(said)}: {where}'s files here set no such cap, so its own applies (set it)" if said else None


def limit_note(plan: Plan, goal: Goal | None) -> str | None:
    """Where a GRPO plan's vLLM rollout was planned with rows of more than one image or video (Goal.images, videos)
    and the files set no limit_mm_per_prompt for it (asked of the writer, `writes_limit(plan)`: ms-swift's colocated
    engine; a rollout server takes its own; TRL v1.9.0 hands vLLM none): vLLM's own limit applies, 1 a prompt at
    vLLM 0.8.3 (planner.frameworks.mmlimit)."""
    many = {k: n for k, n in (("image", goal.images), ("video", goal.videos)) if n and n > 1} if goal else {}
    if not many or plan.workload.kind != "grpo" or plan.workload.generation == "hf":
        return None
    if getattr(exporter(plan.framework), "writes_limit", lambda plan: False)(plan):
        return None
    return (
        f"rows of up to {' and '.join(f'{n} {k}s' for k, n in many.items())} are planned: the files here give the "
        f"{plan.workload.generation} rollout no limit_mm_per_prompt, so vLLM's own applies (1 a prompt at vLLM "
        f"0.8.3, config.py:2544-2551; 999 at 0.29.0): set {json.dumps(many)} where the engine starts"
    )


def launch(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int, goal: Goal | None = None) -> Launch:
    """The plan's launch material; `goal`: its images (Goal.pixels, image_tokens), written where the command takes
    them and said where it does not (pixels_note)."""
    fw = exporter(plan.framework)
    notes = [export.hf_note(plan) if fw is None else None, budget_note(plan), prequantized_note(plan)]
    notes += [pixels_note(plan, goal), caps_note(plan, goal), limit_note(plan, goal)]
    notes = [n for n in (*notes, device_map_note(plan) if fw is None else None) if n]  # HF's command
    command, framework_files = commands.command(plan, hw, model, seq_len, goal), None
    if fw is not None:
        try:
            command, framework_files = framework_launch(plan, model, hw, seq_len, goal)
        except ValueError as e:  # a plan the framework's config cannot express: the HF material, and why
            notes.append(f"{plan.framework}: {e}")
    return Launch(
        hf_args=export.hf_args(plan, model, hw),
        deepspeed_config=configs.deepspeed_config(plan, model),
        command=commands.env_prefix(plan) + command,
        framework_files=framework_files,
        note=". ".join(notes) or None,
        accelerate_config=configs.accelerate_config(plan, hw, model),
        peft_config=configs.peft_config(plan, model),
        quantization_config=configs.quantization_config(plan),
        quantization_class=configs.quantization_config_class(plan) if plan.quant != "none" else None,
    )


def framework_launch(
    plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int, goal: Goal | None = None
) -> tuple[str, dict[str, str]]:
    """(command, files) of a LLaMA-Factory, ms-swift or axolotl plan: its exporter's files, and launch.sh beside them
    where the command is not the script itself; ValueError for a plan its framework cannot express."""
    fw = exporter(plan.framework)
    out, command = fw.files(plan, model, hw, seq_len, goal), fw.command(plan, hw)
    if not command.startswith("bash "):  # ms-swift's script is its own launcher
        out[LAUNCH_NAME] = (
            f"#!/bin/bash\n# memplan: {plan.framework}'s launch of the files beside this one\n{command}\n"
        )
    return command, out | pinned(plan)


def with_launch(plan: Plan, model: ModelSpec, hw: Hardware, goal: Goal) -> Plan:
    """The plan with its launch material (made once: a plan that has it keeps it)."""
    if plan.launch is None:
        plan.launch = launch(plan, model, hw, goal.seq_len, goal)
    return plan


def command_files(plan: Plan, model: ModelSpec, ds_name: str = DS_CONFIG_NAME) -> dict[str, str]:
    """{file name: text} of every file the HF command (commands.script_args) names: the DeepSpeed JSON of a ZeRO plan,
    the FSDP config of an FSDP plan."""
    out = {}
    ds = configs.deepspeed_config(plan, model)
    if ds is not None:
        out[ds_name] = json.dumps(ds, indent=2) + "\n"
    if plan.fsdp != "off":
        out[FSDP_CONFIG_NAME] = json.dumps(configs.fsdp_config(plan, model), indent=2) + "\n"
    return out


def files(plan: Plan, hw: Hardware, model: ModelSpec, seq_len: int, goal: Goal | None = None) -> dict[str, str]:
    """A framework plan's config files (framework_launch, made once: a plan that carries them keeps them); otherwise
    the command's files, the accelerate config of an FSDP plan, the HF arguments and a Slurm script running the
    printed command's words (`goal`: its images, as launch)."""
    if exporter(plan.framework) is not None:
        made = plan.launch.framework_files if plan.launch else framework_launch(plan, model, hw, seq_len, goal)[1]
        if made is not None:  # None: its framework cannot express it, and the plan carries the HF material
            return dict(made)
    out = command_files(plan, model)
    acc = configs.accelerate_config(plan, hw, model)
    if acc is not None:
        out["accelerate_config.yaml"] = configs.yaml_text(acc)
    out["train_args.json"] = json.dumps(export.hf_args(plan, model, hw), indent=2) + "\n"
    out["launch.sbatch"] = commands.sbatch(plan, hw, model=model, goal=goal)
    return out | pinned(plan)


def emit(
    plan: Plan, hw: Hardware, model: ModelSpec, out_dir: str, seq_len: int, goal: Goal | None = None
) -> list[Path]:
    """Write `files` into out_dir (made if missing); the paths written."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files(plan, hw, model, seq_len, goal).items():
        (d / name).write_text(text)
        written.append(d / name)
    return written


def check_emit_dir(out_dir: str) -> None:
    """BadInput unless `out_dir` is (or can become) a writable folder; checked before any planning."""
    from planner.errors import BadInput

    try:
        d = Path(out_dir).expanduser()
        d.stat() if d.exists() else None
    except (OSError, ValueError) as e:  # ValueError: a NUL byte; OSError: a name too long
        raise BadInput(f"--emit {out_dir!r}: not a usable path ({e})", "emit") from None
    if d.exists() and not d.is_dir():
        raise BadInput(f"--emit {out_dir!r}: a file of that name exists; --emit takes a folder", "emit")
    probe = d
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        raise BadInput(f"--emit {out_dir!r}: {str(probe)!r} is not a writable folder", "emit")
