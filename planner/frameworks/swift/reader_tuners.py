"""ms-swift's AdaLoRA and VeRA (--tuner_type adalora | vera) as memplan's --lora-variant: the rank each reads
(--adalora_init_r, --vera_rank, not --lora_rank; planner.frameworks.swift.keys) and its dropout. Read in the 4.6.0 wheel:
swift/arguments/tuner_args.py:165-182 (the defaults), swift/pipelines/train/tuner.py:255-306 (PEFT's AdaLoraConfig
with the LoRA kwargs, init_r and total_step; VeraConfig with r=vera_rank, vera_dropout, the target modules),
swift/callbacks/adalora.py:23-28 (update_and_allocate at every zero_grad); BOFT (--tuner_type boft: --boft_block_size,
PEFT's BOFTConfig at tuner.py:307-316, --lora_dropout unread); the bottleneck adapter (--tuner_type adapter:
--adapter_length, --adapter_act; tuner.py:280-293 builds it after the architecture's MLP, --target_modules unread); LISA
and unsloth named, planned as full fine-tuning and PEFT's LoRA."""

from __future__ import annotations

from planner.frameworks.swift.keys import ADAPTER_ACT, VERA_DROPOUT
from planner.frameworks.swift.keys import TUNER_RANK as RANK
from planner.frameworks.swift.reader_rl import get, look
from planner.intake.collect import Collector, as_float, as_int, one
from planner.intake.flags import Flag
from planner.intake.loraargs import BOFT_FIXED, refuse_unplanned


def read(c: Collector, f: dict[str, Flag], tuner: str, src: str) -> None:
    """The variant, its rank and VeRA's dropout; the caller reads --target_modules and AdaLoRA's --lora_dropout."""
    c.set("lora_variant", tuner, src, "--tuner_type")
    flag, fallback, cite = RANK[tuner]
    rank, rsrc = get(f, flag, fallback, cite)
    c.number("lora_rank", rank, f"{rsrc}; {src}", f"--{flag}")
    if tuner == "adapter":
        _adapter(c, f, src)
    if tuner == "boft":  # one butterfly factor, no block count or dropout (planner.estimate.boft)
        refuse_unplanned(f, BOFT_FIXED)
    if tuner == "vera":
        dropout, dsrc = get(f, *VERA_DROPOUT)
        if as_float(dropout) is not None:
            c.set("lora_dropout", as_float(dropout), dsrc, f"--{VERA_DROPOUT[0]}")
        c.note(
            f"{src} (ms-swift keeps VeRA's targets to the linears shaped as v_proj where the targets' shapes differ, "
            "swift/pipelines/train/tuner.py:154-170: planned on every target named, which holds more)"
        )


# activations whose backward reads their output (linear2's input, already saved): one tokens x adapter_length fewer
OUTPUT_SAVING = ("relu", "relu6", "relu2", "tanh", "sigmoid", "leaky_relu")


def _adapter(c: Collector, f: dict[str, Flag], src: str) -> None:
    """The adapter's activation sets no field (planned as gelu's, which saves its input); what ms-swift ignores."""
    act, asrc = get(f, *ADAPTER_ACT)
    if str(act).strip().lower() in OUTPUT_SAVING:
        c.note(
            f"{asrc} (--adapter_act {act} saves its output, linear2's input: planned as gelu, one tokens x "
            "adapter_length tensor a layer more)"
        )
    for flag in ("target_modules", "lora_dropout"):
        if flag in f:
            c.note(
                f"{f[flag].source} (--{flag} is not read by ms-swift's adapter: one after each decoder layer's "
                "MLP, swift/pipelines/train/tuner.py:280-293)"
            )


def unplanned_backends(c: Collector, f: dict[str, Flag]) -> None:
    """What changes the trained parameters' memory beside the tuner, named (each planned as its upper bound): LISA's
    few active layers (--lisa_activated_layers N > 0: swift/callbacks/lisa.py:14-60, every decoder layer frozen but N
    at a time; planned as full fine-tuning, whose states it reaches as layers rotate) and unsloth's own LoRA kernels and
    checkpointing (--tuner_backend unsloth, v4.5.2 swift/arguments/base_args/base_args.py:92; planned as PEFT's)."""
    lisa = f.get("lisa_activated_layers")
    if lisa is not None and (as_int(one(lisa.value)) or 0) > 0:
        c.note(f"{lisa.source} (LISA's rotating active layers are not planned: planned as full fine-tuning)")
    backend = f.get("tuner_backend")
    if backend is not None and str(one(backend.value)).lower() == "unsloth":
        c.note(f"{backend.source} (unsloth's kernels and checkpointing are not planned: planned as PEFT's)")


# ms-swift 4.x's --tuner_type lora_llm (swift/tuner_plugin/lora_llm.py:72-81): PEFT's LoraConfig(r, lora_alpha,
# target_modules=get_multimodal_target_regex(model)), the language model's linears alone (swift/utils/
# transformers_utils.py:208-216: freeze_vit and freeze_aligner True by default), no lora_dropout (PEFT's 0.0), then
# requires_grad_(True) on the ViT and the aligner, kept in the dtype they were loaded in
LORA_LLM = "swift/tuner_plugin/lora_llm.py:72-81"
LORA_LLM_IGNORES = ("target_modules", "lora_dropout", "freeze_vit", "freeze_aligner", "freeze_llm")


def read_lora_llm(c: Collector, f: dict[str, Flag], src: str, key: str) -> None:
    """--tuner_type lora_llm: LoRA at --lora_rank on the language model's linears, the tower and projector trained in
    full (lora_tower_full); the flags its tuner does not read, each one line."""
    rank, rsrc = look(f, "lora_rank")
    c.number("lora_rank", rank, f"{rsrc}; {src}", "--lora_rank")
    c.set("lora_tower_full", True, f"{src} (the ViT and aligner trained in full: {LORA_LLM})", key)
    c.set("lora_targets", "all-linear", f"{src} (the language model's linears: {LORA_LLM})", key)
    c.set("lora_dropout", 0.0, f"{src} (its LoraConfig sets no dropout: PEFT's 0.0, {LORA_LLM})", key)
    for name in LORA_LLM_IGNORES:
        if name in f:
            c.note(f"{f[name].source} (not read by --tuner_type lora_llm: {LORA_LLM})")
