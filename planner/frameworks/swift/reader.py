"""ms-swift 4.6.0: a `swift sft|pt|rlhf` command line (or the config file it is given), its environment (NPROC_PER_NODE,
NNODES, CUDA_VISIBLE_DEVICES, MAX_PIXELS) and its presets (`--deepspeed zero3`, `--fsdp fsdp2`) -> request fields.
Defaults are ms-swift's, cited in the 4.6.0 wheel (swift/...): LoRA rank 8 on all-linear, gradient checkpointing on, the
ViT and aligner frozen, gradient accumulation to a batch of 16, max_length the model's context, bf16 from its config.
v3's `--train_type` is read as v4's `--tuner_type`.
"""

from __future__ import annotations

import math
from pathlib import Path

from planner.frameworks import FRAMEWORKS
from planner.frameworks.accelerate import reader as accelerate
from planner.frameworks.deepspeed import reader as deepspeed
from planner.frameworks.hf import reader as hfargs
from planner.frameworks.hf import reader_attn as hf_attn
from planner.frameworks.hf import reader_optim as hf_optim
from planner.frameworks.swift import reader_2 as swift2
from planner.frameworks.swift import reader_3x as swift3x
from planner.frameworks.swift import reader_env as swiftenv
from planner.frameworks.swift import reader_freeze as swift_freeze
from planner.frameworks.swift import reader_keys as swift_keys
from planner.frameworks.swift import reader_media as media
from planner.frameworks.swift import reader_plugin, reader_video
from planner.frameworks.swift import reader_ppo as swift_ppo
from planner.frameworks.swift import reader_rl as swiftrl
from planner.frameworks.swift import reader_tuners as swift_tuners
from planner.frameworks.swift.keys import KEYS, TRAIN_TYPE_LINES, TUNER_RANK, S
from planner.frameworks.swift.reader_deleted import deleted
from planner.frameworks.swift.reader_optim import read_matrix_optimizer
from planner.frameworks.swift.reader_rl import get, look
from planner.intake import line_defaults, loraargs, modelconfig, models, releases, tasks, tuners, vocab
from planner.intake.collect import (
    PRESETS,
    SWIFT,
    Collector,
    as_bool,
    as_float,
    default,
    one,
    parallel_sizes,
    pipeline_notes,
    section,
    show,
)
from planner.intake.flags import Flag, from_mapping


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
    release = _release(c)
    hint = (show(one(f["model_type"].value)), f["model_type"].source) if "model_type" in f else None
    if release.name == "2":
        f = swift2.translate(c, f)
    f = swift_keys.aliased(f, release.name)
    fast3 = swift3x.fast_inference(f, release.name)  # 3.1.1-3.4.x GRPO's engine: its own placement words, read
    read3 = set(swift3x.OLD_ROLLOUT) if fast3 else set()
    swift_keys.note_unknown(c, f, release.name, {KEYS.key("lora", "3")} | read3 | pipeline_notes(c, f))
    m = KEYS.key("model")
    if m in f:
        models.read_model(c, show(one(f[m].value)), f[m].source, KEYS.flag("model"), near, hint)
    if release.name == "2":  # 2.x's --use_liger, by its model_type (reader_2.liger)
        f = swift2.liger(c, f, hint)
    kind = swiftrl.read_kind(c, f, sub)
    world = swiftenv.ray_world(c, f, sub) or (
        swiftenv.world(c, env, where, f.get(KEYS.key("zero_stage")), mp=not fast3)
        if launcher
        else int(c.get("gpus_per_node", 1)) * int(c.get("nodes", 1))
    )
    lora = _tuner(c, f, near)
    swift_tuners.unplanned_backends(c, f)  # LISA, unsloth: named, planned as their upper bound
    _batch(c, f, kind, world)
    _sequence(c, f, kind, near, swift3x.placement(c, f, env, release.name) if fast3 and kind == "grpo" else None)
    if kind == "gkd":
        swiftrl.read_gkd(c, f, near)
    _training(c, f, kind, near)
    if kind != "rm":  # a reward model's head is set by --rlhf_type rm over --task_type (reader_rl.read_rm)
        tasks.read_swift(c, f, env, where)
    media.vision(c, f, env, where, lora)
    # the trainer's own vLLM engine's images and videos a row: colocated, or 3.4.x's on GPUs of its own
    limit = media.limits(c, f, fast3 and swift3x.engine(f) == "vllm" and "vllm_server_host" not in f)
    gone = deleted(release, kind, f.get("truncation_strategy"))  # a row over --max_length deleted
    media.image(c, env, where, release, limit.get("image"), hint, f.get("max_pixels"), gone)
    reader_video.video(c, env, where, release, limit.get("video"))
    for field in ("zero_stage", "fsdp"):
        key = KEYS.key(field)
        if key in f:
            ref = one(f[key].value)
            if field == "fsdp":
                _fsdp(c, ref, f[key].source, near, vars)
            else:
                deepspeed.read(c, ref, f[key].source, KEYS.flag(field), near, vars=vars)
    swiftenv.chunked_loss(c, env, where)
    swiftenv.omni_talker(c, env, where)
    parallel_sizes(  # Ulysses (with ring attention past the heads: ms-swift's sequence_parallel); AutoTP
        c,
        {
            field: (f[KEYS.key(field)].value, f[KEYS.key(field)].source, KEYS.flag(field))
            for field in ("sequence_parallel", "tensor_parallel")
            if KEYS.key(field) in f
        },
    )
    swiftenv.sp_padded(c)  # a row's tokens padded to a multiple of the sequence-parallel ranks
    swiftrl.grpo_split_steps(c, kind)  # GRPO's micro-steps under sequence parallel


def _tuner(c: Collector, f: dict[str, Flag], near: Path) -> bool:
    row, old = KEYS["lora"], KEYS.key("lora", "3")
    key = old if old in f and row.key not in f else row.key
    tuner, src = get(f, key, row.default, row.cite)
    if key == old:
        src += f" (ms-swift 3's name for {KEYS.flag('lora')})"
    if tuner == "full":
        c.set("lora_rank", 0, src, f"--{key}")
        swift_freeze.read_freeze(c, f)  # --freeze_parameters_ratio 1 with the top layers trainable: freeze tuning
        return False
    if tuner == "llamapro":  # new blocks inserted and trained, the rest frozen: freeze tuning's terms
        c.set("lora_rank", 0, src, f"--{key}")
        swift_freeze.read_llamapro(c, f, src, f"--{key}")
        return False
    if tuner == "custom" and "external_plugins" in f:  # 3.x's tuner from a plugin file (reader_plugin)
        reader_plugin.read_custom(c, f, near, src, f"--{key}")
        _quant(c, f)
        return True
    if tuner == "lora_llm":  # LoRA on the language model, the ViT and aligner trained in full (reader_tuners)
        swift_tuners.read_lora_llm(c, f, src, f"--{key}")
        _quant(c, f)
        return True
    variant = str(tuner).strip().lower() if str(tuner).strip().lower() in TUNER_RANK else ""
    if tuner != "lora" and not variant:
        tuners.tuner(src, tuner)
    dora = f.get(KEYS.key("lora_variant"))  # PEFT's use_dora (pipelines/train/tuner.py:188)
    if dora and as_bool(one(dora.value)):
        c.set("lora_variant", "dora", dora.source, KEYS.flag("lora_variant"))
    saved = f.get(KEYS.key("lora_train_embeddings"))
    if saved:
        tuners.modules_to_save(c, saved.value, saved.source, KEYS.flag("lora_train_embeddings"))
    if variant:  # AdaLoRA, VeRA and the adapter read their own rank (and VeRA its dropout)
        swift_tuners.read(c, f, variant, src)
    if variant == "adapter":  # no targets or dropout: one adapter after each MLP (reader_tuners)
        _quant(c, f)
        return True
    if not variant:
        rank, rsrc = look(f, "lora_rank")
        c.number("lora_rank", rank, rsrc if key not in f else f"{rsrc}; {src}", KEYS.flag("lora_rank"))
    targets, tsrc = look(f, "lora_targets")
    given = f.get(KEYS.key("lora_targets"))
    loraargs.lora_targets(c, given.value if given else targets, tsrc, KEYS.flag("lora_targets"))
    dropout, dsrc = look(f, "lora_dropout")
    if variant not in ("vera", "boft") and as_float(dropout) is not None:  # BOFT: its own boft_dropout
        c.set("lora_dropout", as_float(dropout), dsrc, KEYS.flag("lora_dropout"))
    _quant(c, f)
    return True


def _quant(c: Collector, f: dict[str, Flag]) -> None:
    keys = (KEYS.key("quant_method"), KEYS.key("quant"))
    method, bits = (str(one(f[k].value)).lower() if k in f else None for k in keys)
    if method == "bnb" and bits == "4":
        qtype, qsrc = look(f, "quant_type")
        quant = qtype if qtype in ("nf4", "fp4") else "nf4"
        c.set("quant", quant, f"{f[keys[1]].source}; {qsrc}", KEYS.flag("quant"))
        nested = f.get(KEYS.key("quant_absmax"))  # quant_args.py:42: True
        if nested and not as_bool(one(nested.value)):
            c.set("quant_absmax", "fp32", nested.source, KEYS.flag("quant_absmax"))
    elif method == "bnb" and bits == "8":  # model/register.py:83: load_in_8bit
        c.set("quant", "int8", f[keys[1]].source, KEYS.flag("quant"))
    elif method == "hqq" and bits == "4":  # quant_args.py:69-71 (v3.10.3): HqqConfig(nbits=4), groups of 64
        c.set("quant", "hqq", f"{f[keys[0]].source}; {f[keys[1]].source}", KEYS.flag("quant"))
    elif method:
        c.note(
            f"{'; '.join(f[k].source for k in keys if k in f)} ({method} {bits or ''}-bit "
            "quantization is not planned yet; planned in 16 bits)"
        )


def _batch(c: Collector, f: dict[str, Flag], kind: str, world: int) -> None:
    mb, src = look(f, "micro_batch")
    micro = c.number("micro_batch", mb, src, KEYS.flag("micro_batch")) or 1
    ga_flag = KEYS.flag("grad_accum")
    if KEYS.key("grad_accum") in f:
        g = f[KEYS.key("grad_accum")]
        c.number("grad_accum", g.value, g.source, ga_flag)
    elif (line := _release(c)).defaults.get("grad_accum") is not None:  # 3.0-3.2.1: transformers' own 1
        d = line.defaults["grad_accum"]
        c.set("grad_accum", d.value, default(f"swift@{line.name}", d.source), ga_flag)
    elif kind == "grpo" and (line.first or ()) >= (3, 7):  # 1 for GRPO from v3.7.0 (rlhf_args.py:277-280); 3.4-3.6
        c.set(  # compute it as for every run (v3.4.1 trainers/arguments.py:93-95)
            "grad_accum",
            1,
            default(SWIFT, f"{S}rlhf_args.py:528-531", "gradient_accumulation_steps 1 for GRPO"),
            ga_flag,
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
            ga_flag,
        )


def _sequence(c: Collector, f: dict[str, Flag], kind: str, near=None, placed3: str | None = None) -> None:
    ml, flag = KEYS.key("seq_len"), KEYS.flag("seq_len")
    if ml in f:
        value, src = f[ml].value, f[ml].source
    elif c.model is not None and modelconfig.context(c.model.config):
        value = modelconfig.context(c.model.config)
        src = default(SWIFT, f"{S}base_args/base_args.py:227-228", f"max_length: the model's context {value}")
    else:
        c.note(
            "max_length not given and the model's context is not known (ms-swift plans for the model's context: "
            "pass --seq-len)"
        )
        return
    prompt = "workload.max_prompt_length"
    rows = "workload.max_length"
    field = {"dpo": rows, "kto": rows, "gkd": rows, "grpo": prompt, "ppo": prompt}.get(kind, "seq_len")
    c.number(field, value, src if field != prompt else f"{src} (the prompt's limit, truncated left)", flag)
    if ml not in f:  # the model's whole context: rows are rarely that long, the data decides (issue 47 item 6)
        c.fact("open_length", field, src, flag)
    if kind == "grpo":
        swiftrl.read_grpo(c, f, near, placed3)
    if kind == "ppo":
        swift_ppo.read_ppo(c, f, near)


def _training(c: Collector, f: dict[str, Flag], kind: str, near: Path) -> None:
    gc, src = (False, swift_ppo.NO_CHECKPOINTING) if kind == "ppo" else look(f, "checkpointing")
    c.set("checkpointing", "full" if as_bool(gc) else "off", src, KEYS.flag("checkpointing"))
    vit = f.get(KEYS.key("vit_checkpointing"))  # None follows --gradient_checkpointing (arguments.py:297-298)
    if as_bool(gc) and vit is not None and as_bool(vit.value) is False:
        c.set("vit_checkpointing", "off", vit.source, KEYS.flag("vit_checkpointing"))
    cfg = c.model.config if c.model is not None else {}
    dt = KEYS["precision"]
    dtype, dsrc = get(f, dt.key, cfg.get("torch_dtype") or "bfloat16", dt.cite)
    weights = hfargs.dtype(dtype, c) or "bf16"
    c.fact("weights", weights, dsrc, KEYS.flag("precision"))
    for key in ("bf16", "fp16"):
        if KEYS.key(key) in f and as_bool(f[KEYS.key(key)].value):
            c.fact("amp", key, f[KEYS.key(key)].source, KEYS.flag(key))
    c.fact(
        "amp",
        "bf16" if weights == "bf16" else "fp16",
        f"{dsrc}; " + default(SWIFT, f"{S}base_args/model_args.py:130-142", "mixed precision follows torch_dtype"),
        KEYS.flag("bf16"),
        weak=True,
    )
    for key in (KEYS.key("packing"), KEYS.key("padding_free")):
        if key in f and as_bool(f[key].value):
            c.set("batching", "packed", f[key].source, f"--{key}")
    attn = f.get(KEYS.key("attention"))
    if attn is None and (at := hf_attn.attention_at(c, "swift", near)) is not None:  # an older line's pin
        attn = Flag(KEYS.key("attention"), at[0], f"{NO_ATTN}; {at[1]}", KEYS.flag("attention"))
    if attn:
        mapped = vocab.attention(one(attn.value))
        if mapped:
            c.set("attention", mapped, attn.source, KEYS.flag("attention"))
        else:
            c.note(f"{attn.source} (this attention implementation is not planned yet; planned as sdpa)")
    liger = f.get(KEYS.key("loss"))
    if liger and as_bool(liger.value):
        if kind == "sft":
            if liger.raw.lstrip("-") == "use_liger":  # 3.0-3.2's own (reader_keys.ALIASES)
                swift3x.liger(c, liger)
            c.set("loss", "fused", liger.source, KEYS.flag("loss"))
        else:
            c.note(f"{liger.source} (Liger kernels in RLHF are not planned yet)")
    k = KEYS["optimizer"]  # unset: HF's default at a transformers pin beside the files, else the line's (3's pins)
    at = hf_optim.optimizer_at(c, "swift", True, near) or line_defaults.moved_default(c, "swift", "optimizer")
    opt, osrc = at if k.key not in f and at is not None else get(f, k.key, k.default, k.cite)
    opt = {"adamw": "adamw_torch", "adamw-fused": "adamw_torch_fused"}.get(str(opt), opt)  # a line's, in HF's words
    if tuners.optimizer(osrc, opt) and vocab.optimizer(opt):
        c.set("optimizer", vocab.optimizer(opt), osrc, KEYS.flag("optimizer"))
    else:
        c.note(f"{osrc} (this optimizer is not planned yet; planned as AdamW)")
    plugin = str(one(f["optimizer"].value)).lower() if "optimizer" in f else ""
    if read_matrix_optimizer(c, f, plugin):  # --use_galore, --optimizer galore / muon (reader_optim.py)
        return
    if plugin and plugin != "lorap" and tuners.optimizer(f["optimizer"].source, plugin):  # lorap: LoRA+, LoRA's memory
        c.note(f"{f['optimizer'].source} (ms-swift's optimizer plugin is not planned yet; planned as AdamW)")


# no attention flag: ms-swift passes none, from_pretrained chooses (v2.5.2 swift/llm/utils/model.py:1951-1955; v3.0.3
# swift/llm/model/utils.py:36-47, which still sets _flash_attn_2_enabled below transformers 4.36)
NO_ATTN = "no attention flag (ms-swift passes none: transformers' choice, v3.0.3 swift/llm/model/utils.py:36-47)"


def _release(c: Collector):
    """The ms-swift release line the reading found (planner.intake.releases), the newest where it found none."""
    return FRAMEWORKS["swift"].release(str(c.facts.get("release", ("",))[0] or ""))


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
    if as_bool(section(cfg, "fsdp_config").get("activation_cpu_offload")):  # v4.5.2 swift/trainers/arguments.py:269-271
        c.note(
            f"{source} (activation_cpu_offload: ms-swift's activations to host RAM, not planned: planned on the GPU)"
        )


# flags only ms-swift 2.x takes (v2.5.2 swift/llm/utils/argument.py:610-617 SftArguments; 3.0 renamed them): the key
# table's 2.x names of these rows, and the 2.x data flag (no row: memplan plans no dataset path)
SWIFT2_FLAGS = (
    *(KEYS.key(n, "2") for n in ("lora", "model", "lora_targets", "lora_dropout")),
    "custom_train_dataset_path",
)


def release_hint(flags: dict[str, Flag]) -> tuple[str, str] | tuple[str, str, tuple[str, ...]] | None:
    """The release the flags' names say (planner.intake.releases.by_flags): ("3", why, the lines taking it) for
    ms-swift 3's --train_type without 4.x's --tuner_type, read as 3.0-3.3 (the hungrier for images) with 3.4, 3.7, 3.9 and
    4 (4.0.x's deprecated alias: keys.TRAIN_TYPE_LINES) planned too; ("2", why) for a 2.x-only name."""
    old, new = KEYS.key("lora", "3"), KEYS.key("lora")
    if old in flags and new not in flags:
        lines, narrowed = swift3x.lines_taking(flags, TRAIN_TYPE_LINES)
        read_as = (
            "read as 3.0-3.3, the hungrier for images: their --max_length leaves the image's tokens out"
            if lines[0] == "3"
            else f"{narrowed}: only {', '.join(lines)} take {'them' if ', ' in narrowed else 'it'}, read as {lines[0]}"
        )
        why = (
            f"{flags[old].source} (ms-swift 3's name, kept by 4.0.x as an alias of --{new} and refused from 4.1.0; "
            f"{read_as}; a pin ms-swift==3.4 or later beside the script reads it as that release)"
        )
        if lines != TRAIN_TYPE_LINES and lines[0] == "3":
            why = f"{why[:-1]}; {narrowed}: only {', '.join(lines)} take {'them' if ', ' in narrowed else 'it'})"
        return lines[0], why, lines
    old2 = next((flags[k] for k in SWIFT2_FLAGS if k in flags), None)
    if old2 is not None and new not in flags:
        return "2", f"{old2.source} (an ms-swift 2.x name, v2.5.2 swift/llm/utils/argument.py:610-617)"
    return None


def read_cli(
    c: Collector, run, sub: str, flags: dict[str, Flag], data: dict | None, path: Path | None, *, launcher: bool
):
    """planner.intake's dispatch of a `swift sft|pt|rlhf` run, or of its entry script under another launcher (Tool.reads
    "cli"; `run`: planner.intake.launch.Run): the release a pin or its flags' names say, then the config file it is
    given (`data` from `path`) with its ENV section under the command's environment, and the flags over its keys;
    `launcher`: swift's own CLI started the processes (NPROC_PER_NODE), not a launcher planner.intake read."""
    mapping = from_mapping(data, path) if data else {}
    if path is not None and data is not None:  # the argument file, positional (4.5+) or --config's (3.10-4.0.x)
        c.add_file(path)
    by_flag = data is not None and any(w.text == "--config" for w in run.command.words)
    keys = flags | mapping if by_flag else mapping | flags  # --config's keys come after the command line's: they win
    releases.by_flags(c, "swift", run, config_lines(release_hint(keys), by_flag))
    env = run.command.env
    env = env | {str(k): str(v) for k, v in section(data, "ENV").items() if k not in env}
    read(c, keys, env, sub, run.where, run.command.path, run.command.vars, launcher=launcher)


# `swift sft --config x.yaml`: v3.10.0 .. v4.0.x turn the file's keys into flags appended after the command line's
# (v3.10.0 swift/cli/main.py prepare_config_args; argparse keeps the last), so the file's values win; v4.5.2's
# parse_yaml_args takes a first positional file instead, its keys before the command line's (main.py:38-70)
CONFIG_FLAG_LINES = ("3.9", "4")


def config_lines(hint: tuple | None, by_flag: bool) -> tuple | None:
    """release_hint's lines narrowed to those whose CLI takes --config FILE (CONFIG_FLAG_LINES), where the run gives
    one."""
    if not by_flag or hint is None or len(hint) < 3:
        return hint
    lines = tuple(x for x in hint[2] if x in CONFIG_FLAG_LINES) or hint[2]
    why = f"{hint[1][:-1]}; --config FILE: ms-swift 3.10-4.0.x, v3.10.0 swift/cli/main.py prepare_config_args)"
    return lines[0], why, lines


def read_file(
    c: Collector, data: dict, path: Path, *, flags: dict, words: list, script: Path, trainer: str, vars
) -> None:
    """planner.intake's dispatch of a ms-swift argument file (Framework.reads; `flags`: the command line's, `words`: its positional
    words after the file, `script`: the command's file): its ENV section and keys, with the flags over them."""
    env = {str(k): str(v) for k, v in section(data, "ENV").items()}
    keys = from_mapping({k: v for k, v in data.items() if k != "ENV"}, path) | flags
    read(c, keys, env, "rlhf" if "rlhf_type" in data else "sft", path.name, path, vars)
