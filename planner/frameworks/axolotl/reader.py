"""axolotl 0.19.0: a config YAML (with the DeepSpeed JSON it names) -> request fields. Defaults are axolotl's, cited
in the 0.19.0 wheel (axolotl/...): micro_batch_size 1, sequence_len 512, gradient checkpointing off, bf16 "auto", and
the model loaded in that dtype (utils/config/__init__.py:199-203), so a full fine-tune without DeepSpeed or FSDP
keeps no fp32 master weights. Unknown keys, which axolotl drops silently, are unplanned lines here.
"""

from __future__ import annotations

from pathlib import Path

from planner.frameworks.accelerate import reader as accelerate
from planner.frameworks.deepspeed import reader as deepspeed
from planner.frameworks.trl import reader_grpo as grpoargs
from planner.intake import loraargs, models, tuners, vocab
from planner.intake.collect import (
    AXOLOTL,
    Collector,
    accepted,
    as_bool,
    as_float,
    as_int,
    default,
    parallel_sizes,
    pipeline_notes,
    show,
)
from planner.intake.flags import Flag, from_mapping

A = "axolotl/utils/schemas/"
RL = {"dpo": "dpo", "ipo": "dpo", "orpo": "dpo", "simpo": "dpo", "grpo": "grpo"}
UNPLANNED = {
    "tiled_mlp": "ALST's tiled MLP",
    "fp8": "fp8 training",
    "torch_compile": "torch.compile's memory effect",
    "layer_offloading": "layer offloading",
    "relora": "ReLoRA",
    "unfrozen_parameters": "partial freezing",
    "model_quantization_config": "a quantized checkpoint's loading",
    "qat": "quantization-aware training",
    "dp_shard_size": "a data-parallel shard group",
    "lora_on_cpu": "LoRA weights on the CPU",
}


def _get(f: dict[str, Flag], key: str, fallback: object, cite: str) -> tuple[object, str]:
    if key in f and f[key].value is not None:
        return f[key].value, f[key].source
    return fallback, default(AXOLOTL, cite, f"{key} {fallback}")


def read(c: Collector, data: dict, path: Path, vars=None) -> None:
    f = from_mapping(data, path)
    c.add_file(path)
    for k in sorted(set(f) - accepted("axolotl") - pipeline_notes(c, f)):
        c.note(f"{f[k].source} (not an {AXOLOTL} key: axolotl drops it silently)")
    if "base_model" in f and f["base_model"].value not in (None, ""):
        models.read_model(c, show(f["base_model"].value), f["base_model"].source, "base_model", path.parent)
    micro, msrc = _get(f, "micro_batch_size", 1, f"{A}training.py:77")
    mb = c.number("micro_batch", micro, msrc, "micro_batch_size") or 1
    if "gradient_accumulation_steps" not in f and as_int(data.get("batch_size")):
        c.number(
            "grad_accum",
            as_int(data["batch_size"]) // mb,
            f"{f['batch_size'].source} // micro_batch_size (axolotl/utils/config/__init__.py:209)",
            "batch_size",
        )
    else:
        ga, gsrc = _get(f, "gradient_accumulation_steps", 1, f"{A}training.py:71")
        c.number("grad_accum", ga, gsrc, "gradient_accumulation_steps")
    kind = _rl(c, f)
    seq, ssrc = _get(f, "sequence_len", 512, f"{A}config.py:671")
    if kind == "sft":
        c.number("seq_len", seq, ssrc, "sequence_len")
    elif kind == "dpo":
        c.number("workload.max_length", seq, f"{ssrc} (axolotl/core/builders/base.py:690-691)", "sequence_len")
    _adapter(c, f)
    _training(c, f)
    _sharding(c, f, path, vars)
    _parallel(c, f)
    for key, why in UNPLANNED.items():
        if key in f and _on(f[key].value):
            c.note(f"{f[key].source} ({why} is not planned yet)")


def _parallel(c: Collector, f: dict[str, Flag]) -> None:
    """context_parallel_size (ring-flash-attn's ring attention; sequence_parallel_degree is its deprecated name,
    utils/schemas/config.py) and tensor_parallel_size (DeepSpeed AutoTP)."""
    cp = next((k for k in ("context_parallel_size", "sequence_parallel_degree") if k in f), None)
    sizes = {"context_parallel": (f[cp].value, f[cp].source, cp)} if cp else {}
    if "tensor_parallel_size" in f:
        sizes["tensor_parallel"] = (
            f["tensor_parallel_size"].value,
            f["tensor_parallel_size"].source,
            "tensor_parallel_size",
        )
    parallel_sizes(c, sizes)


def _on(value: object) -> bool:
    """A setting that does something: true, a size above 1, a non-empty name or section."""
    if isinstance(value, bool) or value is None:
        return bool(value)
    return value > 1 if isinstance(value, (int, float)) else bool(value)


def _rl(c: Collector, f: dict[str, Flag]) -> str:
    if "rl" not in f or not f["rl"].value:
        return "sft"
    rl = str(f["rl"].value).lower()
    kind = RL.get(rl)
    if kind is None:
        c.note(f"{f['rl'].source} ({rl} is not planned yet; planned as SFT)")
        return "sft"
    c.set("workload.kind", kind, f["rl"].source, "rl")
    if rl in ("orpo", "simpo"):
        c.set("workload.precompute_ref_log_probs", True, f"{f['rl'].source} (no reference model)", "rl")
    trl = f["trl"].value if "trl" in f and isinstance(f["trl"].value, dict) else {}
    if kind == "grpo":
        sub = {k: Flag(k, v, f"{f['trl'].source.split(':')[0]}: trl.{k}: {v}", f"trl.{k}") for k, v in trl.items()}
        grpoargs.read_grpo(c, sub)
    return kind


def _adapter(c: Collector, f: dict[str, Flag]) -> None:
    adapter = str(f["adapter"].value).lower() if "adapter" in f and f["adapter"].value else ""
    if adapter not in ("lora", "qlora"):
        c.set(
            "lora_rank",
            0,
            f["adapter"].source
            if "adapter" in f
            else default(AXOLOTL, f"{A}peft.py:41", "adapter None: full fine-tuning"),
            "adapter",
        )
        if adapter:
            tuners.tuner(f["adapter"].source, adapter)
        return
    if "lora_r" in f and f["lora_r"].value is not None:
        c.number("lora_rank", f["lora_r"].value, f["lora_r"].source, "lora_r")
    else:
        c.note(f"{f['adapter'].source} without lora_r (axolotl has no default rank: lora_rank not read)")
    if "lora_target_modules" in f and f["lora_target_modules"].value:
        loraargs.lora_targets(c, f["lora_target_modules"].value, f["lora_target_modules"].source, "lora_target_modules")
    if "lora_target_linear" in f and as_bool(f["lora_target_linear"].value):
        c.set("lora_targets", "all-linear", f["lora_target_linear"].source, "lora_target_linear")
    if "peft_use_dora" in f and as_bool(f["peft_use_dora"].value):  # peft.py:89
        c.set("lora_variant", "dora", f["peft_use_dora"].source, "peft_use_dora")
    if "lora_modules_to_save" in f and f["lora_modules_to_save"].value:  # peft.py:62
        save = f["lora_modules_to_save"]
        tuners.modules_to_save(c, save.value, save.source, "lora_modules_to_save")
    drop, dsrc = _get(f, "lora_dropout", 0.0, f"{A}peft.py:80")
    if as_float(drop) is not None:
        c.set("lora_dropout", as_float(drop), dsrc, "lora_dropout")
    if "load_in_4bit" in f and as_bool(f["load_in_4bit"].value):
        c.set("quant", "nf4", f"{f['load_in_4bit'].source} (nf4: axolotl/loaders/model.py:808)", "load_in_4bit")
        kwargs = f["bnb_config_kwargs"].value if "bnb_config_kwargs" in f else None  # :807: double quant on
        if isinstance(kwargs, dict) and kwargs.get("bnb_4bit_use_double_quant") is False:
            c.set("quant_absmax", "fp32", f["bnb_config_kwargs"].source, "bnb_config_kwargs")
    if "load_in_8bit" in f and as_bool(f["load_in_8bit"].value):
        c.set("quant", "int8", f"{f['load_in_8bit'].source} (bitsandbytes LLM.int8)", "load_in_8bit")


def _training(c: Collector, f: dict[str, Flag]) -> None:
    gc, gsrc = _get(f, "gradient_checkpointing", False, f"{A}config.py:606")
    offload = f["activation_offloading"].value if "activation_offloading" in f else None
    if str(gc).startswith("offload") or (offload and as_bool(gc) is not False):
        src = f["activation_offloading"].source if offload else gsrc
        c.set("checkpointing", "offload", src, "activation_offloading" if offload else "gradient_checkpointing")
        if any("disk" in str(x) for x in (gc, offload)):
            c.note(f"{src} (offloading to disk: planned as offloading to host RAM)")
    else:
        c.set("checkpointing", "full" if as_bool(gc) else "off", gsrc, "gradient_checkpointing")
    bf16, bsrc = _get(f, "bf16", "auto", f"{A}config.py:561")
    fp16 = "fp16" in f and as_bool(f["fp16"].value)
    amp = "bf16" if bf16 == "auto" or as_bool(bf16) else "fp16" if fp16 else "fp32"
    src = f"{bsrc} (auto: bf16 where the GPU has it)" if bf16 == "auto" else bsrc if amp != "fp16" else f["fp16"].source
    c.fact("amp", amp, src, "bf16" if amp != "fp16" else "fp16")
    c.fact("weights", amp, f"{src}; the model loads in it (axolotl/utils/config/__init__.py:199-203)", "bf16")
    _attention(c, f)
    if "sample_packing" in f and as_bool(f["sample_packing"].value):
        c.set("batching", "packed", f["sample_packing"].source, "sample_packing")
    opt, osrc = _get(f, "optimizer", "adamw_torch_fused", f"{A}training.py:122")
    if tuners.optimizer(osrc, opt) and vocab.optimizer(opt):
        c.set("optimizer", vocab.optimizer(opt), osrc, "optimizer")
    else:
        c.note(f"{osrc} (this optimizer is not planned yet; planned as AdamW)")
    plugins = show(f["plugins"].value) if "plugins" in f else ""
    if "liger_fused_linear_cross_entropy" in f and as_bool(f["liger_fused_linear_cross_entropy"].value):
        c.set("loss", "fused", f["liger_fused_linear_cross_entropy"].source, "liger_fused_linear_cross_entropy")
    elif "CutCrossEntropyPlugin" in plugins and as_bool(
        f["cut_cross_entropy"].value if "cut_cross_entropy" in f else True
    ):
        c.set(
            "loss",
            "fused",
            f"{f['plugins'].source} (Cut Cross-Entropy, on once listed: axolotl/integrations/"
            "cut_cross_entropy/args.py:33; no full logits, planned as memplan's fused loss)",
            "plugins",
        )
    elif "chunked_cross_entropy" in f and as_bool(f["chunked_cross_entropy"].value):
        c.set("loss", "chunked", f["chunked_cross_entropy"].source, "chunked_cross_entropy")


def _attention(c: Collector, f: dict[str, Flag]) -> None:
    legacy = {"flash_attention": "flash", "sdp_attention": "sdpa", "eager_attention": "eager"}
    for key, value in legacy.items():
        if key in f and as_bool(f[key].value):
            c.set("attention", value, f[key].source, key)
    if "attn_implementation" in f and f["attn_implementation"].value:
        mapped = vocab.attention(f["attn_implementation"].value)
        if mapped:
            c.set("attention", mapped, f["attn_implementation"].source, "attn_implementation")
        else:
            c.note(
                f"{f['attn_implementation'].source} (this attention implementation is not planned yet; planned as sdpa)"
            )


def _sharding(c: Collector, f: dict[str, Flag], path: Path, vars) -> None:
    if "deepspeed" in f and f["deepspeed"].value:
        deepspeed.read(c, f["deepspeed"].value, f["deepspeed"].source, "deepspeed", path, vars=vars)
    cfg = f["fsdp_config"].value if "fsdp_config" in f and isinstance(f["fsdp_config"].value, dict) else None
    words = f["fsdp"].value if "fsdp" in f and f["fsdp"].value else None
    if cfg is None and not words:
        return
    spec = dict(cfg or {})
    if "fsdp_version" in f and f["fsdp_version"].value:
        spec["version"] = f["fsdp_version"].value
    src = f["fsdp_config"].source if cfg is not None else f["fsdp"].source
    tokens = tuple(str(w) for w in (words if isinstance(words, list) else str(words or "").split()))
    accelerate.fsdp(
        c,
        spec,
        src,
        "fsdp_config",
        tokens=tokens,
        version=(1, default(AXOLOTL, f"{A}validation.py:1215-1233", "fsdp_version 1 with fsdp_config")),
    )
