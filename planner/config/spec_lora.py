"""The LoRA rules between knobs alone (planner.config.spec_rules.combination_rules runs lora_rules): the adapter
knobs need adapters, DoRA's planned bases, the quantized bases' precisions and sharding, the tower's checkpointing and
adapters; each broken rule a BadInput naming its field (as its CLI flag)."""

from __future__ import annotations

from planner.config.knobfields import CT_QUANTS, KnobFields
from planner.config.spec_lora_ends import ends_rules
from planner.errors import BadInput
from planner.frameworks import adapter
from planner.frameworks.memory import DROPOUT_KEPT_BY_FLAG
from planner.frameworks.peft import PEFT_0_22, peft_of, reached
from planner.frameworks.rules import runs_transformers_5


def _plain_base(k: KnobFields) -> tuple[tuple[bool, str], ...]:
    """The settings no LoRA variant but plain LoRA is planned with: a quantized base, tower adapters, an fp32 base
    under mixed precision (each variant's rules check them first, in this order)."""
    return (
        (k.quant != "none", f"--quant {k.quant}"),
        (k.lora_vision, "--lora-vision"),
        (k.lora_base_fp32, "--lora-base-fp32"),
        (k.lora_tower_full, "--lora-tower-full"),
    )


def _stacked_experts(k: KnobFields) -> tuple[bool, str]:
    """LoRA on stacked expert weights (PEFT adapts nn.Linear alone with the variants)."""
    return (".experts" in k.lora_targets or "experts." in k.lora_targets, f"--lora-targets {k.lora_targets}")


def _refuse_first(checks, message) -> None:
    """The first broken setting of a LoRA variant's (broken, flag) checks, refused with message(flag)."""
    for bad, what in checks:
        if bad:
            raise BadInput(message(what), "lora_variant")


def dora_rules(k: KnobFields) -> None:
    """DoRA's terms (planner.estimate.lora) are pinned on a 16-bit or fp32 base's decoder linears, under DDP, ZeRO
    (ZeRO-3 gathers the base weight its norm reads as an external parameter of the DoRA module: deepspeed 0.19.8
    runtime/zero/parameter_offload.py:80-89) or FSDP (the unit's unsharded weight). Not on a quantized base (the
    norm dequantizes each weight: another transient, unmeasured), nor on tower adapters (the towers' linears are not
    traced with DoRA), nor under selective-op checkpointing (the sim's trace of torch's selective checkpointing fails
    on DoRA's weight norm: its recompute finds no saved copy); PEFT runs no DoRA on stacked experts (peft 0.21.2
    tuners/lora/layer.py:2371-2372)."""
    if k.lora_variant != "dora":
        return
    _refuse_first(
        (*_plain_base(k), (k.checkpointing == "selective-op", "--checkpointing selective-op"), _stacked_experts(k)),
        lambda what: (
            f"--lora-variant dora with {what} is not planned (DoRA is planned on a 16-bit or fp32 base's "
            "decoder linears, under DDP, ZeRO or FSDP; no quantized base or tower adapters): does plain LoRA's "
            "plan answer you (DoRA only adds to its memory)? then give --lora-variant lora"
        ),
    )


def oft_rules(k: KnobFields) -> None:
    """OFT's terms (planner.estimate.oft) are pinned on a 16-bit or bitsandbytes 4-bit base's decoder linears (the
    4-bit linear saves no input, as the half one: bitsandbytes 0.50.2 autograd/_functions.py:357-358; one OFT linear
    over a real nf4 base on CPU keeps and holds the same bytes as over a bf16 one), on one GPU, DDP, ZeRO 1-3 or FSDP
    (DeepSpeed and FSDP run the rotations in half: planner.estimate.oft.mode); and on a GPTQ or AWQ checkpoint (AWQ's
    in the fp16 it loads in), whose quantized linear PEFT wraps in the same OFT Linear, the input rotated before the
    base runs (peft 0.21.2 tuners/oft/model.py:38-39, layer.py:638-660): the base's terms are LoRA's on it
    (tests/probes/test_oft.py). No int8 or other prequantized base, no tower adapters, no dropout (PEFT's OFT has
    only its block-wise module_dropout, which memplan does not plan)."""
    if k.lora_variant != "oft":
        return
    _refuse_first(
        (
            (k.quant not in ("none", "nf4", "fp4", "gptq", "awq"), f"--quant {k.quant}"),
            *_plain_base(k)[1:],
            (k.lora_dropout > 0, f"--lora-dropout {k.lora_dropout}"),
            (k.precision == "fp32" or (k.precision == "fp16" and k.quant != "awq"), f"--precision {k.precision}"),
            (k.checkpointing == "selective-op", "--checkpointing selective-op"),
            _stacked_experts(k),
        ),
        lambda what: (
            f"--lora-variant oft with {what} is not planned (OFT is planned on a bf16 or bitsandbytes 4-bit base's "
            f"decoder linears under bf16 AMP or bf16-pure): would the run without {what} answer you?"
        ),
    )


def boft_rules(k: KnobFields) -> None:
    """BOFT's terms (planner.estimate.boft) are pinned on a bf16 base's decoder linears under bf16 AMP or bf16-pure, on
    one GPU or DDP, where HF's Trainer moves the whole model, permutation buffers included, to the GPU (transformers
    5.25 trainer.py:481-505). Not under DeepSpeed or FSDP (their engines move and cast the buffers: unmeasured), a
    device map or a bitsandbytes base (the Trainer moves neither: the buffers stay on the CPU and are copied each
    forward, unmeasured), nor with dropout, tower adapters or selective-op checkpointing (as OFT)."""
    if k.lora_variant != "boft":
        return
    _refuse_first(
        (
            (k.quant != "none", f"--quant {k.quant}"),
            *_plain_base(k)[1:],
            (k.lora_dropout > 0, f"--lora-dropout {k.lora_dropout}"),
            (k.precision in ("fp32", "fp16"), f"--precision {k.precision}"),
            (k.zero_stage > 0, f"--zero {k.zero_stage}"),
            (k.fsdp != "off", f"--fsdp {k.fsdp}"),
            (k.device_map > 1, f"--device-map {k.device_map}"),
            (k.dataparallel, "--dataparallel"),
            (k.checkpointing == "selective-op", "--checkpointing selective-op"),
            _stacked_experts(k),
        ),
        lambda what: (
            f"--lora-variant boft with {what} is not planned (BOFT is planned on a bf16 base's decoder linears under "
            f"bf16 AMP or bf16-pure, on one GPU or DDP): would the run without {what} answer you?"
        ),
    )


def tuner_rules(k: KnobFields) -> None:
    """AdaLoRA's and VeRA's terms (planner.estimate.peft_tuners) are pinned on a 16-bit or fp32 base's decoder
    linears without ZeRO-3 or FSDP (AdaLoRA's allocator reads whole gradients, VeRA's shared buffers are not
    sharded: unmeasured), with AdamW-family or SGD optimizers (Adafactor's factored states of their vectors are not
    counted), and no stacked experts (PEFT adapts nn.Linear alone with them)."""
    if k.lora_variant not in ("adalora", "vera"):
        return
    name = "AdaLoRA" if k.lora_variant == "adalora" else "VeRA"
    _refuse_first(
        (
            *_plain_base(k),
            (k.zero_stage == 3, "--zero 3"),
            (k.fsdp != "off", f"--fsdp {k.fsdp}"),
            (k.optimizer == "adafactor", "--optimizer adafactor"),
            _stacked_experts(k),
        ),
        lambda what: (
            f"--lora-variant {k.lora_variant} with {what} is not planned ({name} is planned on a 16-bit or fp32 "
            "base's decoder linears under DDP or ZeRO-1/2, with AdamW or SGD)"
        ),
    )


def adapter_rules(k: KnobFields) -> None:
    """ms-swift's bottleneck adapters (planner.estimate.bottleneck) are pinned on a bf16 base under bf16 AMP or
    bf16-pure, on one GPU or DDP (ZeRO and FSDP cast the fp32 adapters to half: unmeasured), on every decoder layer's
    MLP (ms-swift reads no target list for them, so LoRA's target, dropout, embedding and tower knobs have nothing
    to act on), with no quantized base and no selective-op checkpointing."""
    if k.lora_variant != "adapter":
        return
    _refuse_first(
        (
            *_plain_base(k),
            (k.lora_train_embeddings, "--lora-train-embeddings"),
            (k.lora_dropout > 0, f"--lora-dropout {k.lora_dropout}"),
            (k.lora_targets != "all-linear", f"--lora-targets {k.lora_targets}"),
            (k.precision in ("fp32", "fp16"), f"--precision {k.precision}"),
            (k.zero_stage > 0, f"--zero {k.zero_stage}"),
            (k.fsdp != "off", f"--fsdp {k.fsdp}"),
            (k.checkpointing == "selective-op", "--checkpointing selective-op"),
        ),
        lambda what: (
            f"--lora-variant adapter with {what} is not planned (ms-swift's bottleneck adapters are planned after "
            "every decoder layer's MLP, on a bf16 base under bf16 AMP or bf16-pure, on one GPU or DDP)"
        ),
    )


def oft_model_error(k: KnobFields, spec) -> BadInput | None:
    """OFT's and the bottleneck adapter's layer terms were traced on Llama/Qwen2-style dense layers (two RMSNorms,
    separate q/k/v and gate/up), as planner.estimate.lora.layer_examined names them; another model's is refused in
    one line."""
    if k.lora_variant not in ("oft", "boft", "adapter") or not k.lora_rank or spec is None:
        return None
    name = {"oft": "OFT", "boft": "BOFT"}.get(k.lora_variant, "the bottleneck adapter")
    t = spec.text
    fused = any(x.name in ("qkv_proj", "gate_up_proj") for x in spec.tensors if x.role == "layer" and x.lora)
    if t.traits.conv1d or t.traits.fp32_norms or t.qk_norm or t.moe or t.mla or t.traits.norms_per_layer != 2 or fused:
        return BadInput(
            f"--lora-variant {k.lora_variant} on {spec.name} is not planned ({name}'s terms are pinned on Llama/Qwen2-style dense "
            "layers: two RMSNorms, separate q/k/v and gate/up linears): would LoRA's plan answer you? then give "
            "--lora-variant lora",
            "lora_variant",
        )
    return boft_width_error(k, spec)


def experts_dropout_error(k, spec) -> BadInput | None:
    """PEFT's ParamWrapper (LoRA on stacked experts, target_parameters) refuses any LoRA dropout: get_peft_model
    raises (peft 0.22.0 tuners/lora/layer.py:2535, 0.20.0 :2267; measured on 0.21.2 and 0.22.0 with Mixtral, DeepSeek
    and Qwen1.5-MoE, and through ms-swift 4.6.0's default 0.05 on DeepSeek-V2 and GLM-4.5). A plan whose adapters
    reach the experts (all-linear as the line's PEFT and target list reach them: planner.frameworks.peft) with
    --lora-dropout above 0 is refused in one line."""
    if not k.lora_rank or k.lora_dropout <= 0 or spec is None or k.lora_variant != "lora":
        return None
    if not runs_transformers_5(k.framework, k.release):  # transformers 4: each expert's nn.Linear, no ParamWrapper
        return None
    model = reached(spec, k.framework, k.release, k.peft_release) if k.lora_targets == "all-linear" else spec
    if not any(t.experts and t.adapted(k.lora_targets) for t in model.tensors):
        return None
    return BadInput(
        f"--lora-dropout {k.lora_dropout} with LoRA on {spec.name}'s stacked experts ({k.lora_targets} reaches them "
        "here): PEFT's ParamWrapper refuses any dropout there (get_peft_model raises); give --lora-dropout 0, or "
        "--lora-targets without the experts",
        "lora_dropout",
    )


def pattern_tower_error(k, spec) -> BadInput | None:
    """A VLM whose language model memplan adapts by a pattern of names, in a family PEFT maps (GLM-4.5V:
    planner.model.moespec.PATTERN_MAPS): from PEFT 0.22 the MoE conversion resolves the pattern to bare leaf names
    (peft 0.22.0 utils/transformers_weight_conversion.py:356-408), which also match the vision tower's and merger's
    gate/up/down_proj (measured, GLM-4.5V cut to two layers: 631,296 adapter parameters there, the plan keeps the
    tower frozen). Where the line hands PEFT that pattern and targets an MLP name: refused in one line."""
    moe = spec.text.moe if spec is not None else None
    if not k.lora_rank or moe is None or not moe.pattern or spec.vision is None:
        return None
    if adapter(k.framework, k.release).all_linear_names or peft_of(k.framework, k.release, k.peft_release) < PEFT_0_22:
        return None
    if not any(t.moe_part == "mlp" and t.adapted(k.lora_targets) for t in spec.tensors):
        return None
    return BadInput(
        f"--lora-targets {k.lora_targets} on {spec.name} with PEFT 0.22: its MoE target conversion turns the "
        "language model's pattern into bare module names, which also adapt the vision tower's and merger's MLP "
        "(the plan keeps them frozen); give --lora-targets attention (q/k/v/o name no tower module)",
        "lora_targets",
    )


def boft_width_error(k: KnobFields, spec) -> BadInput | None:
    """PEFT's BOFT takes a block size that divides every adapted linear's input width, else get_peft_model raises
    (peft 0.21.2 tuners/boft/layer.py:322-326; OFT adjusts it instead): refused in one line."""
    if k.lora_variant != "boft":
        return None
    bad = sorted({t.shape[-1] for t in spec.tensors if t.adapted(k.lora_targets) and t.shape[-1] % k.lora_rank})
    if not bad:
        return None
    return BadInput(
        f"--lora-rank {k.lora_rank} (BOFT's boft_block_size) does not divide the input width {bad[0]} of an adapted "
        f"linear of {spec.name}: PEFT raises on it; give a block size that divides every adapted input width",
        "lora_rank",
    )


def lora_rules(k: KnobFields) -> None:
    """Adapter knobs without adapters, frozen parts with LoRA, the tower's checkpointing and adapters, DoRA, the base."""
    if k.frozen != "none" and k.lora_rank:
        raise BadInput(
            f"--frozen {k.frozen} is for full fine-tuning: LoRA (--lora-rank {k.lora_rank}) "
            "already freezes every base weight",
            "frozen",
        )
    if k.lora_rank == 0:
        for field, default in (
            ("quant", "none"),
            ("quant_absmax", "8bit"),
            ("lora_targets", "all-linear"),
            ("lora_train_embeddings", False),
            ("lora_variant", "lora"),
            ("lora_dropout", 0.0),
            ("lora_base_fp32", False),
            ("lora_vision", False),
            ("lora_tower_full", False),
            ("lora_dropout_kept", False),
            ("lora_ends", "none"),
        ):
            if getattr(k, field) != default:
                flag = "--" + field.replace("_", "-")
                raise BadInput(f"{flag} {getattr(k, field)} needs LoRA adapters: give --lora-rank > 0", field)
    if k.vit_checkpointing == "off" and k.checkpointing in ("off", "offload"):
        raise BadInput(
            f"--vit-checkpointing off: the tower checkpoints only beside the decoder's checkpointing (--checkpointing "
            f"{k.checkpointing} has none to leave out)",
            "vit_checkpointing",
        )
    if k.lora_vision and k.lora_targets != "all-linear":
        raise BadInput(
            f"--lora-vision adapts every linear of the tower and projector, as PEFT's all-linear does: with "
            f"--lora-targets all-linear, not {k.lora_targets}",
            "lora_vision",
        )
    if k.lora_dropout_kept and k.workload.kind not in DROPOUT_KEPT_BY_FLAG:
        raise BadInput(
            f"--lora-dropout-kept keeps the dropout TRL's DPO, KTO and GKD trainers zero (disable_dropout false): it "
            f"needs --workload dpo, kto or gkd, not {k.workload.kind}",
            "lora_dropout_kept",
        )
    tower_full_rules(k)
    ends_rules(k)
    dora_rules(k)
    oft_rules(k)
    boft_rules(k)
    tuner_rules(k)
    adapter_rules(k)
    base_rules(k)


def tower_full_rules(k: KnobFields) -> None:
    """--lora-tower-full (ms-swift's lora_llm): the tower and projector trained themselves, so no adapters on them;
    planned on an unquantized base, whole on each rank or under ZeRO (FSDP's units and a quantized tower are not)."""
    if not k.lora_tower_full:
        return
    for bad, what in (
        (k.lora_vision, "--lora-vision (the tower trains in full: no adapters on it)"),
        (k.quant != "none", f"--quant {k.quant}"),
        (k.fsdp != "off", f"--fsdp {k.fsdp}"),
    ):
        if bad:
            raise BadInput(f"--lora-tower-full with {what} is not planned", "lora_tower_full")


GPTQMODEL_BUFFERS = "gptqmodel keeps the weights in buffers, which FSDP and ZeRO-3 do not shard"
UNSHARDED = {  # the quantized bases memplan plans on whole ranks only, and why
    "int8": "FSDP drops bitsandbytes' int8 state, LLaMA-Factory refuses it",
    "gptq": GPTQMODEL_BUFFERS,
    "awq": GPTQMODEL_BUFFERS,
    **dict.fromkeys(
        CT_QUANTS,
        "CompressedLinear registers its dense weight at its first forward, after FSDP or ZeRO-3 has wrapped it",
    ),
    "hqq": "HQQLinear keeps its scales and zeros in a dict, not in parameters or buffers",
}


def base_rules(k: KnobFields) -> None:
    """The base's dtype and quantization: an fp32 base under mixed precision, a 4-bit base's absmax, which quantized
    bases shard, AWQ's and GPTQ's compute dtypes, no offloaded quantized base."""
    if k.lora_base_fp32 and (k.zero_stage or k.precision not in ("bf16", "fp16")):
        raise BadInput(
            "--lora-base-fp32 is for bf16/fp16 mixed precision under torch AMP or FSDP: DeepSpeed casts the base to "
            f"half (--zero {k.zero_stage}), and --precision {k.precision} sets the base's dtype itself",
            "lora_base_fp32",
        )
    sharded = k.zero_stage == 3 or k.fsdp != "off"
    if k.quant_absmax != "8bit" and k.quant not in ("nf4", "fp4"):
        raise BadInput(
            f"--quant-absmax {k.quant_absmax} is how a 4-bit base stores its block constants: give --quant nf4 or fp4",
            "quant_absmax",
        )
    if k.quant in UNSHARDED and sharded:
        raise BadInput(
            f"--quant {k.quant} cannot be sharded ({UNSHARDED[k.quant]}): use --zero 0, 1 or 2 with --fsdp off, or a "
            "bitsandbytes 4-bit base (--quant nf4)",
            "quant",
        )
    if k.quant == "hqq" and k.precision == "bf16-pure":
        raise BadInput(
            "--quant hqq with --precision bf16-pure: transformers 4.57 builds HQQLinear in fp32 (quantizers/"
            "quantizer_hqq.py:74-79), whose weight meets a bf16 input only under autocast: use --precision bf16",
            "quant",
        )
    if k.quant == "awq" and k.precision != "fp16":
        raise BadInput(
            f"--quant awq with --precision {k.precision}: transformers runs AWQ models in fp16 on CUDA "
            "(quantizers/quantizer_awq.py:54-62); use --precision fp16",
            "quant",
        )
    if k.quant == "gptq" and k.precision == "fp32":
        raise BadInput("--quant gptq computes in fp16 or bf16: use --precision fp16 or bf16", "quant")
    fsdp_four_bit = k.quant in ("nf4", "fp4") and k.fsdp != "off"  # planner.estimate.fsdp: packed shards
    if k.quant != "none" and sharded and k.offload == "optimizer+params" and not fsdp_four_bit:
        raise BadInput(
            f"--quant {k.quant} with --offload optimizer+params: a quantized base offloaded to the host is "
            "planned under FSDP with a 4-bit base only; use --offload none or optimizer",
            "quant",
        )
