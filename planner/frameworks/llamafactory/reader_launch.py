"""How a LLaMA-Factory run is launched and sharded (reader.py reads the YAML's other keys): whether the file trains at
all (do_train), the DeepSpeed config and FSDP keys it names, one process over the visible GPUs before v0.8.0
(nn.DataParallel), llamafactory-cli's torchrun (NPROC_PER_NODE, the visible devices, NNODES), and the question a YAML
given alone asks (its processes are its launch's)."""

from __future__ import annotations

import re
from pathlib import Path

from planner.errors import BadInput
from planner.frameworks.accelerate import reader as accelerate
from planner.frameworks.deepspeed import reader as deepspeed
from planner.frameworks.llamafactory.keys import KEYS
from planner.frameworks.llamafactory.releases import DATAPARALLEL_LINES
from planner.intake import configs
from planner.intake.collect import ASK_GPUS, Collector, as_bool, count_devices, processes_fit_devices, show
from planner.intake.flags import Flag

# what a YAML without `do_train: true` runs instead (LLaMA-Factory trains only under it: v0.9.5 src/llamafactory/train/
# sft/workflow.py:120, and each stage's workflow alike), by the key that says so: refused in one line (not_training)
NOT_TRAINING = {
    "do_predict": "a prediction run (train/sft/workflow.py:152)",
    "do_eval": "an evaluation run",
    "infer_backend": "llamafactory-cli chat's inference settings (hparams/model_args.py:165)",
    "export_dir": "llamafactory-cli export's merge or export (hparams/model_args.py:358, train/tuner.py:152-156)",
    "do_train": "no training",
}


def sharding(c: Collector, f: dict[str, Flag], path: Path, vars) -> None:
    ds = f.get(KEYS.key("zero_stage"))
    if ds and ds.value:
        deepspeed.read(c, ds.value, ds.source, KEYS.key("zero_stage"), path, vars=vars)
    if "fsdp" in f and f["fsdp"].value:
        cfg = f["fsdp_config"].value if "fsdp_config" in f and isinstance(f["fsdp_config"].value, dict) else {}
        accelerate.fsdp(
            c,
            cfg,
            f["fsdp"].source,
            "fsdp",
            tokens=tuple(
                str(t) for t in (f["fsdp"].value if isinstance(f["fsdp"].value, list) else str(f["fsdp"].value).split())
            ),
        )


def processes(c: Collector, r) -> None:
    """Before v0.8.0 LLaMA-Factory trained in the process it was started in (llamafactory-cli: v0.7.1
    src/llmtuner/cli.py:64-65 run_exp; src/train.py and src/train_bash.py likewise), so HF's Trainer wrapped the model
    in nn.DataParallel over the visible GPUs (planner.estimate.dataparallel); from v0.8.0 llamafactory-cli starts
    torchrun (src/llamafactory/cli.py:74-87), and v0.8.3 refuses one process over several GPUs (hparams/parser.py:195).
    Under DeepSpeed the Trainer is distributed, one GPU a process (transformers 4.40.2 training_args.py _setup_devices)."""
    gpus = c.setting("gpus_per_node")
    if gpus is None or gpus.key != "CUDA_VISIBLE_DEVICES" or not isinstance(gpus.value, int) or gpus.value < 2:
        return
    shown = gpus.source.split(" (")[0]
    if r is not None and r.name in DATAPARALLEL_LINES and not c.get("zero_stage"):
        source = (
            f"{shown} (LLaMA-Factory {r.name} trains in one process over the visible GPUs, v0.7.1 src/llmtuner/cli.py:"
            "64-65: HF's Trainer nn.DataParallel, transformers 4.40.2 trainer.py:1628-1629)"
        )
        c.set("gpus_per_node", gpus.value, source, gpus.key)
        c.set("dataparallel", True, source, gpus.key)
    elif c.get("dataparallel"):  # python src/train.py from v0.8 (planner.intake.world)
        c.drop("dataparallel")
        c.set("gpus_per_node", 1, f"{shown} (one process)", gpus.key)
        c.note(
            f"{shown} with one process: LLaMA-Factory v0.8.0-v0.8.2 ran nn.DataParallel, v0.8.3 refuses it "
            "(hparams/parser.py:195): planned on one GPU (give --framework llamafactory@0.7.1 for DataParallel)"
        )


def read_launcher(c: Collector, env: dict[str, str], where: str) -> None:
    """llamafactory-cli's torchrun: NPROC_PER_NODE, else the visible devices (src/llamafactory/launcher.py:60-66)."""
    procs, devices = env.get("NPROC_PER_NODE"), count_devices(env.get("CUDA_VISIBLE_DEVICES", ""))
    if procs is not None:
        source = f"{where} NPROC_PER_NODE={show(procs)}"
        processes_fit_devices(c.number("gpus_per_node", procs, source, "NPROC_PER_NODE"), env, source, c)
    elif devices:
        c.set(
            "gpus_per_node",
            devices,
            f"{where} CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} (LLaMA-Factory "
            "runs one process a visible device, src/llamafactory/launcher.py:60-66)",
            "CUDA_VISIBLE_DEVICES",
        )
    if procs is None and not devices:
        c.note(f"{where} llamafactory-cli (one process a visible GPU of the training host: {ASK_GPUS}")
    if "NNODES" in env:
        c.number("nodes", env["NNODES"], f"{where} NNODES={show(env['NNODES'])}", "NNODES")


CONFIG_FILE = re.compile(r"^\s*#.*--config_file[= ]+(\S+)")


def alone(c: Collector, path: Path, data: dict) -> None:
    """A YAML given with no command that launches it: its processes are the launch's, which the file leaves open.
    `llamafactory-cli train` starts one a visible GPU of the host it runs on (0.9.5 src/llamafactory/launcher.py:
    60-66); a file whose own comment launches it with `accelerate launch --config_file X` (examples/ascend/*_fsdp*.yaml,
    examples/README.md "FSDP") has its FSDP and processes in X: the reading asks for X or the GPUs."""
    if as_bool(data.get("use_kt")):  # KTransformers: one process, no torchrun (launcher.py:61)
        return
    lines = configs.text_of(path).splitlines()
    said = next(((n, m[1]) for n, line in enumerate(lines, 1) if (m := CONFIG_FILE.match(line))), None)
    if said is not None and not c.get("fsdp") and not c.get("zero_stage"):
        n, given = said
        c.note(
            f"{path.name}:{n} launches it, in a comment, with accelerate launch --config_file {given}, which holds "
            f"its FSDP settings and processes (give that file too: --config {path.name} {Path(given).name}; else "
            f"{ASK_GPUS}"
        )
    else:
        c.note(
            f"{path.name} alone: llamafactory-cli train runs one process a visible GPU of the training host "
            f"(src/llamafactory/launcher.py:60-66: {ASK_GPUS}"
        )


def not_training(f: dict[str, Flag]) -> None:
    """BadInput for a file that says it runs something other than training (NOT_TRAINING) and not `do_train: true`;
    a file that says neither is read as the training run it is given as."""
    if "do_train" in f and as_bool(f["do_train"].value):
        return
    for key, what in NOT_TRAINING.items():
        said = as_bool(f[key].value) if key in f else None
        if key in f and ((said is False) if key == "do_train" else (said is not False)):
            raise BadInput(
                f"{f[key].source}: {what}, without do_train: true: LLaMA-Factory trains nothing (v0.9.5 "
                "src/llamafactory/train/sft/workflow.py:120): memplan plans training runs (give the training YAML)",
                "config",
            )
