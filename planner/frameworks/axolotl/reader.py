"""axolotl 0.19.0: a config YAML (with the DeepSpeed JSON it names) -> request fields. Defaults are axolotl's, cited
in the 0.19.0 wheel (axolotl/...): micro_batch_size 1, sequence_len 512, gradient checkpointing off, bf16 "auto", and
the model loaded in that dtype (utils/config/__init__.py:199-203), so a full fine-tune without DeepSpeed or FSDP
keeps no fp32 master weights. Unknown keys, which axolotl drops silently, are unplanned lines here. The release
line (planner.frameworks.axolotl.releases) a pin or the keys show decides the defaults that moved (the optimizer,
v0.4.0's required batch and length, GRPO's beta) and the keys it takes. The training settings (checkpointing,
precision, attention, packing, optimizer, loss) are read in reader_training.py.
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import BadInput
from planner.frameworks.accelerate import reader as accelerate
from planner.frameworks.axolotl import FRAMEWORK, SPANS
from planner.frameworks.axolotl.keys import KEYS, A
from planner.frameworks.axolotl.reader_task import read_task
from planner.frameworks.axolotl.reader_training import given_flag, look, training
from planner.frameworks.deepspeed import reader as deepspeed
from planner.frameworks.trl import reader_grpo as grpoargs
from planner.intake import loraargs, models, releases, tuners
from planner.intake.collect import (
    ASK_GPUS,
    AXOLOTL,
    Collector,
    accepted,
    as_bool,
    as_float,
    as_int,
    assumption,
    default,
    parallel_sizes,
    pipeline_notes,
    show,
)
from planner.intake.flags import Flag, from_mapping

RL = {"dpo": "dpo", "ipo": "dpo", "orpo": "dpo", "simpo": "dpo", "grpo": "grpo", "kto": "kto", "gdpo": "grpo"}
# rl gdpo: GRPO's trainer and config with multi_objective_aggregation normalize_then_sum (v0.18.0
# core/builders/rl.py:53, 173-176): GRPO's memory; an rl value from v0.14.0 (schemas/enums.py:29)
GDPO = (0, 14)
GDPO_AS_GRPO = (
    "GDPO: GRPO's trainer with multi_objective_aggregation, v0.18.0 core/builders/rl.py:53, 173-176: planned as GRPO"
)
GRPO_LENGTHS = (
    "GRPO: axolotl keeps max_length and max_prompt_length out of GRPOConfig (v0.18.0 core/trainers/grpo/__init__.py:"
    "238-245): the prompts are planned at memplan's default length, the completions at trl.max_completion_length"
)
# rl values whose trainers memplan's terms do not cover: planned as SFT they would understate the memory
REFUSED = {
    "ebft": "EBFT keeps a frozen feature network, a deep copy of the model unless LoRA (v0.18.0 core/trainers/ebft/"
    "trainer.py:105-116, strided.py:428-470), and scores completions it generates (trainer.py:144, strided.py:859): "
    "not planned; memplan plans rl dpo, ipo, orpo, simpo, grpo, gdpo",
}
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


def _required(c: Collector, f: dict[str, Flag], name: str, r) -> tuple[object, str]:
    """`look`, where a line with no default (v0.4.0's micro_batch_size, gradient_accumulation_steps, sequence_len)
    stops without the key: a note, and the next line's default as an assumption."""
    value, src = look(c, f, name)
    if value is None:
        c.note(f"{src} (axolotl {r.name} stops without {KEYS.key(name)}; planned at {KEYS[name].default})")
        value, src = KEYS[name].default, assumption(f"{KEYS.key(name)} {KEYS[name].default}: {src}")
    return value, src


def _release(c: Collector, f: dict[str, Flag], path: Path):
    """The release line the run targets: the one its launch decided (planner.intake.releases.for_entry), else a pin
    beside the file or the lines its keys allow (SPANS), the newest of them assumed and said."""
    releases.for_entry(c, "axolotl", f, [path.parent.resolve()])
    return FRAMEWORK.release(str(c.facts.get("release", ("",))[0] or ""))


def _in_release(c: Collector, f: dict[str, Flag], r) -> dict[str, Flag]:
    """The keys release `r` takes: one it does not (SPANS) is dropped, as axolotl drops it, with a note."""
    out = dict(f)
    for k in sorted(set(f) & set(SPANS)):
        if r not in FRAMEWORK.lines_taking("train", [k]):
            c.note(f"{f[k].source} (not an axolotl {r.name} key: axolotl drops it silently)")
            del out[k]
    return out


def read(c: Collector, data: dict, path: Path, vars=None) -> None:
    f = from_mapping(data, path)
    c.add_file(path)
    for k in sorted(set(f) - accepted("axolotl") - pipeline_notes(c, f)):
        c.note(f"{f[k].source} (not an {AXOLOTL} key: axolotl drops it silently)")
    r = _release(c, f, path)
    f = _in_release(c, f, r)
    m = given_flag(f, "model")
    if m is not None:
        models.read_model(c, show(m.value), m.source, KEYS.key("model"), path.parent)
    micro, msrc = _required(c, f, "micro_batch", r)
    mb = c.number("micro_batch", micro, msrc, KEYS.key("micro_batch")) or 1
    if KEYS.key("grad_accum") not in f and as_int(data.get("batch_size")):
        c.number(
            "grad_accum",
            as_int(data["batch_size"]) // mb,
            f"{f['batch_size'].source} // {KEYS.key('micro_batch')} (axolotl/utils/config/__init__.py:209)",
            "batch_size",
        )
    else:
        ga, gsrc = _required(c, f, "grad_accum", r)
        c.number("grad_accum", ga, gsrc, KEYS.key("grad_accum"))
    kind = _rl(c, f, r)
    read_task(c, f, kind)
    seq, ssrc = _required(c, f, "seq_len", r)
    if kind == "sft":
        c.number("seq_len", seq, ssrc, KEYS.key("seq_len"))
    elif kind in ("dpo", "kto"):  # max_length for every rl trainer (v0.18.0 core/builders/base.py:680-682)
        why = f"{ssrc} (axolotl/core/builders/base.py:690-691)"
        c.number("workload.max_length", seq, why, KEYS.key("seq_len"))
    elif KEYS.key("seq_len") in f:  # grpo
        c.note(f"{ssrc} ({GRPO_LENGTHS})")
    _rows_fill_cap(c, f)
    _adapter(c, f)
    training(c, f, r.first)
    _sharding(c, f, path, vars)
    _parallel(c, f)
    sharded = _dp_shard(c, f)
    for key, why in UNPLANNED.items():
        if key in f and _on(f[key].value) and not (sharded and key == "dp_shard_size"):
            c.note(f"{f[key].source} ({why} is not planned yet)")


def _rows_fill_cap(c: Collector, f: dict[str, Flag]) -> None:
    """pad_to_sequence_len pads every micro-batch to sequence_len (v0.18.0 core/builders/causal.py:383-390), so no
    row costs less than the cap (Reading.rows_fill_cap); axolotl's validation turns it on where it is unset beside
    reward_model (utils/schemas/validation.py:246-254) and beside sample_packing (:228-241, a packed plan already)."""
    pad, reward = f.get("pad_to_sequence_len"), f.get("reward_model")
    if pad is not None and as_bool(pad.value):
        c.fact("rows_fill_cap", True, pad.source, "pad_to_sequence_len")
    elif pad is None and reward is not None and as_bool(reward.value):
        why = f"{reward.source} (axolotl sets pad_to_sequence_len: utils/schemas/validation.py:246-254)"
        c.fact("rows_fill_cap", True, why, "pad_to_sequence_len")


def _dp_shard(c: Collector, f: dict[str, Flag]) -> bool:
    """dp_shard_size without dp_replicate_size (v0.18.0 schemas/config.py:1091): FSDP over that many data-parallel
    ranks, each behind tensor_parallel x context_parallel ranks (utils/distributed.py:350-370, ParallelismConfig; a
    larger world replicates the groups, HSDP): the GPUs the file names, where the command gives none. With
    dp_replicate_size, HSDP's groups: not planned yet."""
    shard, rep = f.get("dp_shard_size"), f.get("dp_replicate_size")
    if shard is None or not _on(shard.value) or (rep is not None and _on(rep.value)) or c.get("fsdp", "off") == "off":
        return False
    ranks = int(shard.value) * int(c.get("tensor_parallel", 1)) * int(c.get("context_parallel", 1))
    if c.setting("gpus_per_node") is None:
        why = f"{shard.source} (FSDP over that many data-parallel ranks, each behind TP x CP ranks)"
        c.set("gpus_per_node", ranks, why, "dp_shard_size")
    return True


def _parallel(c: Collector, f: dict[str, Flag]) -> None:
    """context_parallel_size (ring-flash-attn's ring attention; sequence_parallel_degree is its deprecated name,
    utils/schemas/config.py) and tensor_parallel_size (DeepSpeed AutoTP)."""
    cp = next((k for k in (KEYS.key("context_parallel"), "sequence_parallel_degree") if k in f), None)
    sizes = {"context_parallel": (f[cp].value, f[cp].source, cp)} if cp else {}
    tp = KEYS.key("tensor_parallel")
    if tp in f:
        sizes["tensor_parallel"] = (f[tp].value, f[tp].source, tp)
    parallel_sizes(c, sizes)


def _on(value: object) -> bool:
    """A setting that does something: true, a size above 1, a non-empty name or section."""
    if isinstance(value, bool) or value is None:
        return bool(value)
    return value > 1 if isinstance(value, (int, float)) else bool(value)


def _rl(c: Collector, f: dict[str, Flag], r) -> str:
    given = given_flag(f, "workload.kind")
    if given is None:
        return "sft"
    rl, key = str(given.value).lower(), KEYS.key("workload.kind")
    kind = RL.get(rl)
    if rl in REFUSED:
        raise BadInput(f"{given.source}: {REFUSED[rl]}", "workload")
    if rl == "gdpo" and r.first < GDPO:
        why = (
            f"GDPO came at axolotl v0.14.0 (utils/schemas/enums.py:29), not in {r.name}: give --framework axolotl@0.14"
        )
        raise BadInput(f"{given.source}: {why}", "workload")
    if rl == "gdpo":
        c.note(f"{given.source} ({GDPO_AS_GRPO})")
    if kind is None:
        c.note(f"{given.source} ({rl} is not planned yet; planned as SFT)")
        return "sft"
    c.set("workload.kind", kind, given.source, key)
    if rl in ("orpo", "simpo"):
        c.set("workload.precompute_ref_log_probs", True, f"{given.source} (no reference model)", key)
    trl = f["trl"].value if "trl" in f and isinstance(f["trl"].value, dict) else {}
    if kind == "grpo":
        sub = {k: Flag(k, v, f"{f['trl'].source.split(':')[0]}: trl.{k}: {v}", f"trl.{k}") for k, v in trl.items()}
        grpoargs.read_grpo(c, sub)
    if kind in ("dpo", "grpo"):
        _trl_meanings(c, f, r, kind, trl)
    return kind


# axolotl passes its trl section's max_completion_length, None where left out, to GRPOConfig (0.19.0
# core/trainers/grpo/__init__.py:104; v0.7.0 :56): TRL's own default (256 through trl 1.9.0) never applies
NO_MCL = (
    "axolotl passes trl.max_completion_length None to GRPOConfig (axolotl/core/trainers/grpo/__init__.py:104), not "
    "TRL's 256: the generation's own limit decides; planned at 512"
)


def _trl_meanings(c: Collector, f: dict[str, Flag], r, kind: str, trl: dict) -> None:
    """What the TRL the line pins means where the trl section says nothing (releases.py, from TRL's own lines): GRPO's
    beta, DPO's and GRPO's log-prob head (the whole logits; trl.use_liger_loss: Liger's fused GRPO loss, trl v1.9.0
    grpo_trainer.py:773 use_liger_kernel), and GRPO's completion length, which axolotl leaves open."""
    who = f"axolotl@{r.name}"
    beta, head = r.workload.get("beta"), r.workload.get("logprobs")
    if kind == "grpo" and beta is not None and "beta" not in trl:
        c.fill("workload.beta", beta.value, default(who, beta.source), "trl.beta")
    if kind == "grpo" and as_bool(trl.get("use_liger_loss")):
        c.set("workload.logprobs", "fused", f"{f['trl'].source.split(':')[0]}: trl.use_liger_loss: true", "trl")
    elif head is not None:
        c.fill("workload.logprobs", head.value, default(who, head.source), "trl")
    if kind == "grpo" and trl.get("max_completion_length") is None:
        c.fill("workload.max_completion_length", 512, assumption(NO_MCL), "trl.max_completion_length")


def _adapter(c: Collector, f: dict[str, Flag]) -> None:
    given, key = given_flag(f, "lora"), KEYS.key("lora")
    adapter = str(given.value).lower() if given else ""
    if adapter not in ("lora", "qlora"):
        row = KEYS["lora"]
        src = f[key].source if key in f else default(AXOLOTL, row.cite, f"{key} None: full fine-tuning")
        c.set("lora_rank", 0, src, key)
        if adapter:
            tuners.tuner(f[key].source, adapter)
        return
    r = KEYS.key("lora_rank")
    if r in f and f[r].value is not None:
        c.number("lora_rank", f[r].value, f[r].source, r)
    else:
        c.note(f"{f[key].source} without {r} (axolotl has no default rank: lora_rank not read)")
    for name, field in (("lora_targets", None), ("lora_target_linear", "all-linear")):
        flag = given_flag(f, name)
        if flag is not None and field is None:
            loraargs.lora_targets(c, flag.value, flag.source, KEYS.key(name))
        elif flag is not None and as_bool(flag.value):
            c.set("lora_targets", field, flag.source, KEYS.key(name))
    dora, save = given_flag(f, "lora_variant"), given_flag(f, "lora_train_embeddings")
    if dora is not None and as_bool(dora.value):
        c.set("lora_variant", "dora", dora.source, KEYS.key("lora_variant"))
    if save is not None:
        tuners.modules_to_save(c, save.value, save.source, KEYS.key("lora_train_embeddings"))
    drop, dsrc = look(c, f, "lora_dropout")
    if as_float(drop) is not None:
        c.set("lora_dropout", as_float(drop), dsrc, KEYS.key("lora_dropout"))
    _quant(c, f)


def _quant(c: Collector, f: dict[str, Flag]) -> None:
    four, eight, kw = f.get(KEYS.key("quant_4bit")), f.get(KEYS.key("quant_8bit")), f.get(KEYS.key("quant_kwargs"))
    if four is not None and as_bool(four.value):
        c.set("quant", "nf4", f"{four.source} (nf4: axolotl/loaders/model.py:808)", KEYS.key("quant_4bit"))
        kwargs = kw.value if kw is not None else None  # :807: double quant on
        if isinstance(kwargs, dict) and kwargs.get("bnb_4bit_use_double_quant") is False:
            c.set("quant_absmax", "fp32", kw.source, KEYS.key("quant_kwargs"))
    if eight is not None and as_bool(eight.value):
        c.set("quant", "int8", f"{eight.source} (bitsandbytes LLM.int8)", KEYS.key("quant_8bit"))


def _sharding(c: Collector, f: dict[str, Flag], path: Path, vars) -> None:
    ds, fk, vk = given_flag(f, "zero_stage"), KEYS.key("fsdp"), KEYS.key("fsdp_version")
    if ds is not None:
        deepspeed.read(c, ds.value, ds.source, KEYS.key("zero_stage"), path, vars=vars)
    cfg = f[fk].value if fk in f and isinstance(f[fk].value, dict) else None
    words = f["fsdp"].value if "fsdp" in f and f["fsdp"].value else None
    if cfg is None and not words:
        return
    spec = dict(cfg or {})
    if vk in f and f[vk].value:
        spec["version"] = f[vk].value
    src = f[fk].source if cfg is not None else f["fsdp"].source
    tokens = tuple(str(w) for w in (words if isinstance(words, list) else str(words or "").split()))
    accelerate.fsdp(
        c,
        spec,
        src,
        fk,
        tokens=tokens,
        version=(1, default(AXOLOTL, f"{A}validation.py:1215-1233", "fsdp_version 1 with fsdp_config")),
        mesh=False,  # axolotl builds its own (dp_shard_size, dp_replicate_size): not accelerate's meshless hybrid
    )


def read_file(
    c: Collector, data: dict, path: Path, *, flags: dict, words: list, script: Path, trainer: str, vars
) -> None:
    """planner.intake's dispatch of a axolotl YAML (Framework.reads; `flags`: the command line's, `words`: its positional
    words after the file, `script`: the command's file): read as it is (axolotl's own flags are not read)."""
    read(c, data, path, vars)
    if script == path:  # given alone: the launch, and so the processes, left open
        c.note(
            f"{path.name} alone: axolotl train launches accelerate (v0.19.0 cli/main.py:84-86, --launcher accelerate by "
            "default), which starts one process a visible GPU where no accelerate config says otherwise (accelerate "
            f"1.13.0 commands/launch.py:1300-1316: {ASK_GPUS}"
        )
