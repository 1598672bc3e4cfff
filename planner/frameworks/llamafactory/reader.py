"""LLaMA-Factory 0.9.5: a `llamafactory-cli train` YAML (with its `key=value` overrides, the DeepSpeed JSON it names,
and the launcher's NPROC_PER_NODE / NNODES / CUDA_VISIBLE_DEVICES) -> request fields. Defaults are LF's, cited at
v0.9.5 (src/llamafactory/...): LoRA rank 8 on all linears, gradient checkpointing on, cutoff_len 2048, a VLM's tower
and projector frozen, image_max_pixels 768*768. LF upcasts trainable weights to fp32 (model/adapter.py:313-325), so
bf16 is mixed precision unless pure_bf16. A key's value is the file's, else the release line's default, else 0.9.5's
(reader_keys.py); images and videos are read in reader_media.py.
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import BadInput
from planner.frameworks.hf import old_optim_default
from planner.frameworks.hf import reader_optim as hf_optim
from planner.frameworks.llamafactory import FRAMEWORK
from planner.frameworks.llamafactory import reader_media as media
from planner.frameworks.llamafactory.keys import HF_ARGS, KEYS, OLD_FLASH_WORDS, H
from planner.frameworks.llamafactory.reader_keys import get, look
from planner.frameworks.llamafactory.reader_launch import (  # noqa: F401 - read_launcher re-exported (Tool.launch)
    alone,
    not_training,
    processes,
    read_launcher,
    sharding,
)
from planner.frameworks.llamafactory.reader_optim import read_matrix_optimizer
from planner.frameworks.llamafactory.reader_ppo import read_ppo
from planner.frameworks.llamafactory.releases import SPANS
from planner.intake import hydra, line_defaults, loraargs, models, releases, tuners, vocab
from planner.intake.collect import (
    LF,
    Collector,
    accepted,
    as_bool,
    as_float,
    as_int,
    assumption,
    default,
    pipeline_notes,
    show,
)
from planner.intake.flags import Flag, from_mapping

REFUSED = {  # key: what it runs, refused in one line (planner.intake.tuners)
    "use_badam": "BAdam's block-wise updates",
    "use_adam_mini": "Adam-mini's reduced states",
}
# the line whose image_resolution is an image's longer side (v0.9.0 model_args.py:59-60, data/mm_plugin.py:58-60)
SIDE = "0.8"
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


def _release(c: Collector, f: dict[str, Flag], path: Path):
    """The release line the run targets: the one its launch decided (planner.intake.releases.for_entry), else a pin
    beside the file or the lines its keys allow (a YAML read alone)."""
    releases.for_entry(c, "llamafactory", f, [path.parent.resolve()])
    return FRAMEWORK.release(str(c.facts.get("release", ("",))[0] or ""))


def _in_release(c: Collector, f: dict[str, Flag], r) -> dict[str, Flag]:
    """The keys in the newest release's names (keys.py renames: dpo_beta -> pref_beta to 0.7.1, sft_packing ->
    packing to 0.5), flash_attn's older values in its newest words (keys.py OLD_FLASH_WORDS), and a note for each key the release
    does not take."""
    new = KEYS.renamed(r.name)
    f = {new.get(k, k): v for k, v in f.items()}
    fa = KEYS.key("attention")
    if fa in f and str(f[fa].value).lower() in OLD_FLASH_WORDS:
        f[fa] = Flag(fa, OLD_FLASH_WORDS[str(f[fa].value).lower()], f[fa].source, fa)
    for px in (KEYS.key("max_pixels"), KEYS.key("video_max_pixels")):  # v0.9.0's *_resolution: the longer side
        side = KEYS.named(px).at(r.name)
        if r.name == SIDE and px in f and as_int(f[px].value):
            f[px] = Flag(px, as_int(f[px].value) ** 2, f"{f[px].source} (the longer side: {side} squared)", px)
    taken = {k for k in SPANS if r in FRAMEWORK.lines_taking("train", [k])} | set(new)
    known = (accepted("llamafactory") - set(SPANS)) | taken | set(new.values())
    for k in sorted(set(f) - known - pipeline_notes(c, f)):
        c.note(f"{f[k].source} (not a llamafactory {r.name} key: LLaMA-Factory refuses it)")
    return f


def read(c: Collector, data: dict, path: Path, overrides: dict[str, Flag] | None = None, vars=None) -> None:
    f = from_mapping(data, path) | (overrides or {})
    c.add_file(path)
    r = _release(c, f, path)
    f = _in_release(c, f, r)
    not_training(f)
    m = KEYS.key("model")
    if m in f and f[m].value not in (None, ""):
        models.read_model(c, show(f[m].value), f[m].source, m, path.parent)
        media.thinker_alone(c, f[m].source)
    else:
        c.note(f"{path.name}: no {m} (LLaMA-Factory requires one: pass --model)")
    for key, why in REFUSED.items():  # a key the line does not take: _in_release's note, in the line's words
        if key in f and as_bool(f[key].value) and _takes(r, key):
            tuners.refuse(f[key].source, f"{why}, as LLaMA-Factory {r.name} runs it")
    stage = _stage(c, f, path.parent)
    lora = _method(c, f, r)
    for field in ("micro_batch", "grad_accum"):
        value, src = look(c, f, field)
        c.number(field, value, src, KEYS.key(field))
    # HF's Trainer evaluates (evaluation_strategy: its name through transformers 4.45, training_args.py of 4.40.2)
    if any(k in f and str(f[k].value).lower() != "no" for k in ("eval_strategy", "evaluation_strategy")):
        value, src = look(c, f, "eval_batch")
        c.number("eval_batch", value, src, KEYS.key("eval_batch"))
    value, src = look(c, f, "seq_len")
    if stage != "ppo":  # PPO: the prompt's cut (reader_ppo)
        rows = "workload.max_length" if stage in ("dpo", "kto") else "seq_len"
        c.number(rows, value, src, KEYS.key("seq_len"))
    _training(c, f, stage)
    media.vision(c, f, lora)
    sharding(c, f, path, vars)
    processes(c, r)
    for key, why in UNPLANNED.items():
        if key in f and as_bool(f[key].value) is not False and _takes(r, key):
            c.note(f"{f[key].source} ({why} not planned yet)")


def _takes(r, key: str) -> bool:
    """Whether release line `r` takes YAML key `key` (SPANS, each tag's hparams dataclasses): one it does not is
    _in_release's note ("not a llamafactory 0.7.1 key"), never the newest's words for it (guard: tests/planner/
    frameworks/llamafactory/test_line_defaults.py, each line's venv)."""
    return key not in SPANS or r in FRAMEWORK.lines_taking("train", [key])


def _stage(c: Collector, f: dict[str, Flag], near=None) -> str:
    stage, src = look(c, f, "workload.kind")
    stage = str(stage)
    if stage == "dpo":
        c.set("workload.kind", "dpo", src, KEYS.key("workload.kind"))
        # its concatenated_forward takes log-probs from the whole logits, cast to fp32, then one log_softmax over the
        # chosen and rejected rows (0.9.5 train/dpo/trainer.py:230, train/trainer_utils.py:612; v0.8.0 :156 and v0.6.0
        # src/llmtuner/train/dpo/trainer.py:93 alike),
        # not TRL's fused head; the fp32 copies are planned (Framework.fp32_logps, planner.estimate.fp32_logps)
        head = f"{src} (LLaMA-Factory's DPO: train/dpo/trainer.py:230 .logits.to(torch.float32), trainer_utils.py:612)"
        c.set("workload.logprobs", FRAMEWORK.logprobs, head, KEYS.key("workload.kind"))
        pl = KEYS.key("pref_loss")
        loss = str(f[pl].value) if pl in f else "sigmoid"
        if loss in ("orpo", "simpo"):
            c.set("workload.precompute_ref_log_probs", True, f"{f[pl].source} (no reference model)", pl)
        if "ref_model" in f:
            c.note(f"{f['ref_model'].source} (a separate reference model is not planned yet)")
    elif stage == "kto":  # the rows' whole fp32 logits, then the KL batch's without grad (train/kto/trainer.py:179,
        # 187-189: Framework.kto_kl_after); kto_chosen_weight / kto_rejected_weight scale the loss only
        c.set("workload.kind", "kto", src, KEYS.key("workload.kind"))
        head = f"{src} (LLaMA-Factory's KTO: train/kto/trainer.py:179 .logits.to(torch.float32))"
        c.set("workload.logprobs", FRAMEWORK.logprobs, head, KEYS.key("workload.kind"))
        if "ref_model" in f:
            c.note(f"{f['ref_model'].source} (a separate reference model is not planned yet)")
    elif stage == "ppo":  # every role in every process, the policy's own generate (reader_ppo)
        read_ppo(c, f, src, near)
    elif stage == "rm":  # a reward model: trl's AutoModelForCausalLMWithValueHead (model/loader.py:185-187), its
        # vocabulary head kept and its logits made and cast to fp32 (trl 0.24.0 modeling_value_head.py:169-181), one
        # value over the chosen and the rejected row (train/rm/trainer.py:98-109; Framework.value_head_rm)
        key = KEYS.key("workload.kind")
        head = f"{src} (trl's value-head model over chosen and rejected rows: train/rm/trainer.py:98-109)"
        c.set("task", "seq-cls", head, key)
        c.set("num_labels", 1, f"{src} (one value a row)", key)
        c.set("negatives", 1, f"{src} (the rejected row beside the chosen: the pairwise collator)", key)
    elif stage not in ("sft", "pt"):
        raise BadInput(f"{src}: not planned (memplan plans stage sft, pt, rm, dpo, kto and ppo)", "workload")
    return stage


def _method(c: Collector, f: dict[str, Flag], r) -> bool:
    kind, src = look(c, f, "lora")
    qb = KEYS.key("quant")
    if kind == "oft":
        return _oft(c, f, src)
    if kind not in ("lora", "full", "freeze"):
        tuners.tuner(src, kind)
    if kind == "freeze":
        _freeze(c, f, r)
    elif KEYS.key("trained_layout") in f and as_bool(f[KEYS.key("trained_layout")].value):
        tuners.refuse(f[KEYS.key("trained_layout")].source, f"LLaMA-Pro's blocks with finetuning_type {kind}")
    if kind != "lora":
        c.set("lora_rank", 0, src, KEYS.key("lora"))
        if qb in f:
            c.note(f"{f[qb].source} (LLaMA-Factory quantizes only with LoRA: not planned)")
        return False
    rank, rsrc = look(c, f, "lora_rank")
    c.number("lora_rank", rank, rsrc if KEYS.key("lora_rank") in f else f"{src}; {rsrc}", KEYS.key("lora_rank"))
    target, tsrc = look(c, f, "lora_targets")
    if target is None:  # v0.5: LoRA without lora_target stops (parser.py:141-142)
        c.note(f"{tsrc} (LLaMA-Factory {r.name} stops without lora_target; planned on every linear layer)")
        target, tsrc = KEYS["lora_targets"].default, assumption(f"every linear layer: {tsrc}")
    loraargs.lora_targets(c, target, tsrc, KEYS.key("lora_targets"))
    dora, extra = f.get(KEYS.key("lora_variant")), f.get(KEYS.key("lora_train_embeddings"))
    if dora and as_bool(dora.value):
        c.set("lora_variant", "dora", dora.source, KEYS.key("lora_variant"))
    if extra and extra.value:  # model/adapter.py:241: modules_to_save
        tuners.modules_to_save(c, extra.value, extra.source, KEYS.key("lora_train_embeddings"))
    dropout, dsrc = look(c, f, "lora_dropout")
    if as_float(dropout) is not None:
        c.set("lora_dropout", as_float(dropout), dsrc, KEYS.key("lora_dropout"))
    _quant(c, f)
    return True


def _freeze(c: Collector, f: dict[str, Flag], r) -> None:
    """finetuning_type freeze: the last freeze_trainable_layers decoder layers trained in full (model/adapter.py:89-90;
    num_layer_trainable, 3 by default at v0.5.3 src/llmtuner/hparams/finetuning_args.py:25-26), the first N for a
    negative count (:91-92; v0.5.3 src/llmtuner/model/adapter.py:61-62 the same); none (0), LLaMA-Pro's blocks
    counted negatively (no layer trained: :80-88's stride is negative), some modules of a layer or extra modules
    trained are refused in one line."""
    n, src = look(c, f, "trained_layers")
    if r.name == "0.5" and KEYS.key("trained_layers") not in f:
        n, src = 3, default(LF, "v0.5.3 src/llmtuner/hparams/finetuning_args.py:25-26", "num_layer_trainable 3")
    count, pro = as_int(n), f.get(KEYS.key("trained_layout"))
    if not count or (count < 0 and pro and as_bool(pro.value)):
        tuners.refuse(src, f"freeze tuning with freeze_trainable_layers {n} (no layer trained)")
    modules, msrc = look(c, f, "freeze_modules")
    if str(modules).strip().lower() not in ("all", "none"):
        tuners.refuse(msrc, f"freeze tuning of some modules of a layer ({modules})")
    extra = f.get(KEYS.key("freeze_extra"))
    if extra and extra.value:
        tuners.refuse(extra.source, f"freeze tuning with extra modules trained ({extra.value})")
    c.number("trained_layers", abs(count), src, KEYS.key("trained_layers"))
    if count < 0:  # model/adapter.py:91-92: the first -N layers
        c.set("trained_layout", "first", src, KEYS.key("trained_layers"))
    elif pro and as_bool(pro.value):  # model/adapter.py:80-88: every (layers/N)-th layer of the expanded checkpoint
        c.set("trained_layout", "interleaved", pro.source, KEYS.key("trained_layout"))


def _oft(c: Collector, f: dict[str, Flag], src: str) -> bool:
    """finetuning_type oft: PEFT's OFTConfig by its block size (--lora-variant oft, --lora-rank the block size);
    oft_rank (PEFT's r, the blocks a linear) sizes each linear's blocks by its width and is refused in one line, as
    its module_dropout (v0.9.5 model/adapter.py:243-250)."""
    count, csrc = look(c, f, "oft_rank")
    if as_int(count):
        tuners.refuse(
            csrc,
            "OFT by its block count (oft_rank) sizes each linear's blocks by its width; give "
            "oft_block_size and oft_rank 0",
        )
    drop, dsrc = look(c, f, "oft_dropout")
    if as_float(drop):
        tuners.refuse(dsrc, "OFT's module_dropout (whole blocks set to the identity)")
    c.set("lora_variant", "oft", src, KEYS.key("lora"))
    block, bsrc = look(c, f, "oft_block_size")
    c.number("lora_rank", block, bsrc, KEYS.key("oft_block_size"))
    target, tsrc = look(c, f, "oft_targets")
    loraargs.lora_targets(c, target, tsrc, KEYS.key("oft_targets"))
    extra = f.get(KEYS.key("lora_train_embeddings"))
    if extra and extra.value:
        tuners.modules_to_save(c, extra.value, extra.source, KEYS.key("lora_train_embeddings"))
    _quant(c, f)
    return True


def _quant(c: Collector, f: dict[str, Flag]) -> None:
    qb, qm, qd = KEYS.key("quant"), KEYS.key("quant_method"), KEYS.key("quant_absmax")
    bits = as_int(f[qb].value) if qb in f else None
    method = str(f[qm].value).lower() if qm in f else "bnb"
    if bits == 4 and method == "bnb":
        qtype, qsrc = look(c, f, "quant_type")
        c.set("quant", str(qtype) if qtype in ("nf4", "fp4") else "nf4", f"{f[qb].source}; {qsrc}", qb)
        if qd in f and not as_bool(f[qd].value):  # model_args.py:291: True
            c.set("quant_absmax", "fp32", f[qd].source, qd)
    elif bits == 8 and method == "bnb":  # model/model_utils/quantization.py:168-170
        c.set("quant", "int8", f[qb].source, qb)
    elif bits:
        c.note(f"{f[qb].source} ({bits}-bit {method} quantization is not planned yet; planned in 16 bits)")


def _training(c: Collector, f: dict[str, Flag], stage: str) -> None:
    off, src = look(c, f, "checkpointing")
    gc, unsloth = KEYS.key("checkpointing"), f.get(KEYS.key("checkpointing_offload"))
    if as_bool(off):
        c.set("checkpointing", "off", src, gc)
    elif unsloth and as_bool(unsloth.value):  # each layer's input to the host, recomputed: checkpointing.py:43-77
        why = f"{unsloth.source} (each layer's input in host RAM: model/model_utils/checkpointing.py:55)"
        c.set("checkpointing", "offload-inputs", why, KEYS.key("checkpointing_offload"))
    else:
        why = f"{src}: on unless disabled (src/llamafactory/model/model_utils/checkpointing.py:173-176)"
        c.set("checkpointing", "full", why, gc)
    pure = f.get(KEYS.key("pure_bf16"))
    if pure and as_bool(pure.value):
        c.set("precision", "bf16-pure", pure.source, KEYS.key("pure_bf16"))
    for key in (KEYS.key("bf16"), KEYS.key("fp16")):
        if key in f and as_bool(f[key].value):
            c.fact("amp", key, f[key].source, key)
    c.fact("amp", "fp32", default(LF, f"{HF_ARGS}:879-885", "bf16 False, fp16 False"), KEYS.key("bf16"), weak=True)
    attn, asrc = look(c, f, "attention")
    if attn != KEYS["attention"].default and vocab.attention(attn):
        c.set("attention", vocab.attention(attn), asrc, KEYS.key("attention"))
    liger = f.get(KEYS.key("loss"))
    if liger and as_bool(liger.value):
        if stage in ("sft", "pt"):
            c.set("loss", "fused", liger.source, KEYS.key("loss"))
        else:
            c.note(f"{liger.source} (Liger's kernels without its fused loss: not planned)")
    _packing(c, f, stage)
    opt, osrc = _optimizer(c, f)
    if tuners.optimizer(osrc, opt) and vocab.optimizer(opt):
        c.set("optimizer", vocab.optimizer(opt), osrc, KEYS.key("optimizer"))
    else:
        c.note(f"{osrc} (this optimizer is not planned yet; planned as AdamW)")
    read_matrix_optimizer(c, f)  # use_galore, use_apollo, use_muon (reader_optim.py)


def _optimizer(c: Collector, f: dict[str, Flag]) -> tuple[object, str]:
    """optim's value and source: the file's; else HF's default at a transformers pin beside the files (frameworks.hf.
    reader_optim); else at a transformers the file's keys show (before 4.53: frameworks.hf), unless the line's own
    default is already that; else the line's where it moved (Release.defaults); else at the transformers the line
    runs (Release.transformers, said as assumed: v0.9.4's 4.57.1); else the newest's."""
    k = KEYS["optimizer"]
    opt, osrc = look(c, f, "optimizer")
    if k.key in f:
        return opt, osrc
    if (pinned := hf_optim.optimizer_at(c, "llamafactory", pinned=True)) is not None:
        return pinned
    if (old := old_optim_default(f)) is not None and opt != "adamw":
        return get(f, k.key, *old)
    if line_defaults.moved_default(c, "llamafactory", "optimizer") is None:
        return hf_optim.optimizer_at(c, "llamafactory", pinned=False) or (opt, osrc)
    return opt, osrc


def _packing(c: Collector, f: dict[str, Flag], stage: str) -> None:
    pk, nk = KEYS.key("packing"), KEYS.key("neat_packing")
    packing = as_bool(f[pk].value) if pk in f else stage == "pt"
    neat = nk in f and as_bool(f[nk].value)
    if packing or neat:
        src = f[pk].source if pk in f else default(LF, f"{H}data_args.py:108", "packing for stage pt")
        c.set("batching", "packed", f[nk].source if neat else src, pk)


def read_file(
    c: Collector, data: dict, path: Path, *, flags: dict, words: list, script: Path, trainer: str, vars
) -> None:
    """planner.intake's dispatch of a LLaMA-Factory YAML (Framework.reads; `flags`: the command line's, `words`: its positional
    words after the file, `script`: the command's file): read with the flags and llamafactory-cli's key=value words over it."""
    read(c, data, path, flags | hydra.overrides(words, script), vars)
    if script == path:  # given alone: the launch, and so the processes, left open
        alone(c, path, data)
