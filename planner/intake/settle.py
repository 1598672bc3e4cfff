"""The fields a reading settles last, once every file is read: the precision (the trainer's mixed precision, the dtype
the weights load in, and whether DeepSpeed or FSDP keeps fp32 master weights) and the modules a VLM's full fine-tune
keeps frozen (only for a model known to have a vision tower, and never beside LoRA), or whether its LoRA adapts the
tower (PEFT's all-linear); FSDP's own activation
checkpointing, which wraps the layers whatever the trainer's flag says; the framework, as memplan's adapter for it
(planner.frameworks) allows.
"""

from __future__ import annotations

from planner.config import zerobuckets
from planner.config.knobfields import KnobFields
from planner.errors import BadInput
from planner.frameworks import BUNDLED, FRAMEWORKS, adapter
from planner.intake import line_defaults, modelconfig, models, peft_pin
from planner.intake.collect import Collector, assumption
from planner.intake.releases import transformers_read
from planner.model.catalog import checkpoints
from planner.model.families import from_config


def finish(c: Collector) -> None:
    """The settled fields, then the framework (last: it checks what the others say it runs)."""
    _precision(c)
    _frozen(c)
    _lora_vision(c)
    _checkpoint_names(c)
    _zero_auto(c)
    if "fsdp_checkpointing" in c.facts and c.get("fsdp", "off") != "off":
        c.set("checkpointing", *c.facts["fsdp_checkpointing"])
    _hsdp_unmeshed(c)
    _hsdp(c)
    _unplannable(c)
    _split_world(c)
    peft_pin.read(c)
    _framework(c)
    line_defaults.restate(c)  # an older line's defaults that are the newest's, said so


def _hsdp(c: Collector) -> None:
    """A full shard over accelerate's replicas (ParallelismConfig's dp_replicate_size above 1, from the launcher's
    config or its variables) is FSDP2's hybrid shard, fully_shard over the dp_replicate x dp_shard mesh (accelerate
    1.10.1 utils/fsdp_utils.py:624-631), whatever the trainer's --fsdp says: planned as one replica a node."""
    fact = c.facts.get("dp_replicate")
    if fact is None or fact[0] <= 1 or c.get("fsdp", "off") not in ("full", "hybrid"):
        return
    c.set("fsdp", "hybrid", fact[1], fact[2])
    if fact[0] != int(c.get("nodes", 1)):
        c.note(f"{fact[1]} (HSDP is planned with one replica a node, {c.get('nodes', 1)} here)")


# where the transformers a line runs is the files' choice (Release.transformers), the note names the other answer
REFUSED_FROM_5_10 = (
    "; at transformers 5.10+ the Trainer refuses the flag at start instead (5.10.0 training_args.py:2826-2840): "
)


def _hsdp_unmeshed(c: Collector) -> None:
    """A hybrid shard asked of FSDP2 (HF's --fsdp hybrid_shard, accelerate's fsdp_sharding_strategy HYBRID_SHARD, with
    fsdp_version 2) where no ParallelismConfig names replicas: FSDP2's fully_shard gets no mesh and shards over every
    rank (accelerate 1.10.1 utils/fsdp_utils.py:615-659; the strategy is FSDP1's alone, utils/dataclasses.py:
    1775-1790), planned as the full shard that runs, saying so; transformers 5.10+ refuse HF's flag at start
    (Release.means fsdp2_hybrid, reading.MEANINGS). FSDP1's hybrid shard is its own (kept)."""
    asked, version, replicas = (c.facts.get(k) for k in ("fsdp_hybrid", "fsdp_version", "dp_replicate"))
    if c.get("fsdp", "off") != "hybrid" or asked is None or version is None or version[0] != 2:
        return
    if replicas is not None and replicas[0] > 1:  # the fact: a framework whose mesh is accelerate's (its reader)
        return
    tail = version[1].removeprefix(asked[1]).strip() if version[1].startswith(asked[1]) else f"({version[1]})"
    line, how = _line(c), f" {tail}" if tail else ""
    version, said = transformers_read(c, line) if asked[0] else (None, "")  # TRL's lines take either answer
    if asked[0] and line is not None and (line.means("fsdp2_hybrid") == "refused" or (version or ()) >= (5, 10)):
        raise BadInput(
            f"{asked[1]} under FSDP2{how}{f' ({said})' if said else ''}: transformers 5.10+ refuse it at start (5.10.0 training_args.py:"
            "2826-2840 'only available with FSDP1'): set fsdp_config's version 1 (FSDP1's hybrid shard), or --fsdp "
            "full_shard with accelerate's mesh (ACCELERATE_USE_PARALLELISM_CONFIG=true, PARALLELISM_CONFIG_DP_"
            "REPLICATE_SIZE=nodes, or the accelerate config's parallelism_config_dp_replicate_size)",
            "fsdp",
        )
    c.note(
        f"{asked[1]} (a hybrid shard, one copy a node, asked of FSDP2{how}, which builds no replicate x "
        "shard mesh without accelerate's ParallelismConfig (parallelism_config_dp_replicate_size): it runs as a full "
        f"shard over every GPU, planned so{REFUSED_FROM_5_10 + said if said else ''})"
    )
    c.set("fsdp", "full", f"{asked[1]} (FSDP2 with no mesh: a full shard over every GPU)", asked[2])


def _line(c: Collector):
    """The release line the reading targets (Framework.release; a name that is another's line: Framework.same_as),
    None for a framework without lines."""
    fw = FRAMEWORKS.get(c.framework)
    release = str(c.facts.get("release", ("",))[0] or "")
    if fw is not None and not fw.releases and fw.same_as:
        name, _, release = fw.same_as.partition("@")
        fw = FRAMEWORKS.get(name)
    return fw.release(release) if fw is not None and fw.releases else None


def _split_world(c: Collector) -> None:
    """A configuration that splits each sample over more GPUs than it names (often none: the launcher's count is
    elsewhere) is planned on the fewest GPUs that run the split, one node's worth, as an assumption it says; not where
    the files leave the count to a variable they do not set (Reading.unknown_world: asked)."""
    parts = [c.setting(f) for f in ("tensor_parallel", "sequence_parallel", "context_parallel")]
    ranks = 1
    for p in parts:
        ranks *= int(p.value) if p is not None else 1
    world = int(c.get("gpus_per_node", 1)) * int(c.get("nodes", 1))
    if ranks > 1 and world % ranks and c.setting("gpus_per_node") is None and "unknown_world" not in c.facts:
        why = ", ".join(p.source for p in parts if p is not None)
        c.set("gpus_per_node", ranks, assumption(f"the GPUs the split needs: {why}; give --gpus-per-node"), "gpus")


def _framework(c: Collector) -> None:
    """The framework the configuration is for; where memplan's adapter for it (planner.frameworks) does not run a
    value the configuration sets, the value is kept (the memory is the configuration's) and the plan is the bundled
    trainer's, which runs every knob."""
    _, source, key = c.facts.get("framework", (c.framework, f"read as a {c.framework} configuration", "config"))
    release, why, _ = c.facts.get("release", ("", "", ""))
    knobs, read = _knobs(c)
    refused = _refusal(c)
    # where the bundled trainer cannot run the value either (a compressed-tensors or HQQ base on a transformers 5
    # line), the framework stays and the check refuses in the framework's own line
    if refused is None or adapter(BUNDLED).cannot({**knobs, **read, "framework": BUNDLED, "release": ""}):
        named = f"{c.framework}@{release}" if release else c.framework  # NAME@RELEASE: in that release's terms
        c.set("framework", named, f"{source}; {why}" if why else source, key)
        return
    c.note(f"{refused[1]} (memplan's {c.framework} adapter; planned as the bundled trainer runs it)")
    c.set("framework", BUNDLED, assumption(f"{source}; {refused[0]} is a value its adapter does not run"), key)


def _knobs(c: Collector) -> tuple[dict, dict]:
    """Every knob's default, and the knobs the reading set so far."""
    knobs = {k: f.get_default(call_default_factory=True) for k, f in KnobFields.model_fields.items()}
    return knobs, {k: v for k, v in c.reading().request.items() if k in knobs}


def _refusal(c: Collector) -> tuple[str, str] | None:
    """(field, line) of what the framework's adapter, at the release read, does not run among the values read."""
    release = c.facts.get("release", ("",))[0]
    knobs, read = _knobs(c)
    return adapter(c.framework, release).cannot({**knobs, **read, "release": release or read.get("release", "")})


def _unplannable(c: Collector) -> None:
    """Combinations a configuration runs and memplan cannot plan yet: the part it cannot plan becomes an unplanned line
    and the plan goes on without it (planner/config/workload.py check_rl_knobs, planner/config/spec.py)."""
    kind = c.get("workload.kind", "sft")
    if kind != "sft":
        # DPO's and KTO's padding-free rows (planner.config.workload)
        batching = ("padded", "packed") if kind in ("dpo", "kto") else ("padded",)
        for field, allowed in (("checkpointing", ("off", "full")), ("loss", ("standard",)), ("batching", batching)):
            s = c.setting(field)
            if s is not None and s.value not in allowed:
                c.note(f"{s.source} ({field} {s.value} in {kind.upper()} is not planned yet; planned as {allowed[-1]})")
                c.set(field, allowed[-1], f"{s.source} (planned as {allowed[-1]})", s.key)
    _dpo_padded(c, kind)
    _sharded_quant(c)


def _dpo_padded(c: Collector, kind: str) -> None:
    """DPO's or KTO's padding-free flag where the framework's DPO or KTO (at the release read) pads anyway
    (Runs.dpo_runs: TRL 0.29+ sets padding_free back to False; Runs.kto_runs: ms-swift before v3.9.0, LLaMA-Factory's
    packing, SFT's only): planned padded, saying why."""
    s = c.setting("batching")
    if kind not in ("dpo", "kto") or s is None or s.value != "packed" or c.framework not in FRAMEWORKS:
        return
    fw = adapter(c.framework, c.facts.get("release", ("",))[0])
    if "packed" not in (fw.dpo_runs if kind == "dpo" else fw.kto_runs):
        why = fw.why_not("packed", kind)
        c.note(f"{s.source} ({why}; planned padded)")
        c.set("batching", "padded", f"{s.source} (planned padded: {why})", s.key)


def _sharded_quant(c: Collector) -> None:
    """A quantized base under ZeRO-3 or FSDP. bitsandbytes 4-bit is planned sharded (FSDP-QLoRA: the packed weight in
    the compute dtype's storage, which axolotl 0.19.0 loaders/model.py:809 and LLaMA-Factory 0.9.5
    model/model_utils/quantization.py:178 set; planner.estimate.quant). int8 and GPTQ/AWQ bases are not sharded by
    FSDP or ZeRO-3, and a 4-bit base offloaded to the host is planned under FSDP only (its packed shards on the host,
    the unit gathered packed, the quant state on every GPU: planner.estimate.fsdp; ZeRO-3's is not, planner.config.spec):
    the others are planned in 16 bits with one line."""
    quant = c.setting("quant")
    if quant is None or not (c.get("zero_stage", 0) == 3 or c.get("fsdp", "off") != "off"):
        return
    storage, version = c.facts.get("quant_storage"), c.facts.get("fsdp_version")
    if quant.value in ("nf4", "fp4") and storage and storage[0] == "uint8" and version and version[0] == 1:
        refused = _refusal(c) if c.framework in FRAMEWORKS else None
        if refused is not None and refused[0] == "fsdp":  # a framework that shards with no FSDP (trl@unsloth)
            raise BadInput(
                f"{quant.source} under FSDP1 ({version[1]}), stored as uint8 ({storage[1]}): {refused[1]}", "fsdp"
            )
        raise BadInput(
            f"{quant.source} under FSDP1 ({version[1]}) with the 4-bit weight stored as uint8 ({storage[1]}): FSDP1's "
            "FlatParameter flattens floating tensors of one dtype only (torch 2.13 distributed/fsdp/_flat_param.py:"
            "810-816, from accelerate 1.16.0 accelerator.py:1943 FSDP(model)); set bnb_4bit_quant_storage to "
            "the model's dtype (bfloat16), or fsdp_version 2",
            "quant",
        )
    if quant.value not in ("nf4", "fp4"):
        why = "FSDP drops bitsandbytes' int8 state" if quant.value == "int8" else "its weights are buffers"
        c.note(f"{quant.source} ({quant.value} base sharded by ZeRO-3 or FSDP: {why}; planned in 16 bits)")
        c.drop("quant")
    elif c.get("offload", "none") == "optimizer+params" and c.get("fsdp", "off") == "off":
        c.note(f"{quant.source} (a 4-bit base offloaded to the host by ZeRO-3 is not planned yet; planned in 16 bits)")
        c.drop("quant")


def _precision(c: Collector) -> None:
    """bf16 AMP over fp32 weights is memplan's bf16; bf16 weights trained without DeepSpeed or FSDP (no fp32 master
    copy) are bf16-pure; no AMP over fp32 weights is fp32."""
    if c.explicit("precision") or "amp" not in c.facts:
        return
    amp, amp_src, amp_key = c.facts["amp"]
    weights, w_src, w_key = c.facts.get("weights", (None, "", ""))
    sharded = c.get("zero_stage", 0) != 0 or c.get("fsdp", "off") != "off"
    lora = bool(c.get("lora_rank", 0))
    if amp == "fp16":
        c.set("precision", "fp16", amp_src, amp_key)
        _fp32_base(c, weights, w_src, w_key, lora)
    elif weights == "bf16" and not sharded and (amp == "fp32" or not lora):
        both = amp_src if w_src in amp_src else w_src if amp_src in w_src else f"{amp_src}; {w_src}"
        c.set("precision", "bf16-pure", f"{both} (bf16 weights without DeepSpeed or FSDP: no fp32 master copy)", w_key)
    elif amp == "bf16" and _awq(c):  # fp16 weights under bf16 autocast: 2 bytes a weight and activation, as fp16's
        c.set("precision", "fp16", f"{amp_src} ({AWQ_FP16})", amp_key)
    elif amp == "bf16":
        c.set("precision", "bf16", amp_src, amp_key)
        _fp32_base(c, weights, w_src, w_key, lora)
    elif weights == "fp16":
        c.set("precision", "fp16", w_src, w_key)
        c.note(f"{w_src} (fp16 weights without mixed precision are not planned; planned as fp16 mixed precision)")
    else:
        c.set("precision", "fp32", amp_src, amp_key)


AWQ_FP16 = "an AWQ base loads in fp16 whatever dtype is asked: transformers 5.6 quantizers/quantizer_awq.py:57-62"


def _awq(c: Collector) -> bool:
    """Whether the model is an AWQ checkpoint (its quantization_config, or the one its name implies)."""
    qc = (c.model.config.get("quantization_config") if c.model is not None else None) or {}
    return isinstance(qc, dict) and str(qc.get("quant_method", "")).lower() == "awq"


def _fp32_base(c: Collector, weights: str | None, source: str, key: str, lora: bool) -> None:
    """A LoRA base loaded in fp32 under mixed precision stays fp32 (the adapters train beside it), unless DeepSpeed
    casts the module to half."""
    if lora and weights == "fp32" and not c.get("zero_stage", 0):
        c.set("lora_base_fp32", True, f"{source} (the LoRA base stays in fp32 under mixed precision)", key)


def _zero_auto(c: Collector) -> None:
    """A DeepSpeed JSON's own sizes (zero_buckets) that equal what HF resolves "auto" to for this model (memplan's own
    exports write them so: planner.estimate.zero.settings) are the knob's default, "", not values of the user's."""
    s, model = c.setting("zero_buckets"), c.model or models.given_model()
    if s is None or model is None:
        return
    try:
        hidden = from_config(model.config, "settle").text.hidden
    except (KeyError, ValueError, TypeError):
        return
    auto = {"reduce_bucket_size": hidden * hidden, "stage3_prefetch_bucket_size": int(0.9 * hidden * hidden)}
    auto["stage3_param_persistence_threshold"] = 10 * hidden
    values = zerobuckets.parse(s.value)
    kept = {k: v for k, v in values.items() if auto.get(k) != v}
    if kept == values:
        return
    c.drop("zero_buckets")
    if set(kept) - {"stage"}:
        c.set("zero_buckets", zerobuckets.canonical(kept), s.source, s.key)


def _lora_vision(c: Collector) -> None:
    """PEFT's all-linear (TRL's --lora_target_modules all-linear, a script's LoraConfig) adapts a VLM's tower and
    projector too (PEFT 0.21: tests/planner/model/test_vlm_lora.py), unless the script keeps them frozen (VLM-R1's
    --freeze_vision_modules); LLaMA-Factory, ms-swift and axolotl leave the tower out of their own all-linear."""
    s = c.setting("lora_targets")  # none: the reader's default, all-linear
    if not c.get("lora_rank", 0) or (s is not None and s.value != "all-linear"):
        return
    if "freeze_vision" in c.facts:
        _, source, key = c.facts["freeze_vision"]
        c.set("lora_vision", False, f"{source} (no adapters on the tower)", key)
        return
    if s is None:
        return
    framework = FRAMEWORKS.get(c.framework)
    if framework is not None and not framework.all_linear_vision:
        return
    if c.model is None or not modelconfig.has_vision(c.model.config):
        return
    c.set("lora_vision", True, f"{s.source} (PEFT's all-linear adapts the vision tower and projector too)", s.key)


def _checkpoint_names(c: Collector) -> None:
    """LoRA targets named as a remote-code checkpoint names its linears (ms-swift loads OpenGVLab/InternVL2_5-8B's own
    InternLM2: wqkv, wo, w1-w3), as the catalog names them: the written wqkv adapts q, k and v alike."""
    s, framework = c.setting("lora_targets"), FRAMEWORKS.get(c.framework)
    if s is None or s.value == "all-linear" or "model_id" not in c.facts or not (framework and framework.remote_code):
        return
    model_id = c.facts["model_id"][0]
    names = checkpoints.transformers_names(model_id, s.value.split(","))
    if names != s.value.split(","):
        c.set("lora_targets", ",".join(names), f"{s.source} ({model_id}'s own module names)", s.key)


def _frozen(c: Collector) -> None:
    if "frozen" not in c.facts or c.get("lora_rank", 0):
        return
    value, source, key = c.facts["frozen"]
    if c.model is not None and modelconfig.has_vision(c.model.config) and value != "none":
        c.set("frozen", value, source, key)
