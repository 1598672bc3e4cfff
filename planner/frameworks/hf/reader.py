"""transformers TrainingArguments and TRL names (SFTConfig, DPOConfig, GRPOConfig, ModelConfig), as a training
script's `--flags`, a TRL / HF YAML or JSON, or a Python script's literal keyword arguments -> request fields. The
trainer decides the defaults: a plain HF Trainer (`hf`: transformers 5.23's) or TRL's `sft`, `dpo`, `grpo` (trl 1.16's,
whose base config turns gradient checkpointing and bf16 on).
"""

from __future__ import annotations

from pathlib import Path

from planner.frameworks.hf import reader_optim as hf_optim
from planner.frameworks.hf.keys import ARGS, BASE
from planner.frameworks.hf.keys import KEYS as K
from planner.frameworks.hf.reader_launch import alone_note
from planner.frameworks.hf.reader_sharding import sharding
from planner.frameworks.runs import TRANSFORMERS_LOW_RANK
from planner.frameworks.trl import reader_gkd as gkdargs
from planner.frameworks.trl import reader_grpo as grpoargs
from planner.frameworks.trl import reader_kto as ktoargs
from planner.frameworks.trl import reader_vlmr1 as vlmr1
from planner.intake import line_defaults, loraargs, models, tuners, vocab
from planner.intake.collect import (
    HF,
    TRL,
    Collector,
    accepted,
    as_bool,
    default,
    known,
    one,
)
from planner.intake.flags import Flag, from_mapping

SEQ_KEYS = ("max_length", "max_seq_length", "model_max_length", "max_seq_len")
GRPO_KEYS = {
    "num_generations",
    "max_completion_length",
    "use_vllm",
    "vllm_mode",
    "reward_funcs",
    "beta",
    "steps_per_generation",
    "num_iterations",
    "vllm_gpu_memory_utilization",
}
TRL_KEYS = GRPO_KEYS | {
    "use_peft",
    "lora_r",
    "packing",
    "padding_free",
    "dataset_name",
    "max_prompt_length",
    "precompute_ref_log_probs",
    "lora_target_modules",
    "completion_only_loss",
}


def trainer_of(flags: dict[str, Flag], hint: str) -> str:
    """hf, sft, dpo, kto, gkd or grpo: from the command (`trl grpo`, a script named *grpo*) or the flags it takes."""
    text = hint.lower()
    if "gkd" in text or gkdargs.GKD_KEYS & set(flags):
        return "gkd"
    if "kto" in text or ktoargs.KTO_KEYS & set(flags):
        return "kto"
    if "grpo" in text or GRPO_KEYS & set(flags) - {"beta"}:
        return "grpo"
    if "dpo" in text or "precompute_ref_log_probs" in flags:
        return "dpo"
    if "sft" in text or "trl" in text or TRL_KEYS & set(flags):
        return "sft"
    return "hf"


def zeroes_dropout(framework: str) -> dict[str, str]:
    """The workloads whose trainer zeroes every dropout by default (Memory.zeroes_dropout; read at call time: the
    adapters import this reader)."""
    from planner.frameworks import FRAMEWORKS

    fw = FRAMEWORKS.get(framework)
    return fw.zeroes_dropout if fw is not None else {}


def read(
    c: Collector, flags: dict[str, Flag], near: Path, trainer: str, *, strict: bool = False, vars=None, why: str = ""
) -> None:
    """The flags into the reading; `strict`: a name neither transformers nor TRL takes is an unplanned line (a
    config file read by TRL's parser; a script's own flags are its business); `why`: where the trainer was told."""
    f = flags.get
    name = f("model_name_or_path") or f("model")
    if name is not None and known(name.value):
        models.read_model(c, str(one(name.value)), name.source, name.raw, near)
    elif name is not None:
        c.note(f"{name.source} (the model is not known from the script: pass --model)")
    else:
        c.note("no model_name_or_path in the configuration (pass --model)")
    if trainer in ("dpo", "grpo", "gkd", "kto"):
        c.set("workload.kind", trainer, f"{why or near.name} (a {trainer.upper()} trainer)", "trainer")
    for field in ("micro_batch", "grad_accum"):
        if f(K.key(field)):
            c.number(field, f(K.key(field)).value, f(K.key(field)).source, f(K.key(field)).raw)
    _checkpointing(c, flags, trainer)
    _evaluation(c, flags)
    _precision(c, flags)
    _sequence(c, flags, trainer)
    if trainer == "grpo":
        grpoargs.read_grpo(c, flags)
    if trainer == "gkd":
        gkdargs.read_gkd(c, flags, near)
    if trainer == "kto":
        ktoargs.read_kto(c, flags)
    loraargs.read_lora(c, flags, trl=trainer != "hf")
    loraargs.read_disable_dropout(c, f("disable_dropout"), zeroes_dropout(c.framework))
    _kernels(c, flags, trainer)
    sharding(c, flags, near, vars)
    if strict:
        own = {"gkd": gkdargs.CONFIG_FIELDS, "kto": ktoargs.CONFIG_FIELDS}.get(trainer, set())
        for k in sorted(set(flags) - accepted("hf") - own):
            c.note(f"{flags[k].source} (not a {HF} / {TRL} argument: the trainer refuses it)")
    defaults(c, trainer, near)


def _checkpointing(c: Collector, flags: dict[str, Flag], trainer: str) -> None:
    for key in ("activation_checkpointing", "gradient_checkpointing"):
        if key in flags:
            on = c.flag(flags[key].value, flags[key].source)
            if on is not None:
                c.set("checkpointing", "full" if on else "off", flags[key].source, flags[key].raw)
            return
    if "no_gradient_checkpointing" in flags:
        c.set("checkpointing", "off", flags["no_gradient_checkpointing"].source, "--no_gradient_checkpointing")


def _evaluation(c: Collector, flags: dict[str, Flag]) -> None:
    """A run that evaluates (eval_strategy other than "no", or do_eval) at per_device_eval_batch_size rows, HF's 8 by
    default (transformers/training_args.py:1128)."""
    strategy = flags.get("eval_strategy") or flags.get("evaluation_strategy")
    on = strategy if strategy and str(one(strategy.value)).lower() != "no" else None
    if on is None and "do_eval" in flags and c.flag(flags["do_eval"].value, flags["do_eval"].source):
        on = flags["do_eval"]
    if on is None:
        return
    size = flags.get("per_device_eval_batch_size")
    if size:
        c.number("eval_batch", size.value, size.source, size.raw)
    else:
        c.set(
            "eval_batch",
            8,
            default(HF, "transformers/training_args.py:1128", "per_device_eval_batch_size 8") + f" ({on.source})",
            "per_device_eval_batch_size",
        )
    steps = flags.get("eval_accumulation_steps")
    if steps and known(steps.value):
        c.note(
            f"{steps.source} (logits kept for compute_metrics are planned only with --eval-logits-steps: whether the "
            f"script passes compute_metrics is not read; give --eval-logits-steps {one(steps.value)} where it does)"
        )


def _precision(c: Collector, flags: dict[str, Flag]) -> None:
    for key in ("bf16", "fp16"):
        if key in flags and c.flag(flags[key].value, flags[key].source):
            c.fact("amp", key, flags[key].source, flags[key].raw)
    if "bf16" in flags and "fp16" not in flags and as_bool(flags["bf16"].value) is False:
        c.fact("amp", "fp32", flags["bf16"].source, flags["bf16"].raw)
    for key in ("dtype", "torch_dtype"):
        if key in flags and known(flags[key].value):
            weights = dtype(flags[key].value, c)
            if weights:
                c.fact("weights", weights, flags[key].source, flags[key].raw)
            return


def dtype(value: object, c: Collector) -> str | None:
    """bf16 / fp16 / fp32 of a torch dtype name (`bfloat16`, `torch.bfloat16`, `auto`: the checkpoint's own)."""
    text = str(one(value)).lower().removeprefix("torch.")
    if text == "auto" and c.model is not None:
        text = str(c.model.config.get("torch_dtype") or c.model.config.get("dtype") or "")
    return {
        "bfloat16": "bf16",
        "bf16": "bf16",
        "float16": "fp16",
        "fp16": "fp16",
        "half": "fp16",
        "float32": "fp32",
        "fp32": "fp32",
        "float": "fp32",
    }.get(text)


def _sequence(c: Collector, flags: dict[str, Flag], trainer: str) -> None:
    seq = next((flags[k] for k in SEQ_KEYS if k in flags), None)
    prompt = flags.get("max_prompt_length")
    if trainer in ("dpo", "gkd", "kto"):
        if seq:
            c.number("workload.max_length", seq.value, seq.source, seq.raw, minimum=2)
        if prompt:
            c.number("workload.max_prompt_length", prompt.value, prompt.source, prompt.raw)
        if "precompute_ref_log_probs" in flags and c.flag(
            flags["precompute_ref_log_probs"].value, flags["precompute_ref_log_probs"].source
        ):
            c.set(
                "workload.precompute_ref_log_probs",
                True,
                flags["precompute_ref_log_probs"].source,
                "precompute_ref_log_probs",
            )
    elif trainer == "grpo":
        if prompt:
            c.number("workload.max_prompt_length", prompt.value, prompt.source, prompt.raw)
    elif seq:
        c.number("seq_len", seq.value, seq.source, seq.raw)
    elif trainer == "hf":
        c.note(
            "no sequence length in the configuration (a Trainer's rows are as long as its data makes them: pass "
            "--seq-len, or --data with --tokenizer)"
        )


def _kernels(c: Collector, flags: dict[str, Flag], trainer: str) -> None:
    attn = flags.get("attn_implementation")
    if attn and known(attn.value):
        mapped = vocab.attention(one(attn.value))
        if mapped:
            c.set("attention", mapped, attn.source, attn.raw)
        else:
            c.note(f"{attn.source} (this attention implementation is not planned yet; planned as sdpa)")
    opt = flags.get("optim")
    name = str(one(opt.value)).strip().lower() if opt and known(opt.value) else ""
    if name.endswith("_layerwise") and vocab.optimizer(name.removesuffix("_layerwise")):  # trainer_optimizer.py:164
        c.set("optimizer_in_backward", True, opt.source, opt.raw)
        name = name.removesuffix("_layerwise")
    if name and tuners.optimizer(opt.source, name):
        mapped = vocab.optimizer(name)
        if mapped:
            c.set("optimizer", mapped, opt.source, opt.raw)
        else:
            c.note(f"{opt.source} (this optimizer is not planned yet; planned as AdamW)")
    args, mods = flags.get("optim_args"), flags.get("optim_target_modules")
    rank = tuners.optim_args(args.value).get("rank") if args and known(args.value) else None
    if args and known(args.value):  # optim_args proj= and proj_type= (trainer_optimizer.py:373, 398, 402)
        tuners.rmsprop_buffers(c, name, tuners.optim_args(args.value), args.source)
        tuners.apollo_projector(args.source, name, tuners.optim_args(args.value).get("proj"))
        if "proj_type" in tuners.optim_args(args.value):
            tuners.low_rank_projection(c, tuners.optim_args(args.value)["proj_type"], args.source, args.raw)
    tuners.low_rank_fields(  # trainer_optimizer.py:369-375, 398-405: rank in optim_args; optim_target_modules
        c, (rank, args.source, args.raw) if rank else None, (mods.value, mods.source, mods.raw) if mods else None
    )
    if c.get("optimizer") in TRANSFORMERS_LOW_RANK and mods is None:
        tuners.refuse_untargeted(opt.source, name)
    liger = flags.get("use_liger_kernel") or flags.get("use_liger")
    if liger and c.flag(liger.value, liger.source):
        if trainer in ("dpo", "grpo"):
            c.note(f"{liger.source} (Liger kernels in TRL's {trainer.upper()} trainer are not planned yet)")
        else:
            c.set("loss", "fused", liger.source, liger.raw)
    for key in ("packing", "padding_free"):
        if key in flags and c.flag(flags[key].value, flags[key].source):
            c.set("batching", "packed", flags[key].source, flags[key].raw)
    if "torch_compile" in flags and as_bool(flags["torch_compile"].value):
        c.note(f"{flags['torch_compile'].source} (torch.compile's memory effect is not planned yet)")
    frozen = flags.get("freeze_vision_modules")
    if frozen and as_bool(frozen.value):  # VLM-R1: requires_grad off on the tower and merger (Qwen-VL's `visual.`,
        # src/open_r1/trainer/grpo_trainer.py "Freeze vision modules"); settle applies it where the model has a tower
        c.fact("freeze_vision", True, frozen.source, frozen.raw)
        c.fact("frozen", "vision+projector", f"{frozen.source} (the tower and its merger)", frozen.raw)


def defaults(c: Collector, trainer: str, near: Path | None = None) -> None:
    """The trainer's defaults, where the configuration leaves a field out (the release's first, where the files
    show one; a default the release did not move is the newest's, its source restated as the line's at the end of
    the reading: line_defaults.restate)."""
    opt = K["optimizer"]
    pinned = hf_optim.optimizer_at(c, "trl", pinned=True, near=near) if trainer != "hf" else None
    if pinned is not None:  # a transformers pin beside a TRL line's files decides HF's optim default
        c.fill("optimizer", vocab.optimizer(pinned[0]), pinned[1], opt.key)
    line_defaults.release_defaults(c, trainer)
    for field in ("micro_batch", "grad_accum"):
        k = K[field]
        c.fill(field, k.default, default(HF, k.cite, f"{k.key} {k.default}"), k.key)
    gc = K["checkpointing"]
    if trainer == "hf":
        c.fill("checkpointing", "off", default(HF, gc.cite, f"{gc.key} {gc.default}"), gc.key)
        c.fact("amp", "fp32", default(HF, f"{ARGS}:874-880", "bf16 False, fp16 False"), K.key("bf16"), weak=True)
    else:
        c.fill(
            "checkpointing", "full", default(TRL, f"{BASE}:62", "gradient_checkpointing True"), "gradient_checkpointing"
        )
        c.fact("amp", "bf16", default(TRL, f"{BASE}:68,107-108", "bf16 (None: not fp16)"), "bf16", weak=True)
        c.fact("weights", "fp32", default(TRL, "trl/trainer/model_config.py:89", "dtype float32"), "dtype", weak=True)
    if trainer == "sft":
        c.fill("seq_len", 1024, default(TRL, "trl/trainer/sft_config.py:202", "max_length 1024"), "max_length")
    if trainer == "reward":
        c.fill("seq_len", 1024, default(TRL, "trl/trainer/reward_config.py:144", "max_length 1024"), "max_length")
    if trainer in ("dpo", "kto"):
        cite = "trl/trainer/dpo_config.py:195" if trainer == "dpo" else f"{ktoargs.C}:166"
        c.fill("workload.max_length", 1024, default(TRL, cite, "max_length 1024"), "max_length")
    c.fill("optimizer", "adamw-fused", default(HF, opt.cite, f"{opt.key} {opt.default}"), opt.key)


def read_forks(c: Collector, run, flags: dict[str, Flag], trainer: str, *, flags_only: bool) -> None:
    """After a launched run's reading (planner.intake.training; `flags_only`: no config file), what the GRPO forks that
    froze a TRL release run beyond it: planner.frameworks.trl.reader_vlmr1.read_run."""
    vlmr1.read_run(c, run, flags, trainer, flags_only=flags_only)


def read_file(
    c: Collector, data: dict, path: Path, *, flags: dict, words: list, script: Path, trainer: str, vars
) -> None:
    """planner.intake's dispatch of a TRL / HF argument file (Framework.reads; `flags`: the command line's, `words`: its positional
    words after the file, `script`: the command's file): its keys with the flags over them, strict (TRL's parser refuses a name it lacks)."""
    read(
        c,
        from_mapping(data, path) | flags,
        path,
        trainer,
        strict=True,
        vars=vars,
        why=f"{path.name}: {trainer} arguments",
    )
    if script == path:  # given alone: the launch, and so the processes, left open
        c.note(alone_note(path, trainer))
