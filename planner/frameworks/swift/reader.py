"""ms-swift 4.6.0: a `swift sft|pt|rlhf` command line (or the config file it is given), its environment (NPROC_PER_NODE,
NNODES, CUDA_VISIBLE_DEVICES, MAX_PIXELS) and its presets (`--deepspeed zero3`, `--fsdp fsdp2`) -> request fields.
Defaults are ms-swift's, cited in the 4.6.0 wheel (swift/...): LoRA rank 8 on all-linear, gradient checkpointing on, the
ViT and aligner frozen, gradient accumulation to a batch of 16, max_length the model's context, bf16 from its config.
v3's `--train_type` is read as v4's `--tuner_type`.
"""

from __future__ import annotations

import math
from pathlib import Path

from planner.frameworks.accelerate import reader as accelerate
from planner.frameworks.deepspeed import reader as deepspeed
from planner.frameworks.hf import reader as hfargs
from planner.frameworks.swift import reader_rl as swiftrl
from planner.frameworks.swift.reader_rl import S, get
from planner.intake import loraargs, models, tasks, vocab
from planner.intake.collect import (
    PRESETS,
    SWIFT,
    Collector,
    accepted,
    as_bool,
    as_float,
    as_int,
    count_devices,
    default,
    one,
    parallel_sizes,
    pipeline_notes,
    processes_fit_devices,
    section,
    show,
)
from planner.intake.flags import Flag


def read(
    c: Collector,
    f: dict[str, Flag],
    env: dict[str, str],
    sub: str,
    where: str,
    near: Path,
    vars=None,
    *,
    launcher: bool = True,
) -> None:
    """`swift <sub>` with flags `f`, run with environment `env`; `where`: the command's place (`train.sh:5`);
    `launcher`: swift's own (NPROC_PER_NODE), not accelerate's or torchrun's (which the caller has read)."""
    for k in sorted(set(f) - accepted("swift") - {"train_type"} - pipeline_notes(c, f)):
        c.note(f"{f[k].source} (not an {SWIFT} argument: swift refuses it)")
    if "model" in f:
        models.read_model(c, show(one(f["model"].value)), f["model"].source, "--model", near)
    kind = swiftrl.read_kind(c, f, sub)
    world = _world(c, env, where) if launcher else int(c.get("gpus_per_node", 1)) * int(c.get("nodes", 1))
    lora = _tuner(c, f)
    _batch(c, f, kind, world)
    _sequence(c, f, kind)
    _training(c, f, kind)
    tasks.read_swift(c, f, env, where)
    _vision(c, f, env, where, lora)
    for key in ("deepspeed", "fsdp"):
        if key in f:
            ref = one(f[key].value)
            if key == "fsdp":
                _fsdp(c, ref, f[key].source, near, vars)
            else:
                deepspeed.read(c, ref, f[key].source, "--deepspeed", near, vars=vars)
    _chunked_loss(c, env, where)
    parallel_sizes(  # Ulysses (with ring attention past the heads: ms-swift's sequence_parallel); AutoTP
        c,
        {
            field: (f[k].value, f[k].source, "--" + k)
            for field, k in (
                ("sequence_parallel", "sequence_parallel_size"),
                ("tensor_parallel", "deepspeed_autotp_size"),
            )
            if k in f
        },
    )


def _chunked_loss(c: Collector, env: dict[str, str], where: str) -> None:
    """CELOSS_PARALLEL_SIZE: ms-swift chunks its sequence-parallel loss by that many tokens (swift/trainers/utils.py:
    178-182) -> --loss chunked, planned at ms-swift's examples' 2,048 (planner.estimate.recipe_terms.SWIFT_CE_CHUNK)."""
    n = as_int(env.get("CELOSS_PARALLEL_SIZE", "0"))
    if not n or n <= 0:
        return
    source = f"{where} CELOSS_PARALLEL_SIZE={env['CELOSS_PARALLEL_SIZE']}"
    c.set("loss", "chunked", f"{source} (ms-swift's chunked loss under sequence parallel)", "CELOSS_PARALLEL_SIZE")
    if n != 2048:
        c.note(f"{source} (planned with chunks of 2048 tokens, a chunk's fp32 log-softmax and gradient)")


def _world(c: Collector, env: dict[str, str], where: str) -> int:
    """Processes: NPROC_PER_NODE x NNODES under torchrun (swift/cli/main.py:30-35), else one."""
    if "NPROC_PER_NODE" in env:
        source = f"{where} NPROC_PER_NODE={show(env['NPROC_PER_NODE'])}"
        n = c.number("gpus_per_node", env["NPROC_PER_NODE"], source, "NPROC_PER_NODE") or 1
        processes_fit_devices(n, env, source)
    else:
        c.set("gpus_per_node", 1, f"{where} no NPROC_PER_NODE (one process: swift/cli/main.py:30-35)", "NPROC_PER_NODE")
        n = 1
        visible = count_devices(env.get("CUDA_VISIBLE_DEVICES", ""))
        if visible and visible > 1:
            c.note(
                f"{where} CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} without NPROC_PER_NODE (one process "
                f"splits the model's layers over {visible} GPUs, device_map model parallelism: not planned yet; "
                "planned on one GPU)"
            )
    nodes = (
        c.number("nodes", env["NNODES"], f"{where} NNODES={show(env['NNODES'])}", "NNODES") if "NNODES" in env else 1
    )
    return n * (nodes or 1)


def _tuner(c: Collector, f: dict[str, Flag]) -> bool:
    key = "tuner_type" if "tuner_type" in f or "train_type" not in f else "train_type"
    tuner, src = get(f, key, "lora", f"{S}base_args/base_args.py:121")
    if key == "train_type":
        src += " (ms-swift 3's name for --tuner_type)"
    if tuner == "full":
        c.set("lora_rank", 0, src, f"--{key}")
        return False
    if tuner not in ("lora", "lora_llm"):
        c.note(f"{src} (tuner {tuner} is not planned yet; planned as LoRA)")
    if tuner == "lora_llm":
        c.note(f"{src} (a fully trained ViT and aligner beside LoRA are not planned yet; planned as LoRA)")
    rank, rsrc = get(f, "lora_rank", 8, f"{S}tuner_args.py:133")
    c.number("lora_rank", rank, rsrc, "--lora_rank")
    targets, tsrc = get(f, "target_modules", "all-linear", f"{S}tuner_args.py:126")
    loraargs.lora_targets(c, f["target_modules"].value if "target_modules" in f else targets, tsrc, "--target_modules")
    dropout, dsrc = get(f, "lora_dropout", 0.05, f"{S}tuner_args.py:135")
    if as_float(dropout) is not None:
        c.set("lora_dropout", as_float(dropout), dsrc, "--lora_dropout")
    method, bits = (str(one(f[k].value)).lower() if k in f else None for k in ("quant_method", "quant_bits"))
    if method == "bnb" and bits == "4":
        qtype, qsrc = get(f, "bnb_4bit_quant_type", "nf4", f"{S}base_args/quant_args.py:40")
        c.set("quant", qtype if qtype in ("nf4", "fp4") else "nf4", f"{f['quant_bits'].source}; {qsrc}", "--quant_bits")
        nested = f.get("bnb_4bit_use_double_quant")  # quant_args.py:42: True
        if nested and not as_bool(one(nested.value)):
            c.set("quant_absmax", "fp32", nested.source, "--bnb_4bit_use_double_quant")
    elif method == "bnb" and bits == "8":  # model/register.py:83: load_in_8bit
        c.set("quant", "int8", f["quant_bits"].source, "--quant_bits")
    elif method:
        c.note(
            f"{f['quant_method'].source} ({method} {bits or ''}-bit quantization is not planned yet; planned in 16 "
            "bits)"
        )
    return True


def _batch(c: Collector, f: dict[str, Flag], kind: str, world: int) -> None:
    mb, src = get(f, "per_device_train_batch_size", 1, "swift/trainers/arguments.py:130")
    micro = c.number("micro_batch", mb, src, "--per_device_train_batch_size") or 1
    if "gradient_accumulation_steps" in f:
        g = f["gradient_accumulation_steps"]
        c.number("grad_accum", g.value, g.source, "--gradient_accumulation_steps")
    elif kind == "grpo":
        c.set(
            "grad_accum",
            1,
            default(SWIFT, f"{S}rlhf_args.py:528-531", "gradient_accumulation_steps 1 for GRPO"),
            "--gradient_accumulation_steps",
        )
    else:
        ga = max(1, math.ceil(16 / micro / world))
        c.set(
            "grad_accum",
            ga,
            default(
                SWIFT,
                "swift/trainers/arguments.py:289-292",
                f"gradient_accumulation_steps ceil(16 / {micro} per device / {world} processes) = {ga}",
            ),
            "--gradient_accumulation_steps",
        )


def _sequence(c: Collector, f: dict[str, Flag], kind: str) -> None:
    if "max_length" in f:
        value, src = f["max_length"].value, f["max_length"].source
    elif c.model is not None and models.context(c.model.config):
        value = models.context(c.model.config)
        src = default(SWIFT, f"{S}base_args/base_args.py:227-228", f"max_length: the model's context {value}")
    else:
        c.note(
            "max_length not given and the model's context is not known (ms-swift plans for the model's context: "
            "pass --seq-len)"
        )
        return
    field = {"dpo": "workload.max_length", "grpo": "workload.max_prompt_length"}.get(kind, "seq_len")
    c.number(
        field, value, src if kind != "grpo" else f"{src} (GRPO: the prompt's limit, truncated left)", "--max_length"
    )
    if kind == "grpo":
        swiftrl.read_grpo(c, f)


def _training(c: Collector, f: dict[str, Flag], kind: str) -> None:
    gc, src = get(f, "gradient_checkpointing", True, "swift/trainers/arguments.py:135")
    c.set("checkpointing", "full" if as_bool(gc) else "off", src, "--gradient_checkpointing")
    vit = f.get("vit_gradient_checkpointing")  # None follows --gradient_checkpointing (arguments.py:297-298)
    if as_bool(gc) and vit is not None and as_bool(vit.value) is False:
        c.set("vit_checkpointing", "off", vit.source, "--vit_gradient_checkpointing")
    cfg = c.model.config if c.model is not None else {}
    dtype, dsrc = get(f, "torch_dtype", cfg.get("torch_dtype") or "bfloat16", f"{S}base_args/model_args.py:120-125")
    weights = hfargs.dtype(dtype, c) or "bf16"
    c.fact("weights", weights, dsrc, "--torch_dtype")
    for key in ("bf16", "fp16"):
        if key in f and as_bool(f[key].value):
            c.fact("amp", key, f[key].source, f"--{key}")
    c.fact(
        "amp",
        "bf16" if weights == "bf16" else "fp16",
        f"{dsrc}; " + default(SWIFT, f"{S}base_args/model_args.py:130-142", "mixed precision follows torch_dtype"),
        "--bf16",
        weak=True,
    )
    for key in ("packing", "padding_free"):
        if key in f and as_bool(f[key].value):
            c.set("batching", "packed", f[key].source, f"--{key}")
    if "attn_impl" in f:
        mapped = vocab.attention(one(f["attn_impl"].value))
        if mapped:
            c.set("attention", mapped, f["attn_impl"].source, "--attn_impl")
        else:
            c.note(f"{f['attn_impl'].source} (this attention implementation is not planned yet; planned as sdpa)")
    if "use_liger_kernel" in f and as_bool(f["use_liger_kernel"].value):
        if kind == "sft":
            c.set("loss", "fused", f["use_liger_kernel"].source, "--use_liger_kernel")
        else:
            c.note(f"{f['use_liger_kernel'].source} (Liger kernels in RLHF are not planned yet)")
    opt, osrc = get(f, "optim", "adamw_torch_fused", "transformers 5.19 training_args.py:804-811")
    if vocab.optimizer(opt):
        c.set("optimizer", vocab.optimizer(opt), osrc, "--optim")
    else:
        c.note(f"{osrc} (this optimizer is not planned yet; planned as AdamW)")
    if "optimizer" in f:
        c.note(f"{f['optimizer'].source} (ms-swift's optimizer plugin is not planned yet; planned as AdamW)")


def _vision(c: Collector, f: dict[str, Flag], env: dict[str, str], where: str, lora: bool) -> None:
    if c.model is None or not models.has_vision(c.model.config):
        return
    vit, vsrc = get(f, "freeze_vit", True, f"{S}tuner_args.py:123")
    aligner, asrc = get(f, "freeze_aligner", True, f"{S}tuner_args.py:124")
    llm, lsrc = get(f, "freeze_llm", False, f"{S}tuner_args.py:122")
    if not lora:
        frozen, note = models.frozen_value(as_bool(vit), as_bool(aligner), as_bool(llm))
        c.fact("frozen", frozen, f"{vsrc}; {asrc}; {lsrc}", "--freeze_vit")
        if note:
            c.note(f"{asrc} ({note.replace('projector', 'aligner').replace('tower', 'ViT')})")
    per = models.pixels_per_token(c.model.config)
    pixels = as_int(env.get("MAX_PIXELS"))
    if per and pixels:
        c.set(
            "image_tokens",
            pixels // per,
            f"{where} MAX_PIXELS={pixels} (one image a row: {pixels} // {per} "
            "pixels a token, swift/model/models/qwen.py:758-770)",
            "MAX_PIXELS",
        )
    for key in ("VIDEO_MAX_PIXELS", "FPS_MAX_FRAMES"):
        if key in env:
            c.note(f"{where} {key}={env[key]} (video frames are not planned; rows planned with one image)")


def _fsdp(c: Collector, ref: object, source: str, near: Path, vars) -> None:
    """`--fsdp fsdp2` (swift/config/fsdp2.json), a path or a JSON string: HF's fsdp words and fsdp_config."""
    name = PRESETS / "swift_fsdp2.json" if str(ref) == "fsdp2" else ref
    cfg, _, path = deepspeed.load(str(name), near, "swift", vars)
    if path is not None:
        c.add_file(path)
    if not cfg:
        c.note(f"{source} (FSDP config not found: FSDP not read)")
        return
    tokens = tuple(str(cfg.get("fsdp", "full_shard")).split())
    accelerate.fsdp(c, section(cfg, "fsdp_config"), source, "--fsdp", tokens=tokens, version=(2, ""))


def release_hint(flags: dict[str, Flag]) -> tuple[str, str] | None:
    """("3", why) where the flags name ms-swift 3's --train_type and not 4.x's --tuner_type (planner.intake.releases)."""
    if "train_type" in flags and "tuner_type" not in flags:
        return "3", f"{flags['train_type'].source} (ms-swift 3's name; 4.x's is --tuner_type)"
    return None
