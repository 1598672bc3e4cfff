"""accelerate: a `accelerate launch` config file (YAML or JSON; TRL's bundled `--accelerate_config zero2` presets)
and the launch command's own options -> processes and machines, mixed precision, DeepSpeed (deepspeed_config) or FSDP
(fsdp_config). Also the FSDP options every source writes (HF's `fsdp` / `fsdp_config`, axolotl's) in memplan's terms.
"""

from __future__ import annotations

from pathlib import Path

from planner.frameworks.deepspeed import reader as deepspeed
from planner.intake.collect import (
    ACCELERATE,
    HF,
    PRESETS,
    Collector,
    as_bool,
    as_int,
    default,
    is_file,
    known,
    parallel_sizes,
    parse_yaml,
    section,
    show,
    where,
)
from planner.intake.limits import OverLimit, load_json, read_config_text
from planner.intake.shellvars import find_file

KEYS = {
    "command_file",
    "commands",
    "compute_environment",
    "debug",
    "deepspeed_config",
    "distributed_type",
    "downcast_bf16",
    "dynamo_config",
    "enable_cpu_affinity",
    "fp8_config",
    "fsdp_config",
    "gpu_ids",
    "machine_rank",
    "main_process_ip",
    "main_process_port",
    "main_training_function",
    "megatron_lm_config",
    "mixed_precision",
    "mpirun_config",
    "num_machines",
    "num_processes",
    "parallelism_config",
    "rdzv_backend",
    "same_network",
    "tpu_env",
    "tpu_name",
    "tpu_use_cluster",
    "tpu_use_sudo",
    "tpu_vm",
    "tpu_zone",
    "use_cpu",
}
STRATEGIES = {
    "full_shard": "full",
    "1": "full",
    "shard_grad_op": "grad-op",
    "2": "grad-op",
    "hybrid_shard": "hybrid",
    "4": "hybrid",
    "_hybrid_shard_zero2": "hybrid",
    "hybrid_shard_zero2": "hybrid",
    "5": "hybrid",
    "no_shard": "off",
    "3": "off",
}
DS_FLAGS = ("zero_stage", "offload_optimizer_device", "offload_param_device", "deepspeed_config_file")


def load(ref: str, near: Path, vars=None) -> tuple[dict | None, Path | None]:
    """An accelerate config a launch names: a file, or a TRL bundled name (`zero2`, `fsdp2`, ...)."""
    path = find_file(ref, vars, near)
    if path is None and is_file(PRESETS / f"trl_{ref}.yaml"):
        path = PRESETS / f"trl_{ref}.yaml"
    if path is None:
        return None, None
    try:
        text = read_config_text(path)
        data = load_json(text, path) if path.suffix == ".json" else parse_yaml(text, path)
    except OverLimit:
        raise
    except (OSError, ValueError):
        return None, path
    return (data if isinstance(data, dict) else None), path


def entries(c: Collector, data: dict, path: Path) -> dict[str, tuple[object, str]]:
    """A config file's keys as (value, source) entries (`section.key` for its deepspeed / fsdp sections)."""
    name = path.name if path.parent != PRESETS else f"{path.name.split('_', 1)[1]} (bundled {path.name})"
    out = {k: (v, where(name, k, v)) for k, v in data.items() if k not in ("deepspeed_config", "fsdp_config")}
    for part in ("deepspeed_config", "fsdp_config", "parallelism_config"):
        for k, v in section(data, part).items():
            out[f"{part}.{k}"] = (v, where(name, f"{part}.{k}", v))
    for k in sorted(set(data) - KEYS):
        c.note(f"{name}: {k}: {show(data[k])} (not an {ACCELERATE} config key: accelerate refuses the file)")
    return out


def read_config(c: Collector, data: dict, path: Path, via: str, key: str) -> None:
    """A config file's processes, precision and sharding into the reading."""
    apply(c, entries(c, data, path), via, key, path)


def launch_options(opts: dict) -> dict[str, tuple[object, str]]:
    """`accelerate launch` options as config entries."""
    out = {}
    for k, flag in opts.items():
        if k in ("num_processes", "num_machines", "mixed_precision", "gpu_ids"):
            out[k] = (flag.value, flag.source)
        elif k in DS_FLAGS:
            out[f"deepspeed_config.{k}"] = (flag.value, flag.source)
        elif k.startswith("fsdp_"):
            out[f"fsdp_config.{k}"] = (flag.value, flag.source)
        elif k.startswith("parallelism_config_"):
            out[f"parallelism_config.{k}"] = (flag.value, flag.source)
        elif k in ("use_deepspeed", "use_fsdp", "multi_gpu") and as_bool(flag.value):
            kind = {"use_deepspeed": "DEEPSPEED", "use_fsdp": "FSDP", "multi_gpu": "MULTI_GPU"}[k]
            out["distributed_type"] = (kind, flag.source)
    return out


def apply(c: Collector, e: dict[str, tuple[object, str]], via: str, key: str, near: Path) -> None:
    procs, machines = as_int(e.get("num_processes", (None,))[0]), as_int(e.get("num_machines", (1,))[0]) or 1
    if procs is None and "gpu_ids" in e and str(e["gpu_ids"][0]) != "all":
        procs = len([g for g in str(e["gpu_ids"][0]).split(",") if g.strip()])
    if procs and procs > 0:
        src = e.get("num_processes", e.get("gpu_ids"))[1]
        c.fill("gpus_per_node", max(1, procs // machines), f"{src}{via}", key)
        if procs % machines:
            c.note(f"num_processes {procs} over num_machines {machines} (not a whole number a machine)")
    if machines > 1:
        c.fill("nodes", machines, f"{e['num_machines'][1]}{via}", key)
    mp = str(e.get("mixed_precision", ("no",))[0]).lower()
    if mp in ("bf16", "fp16"):
        c.fact("amp", mp, f"{e['mixed_precision'][1]}{via}", key, weak=True)
    elif mp == "fp8":
        c.note(f"mixed_precision: fp8 ({e['mixed_precision'][1]}; fp8 training is not planned yet)")
    _parallelism(c, e)
    kind = str(e.get("distributed_type", ("",))[0]).upper()
    if kind == "DEEPSPEED":
        _deepspeed(c, e, via, key, near)
    elif kind == "FSDP":
        spec = {k.split(".", 1)[1]: v for k, (v, _) in e.items() if k.startswith("fsdp_config.")}
        src = e.get("distributed_type")[1]
        fsdp(
            c,
            spec,
            f"{src}{via}",
            key,
            version=(1, default(ACCELERATE, "accelerate/commands/launch.py:514-517", "fsdp_version 1")),
            trainer=False,
        )


# accelerate 1.15's ParallelismConfig sizes (commands/launch.py:900-980) -> memplan's; its cp_comm_strategy
# "alltoall" passes the ring's blocks (export.parallel.CP_COMM)
PARALLELISM = {"sp_size": "sequence_parallel", "cp_size": "context_parallel", "tp_size": "tensor_parallel"}
CP_COMM = {"alltoall": "ring", "allgather": "all-gather"}


def _parallelism(c: Collector, e: dict) -> None:
    """The parallelism section's sequence, context and tensor parallel sizes and context parallel's exchange."""
    p = {k.removeprefix("parallelism_config.parallelism_config_"): v for k, v in e.items() if k.startswith("par")}
    parallel_sizes(c, {field: (*p[k], k) for k, field in PARALLELISM.items() if k in p})
    if "dp_replicate_size" in p and as_int(p["dp_replicate_size"][0]):  # FSDP2 over replicas (settle: HSDP)
        c.fact("dp_replicate", as_int(p["dp_replicate_size"][0]), p["dp_replicate_size"][1], "dp_replicate_size")
    comm = p.get("cp_comm_strategy")
    cp = as_int(p.get("cp_size", (1,))[0])
    if comm and cp and cp > 1:
        if str(comm[0]) in CP_COMM:
            c.set("cp_attention", CP_COMM[str(comm[0])], comm[1], "cp_comm_strategy")
        else:
            c.note(f"{comm[1]} (not a cp_comm_strategy accelerate runs: alltoall or allgather)")


def _deepspeed(c: Collector, e: dict, via: str, key: str, near: Path) -> None:
    ds = {k.split(".", 1)[1]: (v, s) for k, (v, s) in e.items() if k.startswith("deepspeed_config.")}
    if "deepspeed_config_file" in ds and known(ds["deepspeed_config_file"][0]):
        value, src = ds["deepspeed_config_file"]
        return deepspeed.read(c, value, f"{src}{via}", key, near)
    stage, src = ds.get("zero_stage", (2, default(ACCELERATE, "accelerate/commands/launch.py:417-421", "zero_stage 2")))
    stage = as_int(stage) if as_int(stage) is not None else 2
    c.set("zero_stage", stage, f"{src}{via}", key)
    opt = str(ds.get("offload_optimizer_device", ("none",))[0]).lower()
    par = str(ds.get("offload_param_device", ("none",))[0]).lower()
    if opt not in ("none", "") or par not in ("none", ""):
        value = "optimizer+params" if par not in ("none", "") and stage == 3 else "optimizer"
        src = ds.get("offload_param_device", ds.get("offload_optimizer_device"))[1]
        c.set("offload", value, f"{src}{via}", key)
    return None


def _state_dict_type(c: Collector, value: object, source: str, key: str, trainer: bool, version: int) -> None:
    """FULL_STATE_DICT gathers the whole model on rank 0 at a save; SHARDED_STATE_DICT (or LOCAL) saves each rank's
    shards. Unset: HF's TrainingArguments says FULL (transformers/training_args.py:2852), accelerate's plugin FULL
    for FSDP1 and SHARDED for FSDP2 (accelerate/utils/dataclasses.py:2047-2051)."""
    if known(value) and value:
        full = "FULL" in str(value).upper()
        return c.set("save_weights", "full" if full else "sharded", f"{source}: state_dict_type {value}", key)
    if trainer:
        return c.fill("save_weights", "full", default(HF, "transformers/training_args.py:2852", "FULL_STATE_DICT"), key)
    full = version < 2
    cite = default(
        ACCELERATE, "accelerate/utils/dataclasses.py:2047-2051", "FULL_STATE_DICT" if full else "SHARDED_STATE_DICT"
    )
    c.fill("save_weights", "full" if full else "sharded", cite, key)


def fsdp(
    c: Collector,
    spec: dict,
    source: str,
    key: str,
    *,
    tokens: tuple = (),
    version: tuple[int, str] = (2, ""),
    trainer: bool = True,
    mesh: bool = True,
) -> None:
    """FSDP options (`fsdp_`-prefixed or not; HF's `fsdp` words in `tokens`) -> fsdp, offload, checkpointing,
    save_weights; `version`: the FSDP version where the options name none, and the default that says so; `trainer`:
    HF's TrainingArguments builds the plugin (its state_dict_type default), else accelerate's config does; `mesh`:
    FSDP2's replicate x shard mesh is accelerate's ParallelismConfig alone (settle._hsdp_unmeshed), not the
    framework's own."""
    s = {k.removeprefix("fsdp_"): v for k, v in spec.items()}
    given = as_int(s.get("version"))
    strategy = s.get("sharding_strategy", s.get("reshard_after_forward"))
    words = [str(t).lower() for t in tokens]
    if str(strategy).lower() in ("true", "false"):
        mode, why = ("full" if as_bool(strategy) else "grad-op"), f"reshard_after_forward {strategy}"
    else:
        named = [(STRATEGIES[w], w) for w in [str(strategy).lower(), *words] if w in STRATEGIES]
        mode, why = named[0] if named else ("full", "")
    source = f"{source}: {why}" if why and why not in source.lower() else source
    if mode == "off":
        c.note(f"{source} (FSDP NO_SHARD: planned as plain data parallelism)")
        return
    how = "" if (given or version[0]) >= 2 else " (FSDP1: planned as FSDP2 with the same sharding"
    how += f"; {version[1]})" if how and not given and version[1] else (")" if how else "")
    c.set("fsdp", mode, f"{source}{how}", key)
    c.fact("fsdp_version", given or version[0], source + (f" ({version[1]})" if not given and version[1] else ""), key)
    if mode == "hybrid" and mesh:  # whether HF's TrainingArguments asked it (settle._hsdp_unmeshed: 5.10 refuses it)
        c.fact("fsdp_hybrid", trainer, source, key)
    if as_bool(s.get("offload_params")) or "offload" in words:
        c.set("offload", "optimizer+params", f"{source}: offload_params", key)
    _state_dict_type(c, s.get("state_dict_type"), source, key, trainer, given or version[0])
    if as_bool(s.get("activation_checkpointing")):  # FSDP's own wrapping wins over the trainer's flag: settled last
        c.fact("fsdp_checkpointing", "full", f"{source}: activation_checkpointing true", key)


def read_file(
    c: Collector, data: dict, path: Path, *, flags: dict, words: list, script: Path, trainer: str, vars
) -> None:
    """planner.intake's dispatch of a accelerate config (Framework.reads; `flags`: the command line's, `words`: its positional
    words after the file, `script`: the command's file): read as the launcher's config."""
    read_config(c, data, path, "", "config_file")


VERSION_ENV = "FSDP_VERSION"  # the plugin's version where none is passed (accelerate 1.8.1 utils/dataclasses.py:1708)


def read_env_version(c: Collector, env: dict[str, str], where: str) -> None:
    """The FSDP version the command's environment names (FSDP_VERSION, what accelerate's plugin reads where the trainer
    hands it none: planner.frameworks.hf.launchenv), the fact "fsdp_env_version" HF's reader settles the version
    with where its release drops fsdp_config's "version" (hf.reader_sharding)."""
    value = env.get(VERSION_ENV, "").strip()
    if value.isdigit():
        c.fact("fsdp_env_version", int(value), f"{where} {VERSION_ENV}={value}", VERSION_ENV)
    replicate = env.get(REPLICATE_ENV, "").strip()
    if env.get(MESH_ENV, "false").lower() == "true" and replicate.isdigit():  # the mesh the Accelerator builds
        c.fact("dp_replicate", int(replicate), f"{where} {REPLICATE_ENV}={replicate}", REPLICATE_ENV)


# the variables `accelerate launch` hands the ranks for its parallelism section (1.10.1 utils/launch.py:353-362), which
# the Accelerator reads into ParallelismConfig (accelerator.py:454-459): HSDP's replicas (planner.export.parallel)
MESH_ENV, REPLICATE_ENV = "ACCELERATE_USE_PARALLELISM_CONFIG", "PARALLELISM_CONFIG_DP_REPLICATE_SIZE"
