"""verl's SFT trainers as a launch script runs them (`torchrun ... -m verl.trainer.fsdp_sft_trainer key=value ...`, or
`-m verl.trainer.sft_trainer`, the engine trainer writer.py writes): torchrun's world, then each Hydra override over
the trainer's config at v0.7.0 (keys_sft.py: every key, its default and where it stands), planned as SFT under FSDP.
Files cited are verl v0.7.0's (paths under verl/): fsdp_sft_trainer.py for the FSDP trainer, sft_trainer.py and
workers/engine/fsdp/transformer_impl.py for the engine trainer."""

from __future__ import annotations

from planner.errors import BadInput
from planner.frameworks.verl.keys_sft import ENGINE_ENTRY, FSDP_ENTRY, TABLES
from planner.frameworks.verl.reader_megatron import refuse_megatron
from planner.intake import hydra, releases, world
from planner.intake.collect import Collector, as_bool, as_int, default, one
from planner.intake.flags import Flag
from planner.intake.models import read_model

V070 = "verl 0.7.0"
MODULES = (FSDP_ENTRY, ENGINE_ENTRY)
FILES = {FSDP_ENTRY: "trainer/fsdp_sft_trainer.py", ENGINE_ENTRY: "trainer/sft_trainer.py"}
# flash attention: fixed in the FSDP trainer; the engine's model.override_config.attn_implementation default
ATTN = {FSDP_ENTRY: "fsdp_sft_trainer.py:244", ENGINE_ENTRY: "workers/config/model.py:128"}
IMPLS = {"flash_attention_2": "flash", "sdpa": "sdpa"}
# engine/fsdp.yaml's keys that move no memory memplan plans (the rest of the engine's keys are keys_sft.ENGINE's)
KNOWN = {"engine.seed", "engine.full_determinism", "engine.use_torch_compile", "engine.param_offload"}
KNOWN |= {"engine.optimizer_offload", "engine.fsdp_size"}  # noted where they move memory
# (optim.optimizer_impl, optim.optimizer) -> memplan's optimizer (workers/config/optimizer.py:183-188: build_optimizer
# imports the class by name); torch's AdamW with override_optimizer_config {fused: true} is its fused kernel
OPTIMIZERS = {("torch.optim", "AdamW"): "adamw", ("bitsandbytes.optim", "AdamW8bit"): "adamw-8bit"}


def read_launched(c: Collector, run) -> None:
    """One SFT run: torchrun's processes are the world (fsdp_sft_trainer.py:808-816 builds its meshes over the process
    group; trainer.n_gpus_per_node is not read there), the overrides over the config's defaults."""
    world.read(c, run)
    over = {k.lstrip("+"): v for k, v in hydra.overrides(run.args, run.command.path, plus=True).items()}
    f = hydra.config(c, run, f"{run.target}'s own config read") | over
    refuse_megatron(f, run)
    table, file = TABLES[run.target], FILES[run.target]
    why = f"{run.target}'s config read at v0.7.0"
    releases.by_flags(c, "verl", run, ("0.7", why))
    c.set("workload.kind", "sft", f"{run.where} -m {run.target}", "-m")

    def get(name: str) -> tuple[object, str]:
        key = table.key(name)
        if key in f:
            return one(f[key].value), f[key].source
        row = table[name]
        return row.default, default(V070, row.cite, f"{key} {row.default}")

    if table.key("model") in f:
        flag = f[table.key("model")]
        read_model(c, str(one(flag.value)), flag.source, table.key("model"), run.command.path)
    attn = f.get("model.override_config.attn_implementation")  # the engine's (workers/config/model.py:128)
    if attn is not None and run.target == ENGINE_ENTRY and str(one(attn.value)) in IMPLS:
        c.set("attention", IMPLS[str(one(attn.value))], attn.source, attn.key)
    else:
        c.set("attention", "flash", default(V070, ATTN[run.target], "flash_attention_2"), "attn_implementation")
    _precision(c, f, get, table, file)
    _split(c, f, get, table, file)
    _sharding(c, f, get, table, file)
    _notes(c, f, get, table, file)


def _split(c: Collector, f: dict[str, Flag], get, table, file: str) -> None:
    """The batch: rows of data.max_length (sft_dataset.py:166-176 pads each to it), micro_batch_size_per_gpu a step,
    data.train_batch_size over the data-parallel ranks, world / Ulysses size (fsdp_sft_trainer.py:145-155;
    sft_trainer.py:187-195): the accumulation from the world, derived again where a flag gives the GPUs."""
    seq, ss = get("seq_len")
    c.number("seq_len", seq, ss, table.key("seq_len"))
    micro, ms = get("micro_batch")
    if "data.micro_batch_size" in f:  # sft_trainer.yaml:7, read by neither trainer at v0.7.0
        c.note(f"{f['data.micro_batch_size'].source} (not read by {V070}: data.micro_batch_size_per_gpu decides)")
    dynamic = "dynamic_batch" in table.rows and as_bool(get("dynamic_batch")[0])
    if dynamic:  # sft_trainer.py:285-289: the engine cuts each rank's rows by tokens, no assertion on the split
        budget, bs = get("max_tokens_per_gpu")
        rows = max(1, (as_int(budget) or 8192) // (as_int(seq) or 1024))
        micro, ms = rows, f"{get('dynamic_batch')[1]}; {bs} (micro-batches cut by tokens: {rows} rows of max_length)"
    m = c.number("micro_batch", micro, ms, table.key("micro_batch"))
    batch, bs = get("global_batch")
    g, sp = as_int(batch) or 256, as_int(get("sequence_parallel")[0]) or 1

    def split(request: dict) -> tuple[int, int]:
        """(micro, accumulation) over the request's world: a token budget's rows at most a rank's share."""
        dp = max(1, (request.get("gpus_per_node") or 1) * (request.get("nodes") or 1) // sp)
        mm = min(m or 1, max(1, g // dp)) if dynamic else m or 1
        return mm, max(1, g // dp // mm)

    c.derived["grad_accum"] = (("gpus_per_node", "nodes"), lambda r: split(r)[1])
    if dynamic:
        c.derived["micro_batch"] = (("gpus_per_node", "nodes"), lambda r: split(r)[0])
    per_node, nodes = c.get("gpus_per_node"), c.get("nodes", 1)
    if per_node is None or m is None:
        return
    dp = max(1, int(per_node) * int(nodes) // sp)
    if not dynamic and file == FILES[FSDP_ENTRY] and (g % dp or (g // dp) % m):
        raise BadInput(
            f"{bs}: {g} rows do not split into {dp} data-parallel ranks x micro {m} (fsdp_sft_trainer.py:149-155 "
            "asserts it): give a train_batch_size that does",
            "global_batch",
        )
    mm, accum = split({"gpus_per_node": int(per_node), "nodes": int(nodes)})
    if mm != m:
        c.number("micro_batch", mm, f"{ms} (at most a rank's {g // dp} rows)", table.key("micro_batch"))
    c.number("grad_accum", accum, f"{bs} / ({dp} data-parallel ranks x micro {mm})", table.key("global_batch"))


def _precision(c: Collector, f: dict[str, Flag], get, table, file: str) -> None:
    """bf16 compute over model_dtype weights (fsdp_sft_trainer.py:222-243, 292-293 MixedPrecision bf16/fp32;
    transformer_impl.py:199-247); a LoRA base in that dtype too (fsdp_sft_trainer.py:285, transformer_impl.py:247)."""
    dtype, ds = get("model_dtype")
    lora, ls = get("lora_rank")
    rank = as_int(lora) or 0
    c.set("precision", "bf16", f"{ds} ({file}: bf16 mixed precision)", table.key("model_dtype"))
    if rank > 0:
        c.number("lora_rank", rank, ls, table.key("lora_rank"))
        targets, ts = get("lora_targets")
        shown = ",".join(map(str, targets)) if isinstance(targets, (list, tuple)) else str(targets)
        c.set("lora_targets", shown, ts, table.key("lora_targets"))
        c.set("lora_base_fp32", str(dtype) in ("fp32", "float32"), ds, table.key("model_dtype"))
    elif str(dtype) not in ("fp32", "float32"):
        raise BadInput(
            f"{ds}: a full fine-tune in {dtype} weights (bf16 optimizer states) is not planned for verl (accepted: "
            f"{table.key('model_dtype')}=fp32, or LoRA)",
            "precision",
        )
    ckpt, cs = get("checkpointing")
    c.set("checkpointing", "full" if as_bool(ckpt) else "off", cs, table.key("checkpointing"))


def _sharding(c: Collector, f: dict[str, Flag], get, table, file: str) -> None:
    strategy, ss = get("strategy")
    if str(strategy) not in ("fsdp", "fsdp2"):
        raise BadInput(f"{ss}: {table.key('strategy')} {strategy} (accepted: fsdp, fsdp2; {file})", "fsdp")
    grad_op = "fsdp" in table.rows and as_bool(get("fsdp")[0]) is False
    c.set("fsdp", "grad-op" if grad_op else "full", ss, table.key("strategy"))
    c.set("zero_stage", 0, ss, table.key("strategy"))
    if "offload" in table.rows:  # engine.offload_policy: FSDP2's CPUOffloadPolicy (transformer_impl.py:348-357)
        on, src = get("offload")
    else:  # CPUOffload(offload_params=...) (fsdp_sft_trainer.py:305-308): the parameters, so the optimizer, on host
        on = as_bool(get("cpu_offload")[0]) and as_bool(get("offload_params")[0])
        src = "; ".join(f[table.key(k)].source for k in ("cpu_offload", "offload_params") if table.key(k) in f)
        src = src or get("cpu_offload")[1]
        if as_bool(get("cpu_offload")[0]) and not on:
            c.note(f"{src} (CPUOffload without offload_params keeps everything on the GPU: no offload planned)")
    c.set("offload", "optimizer+params" if as_bool(on) else "none", src, "offload")
    sp, sps = get("sequence_parallel")
    c.number("sequence_parallel", sp, sps, table.key("sequence_parallel"))
    if (as_int(sp) or 1) > 1 and not as_bool(get("remove_padding")[0]):
        raise BadInput(
            f"{sps}: Ulysses needs {table.key('remove_padding')}=true ({file}; fsdp_sft_trainer.py:231-232 asserts it)",
            "sequence_parallel",
        )
    impl, name = str(get("optimizer_impl")[0]), str(get("optimizer")[0])
    kwargs = get("optimizer_kwargs")[0]
    chosen = OPTIMIZERS.get((impl, name))
    if chosen is None:
        raise BadInput(
            f"{get('optimizer')[1]}: {impl}.{name} is not planned for verl (accepted: torch.optim AdamW, "
            "bitsandbytes.optim AdamW8bit)",
            "optimizer",
        )
    fused = chosen == "adamw" and as_bool(hydra_dict(kwargs).get("fused"))
    c.set("optimizer", "adamw-fused" if fused else chosen, get("optimizer")[1], table.key("optimizer"))


def hydra_dict(value: object) -> dict:
    """A Hydra override's dict (`{fused:true}`: Hydra's grammar reads `key:value` without a space, which YAML reads as
    one key), else {}."""
    if not isinstance(value, dict):
        return {}
    out = {}
    for k, v in value.items():
        key, colon, rest = str(k).partition(":")
        out[key.strip()] = rest.strip() if colon and v is None else v
    return out


def _notes(c: Collector, f: dict[str, Flag], get, table, file: str) -> None:
    """Keys read and not planned, each a line."""
    if as_bool(get("use_liger")[0]):
        c.note(
            f"{get('use_liger')[1]} (not planned: Liger's kernels are patched in, but {file} calls the model without "
            "labels (fsdp_sft_trainer.py:389-391), so no fused cross-entropy runs: planned with the logits kept)"
        )
    own = {row.key for row in table.rows.values()}
    size = f.get("engine.fsdp_size")  # FSDP over groups of that size, replicated across them (utils/fsdp_utils.py)
    if size is not None and as_int(one(size.value)) not in (-1, None):
        if as_int(one(size.value)) == c.get("gpus_per_node") and (c.get("nodes") or 1) > 1:
            c.set("fsdp", "hybrid", size.source, size.key)  # a node's GPUs a group: memplan's HSDP
        else:
            c.note(f"{size.source} (not planned: FSDP groups other than one a node)")
    padding, ps = get("remove_padding")
    if as_bool(padding) and table.key("remove_padding") in f:
        c.note(f"{ps} (the pads dropped before the model: rows planned whole at data.max_length, an upper bound)")
    for key in sorted(k for k in f if k.startswith("engine.") and k not in KNOWN and k not in own):
        c.note(f"{f[key].source} (not a key of verl's FSDP engine, engine/fsdp.yaml: not planned)")
    for key in ("trainer.n_gpus_per_node", "trainer.nnodes"):
        if key in f:
            c.note(f"{f[key].source} (not read under torchrun: its processes are the world)")
    for key in ("engine.param_offload", "engine.optimizer_offload"):
        if key in f and as_bool(one(f[key].value)):
            c.note(
                f"{f[key].source} (not planned: moved to the host between steps, transformer_impl.py:122-123; the "
                "step holds them)"
            )
