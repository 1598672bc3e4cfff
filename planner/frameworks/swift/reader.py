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
from planner.frameworks.swift import reader_2 as swift2
from planner.frameworks.swift import reader_rl as swiftrl
from planner.frameworks.swift.keys import KEYS, S
from planner.frameworks.swift.reader_rl import get, look
from planner.intake import loraargs, models, releases, tasks, tuners, vocab
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
from planner.intake.flags import Flag, from_mapping

QWEN_VL_UTILS_MAX_PIXELS = 16384 * 28 * 28


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
    for k in sorted(set(f) - accepted("swift") - {KEYS.key("lora", "3")} - pipeline_notes(c, f)):
        c.note(f"{f[k].source} (not an {SWIFT} argument: swift refuses it)")
    m = KEYS.key("model")
    if m in f:
        models.read_model(c, show(one(f[m].value)), f[m].source, KEYS.flag("model"), near, hint)
    kind = swiftrl.read_kind(c, f, sub)
    world = (
        _world(c, env, where, f.get(KEYS.key("zero_stage")))
        if launcher
        else int(c.get("gpus_per_node", 1)) * int(c.get("nodes", 1))
    )
    lora = _tuner(c, f)
    _batch(c, f, kind, world)
    _sequence(c, f, kind)
    if kind == "gkd":
        swiftrl.read_gkd(c, f, near)
    _training(c, f, kind)
    tasks.read_swift(c, f, env, where)
    _vision(c, f, env, where, lora)
    _image(c, env, where, release)
    for field in ("zero_stage", "fsdp"):
        key = KEYS.key(field)
        if key in f:
            ref = one(f[key].value)
            if field == "fsdp":
                _fsdp(c, ref, f[key].source, near, vars)
            else:
                deepspeed.read(c, ref, f[key].source, KEYS.flag(field), near, vars=vars)
    _chunked_loss(c, env, where)
    parallel_sizes(  # Ulysses (with ring attention past the heads: ms-swift's sequence_parallel); AutoTP
        c,
        {
            field: (f[KEYS.key(field)].value, f[KEYS.key(field)].source, KEYS.flag(field))
            for field in ("sequence_parallel", "tensor_parallel")
            if KEYS.key(field) in f
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


# ms-swift refuses --deepspeed where a process spreads the model over several GPUs (is_mp): "DeepSpeed is not
# compatible with MP" at every 2.x release (v2.0.0 swift/llm/utils/argument.py:423, v2.6.1 :1111-1115), "with
# `device_map`" in 3.x (v3.4.0 swift/llm/argument/train_args.py:181-182) and 4.6.0 (swift/arguments/sft_args.py:255)
DS_NOT_MP = "v2.6.1 swift/llm/utils/argument.py:1111-1115; v3.4.0 swift/llm/argument/train_args.py:181-182"


def _world(c: Collector, env: dict[str, str], where: str, ds: Flag | None = None) -> int:
    """Processes: NPROC_PER_NODE x NNODES under torchrun (swift/cli/main.py:30-35), else one; with more visible GPUs
    than processes each process spreads the model over its share (_device_map), except under --deepspeed (`ds`),
    which ms-swift refuses there (DS_NOT_MP): a DeepSpeed run that ran had one process a visible GPU, NPROC_PER_NODE
    from the shell that launched it, and is planned so, said in a line."""
    visible = count_devices(env.get("CUDA_VISIBLE_DEVICES", ""))
    if "NPROC_PER_NODE" not in env and ds is not None and visible and visible >= 2:
        source = (
            f"{where} CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} with {ds.source} and no NPROC_PER_NODE: "
            f"ms-swift refuses DeepSpeed over one process's several GPUs ({DS_NOT_MP}), so a run that ran had one "
            "process a GPU"
        )
        c.set("gpus_per_node", visible, source, "NPROC_PER_NODE")
        c.note(
            f"{where} no NPROC_PER_NODE in the file: planned with NPROC_PER_NODE={visible} from the launching shell "
            f"(without it ms-swift stops at start: DeepSpeed is not compatible with MP, {DS_NOT_MP})"
        )
        n = visible
    elif "NPROC_PER_NODE" in env:
        source = f"{where} NPROC_PER_NODE={show(env['NPROC_PER_NODE'])}"
        n = c.number("gpus_per_node", env["NPROC_PER_NODE"], source, "NPROC_PER_NODE") or 1
        processes_fit_devices(n, env, source, c)
    else:
        c.set("gpus_per_node", 1, f"{where} no NPROC_PER_NODE (one process: swift/cli/main.py:30-35)", "NPROC_PER_NODE")
        n = 1
    n *= _device_map(c, env, where, n)
    nodes = (
        c.number("nodes", env["NNODES"], f"{where} NNODES={show(env['NNODES'])}", "NNODES") if "NNODES" in env else 1
    )
    return n * (nodes or 1)


def _device_map(c: Collector, env: dict[str, str], where: str, processes: int) -> int:
    """ms-swift's MP: where a node's visible GPUs are at least twice its processes, each process loads the model
    with device_map "auto" over visible // processes GPUs (is_mp, swift/utils/env.py:64-75; get_default_device_map,
    swift/model/utils.py:229-246), and with several processes runs DDP over those groups (is_mp_ddp, env.py:78-84)."""
    visible = count_devices(env.get("CUDA_VISIBLE_DEVICES", ""))
    if not visible or visible // processes < 2 or visible % processes:
        return 1
    per = visible // processes
    source = (
        f"{where} CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} with {processes} process(es) a node (ms-swift's "
        f"device_map over {per} GPUs a process: swift/utils/env.py:64-75)"
    )
    c.set("device_map", per, source, "CUDA_VISIBLE_DEVICES")
    c.set("gpus_per_node", visible, source, "CUDA_VISIBLE_DEVICES")
    return per


VISION_KEYS = (
    KEYS.key("frozen_vision"),
    KEYS.key("frozen_projector"),
    "MAX_PIXELS",
    "VIDEO_MAX_PIXELS",
    "FPS_MAX_FRAMES",
)


def _tuner(c: Collector, f: dict[str, Flag]) -> bool:
    row, old = KEYS["lora"], KEYS.key("lora", "3")
    key = old if old in f and row.key not in f else row.key
    tuner, src = get(f, key, row.default, row.cite)
    if key == old:
        src += f" (ms-swift 3's name for {KEYS.flag('lora')})"
    if tuner == "full":
        c.set("lora_rank", 0, src, f"--{key}")
        return False
    if tuner != "lora":
        tuners.tuner(src, tuner)
    dora = f.get(KEYS.key("lora_variant"))  # PEFT's use_dora (pipelines/train/tuner.py:188)
    if dora and as_bool(one(dora.value)):
        c.set("lora_variant", "dora", dora.source, KEYS.flag("lora_variant"))
    saved = f.get(KEYS.key("lora_train_embeddings"))
    if saved:
        tuners.modules_to_save(c, saved.value, saved.source, KEYS.flag("lora_train_embeddings"))
    rank, rsrc = look(f, "lora_rank")
    c.number("lora_rank", rank, rsrc if key not in f else f"{rsrc}; {src}", KEYS.flag("lora_rank"))
    targets, tsrc = look(f, "lora_targets")
    given = f.get(KEYS.key("lora_targets"))
    loraargs.lora_targets(c, given.value if given else targets, tsrc, KEYS.flag("lora_targets"))
    dropout, dsrc = look(f, "lora_dropout")
    if as_float(dropout) is not None:
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
    elif kind == "grpo":
        c.set(
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


def _sequence(c: Collector, f: dict[str, Flag], kind: str) -> None:
    ml, flag = KEYS.key("seq_len"), KEYS.flag("seq_len")
    if ml in f:
        value, src = f[ml].value, f[ml].source
    elif c.model is not None and models.context(c.model.config):
        value = models.context(c.model.config)
        src = default(SWIFT, f"{S}base_args/base_args.py:227-228", f"max_length: the model's context {value}")
    else:
        c.note(
            "max_length not given and the model's context is not known (ms-swift plans for the model's context: "
            "pass --seq-len)"
        )
        return
    field = {"dpo": "workload.max_length", "gkd": "workload.max_length", "grpo": "workload.max_prompt_length"}.get(
        kind, "seq_len"
    )
    c.number(field, value, src if kind != "grpo" else f"{src} (GRPO: the prompt's limit, truncated left)", flag)
    if kind == "grpo":
        swiftrl.read_grpo(c, f)


def _training(c: Collector, f: dict[str, Flag], kind: str) -> None:
    gc, src = look(f, "checkpointing")
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
    if attn:
        mapped = vocab.attention(one(attn.value))
        if mapped:
            c.set("attention", mapped, attn.source, KEYS.flag("attention"))
        else:
            c.note(f"{attn.source} (this attention implementation is not planned yet; planned as sdpa)")
    liger = f.get(KEYS.key("loss"))
    if liger and as_bool(liger.value):
        if kind == "sft":
            c.set("loss", "fused", liger.source, KEYS.flag("loss"))
        else:
            c.note(f"{liger.source} (Liger kernels in RLHF are not planned yet)")
    old, k = _release(c).defaults.get("optimizer"), KEYS["optimizer"]  # ms-swift 3's transformers: adamw_torch
    opt, osrc = get(f, k.key, *(("adamw_torch", old.source) if old else (k.default, k.cite)))
    if tuners.optimizer(osrc, opt) and vocab.optimizer(opt):
        c.set("optimizer", vocab.optimizer(opt), osrc, KEYS.flag("optimizer"))
    else:
        c.note(f"{osrc} (this optimizer is not planned yet; planned as AdamW)")
    plugin = str(one(f["optimizer"].value)).lower() if "optimizer" in f else ""
    if plugin and plugin != "lorap" and tuners.optimizer(f["optimizer"].source, plugin):  # lorap: LoRA+, LoRA's memory
        c.note(f"{f['optimizer'].source} (ms-swift's optimizer plugin is not planned yet; planned as AdamW)")


def _vision(c: Collector, f: dict[str, Flag], env: dict[str, str], where: str, lora: bool) -> None:
    if not models.tower_known(c, f | {k: Flag(k, v, f"{where} {k}={v}", k) for k, v in env.items()}, VISION_KEYS):
        return
    vit, vsrc = look(f, "frozen_vision")
    if lora and KEYS.key("frozen_vision") in f:
        why = "all-linear then takes the ViT's linears too: swift/pipelines/train/tuner.py:92-104"
        models.lora_tower(c, vit, vsrc, KEYS.flag("frozen_vision"), why)
    aligner, asrc = look(f, "frozen_projector")
    llm, lsrc = look(f, "frozen_language")
    if not lora:
        frozen, note = models.frozen_value(as_bool(vit), as_bool(aligner), as_bool(llm))
        c.fact("frozen", frozen, f"{vsrc}; {asrc}; {lsrc}", KEYS.flag("frozen_vision"))
        if note:
            c.note(f"{asrc} ({note.replace('projector', 'aligner').replace('tower', 'ViT')})")
    for key in ("VIDEO_MAX_PIXELS", "FPS_MAX_FRAMES"):
        if key in env:
            c.note(f"{where} {key}={env[key]} (video frames are not planned; rows planned with one image)")


def _release(c: Collector):
    """The ms-swift release line the reading found (planner.intake.releases), the newest where it found none."""
    return FRAMEWORKS["swift"].release(str(c.facts.get("release", ("",))[0] or ""))


def _image(c: Collector, env: dict[str, str], where: str, release) -> None:
    """One image a row at MAX_PIXELS, else at the cap every ms-swift release leaves to qwen_vl_utils: its
    MAX_PIXELS 16384 x 28 x 28 = 12,845,056 (qwen_vl_utils/vision_process.py; ms-swift reads the MAX_PIXELS
    environment variable over it: v2.5.2 swift/llm/utils/template.py:1531-1546, v3.4.0
    swift/llm/model/model/qwen.py:537-545, v4.0.0 swift/model/models/qwen.py:654-670). Up to 3.3 --max_length
    counts the text only, the images' tokens inserted after it (planner.frameworks.swift.RELEASES): the row runs
    max_length plus the image; from 3.4 a longer row is deleted, so the image is within max_length and no cap is
    assumed (planned text only, the headline says so). Derived again from a --model given beside the files."""
    given = as_int(env.get("MAX_PIXELS"))
    text = release.means("swift_max_length_counts") == "text"
    if not given and not text:
        return
    pixels = given or QWEN_VL_UTILS_MAX_PIXELS
    how = (
        f"{where} MAX_PIXELS={given}"
        if given
        else default(
            f"ms-swift {release.name}.x",
            "qwen_vl_utils/vision_process.py MAX_PIXELS = 16384 * 28 * 28; no MAX_PIXELS in the environment",
            f"image cap {pixels:,} pixels",
        )
    )

    def tokens(request: dict) -> int:  # the image under the final model (a --model beside the files)
        m = c.model if request is None else models.lookup(str(request.get("model", "")), None)
        per = models.pixels_per_token(m.config) if m is not None and models.has_vision(m.config) else None
        return pixels // per if per and (given or per == 28 * 28) else 0  # the default cap: the Qwen2-VL family

    c.derived["image_tokens"] = (("model",), tokens)
    # the length --max_length set: SFT's rows, DPO's chosen and rejected rows, GRPO's prompt (_sequence)
    field = next((f for f in ("seq_len", "workload.max_length", "workload.max_prompt_length") if c.has(f)), "seq_len")
    seq = c.setting(field)
    if text and seq is not None:
        c.derived[field] = (("model",), lambda request: int(seq.value) + tokens(request))
    n = tokens(None)
    if not n:
        return
    per = f"{pixels // n} pixels a token{', swift/model/models/qwen.py:758-770' if given else ''}"
    c.set("image_tokens", n, f"{how} (one image a row: {pixels} // {per})", "MAX_PIXELS")
    if text and seq is not None:
        c.set(
            field,
            int(seq.value) + n,
            f"{seq.source} + {n} image tokens (ms-swift {release.name}.x checks --max_length on the text, then "
            "inserts the image's tokens: planner.frameworks.swift.RELEASES)",
            KEYS.flag("seq_len"),
        )


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


# flags only ms-swift 2.x takes (v2.5.2 swift/llm/utils/argument.py:610-617 SftArguments; 3.0 renamed them): the key
# table's 2.x names of these rows, and the 2.x data flag (no row: memplan plans no dataset path)
SWIFT2_FLAGS = (
    *(KEYS.key(n, "2") for n in ("lora", "model", "lora_targets", "lora_dropout")),
    "custom_train_dataset_path",
)


def release_hint(flags: dict[str, Flag]) -> tuple[str, str] | None:
    """The release the flags' names say (planner.intake.releases): ("3", why) for ms-swift 3's --train_type without
    4.x's --tuner_type, read as 3.0-3.3 (the hungrier for images); ("2", why) for a 2.x-only name."""
    old, new = KEYS.key("lora", "3"), KEYS.key("lora")
    if old in flags and new not in flags:
        why = (
            f"{flags[old].source} (ms-swift 3's name; 4.x's is --{new}; read as 3.0-3.3, the hungrier "
            "for images: their --max_length leaves the image's tokens out; a pin ms-swift==3.4 or later beside the "
            "script reads it as 3.4)"
        )
        return "3", why
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
    releases.by_flags(c, "swift", run, release_hint(flags))
    mapping = from_mapping(data, path) if data else {}
    env = run.command.env
    env = env | {str(k): str(v) for k, v in section(data, "ENV").items() if k not in env}
    read(c, mapping | flags, env, sub, run.where, run.command.path, run.command.vars, launcher=launcher)


def read_file(
    c: Collector, data: dict, path: Path, *, flags: dict, words: list, script: Path, trainer: str, vars
) -> None:
    """planner.intake's dispatch of a ms-swift argument file (Framework.reads; `flags`: the command line's, `words`: its positional
    words after the file, `script`: the command's file): its ENV section and keys, with the flags over them."""
    env = {str(k): str(v) for k, v in section(data, "ENV").items()}
    keys = from_mapping({k: v for k, v in data.items() if k != "ENV"}, path) | flags
    read(c, keys, env, "rlhf" if "rlhf_type" in data else "sft", path.name, path, vars)
