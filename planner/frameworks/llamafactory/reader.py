"""LLaMA-Factory 0.9.5: a `llamafactory-cli train` YAML (with its `key=value` overrides, the DeepSpeed JSON it names,
and the launcher's NPROC_PER_NODE / NNODES / CUDA_VISIBLE_DEVICES) -> request fields. Defaults are LF's, cited at
v0.9.5 (src/llamafactory/...): LoRA rank 8 on all linears, gradient checkpointing on, cutoff_len 2048, a VLM's tower
and projector frozen, image_max_pixels 768*768. LF upcasts trainable weights to fp32 (model/adapter.py:313-325), so
bf16 is mixed precision unless pure_bf16.
"""

from __future__ import annotations

from pathlib import Path

from planner.frameworks.accelerate import reader as accelerate
from planner.frameworks.deepspeed import reader as deepspeed
from planner.frameworks.hf import old_optim_default
from planner.intake import loraargs, models, tuners, vocab
from planner.intake.collect import (
    LF,
    Collector,
    accepted,
    as_bool,
    as_float,
    as_int,
    count_devices,
    default,
    pipeline_notes,
    processes_fit_devices,
    show,
)
from planner.intake.flags import Flag, from_mapping

H = "src/llamafactory/hparams/"
REFUSED = {  # key: what it runs, refused in one line (planner.intake.tuners)
    "use_galore": "GaLore's projected optimizer states",
    "use_apollo": "APOLLO's optimizer states",
    "use_badam": "BAdam's block-wise updates",
    "use_adam_mini": "Adam-mini's reduced states",
    "use_muon": "Muon's optimizer states",
    "use_llama_pro": "LLaMA-Pro's expanded blocks",
}
HF_ARGS = "transformers 5.6 training_args.py"
UNPLANNED = {  # key: why (memory-relevant, no memplan equivalent yet)
    "use_unsloth": "Unsloth's kernels",
    "fp8": "fp8 training",
    "use_dft_loss": "DFT's full fp32 logits",
    "use_eaft_loss": "EAFT's full fp32 logits",
    "use_asft_loss": "ASFT's reference model",
    "upcast_lmhead_output": "fp32 head output",
    "use_kt": "KTransformers",
    "moe_aux_loss_coef": "router logits",
}


def _get(f: dict[str, Flag], key: str, fallback: object, cite: str) -> tuple[object, str]:
    """(value, source) of a key, or LF's default with its citation."""
    if key in f:
        return f[key].value, f[key].source
    return fallback, default(LF, cite, f"{key} {fallback}")


def read(c: Collector, data: dict, path: Path, overrides: dict[str, Flag] | None = None, vars=None) -> None:
    f = from_mapping(data, path) | (overrides or {})
    c.add_file(path)
    for k in sorted(set(f) - accepted("llamafactory") - pipeline_notes(c, f)):
        c.note(f"{f[k].source} (not a {LF} key: LLaMA-Factory refuses it)")
    if "model_name_or_path" in f and f["model_name_or_path"].value not in (None, ""):
        models.read_model(
            c, show(f["model_name_or_path"].value), f["model_name_or_path"].source, "model_name_or_path", path.parent
        )
    else:
        c.note(f"{path.name}: no model_name_or_path (LLaMA-Factory requires one: pass --model)")
    for key, why in REFUSED.items():
        if key in f and as_bool(f[key].value):
            tuners.refuse(f[key].source, why)
    stage = _stage(c, f)
    lora = _method(c, f)
    for key, field, fallback, cite in (
        ("per_device_train_batch_size", "micro_batch", 8, f"{HF_ARGS}:782"),
        ("gradient_accumulation_steps", "grad_accum", 1, f"{HF_ARGS}:854"),
    ):
        value, src = _get(f, key, fallback, cite)
        c.number(field, value, src, key)
    if "eval_strategy" in f and str(f["eval_strategy"].value).lower() != "no":  # HF's Trainer evaluates
        value, src = _get(f, "per_device_eval_batch_size", 8, f"{HF_ARGS}:1111")
        c.number("eval_batch", value, src, "per_device_eval_batch_size")
    value, src = _get(f, "cutoff_len", 2048, f"{H}data_args.py:46")
    c.number("workload.max_length" if stage == "dpo" else "seq_len", value, src, "cutoff_len")
    _training(c, f, stage)
    _vision(c, f, lora)
    _sharding(c, f, path, vars)
    for key, why in UNPLANNED.items():
        if key in f and as_bool(f[key].value) is not False:
            c.note(f"{f[key].source} ({why} not planned yet)")


def _stage(c: Collector, f: dict[str, Flag]) -> str:
    stage, src = _get(f, "stage", "sft", f"{H}finetuning_args.py:460")
    stage = str(stage)
    if stage == "dpo":
        c.set("workload.kind", "dpo", src, "stage")
        loss = str(f["pref_loss"].value) if "pref_loss" in f else "sigmoid"
        if loss in ("orpo", "simpo"):
            c.set(
                "workload.precompute_ref_log_probs", True, f"{f['pref_loss'].source} (no reference model)", "pref_loss"
            )
        if "ref_model" in f:
            c.note(f"{f['ref_model'].source} (a separate reference model is not planned yet)")
    elif stage == "rm":  # not seq-cls: trl's AutoModelForCausalLMWithValueHead keeps lm_head and its fp32 logits
        # (llamafactory/model/loader.py:185-186; trl 0.24.0 trl/models/modeling_value_head.py:169-179)
        c.note(
            f"{src} (stage rm, a value head beside the vocabulary head over chosen and rejected rows, is not planned "
            "yet; planned as SFT)"
        )
    elif stage == "ppo":
        c.note(f"{src} (stage ppo is not planned yet)")
        c.fact(
            "refused",
            f"{src}: LLaMA-Factory's PPO is not planned yet, and its sampling under ZeRO-3 gathers the whole policy on "
            "every GPU (src/llamafactory/train/ppo/trainer.py:358 unwrap_model_for_generation, :348 at v0.8.3; trl "
            "0.24 models/utils.py:338-346): does the training step alone answer you? then give --workload sft",
            src,
            "stage",
        )
    elif stage not in ("sft", "pt"):
        c.note(f"{src} (stage {stage} is not planned yet; planned as SFT)")
    return stage


def _method(c: Collector, f: dict[str, Flag]) -> bool:
    kind, src = _get(f, "finetuning_type", "lora", f"{H}finetuning_args.py:464")
    if kind not in ("lora", "full"):
        tuners.tuner(src, kind)
    if kind != "lora":
        c.set("lora_rank", 0, src, "finetuning_type")
        if "quantization_bit" in f:
            c.note(f"{f['quantization_bit'].source} (LLaMA-Factory quantizes only with LoRA: not planned)")
        return False
    rank, rsrc = _get(f, "lora_rank", 8, f"{H}finetuning_args.py:77")
    c.number("lora_rank", rank, rsrc if "lora_rank" in f else f"{src}; {rsrc}", "lora_rank")
    target, tsrc = _get(f, "lora_target", "all", f"{H}finetuning_args.py:81")
    loraargs.lora_targets(c, target, tsrc, "lora_target")
    if "use_dora" in f and as_bool(f["use_dora"].value):  # finetuning_args.py:103
        c.set("lora_variant", "dora", f["use_dora"].source, "use_dora")
    if "additional_target" in f and f["additional_target"].value:  # model/adapter.py:241: modules_to_save
        tuners.modules_to_save(c, f["additional_target"].value, f["additional_target"].source, "additional_target")
    dropout, dsrc = _get(f, "lora_dropout", 0.0, f"{H}finetuning_args.py:73")
    if as_float(dropout) is not None:
        c.set("lora_dropout", as_float(dropout), dsrc, "lora_dropout")
    bits = as_int(f["quantization_bit"].value) if "quantization_bit" in f else None
    method = str(f["quantization_method"].value).lower() if "quantization_method" in f else "bnb"
    if bits == 4 and method == "bnb":
        qtype, qsrc = _get(f, "quantization_type", "nf4", f"{H}model_args.py:287")
        c.set(
            "quant",
            str(qtype) if qtype in ("nf4", "fp4") else "nf4",
            f"{f['quantization_bit'].source}; {qsrc}",
            "quantization_bit",
        )
        if "double_quantization" in f and not as_bool(f["double_quantization"].value):  # model_args.py:291: True
            c.set("quant_absmax", "fp32", f["double_quantization"].source, "double_quantization")
    elif bits == 8 and method == "bnb":  # model/model_utils/quantization.py:168-170
        c.set("quant", "int8", f["quantization_bit"].source, "quantization_bit")
    elif bits:
        c.note(
            f"{f['quantization_bit'].source} ({bits}-bit {method} quantization is not planned yet; planned in 16 bits)"
        )
    return True


def _training(c: Collector, f: dict[str, Flag], stage: str) -> None:
    off, src = _get(f, "disable_gradient_checkpointing", False, f"{H}model_args.py:145")
    if as_bool(off):
        c.set("checkpointing", "off", src, "disable_gradient_checkpointing")
    elif "use_unsloth_gc" in f and as_bool(f["use_unsloth_gc"].value):
        c.set("checkpointing", "offload", f["use_unsloth_gc"].source, "use_unsloth_gc")
    else:
        c.set(
            "checkpointing",
            "full",
            f"{src}: on unless disabled (src/llamafactory/model/model_utils/checkpointing.py:173-176)",
            "disable_gradient_checkpointing",
        )
    if "pure_bf16" in f and as_bool(f["pure_bf16"].value):
        c.set("precision", "bf16-pure", f["pure_bf16"].source, "pure_bf16")
    for key in ("bf16", "fp16"):
        if key in f and as_bool(f[key].value):
            c.fact("amp", key, f[key].source, key)
    c.fact("amp", "fp32", default(LF, f"{HF_ARGS}:879-885", "bf16 False, fp16 False"), "bf16", weak=True)
    attn, asrc = _get(f, "flash_attn", "auto", f"{H}model_args.py:117")
    if attn != "auto" and vocab.attention(attn):
        c.set("attention", vocab.attention(attn), asrc, "flash_attn")
    if "enable_liger_kernel" in f and as_bool(f["enable_liger_kernel"].value):
        if stage in ("sft", "pt"):
            c.set("loss", "fused", f["enable_liger_kernel"].source, "enable_liger_kernel")
        else:
            c.note(f"{f['enable_liger_kernel'].source} (Liger's kernels without its fused loss: not planned)")
    packing = as_bool(f["packing"].value) if "packing" in f else stage == "pt"
    neat = "neat_packing" in f and as_bool(f["neat_packing"].value)
    if packing or neat:
        src = f["packing"].source if "packing" in f else default(LF, f"{H}data_args.py:108", "packing for stage pt")
        c.set("batching", "packed", f["neat_packing"].source if neat else src, "packing")
    opt, osrc = _get(f, "optim", *(old_optim_default(f) or ("adamw_torch_fused", f"{HF_ARGS}:811-816")))
    if tuners.optimizer(osrc, opt) and vocab.optimizer(opt):
        c.set("optimizer", vocab.optimizer(opt), osrc, "optim")
    else:
        c.note(f"{osrc} (this optimizer is not planned yet; planned as AdamW)")


VISION_KEYS = ("freeze_vision_tower", "freeze_multi_modal_projector", "image_max_pixels", "video_max_pixels")


def _vision(c: Collector, f: dict[str, Flag], lora: bool) -> None:
    if not models.tower_known(c, f, VISION_KEYS):
        return
    tower, tsrc = _get(f, "freeze_vision_tower", True, f"{H}finetuning_args.py:527")
    if lora and "freeze_vision_tower" in f:
        why = (
            "LoRA's targets then take the tower's modules too: src/llamafactory/model/model_utils/visual.py:196-211, "
            "misc.py:40-41"
        )
        models.lora_tower(c, tower, tsrc, "freeze_vision_tower", why)
    proj, psrc = _get(f, "freeze_multi_modal_projector", True, f"{H}finetuning_args.py:531")
    llm, lsrc = _get(f, "freeze_language_model", False, f"{H}finetuning_args.py:535")
    if not lora:
        frozen, note = models.frozen_value(as_bool(tower), as_bool(proj), as_bool(llm))
        c.fact("frozen", frozen, f"{tsrc}; {psrc}; {lsrc}", "freeze_vision_tower")
        if note:
            c.note(f"{psrc} ({note})")
    pixels, src = _get(f, "image_max_pixels", 589824, f"{H}model_args.py:305")
    per = models.pixels_per_token(c.model.config)
    if per and as_int(pixels):
        _image(c, f, as_int(pixels), per, src)
    if "video_max_pixels" in f:
        c.note(f"{f['video_max_pixels'].source} (video frames are not planned; rows planned with one image)")


def _image(c: Collector, f: dict[str, Flag], pixels: int, per: int, src: str) -> None:
    """One image a row at image_max_pixels: its tokens where they fit the cutoff; over it, the cap is a bound, not a
    count (issue 47 item 5): the images' tokens are inserted before the row is cut at cutoff_len
    (src/llamafactory/data/processor/supervised.py:62 process_messages, then :73-78 infer_seqlen), so the tower runs
    on the image's patches and the text is cut after them (planned as --images 1 under the pixel bounds)."""
    tokens, seq = pixels // per, c.get("seq_len")
    why = f"{src} (one image a row: {pixels} // {per} pixels a token, src/llamafactory/data/mm_plugin.py:218-235)"
    if not isinstance(seq, int) or tokens <= seq:
        c.set("image_tokens", tokens, why, "image_max_pixels")
        return
    low, lsrc = _get(f, "image_min_pixels", 1024, f"{H}model_args.py:309")
    c.set("images", 1, f"{why}; over cutoff_len {seq}: a bound, the tower on its patches, the text cut", "image")
    c.set("max_pixels", pixels, src, "image_max_pixels")
    if as_int(low):
        c.set("min_pixels", as_int(low), lsrc, "image_min_pixels")


def _sharding(c: Collector, f: dict[str, Flag], path: Path, vars) -> None:
    if "deepspeed" in f and f["deepspeed"].value:
        deepspeed.read(c, f["deepspeed"].value, f["deepspeed"].source, "deepspeed", path, vars=vars)
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
        c.note(f"{where} llamafactory-cli (one process a visible GPU of the training host: pass --gpus-per-node)")
    if "NNODES" in env:
        c.number("nodes", env["NNODES"], f"{where} NNODES={show(env['NNODES'])}", "NNODES")
