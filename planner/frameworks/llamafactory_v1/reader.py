"""LLaMA-Factory 0.9.5's v1 YAML (USE_V1=1) -> request fields, as its v1 trainer runs it. Defaults and meanings are
read at the v0.9.5 tag (paths under src/llamafactory/v1/, the V1 prefix): the dataclasses of config/*.py, the model
engine, the plugins (peft, quantization, fsdp2, deepspeed, batching, kernels) and core/base_trainer.py. What it runs
that memplan does not plan is refused in one line where v1 itself refuses it or its memory is not planned, and named
in a `not planned` line otherwise."""

from __future__ import annotations

from pathlib import Path

from planner.errors import BadInput
from planner.frameworks.deepspeed import reader as deepspeed
from planner.frameworks.llamafactory_v1 import SOURCE, V1
from planner.intake import hydra, loraargs, models, tuners, vocab
from planner.intake.collect import ASK_GPUS, Collector, as_bool, as_int, default, is_default, show
from planner.intake.flags import Flag, dotted
from planner.model import catalog

# the dataclasses' keys (config/model_args.py, data_args.py, sample_args.py, training_args.py); any other stops v1's
# parser unless ALLOW_EXTRA_KEYS is set (config/arg_parser.py:37,52)
KEYS = {
    *("model", "template", "trust_remote_code", "flash_attn", "model_class", "init_config", "peft_config"),
    *("kernel_config", "quant_config", "train_dataset", "eval_dataset", "sample_backend", "max_new_tokens"),
    *("output_dir", "micro_batch_size", "global_batch_size", "cutoff_len", "learning_rate", "num_train_epochs"),
    *("max_steps", "max_grad_norm", "bf16", "batching_strategy", "batching_workers"),
    *("enable_activation_checkpointing", "dist_config", "optim_config", "lr_scheduler_config", "seed"),
    *("full_determinism", "resume_from_checkpoint", "save_steps", "save_epochs", "save_ckpt_as_hf"),
    *("save_total_limit", "logging_steps"),
}
ATTENTION = ("eager", "sdpa", "flash_attention_2")  # config/model_args.py:64-68: the values v1 takes
PACKED = ("padding_free", "dynamic_padding_free")  # plugins/trainer_plugins/batching.py:87-199: one row a micro-batch
BATCHING = ("normal", "dynamic_batching", *PACKED)


def read_file(
    c: Collector, data: dict, path: Path, *, flags: dict, words: list, script: Path, trainer: str, vars
) -> None:
    """planner.intake's dispatch of a v1 YAML (Framework.reads): the command line's key=value words over it."""
    read(c, data, path, flags | hydra.overrides(words, script), vars)
    if script == path:
        c.note(
            f"{path.name} alone: USE_V1=1 llamafactory-cli sft starts torchrun with one process a visible GPU "
            f"({V1}launcher.py:48-121: {ASK_GPUS}"
        )


# the plugin sections, each a mapping with a `name` (config/arg_utils.py:84-103 get_plugin_config raises without one)
SECTIONS = ("init_config", "peft_config", "kernel_config", "quant_config", "dist_config", "optim_config")


def read(c: Collector, data: dict, path: Path, overrides: dict[str, Flag], vars=None) -> None:
    for key in (*SECTIONS, "lr_scheduler_config"):
        if isinstance(data.get(key), dict) and "name" not in data[key]:
            raise BadInput(
                f"{path.name}: {key}: a v1 plugin section needs a name ({V1}config/arg_utils.py:84-103 stops without one)",
                "config",
            )
    f = dotted(data, path) | overrides
    c.add_file(path)
    for key in sorted({k.split(".")[0] for k in f} - KEYS):
        c.note(
            f"{f[key].source if key in f else key} (not a v1 key: its parser stops on it, {V1}config/arg_parser.py:52)"
        )
    _refused(f)
    if "model" in f and f["model"].value not in (None, ""):
        models.read_model(c, show(f["model"].value), f["model"].source, "model", path.parent)
    else:
        c.note(f"{path.name}: no model (v1's default Qwen/Qwen3-4B-Instruct-2507, {V1}config/model_args.py:24)")
    lora = _peft(c, f)
    _quant(c, f, lora)
    _batch(c, f)
    _training(c, f)
    _sharding(c, f, path, lora, vars)
    _kernels(c, f)


def _get(f: dict[str, Flag], key: str, fallback: object, cite: str) -> tuple[object, str]:
    if key in f:
        return f[key].value, f[key].source
    return fallback, default(SOURCE, f"{V1}{cite}", f"{key} {fallback}")


def _refused(f: dict[str, Flag]) -> None:
    """What v1 refuses itself, or runs in a way memplan does not plan, in one line each."""
    cls, src = _get(f, "model_class", "llm", "config/model_args.py:42")
    if str(cls) != "llm":  # config/arg_utils.py:39-44: cls a token classifier, other AutoModel
        tuners.refuse(src, f"model_class {cls} (AutoModelForTokenClassification or AutoModel under the v1 trainer)")
    for key in ("optim_config", "lr_scheduler_config"):
        name = next((k for k in f if (k == key or k.startswith(f"{key}.")) and f[k].value is not None), None)
        if name is not None:
            raise BadInput(
                f"{f[name].source}: v1 registers no {key.split('_')[0]} plugin, so its parser stops on it "
                f"({V1}plugins/trainer_plugins/optimizer.py:18-19, lr_scheduler.py:18-19): remove it",
                "config",
            )
    attn, asrc = _get(f, "flash_attn", "sdpa", "config/model_args.py:36")
    if str(attn) not in ATTENTION:
        raise BadInput(f"{asrc}: v1 takes eager, sdpa or flash_attention_2 ({V1}config/model_args.py:64-68)", "config")
    cp = as_int(_get(f, "dist_config.cp_size", 1, "")[0]) or 1
    if cp > 1:
        tuners.refuse(f["dist_config.cp_size"].source, "v1's Ulysses over cp_size ranks and its own loss plugin")


def _peft(c: Collector, f: dict[str, Flag]) -> bool:
    """peft_config: none, a full fine-tune (cast to fp32); lora, PEFT's LoRA (plugins/model_plugins/peft.py:151-187:
    r 8, dropout 0.05, target_modules all: every Linear but the output head, :80-91); freeze is refused."""
    name = f.get("peft_config.name")
    if name is None:
        c.set(
            "lora_rank", 0, default(SOURCE, f"{V1}core/model_engine.py:176-179", "no peft_config: full"), "peft_config"
        )
        return False
    if str(name.value) == "freeze":  # peft.py:190-281: the trained layers cast to fp32, no autocast to meet them
        tuners.refuse(name.source, "v1's freeze tuning (its trained layers in fp32 beside half ones, no autocast)")
    if str(name.value) != "lora":
        tuners.tuner(name.source, name.value)
    rank, rsrc = _get(f, "peft_config.r", 8, "plugins/model_plugins/peft.py:151-187")
    c.number("lora_rank", rank, rsrc, "peft_config.r")
    drop, dsrc = _get(f, "peft_config.lora_dropout", 0.05, "plugins/model_plugins/peft.py:151-187")
    c.set("lora_dropout", float(drop), dsrc, "peft_config.lora_dropout")
    target, tsrc = _get(f, "peft_config.target_modules", "all", "plugins/model_plugins/peft.py:80-91")
    loraargs.lora_targets(c, target, tsrc, "peft_config.target_modules")
    if as_bool(_get(f, "peft_config.use_dora", False, "")[0]):
        c.set("lora_variant", "dora", f["peft_config.use_dora"].source, "peft_config.use_dora")
    if "peft_config.modules_to_save" in f and f["peft_config.modules_to_save"].value:
        m = f["peft_config.modules_to_save"]
        tuners.modules_to_save(c, m.value, m.source, "peft_config.modules_to_save")
    return True


def _quant(c: Collector, f: dict[str, Flag], lora: bool) -> None:
    """quant_config bnb (or auto with quantization_bit): bitsandbytes 4-bit nf4 with double quantization by default,
    8-bit LLM.int8 (plugins/model_plugins/quantization.py:52-122; bnb's bit defaults to 4 at :89-91)."""
    name = f.get("quant_config.name")
    if name is None or name.value is None:
        return
    bits, bsrc = _get(f, "quant_config.quantization_bit", 4 if str(name.value) == "bnb" else None, "")
    if str(name.value) not in ("bnb", "auto") or as_int(bits) not in (4, 8):
        c.note(
            f"{name.source} (nothing quantized: v1 quantizes with bnb or auto at 4 or 8 bits, quantization.py:52-122)"
        )
        return
    if as_int(bits) == 8:
        c.set("quant", "int8", bsrc, "quant_config.quantization_bit")
        return
    kind, ksrc = _get(f, "quant_config.quantization_type", "nf4", "plugins/model_plugins/quantization.py:80-122")
    c.set("quant", "nf4" if str(kind) == "nf4" else "fp4", f"{bsrc}; {ksrc}", "quant_config.quantization_bit")
    double, dsrc = _get(f, "quant_config.double_quantization", True, "plugins/model_plugins/quantization.py:80-122")
    c.set("quant_absmax", "8bit" if as_bool(double) else "fp32", dsrc, "quant_config.double_quantization")


def _batch(c: Collector, f: dict[str, Flag]) -> None:
    """micro_batch_size rows a micro-step (or, packed, that many rows' budget of tokens in one row); global_batch_size
    over the data-parallel ranks decides the accumulation (core/utils/batching.py:91-102), one micro-step without it."""
    micro, msrc = _get(f, "micro_batch_size", 1, "config/training_args.py:28")
    m = c.number("micro_batch", micro, msrc, "micro_batch_size")
    seq, ssrc = _get(f, "cutoff_len", 2048, "config/training_args.py:36")
    c.number("seq_len", seq, ssrc, "cutoff_len")
    total = f.get("global_batch_size")
    if total is None or total.value is None:
        c.set(
            "grad_accum",
            1,
            default(SOURCE, f"{V1}core/utils/batching.py:91-102", "global_batch_size None: 1"),
            "global_batch_size",
        )
        return
    g = as_int(total.value) or 1

    def accum(request: dict) -> int:
        return max(1, g // max(1, (request.get("gpus_per_node") or 1) * (request.get("nodes") or 1)) // (m or 1))

    c.derived["grad_accum"] = (("gpus_per_node", "nodes"), accum)
    per_node, nodes = c.get("gpus_per_node"), c.get("nodes", 1)
    if isinstance(per_node, int) and isinstance(nodes, int):  # the launch's processes, read before the file
        world = {"gpus_per_node": per_node, "nodes": nodes}
        why = f"{total.source} / ({per_node * nodes} data-parallel ranks x micro {m})"
        c.number("grad_accum", accum(world), why, "global_batch_size")


def _training(c: Collector, f: dict[str, Flag]) -> None:
    on, src = _get(f, "enable_activation_checkpointing", True, "config/training_args.py:68")
    c.set("checkpointing", "full" if as_bool(on) else "off", src, "enable_activation_checkpointing")
    attn, asrc = _get(f, "flash_attn", "sdpa", "config/model_args.py:36")
    c.set("attention", vocab.attention(attn), asrc, "flash_attn")  # _refused took only ATTENTION's
    strategy, bsrc = _get(f, "batching_strategy", "normal", "config/training_args.py:60")
    if str(strategy) not in BATCHING:
        raise BadInput(f"{bsrc}: v1 takes {', '.join(BATCHING)} (config/training_args.py:60)", "config")
    if str(strategy) == "padding_free" and str(attn) != "flash_attention_2":
        raise BadInput(
            f"{bsrc}: v1 runs padding_free with flash_attn: flash_attention_2 alone ({V1}core/base_trainer.py:157-161)",
            "config",
        )
    if str(strategy) in PACKED:
        c.set(
            "batching", "packed", f"{bsrc} (the micro-batch's rows in one row: batching.py:87-199)", "batching_strategy"
        )
    else:
        c.set("batching", "padded", bsrc, "batching_strategy")
    if str(strategy) == "dynamic_batching":
        c.note(
            f"{bsrc} (a budget of micro_batch_size x cutoff_len padded tokens a micro-batch: planned as that many "
            "rows of cutoff_len, batching.py:55-84)"
        )
    c.set(
        "optimizer", "adamw", default(SOURCE, f"{V1}core/base_trainer.py:195-197", "torch.optim.AdamW"), "optim_config"
    )
    for key in ("sample_backend", "max_new_tokens"):  # samplers/cli_sampler.py:75-81: llamafactory-cli chat's
        if key in f:
            c.note(
                f"{f[key].source} (llamafactory-cli chat's, not read in training: {V1}samplers/cli_sampler.py:75-81)"
            )


def _sharding(c: Collector, f: dict[str, Flag], path: Path, lora: bool, vars) -> None:
    """dist_config: none (torch DDP over several ranks, core/base_trainer.py:174-183), fsdp2 or deepspeed
    (plugins/trainer_plugins/distributed/hub.py); and the precision that follows from it (no autocast in v1)."""
    name = f.get("dist_config.name")
    bf16, bsrc = _get(f, "bf16", True, "config/training_args.py:56")
    if name is None or name.value is None:
        _precision(c, lora, "", bsrc)
        return
    kind = str(name.value)
    if kind == "deepspeed":
        ref = f.get("dist_config.config_file")
        if ref is None:
            raise BadInput(
                f"{name.source}: v1's deepspeed needs dist_config.config_file (distributed/deepspeed.py:49-66)",
                "config",
            )
        deepspeed.read(c, ref.value, ref.source, "dist_config.config_file", path.parent, vars=vars)
        _precision(c, lora, "bf16" if as_bool(bf16) else "", f"{bsrc} (DeepSpeed's bf16: v1 deepspeed_utils.py:32-55)")
        return
    if kind != "fsdp2":
        raise BadInput(f"{name.source}: v1 shards with fsdp2 or deepspeed (distributed/hub.py)", "config")
    reshard, rsrc = _get(
        f, "dist_config.reshard_after_forward", True, "plugins/trainer_plugins/distributed/fsdp2.py:158"
    )
    c.set("fsdp", "full" if as_bool(reshard) else "grad-op", rsrc, "dist_config.reshard_after_forward")
    if as_bool(_get(f, "dist_config.offload_params", False, "")[0]):
        src = f"{f['dist_config.offload_params'].source} (FSDP2's CPUOffloadPolicy: fsdp2.py:158-161)"
        c.set("offload", "optimizer+params", src, "dist_config.offload_params")
    if (as_int(_get(f, "dist_config.mp_replicate_size", 1, "")[0]) or 1) > 1:
        c.note(
            f"{f['dist_config.mp_replicate_size'].source} (replicated shard groups are not planned: planned sharded "
            "over every rank)"
        )
    init, isrc = _get(f, "init_config.name", "init_on_default", "core/model_engine.py:173")
    if str(init) == "init_on_default":  # from_pretrained(device_map=its GPU), then fully_shard (fsdp2.py:323-369)
        why = f"{isrc} (each rank loads the whole model onto its GPU before fully_shard: core/model_engine.py:115-122)"
        c.set("fsdp_load", "whole", why, "init_config.name")
    elif str(init) in ("init_on_rank0", "init_on_meta"):  # rank 0's host or the meta device, then the shards
        c.set("fsdp_load", "sharded", f"{isrc} (shards loaded: plugins/trainer_plugins/distributed/fsdp2.py:326-360)",
              "init_config.name")  # fmt: skip
    mixed = f"{bsrc} (FSDP2's MixedPrecisionPolicy bf16 over fp32 shards: fsdp2.py:176-188)"
    _precision(c, lora, "bf16" if as_bool(bf16) else "", mixed)


def _precision(c: Collector, lora: bool, mixed: str, source: str) -> None:
    """No autocast in v1: a full fine-tune cast to fp32 (core/model_engine.py:176-179) trains in fp32 unless FSDP2's
    or DeepSpeed's bf16 (`mixed`); LoRA's base stays in the checkpoint's dtype (dtype auto, :164-171), its adapters
    in PEFT's fp32."""
    if mixed:
        c.set("precision", mixed, source, "bf16")
        return
    said = f"{source.split(' (')[0]}; " if not is_default(source) else ""  # the file's bf16: false under sharding
    if lora:
        why = default(SOURCE, f"{V1}core/model_engine.py:164-171", "the base in its checkpoint's dtype, no autocast")
        c.set("precision", "bf16-pure", said + why, "bf16")
    else:
        why = default(SOURCE, f"{V1}core/model_engine.py:176-179", "model.to(torch.float32), no autocast")
        c.set("precision", "fp32", said + why, "bf16")


def _kernels(c: Collector, f: dict[str, Flag]) -> None:
    """kernel_config: auto applies the kernels registered for the device, on CUDA its Triton MoE experts alone
    (plugins/model_plugins/kernels/interface.py:113-140, ops/mlp/cuda_fused_moe.py:332-366); liger_kernel Liger's
    RoPE, RMSNorm, SwiGLU and cross-entropy on the Qwen3 families, never its fused linear cross-entropy in training
    (liger_kernel_ops.py:33-41, 138-141)."""
    name = f.get("kernel_config.name")
    if name is None or name.value is None:
        return
    if str(name.value) == "liger_kernel":
        c.note(
            f"{name.source} (Liger's RoPE, RMSNorm, SwiGLU and cross-entropy kernels are not planned: planned as "
            "transformers' and torch's; the fp32 logits stay, liger_kernel_ops.py:138-141)"
        )
    elif _moe(c):  # a dense model runs unchanged
        c.note(
            f"{name.source} (v1's Triton grouped-GEMM experts for Mixtral, Qwen3-MoE and Qwen3.5-MoE are not "
            "planned: planned as transformers' experts, cuda_fused_moe.py:332-366)"
        )


def _moe(c: Collector) -> bool:
    """Whether the reading's model has routed experts (a model memplan cannot load: its own check says so)."""
    try:
        return c.model is not None and catalog.load_model(c.model.ref).text.moe is not None
    except BadInput:
        return False
