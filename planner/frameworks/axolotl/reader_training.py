"""axolotl 0.19.0's training settings in a config YAML -> request fields: gradient checkpointing and activation
offloading, precision (the model loaded in it), attention, packing, the optimizer and the loss (Liger's, Cut
Cross-Entropy's, chunked). Also the key lookups both axolotl reader modules share (`look`, `given_flag`)."""

from __future__ import annotations

from planner.config.knobfields import LOW_RANK_OPTIMIZERS
from planner.errors import BadInput
from planner.frameworks import adapter
from planner.frameworks.axolotl.keys import KEYS, OWN_OPTIMIZERS
from planner.intake import line_defaults, tuners, vocab
from planner.intake.collect import AXOLOTL, Collector, as_bool, default, show
from planner.intake.flags import Flag


def _get(f: dict[str, Flag], key: str, fallback: object, cite: str) -> tuple[object, str]:
    if key in f and f[key].value is not None:
        return f[key].value, f[key].source
    return fallback, default(AXOLOTL, cite, f"{key} {fallback}")


def look(c: Collector, f: dict[str, Flag], name: str) -> tuple[object, str]:
    """(value, source) of field `name`'s key (planner.frameworks.axolotl.keys), else the release line's default where
    it moved (planner.intake.line_defaults.moved_default: the line the reading targets), else axolotl's and its cite."""
    k = KEYS[name]
    if k.key not in f and (moved := line_defaults.moved_default(c, "axolotl", name)) is not None:
        return moved
    return _get(f, k.key, k.default, k.cite)


def given_flag(f: dict[str, Flag], name: str) -> Flag | None:
    """Field `name`'s key where the config sets it (truthy)."""
    flag = f.get(KEYS.key(name))
    return flag if flag is not None and flag.value else None


def offload_mode(c: Collector, offload: object, first: tuple) -> str:
    """What axolotl offloads at the line starting at `first`:
    - before v0.12.0, gradient_checkpointing unsloth / offload is Unsloth's checkpointer: each decoder layer's input
      copied to the host, the layer run under no_grad and recomputed in backward (v0.5.0 utils/models.py:380-381,
      v0.8.0 :560-561 -> utils/gradient_checkpointing/__init__.py:8-14, unsloth.py:39-46): offload-inputs;
    - v0.12.0 .. v0.17.x, activation_offloading true (what gradient_checkpointing offload becomes, v0.12.0
      validation): each layer wrapped by torch's non-reentrant checkpoint (loaders/model.py:232-239 ac_wrap_hf_model)
      inside TRL's OffloadActivations, so the checkpoints' inputs go to the host: offload-inputs; legacy is Unsloth's;
    - from v0.18.0 an adapter run's activation_offloading is TRL's offloader with HF's checkpointing turned off,
      every saved tensor to the host (v0.18.0 loaders/model.py:357-369 wraps only full fine-tuning,
      core/builders/base.py:592-597): offload; full fine-tuning keeps the wrap, and hidden_states offloads the
      checkpoints' inputs (monkeypatch/activation_offload_checkpoint.py:1-18).
    The newest line (0.14, v0.14.0 .. 0.19.0) is planned as 0.19.0 runs it (v0.14.0 .. v0.17.x wrapped adapter runs
    too: less host RAM than planned)."""
    if first >= (0, 14) and c.get("lora_rank", 0) and offload and offload != "hidden_states":
        return "offload"
    return "offload-inputs"


def training(c: Collector, f: dict[str, Flag], first: tuple = (0, 14)) -> None:
    gc, gsrc = look(c, f, "checkpointing")
    gk, ok = KEYS.key("checkpointing"), KEYS.key("activation_offloading")
    offload = f[ok].value if ok in f else None
    if str(gc).startswith(("offload", "unsloth")) or (offload and as_bool(gc) is not False):
        src = f[ok].source if offload else gsrc
        if str(gc).startswith("offload") and not offload and first >= (0, 12):  # validation.py:1577-1586
            offload = not str(gc).endswith("disk") or "disk"
        c.set("checkpointing", offload_mode(c, offload, first), src, ok if offload else gk)
        if any("disk" in str(x) for x in (gc, offload)):
            c.note(f"{src} (offloading to disk: planned as offloading to host RAM)")
    else:
        c.set("checkpointing", "full" if as_bool(gc) else "off", gsrc, gk)
    _precision(c, f)
    _attention(c, f)
    _allocator(c)
    packing = f.get(KEYS.key("batching"))
    if packing is not None and as_bool(packing.value):
        c.set("batching", "packed", packing.source, KEYS.key("batching"))
    opt, osrc = look(c, f, "optimizer")
    if tuners.optimizer(osrc, opt) and (vocab.optimizer(opt) or OWN_OPTIMIZERS.get(str(opt).strip().lower())):
        c.set(
            "optimizer", vocab.optimizer(opt) or OWN_OPTIMIZERS[str(opt).strip().lower()], osrc, KEYS.key("optimizer")
        )
    else:
        c.note(f"{osrc} (this optimizer is not planned yet; planned as AdamW)")
    args, mods = f.get("optim_args"), f.get("optim_target_modules")  # transformers' (utils/schemas/training.py:132)
    _low_rank_targets(c, osrc, opt, mods)
    parsed = (args.value if isinstance(args.value, dict) else tuners.optim_args(args.value)) if args else {}
    rank = parsed.get("rank")
    if args:
        tuners.rmsprop_buffers(c, opt, parsed, args.source)
        tuners.apollo_projector(args.source, opt, parsed.get("proj"))  # transformers' optim_args proj=
        if "proj_type" in parsed:  # transformers' optim_args proj_type= (trainer_optimizer.py:373, 402)
            tuners.low_rank_projection(c, parsed["proj_type"], args.source, "optim_args")
    tuners.low_rank_fields(
        c, (rank, args.source, args.raw) if rank else None, (mods.value, mods.source, mods.raw) if mods else None
    )
    _loss(c, f)


def _low_rank_targets(c: Collector, source: str, optimizer: object, mods: Flag | None) -> None:
    """GaLore or APOLLO without optim_target_modules, refused in one line: axolotl's schema leaves it None (0.19.0
    utils/schemas/training.py:132; v0.5.0 v0_4_1/__init__.py:436) and hands None to transformers, which raises
    ValueError building the optimizer (5.16.1, 0.19.0's pin: trainer_optimizer.py:121-122; 4.46.1, v0.5.0's:
    trainer.py:1438-1441)."""
    line, opt = c.facts.get("release", ("",))[0], c.get("optimizer")
    if opt not in adapter("axolotl", str(line or "")).runs["optimizer"]:
        return  # a line whose transformers has no GaLore or APOLLO (v0.4.0) refuses the optimizer itself
    if opt in LOW_RANK_OPTIMIZERS and (mods is None or mods.value is None):
        raise BadInput(
            f"{source}: axolotl{f' {line}' if line else ''} with optimizer {optimizer} and no optim_target_modules: "
            "transformers raises ValueError building it (5.16.1 trainer_optimizer.py:121-122, 4.46.1 trainer.py:1438-"
            "1441): not planned; set optim_target_modules",
            "config",
        )


HALF_WEIGHTS = {"bfloat16": "bf16", "float16": "fp16"}


def _precision(c: Collector, f: dict[str, Flag]) -> None:
    bk, fk = KEYS.key("bf16"), KEYS.key("fp16")
    bf16, bsrc = look(c, f, "bf16")
    fp16 = fk in f and as_bool(f[fk].value)
    amp = "bf16" if bf16 == "auto" or as_bool(bf16) else "fp16" if fp16 else "fp32"
    src = f"{bsrc} (auto: bf16 where the GPU has it)" if bf16 == "auto" else bsrc if amp != "fp16" else f[fk].source
    c.fact("amp", amp, src, bk if amp != "fp16" else fk)
    # bfloat16 / float16: half weights without autocast (v0.18.0 utils/config/__init__.py:191-196)
    half = next((k for k in HALF_WEIGHTS if amp == "fp32" and k in f and as_bool(f[k].value)), None)
    if half is not None:
        c.fact("weights", HALF_WEIGHTS[half], f"{f[half].source}; the model loads in it", half)
        return
    c.fact("weights", amp, f"{src}; the model loads in it (axolotl/utils/config/__init__.py:199-203)", bk)


def _loss(c: Collector, f: dict[str, Flag]) -> None:
    pk, fused, chunked = KEYS.key("plugins"), f.get(KEYS.key("loss_fused")), f.get(KEYS.key("loss_chunked"))
    plugins = show(f[pk].value) if pk in f else ""
    if fused is not None and as_bool(fused.value):
        c.set("loss", "fused", fused.source, KEYS.key("loss_fused"))
    elif "CutCrossEntropyPlugin" in plugins and as_bool(
        f["cut_cross_entropy"].value if "cut_cross_entropy" in f else True
    ):
        c.set(
            "loss",
            "fused",
            f"{f[pk].source} (Cut Cross-Entropy, on once listed: axolotl/integrations/"
            "cut_cross_entropy/args.py:33; no full logits, planned as memplan's fused loss)",
            pk,
        )
    elif chunked is not None and as_bool(chunked.value):
        c.set("loss", "chunked", chunked.source, KEYS.key("loss_chunked"))


def _attention(c: Collector, f: dict[str, Flag]) -> None:
    legacy = {"flash_attention": "flash", "sdp_attention": "sdpa", "eager_attention": "eager"}
    for key, value in legacy.items():
        if key in f and as_bool(f[key].value):
            c.set("attention", value, f[key].source, key)
    impl = given_flag(f, "attention")
    if impl is not None:
        mapped = vocab.attention(impl.value)
        if mapped:
            c.set("attention", mapped, impl.source, KEYS.key("attention"))
        else:
            c.note(f"{impl.source} (this attention implementation is not planned yet; planned as sdpa)")


# the launches that run axolotl's own CLI, which sets the allocator's config (planner.frameworks.axolotl.releases:
# EXPANDABLE): the files alone (the `axolotl train` its docs launch them with) or the `axolotl` command
CLI_READS = ("config", "axolotl")


def _allocator(c: Collector) -> None:
    """Expandable segments where axolotl's CLI turns them on and the command's environment said nothing (a
    PYTORCH_CUDA_ALLOC_CONF it gives was read first: planner.intake.training.read_allocator); v0.5.0-v0.6.0 set them in
    train.py and v0.8.0-v0.11.x in cli/train.py too (v0.8.0 :38), whatever launched them; v0.7.x and from v0.12.0 only
    the `axolotl` command."""
    from planner.frameworks.axolotl.releases import EXPANDABLE

    moved = line_defaults.moved_default(c, "axolotl", "expandable_segments")
    release = str(c.facts.get("release", ("",))[0] or "")
    launched = c.facts.get("framework", (None, None, "config"))[2]
    if moved is None and launched not in CLI_READS and not release.startswith(("0.5", "0.8")):
        return  # `accelerate launch -m axolotl.cli.train` at v0.7.x and from v0.12.0: nothing sets them
    value, source = moved or (True, default(AXOLOTL, EXPANDABLE))
    c.fill("expandable_segments", value, source, "PYTORCH_CUDA_ALLOC_CONF")
