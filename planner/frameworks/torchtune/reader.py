"""torchtune 0.6.1: `tune run [--nproc_per_node N ...] RECIPE --config CFG key=value ...` and a recipe YAML given
alone -> request fields. CFG is a file or a built-in config's name, found as the file `tune cp` writes beside the
script (recipes/configs/<name>.yaml in the folders above it) or asked for in one line. `key=value` overrides go over the
YAML as torchtune merges them (torchtune/config/_utils.py:147-175: a key naming a `_component_` node sets its
`_component_`; `~key` removes one). Defaults are the recipes' own `cfg.get(key, default)` (recipes/*.py at v0.6.1);
the model builder (`torchtune.models.llama3_1.lora_llama3_1_8b`) names the catalog model and the adapter
(reader_model.py). Every key that changes memory and is not planned is one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from planner.errors import BadInput
from planner.frameworks.torchtune import OTHER_RECIPES, RECIPES
from planner.frameworks.torchtune import reader_model as model
from planner.intake import world
from planner.intake.collect import ASK_GPUS, Collector, as_bool, default, is_file, parse_yaml, show
from planner.intake.flags import Flag, dotted
from planner.intake.limits import OverLimit, read_config_text

TT = "torchtune 0.6.1"
R = "recipes/"
# a key of the recipe YAML that changes memory and is not planned: why
UNPLANNED = {
    "compile": "torch.compile's memory effect",
    "custom_sharded_layers": "FSDP units of their own for these layers",
    "tensor_parallel_dim": "tensor parallel",
    "tensor_parallel_plan": "tensor parallel",
    "ac_mode": "selective activation checkpointing",
    "ac_option": "selective activation checkpointing",
    "low_cpu_ram": "low-CPU-RAM loading",
    "enable_async_checkpointing": "asynchronous checkpoint saves",
    "model.use_dora": "DoRA",
}
LOSSES = {  # loss._component_'s class -> memplan's loss
    "CEWithChunkedOutputLoss": "chunked",  # modules/loss/ce_chunked_output_loss.py: 8 chunks, each upcast alone
    # torchtune main after 0.6.1 (bd2a0fc7c modules/loss/cross_entropy_loss.py:19-125): the head applied chunk by
    # chunk, 8 chunks, each chunk's logits upcast for F.cross_entropy: what is saved is the chunked loss's
    # fp32 log-softmax, of the unmasked tokens only (planned over every token)
    "LinearCrossEntropyLoss": "chunked",
    "CrossEntropyLoss": "standard",
}
OPTIMIZERS = {  # optimizer._component_ -> memplan's optimizer (torch's fused AdamW: `fused: True`)
    "torch.optim.AdamW": "adamw",
    "torch.optim.Adam": "adamw",
    "torch.optim.SGD": "sgd",
    "bitsandbytes.optim.AdamW8bit": "adamw-8bit",
    "bitsandbytes.optim.PagedAdamW8bit": "paged-adamw-8bit",
    # one state (planner.estimate.state_terms): torch's foreach RMSprop and Adagrad, bitsandbytes' Lion and RMSprop
    # (Lion and RMSprop default to optim_bits 32: bitsandbytes 0.50.2 optim/lion.py, optim/rmsprop.py)
    "torch.optim.RMSprop": "rmsprop",
    "torch.optim.Adagrad": "adagrad",
    "bitsandbytes.optim.Lion": "lion",
    "bitsandbytes.optim.Lion32bit": "lion",
    "bitsandbytes.optim.Lion8bit": "lion-8bit",
    "bitsandbytes.optim.PagedLion": "paged-lion",
    "bitsandbytes.optim.PagedLion32bit": "paged-lion",
    "bitsandbytes.optim.PagedLion8bit": "paged-lion-8bit",
    "bitsandbytes.optim.RMSprop": "rmsprop-bnb",
    "bitsandbytes.optim.RMSprop32bit": "rmsprop-bnb",
    "bitsandbytes.optim.RMSprop8bit": "rmsprop-bnb-8bit",
}


def read_run(run) -> Collector:
    """A `tune run` command (planner.intake.launch.Run, tool "tune") into a reading."""
    recipe = run.target.removesuffix(".py")
    where_ = f"{run.where} tune run {show(run.target)}"
    if Path(recipe).name in OTHER_RECIPES:
        recipe = Path(recipe).name
        raise BadInput(f"{where_}: torchtune's {recipe} recipe is not planned (memplan plans {', '.join(RECIPES)})")
    if recipe not in RECIPES:
        raise BadInput(
            f"{where_}: not one of torchtune's recipes memplan plans ({', '.join(RECIPES)}); a custom recipe's "
            "memory is its own code's",
            "config",
        )
    words = [w.text for w in run.args]
    if "--config" not in words or words.index("--config") + 1 >= len(words):
        raise BadInput(f"{where_}: no --config (torchtune requires one: torchtune/_cli/run.py:174-179)", "config")
    i = words.index("--config")
    c = Collector("torchtune")
    c.fact("framework", "torchtune", f"{where_}", "tune")
    _world(c, run, recipe)
    path = config_file(words[i + 1], run.command.path, where_)
    data = load(path)
    cli = [w for j, w in enumerate(run.args) if j not in (i, i + 1)]
    overrides = {}
    for w in cli:
        key, eq, value = w.text.partition("=")
        if key.startswith("~"):
            overrides[key[1:]] = Flag(key[1:], None, f"{run.command.path.name}:{w.line} {w.text}", key)
        elif eq:
            parsed = parse_yaml(value) if value not in ("", "None") else None
            overrides[key] = Flag(key, parsed, f"{run.command.path.name}:{w.line} {w.text}", key)
        else:
            c.note(f"{run.command.path.name}:{w.line} {w.text} (not key=value: torchtune refuses it)")
    read(c, data, path, recipe, overrides)
    return c


def _world(c: Collector, run, recipe: str) -> None:
    """torchrun's options before the recipe start torchrun (torchtune/_cli/run.py:113-117,205-212); none: one
    process. A single-device recipe under torchrun is refused by torchtune (run.py:206-210)."""
    if any(k in run.opts for k in ("nproc_per_node", "nnodes")):
        world.read(c, dataclasses.replace(run, tool="torchrun"))
    else:
        c.set(
            "gpus_per_node",
            1,
            default(TT, "torchtune/_cli/run.py:205-214", "no torchrun options: one process"),
            "--nproc_per_node",
        )
    if not recipe.endswith("_distributed") and (c.get("gpus_per_node", 1) > 1 or c.get("nodes", 1) > 1):
        raise BadInput(f"{run.where} tune run {recipe}: a single-device recipe under torchrun options (torchtune "
                       "refuses it: torchtune/_cli/run.py:206-210); run a *_distributed recipe", "gpus_per_node")  # fmt: skip


def config_file(name: str, script: Path, what: str) -> Path:
    """--config's file: a path (relative to the script's folder or the working folder), else a built-in config's
    name found where `tune cp NAME .` or a checkout keeps it (recipes/configs/NAME.yaml in the script's folder or
    the ones above it)."""
    base, given = script.parent, Path(name)
    file = given.name if given.suffix in (".yaml", ".yml") else f"{given.name}.yaml"  # a path's file, or NAME.yaml
    for cand in (given, base / name, base / f"{name}.yaml"):
        if cand.suffix in (".yaml", ".yml") and is_file(cand):
            return cand
    for d in (base, *base.parents[:3]):
        for cand in (d / "recipes" / "configs" / f"{name}.yaml", d / file):
            if is_file(cand):
                return cand
    raise BadInput(
        f"{what} --config {name}: a torchtune built-in config not found beside the script; give the config file: "
        f"`tune cp {name} .` writes it",
        "config",
    )


def load(path: Path) -> dict:
    try:
        data = parse_yaml(read_config_text(path), path)
    except OverLimit:
        raise
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise BadInput(f"--config {path}: not a readable YAML ({' '.join(str(e).split())[:160]})", "config") from None
    if not isinstance(data, dict):
        raise BadInput(f"--config {path}: not a torchtune recipe config (a YAML mapping of its keys)", "config")
    return data


def merge(f: dict[str, Flag], overrides: dict[str, Flag]) -> dict[str, Flag]:
    """The command line's `key=value` over the YAML (torchtune/config/_utils.py:147-175)."""
    out = dict(f)
    for key, flag in overrides.items():
        if flag.raw.startswith("~"):
            out = {k: v for k, v in out.items() if k != key and not k.startswith(f"{key}.")}
            continue
        if f"{key}._component_" in out:  # a component node: `loss=X` sets loss._component_ (_utils.py:172-175)
            key = f"{key}._component_"
        out[key] = Flag(key, flag.value, flag.source, flag.raw)
    return out


def read_alone(c: Collector, data: dict, path: Path) -> None:
    """A recipe YAML given alone: its recipe told from its file name (`tune cp` keeps the built-in's) or its FSDP keys."""
    f = dotted(data, path)
    lora = "lora" in str(f.get("model._component_", Flag("", "", "", "")).value).rsplit(".", 1)[-1]
    one = any(w in path.stem for w in ("single_device", "low_memory"))  # the built-ins' single-device names
    distributed = any(k.startswith("fsdp_") for k in f) or not one
    recipe = f"{'lora' if lora else 'full'}_finetune_{'distributed' if distributed else 'single_device'}"
    c.note(
        f"{path.name} (read as torchtune's {recipe}, told from the file's name and model builder; `tune run RECIPE "
        "--config FILE` names the recipe)"
    )
    if distributed:  # the launch, and so the processes, left open
        c.note(
            f"{path.name} alone: `tune run --nproc_per_node N` starts N processes, `tune run` without torchrun's "
            f"arguments one (torchtune 0.6.1 torchtune/_cli/run.py:113-117, 206-215: {ASK_GPUS}"
        )
    read(c, data, path, recipe, {})


def read(c: Collector, data: dict, path: Path, recipe: str, overrides: dict[str, Flag]) -> None:
    f = merge(dotted(data, path), overrides)
    c.add_file(path)
    model.read_model(c, f, path, recipe)
    _batch(c, f)
    _precision(c, f)
    _checkpointing(c, f, recipe)
    _loss_and_optimizer(c, f, recipe)
    if recipe.endswith("_distributed"):
        _fsdp(c, f)
    else:
        c.set("fsdp", "off", default(TT, f"{R}{recipe}.py", "one process, no FSDP"), "recipe")
    for key, why in UNPLANNED.items():
        if key in f and _set(f[key].value):
            c.note(f"{f[key].source} ({why} is not planned yet)")


def _set(value: object) -> bool:
    """A key that does something: true, a size above 1, a non-empty name or list."""
    if isinstance(value, bool) or value is None:
        return bool(value)
    return value > 1 if isinstance(value, (int, float)) else bool(value)


def _batch(c: Collector, f: dict[str, Flag]) -> None:
    for key, field in (("batch_size", "micro_batch"), ("gradient_accumulation_steps", "grad_accum")):
        if key in f:
            c.number(field, f[key].value, f[key].source, key)
        else:
            c.note(f"no {key} (torchtune requires it: cfg.{key}): {field} not read")
    seq = f.get("tokenizer.max_seq_len")
    if seq is not None and seq.value is not None:
        c.number("seq_len", seq.value, seq.source, "tokenizer.max_seq_len")
    else:
        src = seq.source if seq is not None else "no tokenizer.max_seq_len"
        c.note(f"{src} (no sequence length: rows are not truncated, your data decides)")
    packed = f.get("dataset.packed")
    if packed is not None and as_bool(packed.value):
        c.set("batching", "packed", f"{packed.source} (padded_collate_packed: rows of max_seq_len)", "dataset.packed")
    else:
        src = packed.source if packed is not None else default(TT, f"{R}full_finetune_single_device.py:572", "False")
        c.set("batching", "padded", src, "dataset.packed")


def _precision(c: Collector, f: dict[str, Flag]) -> None:
    """dtype: parameters, gradients and optimizer states in it (recipes' docstrings, e.g. full_finetune_single_device.
    py:59-64); fp16 raises (full_finetune_single_device.py:124-127); training/precision.py:18-22 takes fp16/bf16/fp32."""
    d = f.get("dtype")
    if d is None:
        c.note("no dtype (torchtune requires it: cfg.dtype): precision not read")
        return
    value = show(d.value).lower()
    if value in ("bf16", "bfloat16"):
        c.set("precision", "bf16-pure", f"{d.source} (bf16 params, grads and optimizer states)", "dtype")
    elif value in ("fp32", "float32"):
        c.set("precision", "fp32", d.source, "dtype")
    elif value in ("fp16", "float16"):
        raise BadInput(f"{d.source}: torchtune's recipes refuse fp16 (\"full fp16 training is not supported\"); "
                       "give dtype=bf16 or fp32", "precision")  # fmt: skip
    else:
        raise BadInput(f"{d.source}: not a torchtune dtype (accepted: bf16, fp32)", "precision")


def _on(f: dict[str, Flag], key: str) -> bool:
    return key in f and bool(as_bool(f[key].value))


def _checkpointing(c: Collector, f: dict[str, Flag], recipe: str) -> None:
    """enable_activation_checkpointing (every layer) and enable_activation_offloading, which needs it (the recipes
    raise: full_finetune_single_device.py:160-176): OffloadActivations moves every tensor saved in forward to the
    host (torchtune/training/_activation_offloading.py:24-77, 133-153), and under the layers' non-reentrant
    checkpoints (training/memory.py:26-43) what is saved is each layer's input ("only the checkpointed tensors will be
    offloaded": docs/source/tutorials/memory_optimizations.rst:105-107): memplan's offload-inputs."""
    ac, off = "enable_activation_checkpointing", "enable_activation_offloading"
    if _on(f, off):
        if not _on(f, ac):
            raise BadInput(f"{f[off].source}: torchtune raises \"enable_activation_offloading should only be True "
                           f"when enable_activation_checkpointing is True\"; give {ac}=True", "checkpointing")  # fmt: skip
        c.set("checkpointing", "offload-inputs", f"{f[off].source} (with {f[ac].source})", off)
    elif ac in f:
        c.set("checkpointing", "full" if _on(f, ac) else "off", f[ac].source, ac)
    else:
        c.set("checkpointing", "off", default(TT, f"{R}{recipe}.py: cfg.get", f"{ac} False"), ac)


def _loss_and_optimizer(c: Collector, f: dict[str, Flag], recipe: str) -> None:
    loss = f.get("loss._component_")
    if loss is not None:
        name = show(loss.value).rsplit(".", 1)[-1]
        if name in LOSSES:
            c.set("loss", LOSSES[name], loss.source, "loss._component_")
        else:
            c.note(f"{loss.source} (this loss is not planned yet; planned as cross-entropy over the full logits)")
    opt = f.get("optimizer._component_")
    if opt is not None:
        mapped = OPTIMIZERS.get(show(opt.value))
        if mapped == "adamw" and _on(f, "optimizer.fused"):
            mapped = "adamw-fused"
        if mapped:
            c.set("optimizer", mapped, opt.source, "optimizer._component_")
        else:
            c.note(f"{opt.source} (this optimizer is not planned yet; planned as AdamW)")
    bwd = f.get("optimizer_in_bwd")
    if bwd is None:
        return
    on = bool(as_bool(bwd.value))
    if recipe.startswith("lora"):
        c.note(f"{bwd.source} (the LoRA recipes have no optimizer_in_bwd: torchtune ignores it)")
    elif on and recipe.endswith("_distributed"):
        c.note(f"{bwd.source} (optimizer in backward under FSDP is not planned yet; planned with a step after it)")
    else:
        c.set("optimizer_in_backward", on, bwd.source, "optimizer_in_bwd")


def _fsdp(c: Collector, f: dict[str, Flag]) -> None:
    """fully_shard with fsdp_reshard_after_forward (default True; False is SHARD_GRAD_OP) and fsdp_cpu_offload
    (CPUOffloadPolicy: parameters, gradients and optimizer states on the host): full_finetune_distributed.py:138,299."""
    r = f.get("fsdp_reshard_after_forward")
    if r is not None:
        c.set("fsdp", "full" if as_bool(r.value) is not False else "grad-op", r.source, "fsdp_reshard_after_forward")
    else:
        src = default(TT, f"{R}full_finetune_distributed.py:299", "fsdp_reshard_after_forward True")
        c.set("fsdp", "full", src, "fsdp_reshard_after_forward")
    if _on(f, "fsdp_cpu_offload"):
        c.set("offload", "optimizer+params", f["fsdp_cpu_offload"].source, "fsdp_cpu_offload")


def read_file(
    c: Collector, data: dict, path: Path, *, flags: dict, words: list, script: Path, trainer: str, vars
) -> None:
    """planner.intake's dispatch of a torchtune recipe YAML (Framework.reads; `flags`: the command line's, `words`: its positional
    words after the file, `script`: the command's file): read alone, its recipe from the file."""
    read_alone(c, data, path)
