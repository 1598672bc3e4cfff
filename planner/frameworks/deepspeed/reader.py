"""DeepSpeed configs: a JSON file, an inline object, a framework's bundled preset (ms-swift's `--deepspeed zero3`,
LLaMA-Factory's examples/deepspeed/*.json, axolotl's deepspeed_configs/*.json, copied under presets/) -> the ZeRO stage,
offload, and the batch, precision and optimizer where the file fixes them. "auto" values are the trainer's: read alone,
they are transformers' defaults, resolved as transformers resolves them (integrations/deepspeed.py:141-192).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from planner.config import zerobuckets
from planner.frameworks import FRAMEWORKS
from planner.intake.collect import (
    DEEPSPEED,
    HF,
    PRESETS,
    Collector,
    as_bool,
    as_int,
    assumption,
    default,
    is_file,
    known,
    parallel_sizes,
    section,
    show,
)
from planner.intake.limits import OverLimit, load_json, read_config_text
from planner.intake.shellvars import find_file

AUTO = "transformers/integrations/deepspeed.py"
OPTIMIZERS = {"adamw": "adamw-fused", "adam": "adamw-fused", "fusedadam": "adamw-fused", "sgd": "sgd"}


def preset(ref: str, framework: str) -> Path | None:
    """A bundled config a framework names without shipping a file next to the run."""
    name = Path(ref).name
    f = FRAMEWORKS.get(framework)
    if f is not None and ref in f.deepspeed_words:  # Framework.deepspeed_words: ms-swift's zero0..zero3_offload
        return PRESETS / f"{framework}_{ref}.json"
    for prefix in ("llamafactory", "axolotl"):
        if is_file(PRESETS / f"{prefix}_{name}") and ("deepspeed" in ref or framework == prefix):
            return PRESETS / f"{prefix}_{name}"
    return None


def load(ref: object, near: Path, framework: str, vars=None) -> tuple[dict | None, str, Path | None]:
    """(config, its name for sources, the file read) of what a `deepspeed` setting names; None where not found."""
    if isinstance(ref, dict):
        return ref, "deepspeed", None
    text = show(ref).strip()
    if text.startswith("{"):
        try:
            return load_json(text), "deepspeed", None
        except OverLimit:
            raise
        except ValueError:
            return None, text, None
    path = find_file(text, vars, near) or preset(text, framework)
    if path is None:
        return None, text, None
    try:
        cfg = load_json(read_config_text(path), path)
    except OverLimit:
        raise
    except (OSError, ValueError):
        return None, text, path
    name = path.name if path.parent != PRESETS else f"{path.name.split('_', 1)[1]} (bundled {path.name})"
    return (cfg if isinstance(cfg, dict) else None), name, path


def read(c: Collector, ref: object, source: str, key: str, near: Path, *, alone: bool = False, vars=None) -> None:
    """The DeepSpeed config `ref` names, into the reading; `alone`: no trainer's arguments fill its "auto" values."""
    if not known(ref):
        c.note(f"{key} {show(ref)} (the DeepSpeed config is not known from the script: ZeRO stage not read)")
        return
    cfg, name, path = load(ref, near, c.framework, vars)
    if path is not None:
        c.add_file(path)
    if cfg is None:
        return _guess(c, show(ref), source, key, path)
    via = "" if alone else f" (via {source})"
    zero = section(cfg, "zero_optimization")
    stage = as_int(zero.get("stage", 0)) or 0
    c.set("zero_stage", stage, f"{name}: zero_optimization.stage: {stage}{via}", key)
    _offload(c, zero, stage, name, via, key)
    if stage:
        _buckets(c, zero, stage, name, via, key)
    if stage == 3:
        _gather_on_save(c, zero, name, key)
    _batch(c, cfg, name, alone, key)
    _precision(c, cfg, name, alone, key)
    opt = section(cfg, "optimizer").get("type")
    if opt:
        mapped = OPTIMIZERS.get(str(opt).lower())
        if mapped:
            c.set("optimizer", mapped, f"{name}: optimizer.type: {opt} (DeepSpeed's own optimizer){via}", key)
        else:
            c.note(f"{name}: optimizer.type: {opt} (DeepSpeed's {opt} is not planned; planned as AdamW)")
    elif stage >= 1:
        _client_optimizer(c, name, via, key)
    _unplanned(c, cfg, zero, name)


def _client_optimizer(c: Collector, name: str, via: str, key: str) -> None:
    """A config that names no optimizer: HF's Trainer builds its own `optim` and DeepSpeed steps it as a client
    optimizer (transformers 4.45.2 integrations/deepspeed.py:320-336, 5.6 :542-555), whose step temporaries ZeRO's
    plan counts (planner.estimate.zero.client_step_temp_bytes_per_element)."""
    fw = FRAMEWORKS.get(c.framework)
    if fw is not None and "client_optimizer" not in fw.every and True not in fw.runs.get("client_optimizer", ()):
        return  # a framework that builds its DeepSpeed config itself
    why = "no optimizer entry: DeepSpeed steps the trainer's optim (transformers integrations/deepspeed.py:336)"
    c.set("client_optimizer", True, f"{name}: {why}{via}", key)


# absent keys whose DeepSpeed default is not what memplan plans for "" (HF's "auto" sizes; overlap_comm on): HF's
# Trainer fills only "auto" values (transformers integrations/deepspeed.py:229-241 fill_match), so an absent key is
# DeepSpeed's own default (deepspeed 0.19.8 runtime/zero/config.py)
ABSENT = {
    "reduce_bucket_size": (5 * 10**8, ":113 reduce_bucket_size 5e8"),
    "stage3_prefetch_bucket_size": (5 * 10**7, ":222 stage3_prefetch_bucket_size 5e7"),
    "stage3_param_persistence_threshold": (10**5, ":228 stage3_param_persistence_threshold 1e5"),
    "overlap_comm": (False, ":138, 383-387 overlap_comm None: true at stage 3 only"),
}


# the keys whose value memplan plans for "" does not follow the hidden size (planner.estimate.zero.ZeroSettings)
UNMOVED = {
    "allgather_bucket_size": 5 * 10**8,
    "stage3_max_live_parameters": 10**9,
    "stage3_max_reuse_distance": 10**9,
    "sub_group_size": 10**9,
    "overlap_comm": True,
    "contiguous_gradients": True,
}


def _buckets(c: Collector, zero: dict, stage: int, name: str, via: str, key: str) -> None:
    """The bucket sizes and switches the JSON sets itself (planner.config.zerobuckets), for the stage it runs: an
    explicit value is the plan's; "auto" is HF's, from the hidden size (what memplan plans for ""); an absent key is
    DeepSpeed's default (ABSENT), where it differs from memplan's."""
    values, said = {}, []
    for k in zerobuckets.KEYS:
        if stage not in zerobuckets.STAGES[k]:
            continue
        raw = zero.get(k, zero.get(zerobuckets.KEYS[k]))  # DeepSpeed takes the field's name too (populate_by_name)
        if raw is None and k in ABSENT:
            values[k], cite = ABSENT[k][0], ABSENT[k][1]
            said.append(default(DEEPSPEED, f"deepspeed/runtime/zero/config.py{cite}", f"(no {k})"))
        elif raw is not None and raw != "auto":
            try:
                values[k] = zerobuckets.parse(f"{k}={str(raw).lower()}")[k]
            except ValueError:
                c.note(f"{name}: zero_optimization.{k}: {show(raw)} (not a size DeepSpeed takes: not planned)")
                continue
            if k in UNMOVED and values[k] == UNMOVED[k]:
                del values[k]  # what memplan plans without it
                continue
            said.append(f"{k}: {zerobuckets.canonical({k: values[k]}).split('=')[1]}")
    if values:
        text = zerobuckets.canonical({"stage": stage, **values})
        c.set("zero_buckets", text, f"{name}: zero_optimization {', '.join(said)}{via}", key)
    mics = as_int(zero.get("mics_shard_size"))
    if mics and mics > 0:
        c.note(f"{name}: zero_optimization.mics_shard_size: {mics} (MiCS's shard groups are not planned)")


def _gather_on_save(c: Collector, zero: dict, name: str, key: str) -> None:
    """ZeRO-3's stage3_gather_16bit_weights_on_model_save -> save_weights: true gathers the full weights on rank 0;
    false, absent (DeepSpeed's default, deepspeed/runtime/zero/config.py:257) and "auto" (accelerate fills it with
    false, accelerate/accelerator.py:2223-2226) save the shards."""
    value = zero.get("stage3_gather_16bit_weights_on_model_save")
    if value is None:
        cite = default(
            DEEPSPEED, "deepspeed/runtime/zero/config.py:257", "stage3_gather_16bit_weights_on_model_save false"
        )
        return c.fill("save_weights", "sharded", f"{name}: {cite}", key)
    full = as_bool(value) is True
    why = ' (accelerate fills "auto" with false: accelerator.py:2223-2226)' if value == "auto" else ""
    c.set(
        "save_weights",
        "full" if full else "sharded",
        f"{name}: stage3_gather_16bit_weights_on_model_save: {value}{why}",
        key,
    )


def _offload(c: Collector, zero: dict, stage: int, name: str, via: str, key: str) -> None:
    opt = str(section(zero, "offload_optimizer").get("device", "none")).lower()
    par = str(section(zero, "offload_param").get("device", "none")).lower()
    if "nvme" in (opt, par):
        c.note(f"{name}: offload to nvme (NVMe offload is not planned; planned as CPU offload)")
    if opt == "none" and par == "none":
        return
    if stage == 0:
        c.note(f"{name}: offload with zero_optimization.stage 0 (DeepSpeed offloads only under ZeRO; not planned)")
        return
    value = "optimizer+params" if par != "none" and stage == 3 else "optimizer"
    if par != "none" and opt == "none":
        c.note(f"{name}: offload_param without offload_optimizer (planned as optimizer+params offload)")
    c.set(
        "offload",
        value,
        f"{name}: zero_optimization.offload_optimizer.device: {opt}, offload_param.device: {par}{via}",
        key,
    )


def _batch(c: Collector, cfg: dict, name: str, alone: bool, key: str) -> None:
    for ds_key, field, hf_key, hf_default, cite in (
        ("train_micro_batch_size_per_gpu", "micro_batch", "per_device_train_batch_size", 8, "777"),
        ("gradient_accumulation_steps", "grad_accum", "gradient_accumulation_steps", 1, "849"),
    ):
        value = cfg.get(ds_key)
        if as_int(value):
            c.fill(field, as_int(value), f"{name}: {ds_key}: {value}", key)
        elif alone and (value == "auto" or value is None):
            c.fill(
                field,
                hf_default,
                default(HF, f"transformers/training_args.py:{cite}", f"{hf_key} {hf_default}")
                + f", {name}'s {ds_key} {json.dumps(value)} ({AUTO}:141-160)",
                key,
            )


def _precision(c: Collector, cfg: dict, name: str, alone: bool, key: str) -> None:
    for kind in ("bf16", "fp16"):
        enabled = section(cfg, kind).get("enabled", False)
        if enabled != "auto" and as_bool(enabled):
            c.fact("amp", kind, f"{name}: {kind}.enabled: true", key, weak=True)
            return
    if alone:
        c.fact(
            "amp",
            "fp32",
            default(HF, "transformers/training_args.py:874-880", "bf16 False, fp16 False")
            + f', {name}\'s bf16/fp16 "auto" ({AUTO}:183-192)',
            key,
            weak=True,
        )


def _unplanned(c: Collector, cfg: dict, zero: dict, name: str) -> None:
    tp = section(cfg, "tensor_parallel").get("autotp_size")
    sp = cfg.get("sequence_parallel_size")
    parallel_sizes(
        c,
        {
            "tensor_parallel": (tp, f"{name}: tensor_parallel.autotp_size: {tp} (DeepSpeed AutoTP)", "autotp_size"),
            "sequence_parallel": (sp, f"{name}: sequence_parallel_size: {sp} (Ulysses)", "sequence_parallel_size"),
        },
    )
    hpz = as_int(zero.get("zero_hpz_partition_size"))
    if hpz and hpz > 1:
        c.note(
            f"{name}: zero_optimization.zero_hpz_partition_size: {hpz} (ZeRO++ hierarchical partitions are not "
            "planned yet)"
        )
    for k in ("zero_quantized_weights", "zero_quantized_gradients"):
        if as_bool(zero.get(k)):
            c.note(f"{name}: zero_optimization.{k}: true (ZeRO++ quantized communication is not planned yet)")


def _guess(c: Collector, ref: str, source: str, key: str, path: Path | None) -> None:
    """A config that cannot be read: the stage its name gives, if it gives one."""
    why = "unreadable" if path is not None else "not found"
    m = re.search(r"(?:zero|ds_z|z)[_-]?([0-3])(?![0-9])", Path(ref).name.lower())
    if not m:
        c.note(f"{key} {ref} (file {why}: ZeRO stage not read; pass the JSON too)")
        return
    stage = int(m.group(1))
    c.set("zero_stage", stage, assumption(f"{source}: the file is {why}; its name says ZeRO-{stage}"), key)
    if "offload" in Path(ref).name.lower() and stage:
        value = "optimizer+params" if stage == 3 else "optimizer"
        c.set("offload", value, assumption(f"{source}: the file is {why}; its name says offload"), key)
    c.note(f"{key} {ref} (file {why}: only the ZeRO stage in its name is read; pass the JSON too)")


def read_file(
    c: Collector, data: dict, path: Path, *, flags: dict, words: list, script: Path, trainer: str, vars
) -> None:
    """planner.intake's dispatch of a DeepSpeed JSON (Framework.reads; `flags`: the command line's, `words`: its positional
    words after the file, `script`: the command's file): read as a run's DeepSpeed config, alone."""
    read(c, str(path), path.name, "deepspeed", path, alone=True)
