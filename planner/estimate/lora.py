"""LoRA's and QLoRA's terms beyond the adapters' count (planner/model/modelspec.py counts the adapters on --lora-targets):
the embedding and head trained in full (--lora-train-embeddings), LoRA dropout's saved tensors, the inputs the
adapters save, and DoRA's (--lora-variant dora): its magnitude vectors, the outputs its forward saves and the weight
norm's temporaries.

- Trained embeddings: PEFT's `modules_to_save` (the "LoRA (emb)" recipe) keeps the frozen original and trains a
  copy of `embed_tokens` and of `lm_head` (a tied head is copied too), each in the base's dtype while the LoRA
  adapters are upcast to fp32 (PEFT's autocast_adapter_dtype): measured on debug-llama, PEFT 0.21.
The quantized base itself (--quant) is planner.estimate.quant's.
"""

from __future__ import annotations

from math import prod

from planner.estimate import activations as act
from planner.frameworks import FRAMEWORKS
from planner.frameworks.memory import DROPOUT_KEPT_BY_FLAG


def embedding_copy_params(model, knobs) -> int:
    """The trained copies of the embedding and the head (PEFT modules_to_save)."""
    if not (knobs.lora_rank and knobs.lora_train_embeddings):
        return 0
    return 2 * model.text.vocab * model.text.hidden


INPUT_GROUPS = (("q_proj", "k_proj", "v_proj", "qkv_proj"), ("gate_proj", "up_proj", "gate_up_proj"), ("down_proj",))


def _adapted_width(model, knobs, adapted: bool = True) -> int:
    """Input widths of one layer's linears that LoRA adapts (or, adapted=False, that it leaves out)."""
    return sum(
        t.shape[1] * (t.count // model.text.layers)
        for t in model.tensors
        if t.role == "layer"
        and t.lora
        and len(t.shape) == 2
        and not t.name.startswith("router.")
        and t.adapted(knobs.lora_targets) == adapted
    )


def _groups_left_out(model, knobs) -> int:
    """fp32: input widths of the input groups (q/k/v, gate/up, down) none of whose linears is adapted; o_proj's input
    is the attention output the kernel saves anyway."""
    out = 0
    for group in INPUT_GROUPS:
        members = [t for t in model.tensors if t.role == "layer" and t.lora and t.name in group]
        if members and not any(t.adapted(knobs.lora_targets) for t in members):
            out += members[0].shape[1]
    return out


def shared_inputs_width(model, knobs) -> int:
    """fp32: the input widths a layer's adapters share and keep (the two norms' outputs, down_proj's input), less the
    groups none of whose linears is adapted."""
    return 2 * model.text.hidden + model.text.intermediate - _groups_left_out(model, knobs)


def dropout_zeroed(knobs) -> str:
    """Where the framework's trainer for this workload sets every nn.Dropout's p to 0 before training (TRL's DPO, KTO,
    GKD and PPO: Memory.zeroes_dropout), the line saying so; "" where the dropout runs as set."""
    fw, kind = FRAMEWORKS.get(knobs.framework), knobs.workload.kind
    if fw is None or (knobs.lora_dropout_kept and kind in DROPOUT_KEPT_BY_FLAG):
        return ""
    return fw.zeroes_dropout.get(kind, "")


def dropout_runs(knobs) -> bool:
    """LoRA dropout that drops in training: a p of 0 returns its input (torch's _dropout_impl: `if (p == 0 || !train
    ...) return input`, CUDA's fused kernel taking only 0 < p < 1), saving nothing, as PEFT's nn.Identity for
    lora_dropout 0 (tests/probes/test_disable_dropout.py measures both)."""
    return bool(knobs.lora_rank and knobs.lora_dropout) and not dropout_zeroed(knobs)


def dropout_layer_bytes(model, knobs, tokens: int, profile: str) -> int:
    """LoRA dropout (PEFT: lora_B(lora_A(dropout(x)))): per adapted linear, the dropout's mask at the linear's input
    width, one byte an element (CUDA's fused native_dropout keeps a bool mask; the sim traces it so). In fp32 no
    cast stands between the dropout and lora_A, which saves the dropped fp32 input instead of the shared one."""
    if not dropout_runs(knobs):
        return 0
    if profile == "fp32":
        shared = 2 * model.text.hidden + model.text.intermediate - _groups_left_out(model, knobs)
        return tokens * (5 * _adapted_width(model, knobs) - 4 * shared)
    return tokens * _adapted_width(model, knobs)


def unadapted_inputs_bytes(model, knobs, tokens: int, profile: str) -> int:
    """What a layer does not save for the decoder linears --lora-targets leaves out: each adapter's lora_A saves its
    own copy of the linear's input in the matmul dtype (PEFT casts it to the fp32 adapter, autocast or the half
    compute casts it back), while a frozen linear alone saves no input (sim probe, Llama-3.2-1B: q,v only keeps
    2 x 16 MiB a layer fewer than q,k,v,o at 4,096 tokens, all-linear 96 MiB more than attention). In fp32 the
    adapters share their inputs: an input goes only when no linear reading it is adapted."""
    if not knobs.lora_rank or knobs.lora_targets == "all-linear":
        return 0
    if profile == "fp32":
        return 4 * tokens * _groups_left_out(model, knobs)
    _, c = act.saved_dtype_bytes(profile)
    return c * tokens * _adapted_width(model, knobs, adapted=False)


def adapter_input_bytes(model, knobs, tokens: int, profile: str) -> int:
    """How the adapters' saved inputs differ from a fully trained layer's, per layer (zero 0; DeepSpeed casts the
    adapters to the module's half dtype with it, so they share the layer's inputs):
    - torch AMP: each lora_A saves its own autocast copy of its input (what activations.layer_bytes counts);
    - bf16-pure: PEFT keeps the adapters in fp32 and casts each adapted linear's input to fp32 for lora_A, which
      saves that copy: 4 bytes an element where AMP's copies are 2 (sim probe, Llama-3.2-1B at 4,096 tokens:
      2,618 MiB more than AMP over 16 layers; this term gives 2,560);
    - fp32: no cast, so the adapters save the norms' outputs themselves, and a frozen norm weight saves no
      normalized input: two fewer hidden-sized fp32 tensors a layer (sim: 66.6 MiB a layer; this, 64)."""
    if not knobs.lora_rank or knobs.zero_stage or model.text.traits.conv1d:  # GPT-2's block: not re-examined
        return 0
    if profile == "fp32":
        return -2 * 4 * tokens * model.text.hidden
    if knobs.precision == "bf16-pure":
        _, c = act.saved_dtype_bytes(profile)
        return (4 - c) * tokens * _adapted_width(model, knobs)
    return 0


FUSED = ("qkv_proj", "gate_up_proj")


def layer_examined(model, knobs) -> bool:
    """Where the saved tensors of a LoRA layer were traced tensor by tensor (sim and real CPU steps, PEFT 0.21):
    Llama/Qwen2-style dense layers (two RMSNorms, separate q/k/v and gate/up) at zero 0 without FSDP, the base in
    the run's dtype. Elsewhere the older per-group terms stand."""
    return bool(
        knobs.lora_rank and not knobs.zero_stage and knobs.fsdp == "off" and not knobs.lora_base_fp32
    ) and _dense_layer(model)


def _dense_layer(model) -> bool:
    t = model.text
    return not (t.traits.conv1d or t.traits.fp32_norms or t.qk_norm or t.moe or t.mla) and (
        t.traits.norms_per_layer == 2
        and not any(x.name in FUSED for x in model.tensors if x.role == "layer" and x.lora)
    )


def cast_layer_examined(model, knobs) -> bool:
    """layer_examined's layers run by a module cast to half, adapters included: FSDP2's bf16 policy (probes.sim
    .as_fsdp_casts, measured against a real FSDP2 step) and DeepSpeed's bf16/fp16 (as_deepspeed_casts, against a
    real ZeRO-2 step): plain LoRA on all linears, no dropout, no quantized base (where traced: elsewhere the older
    per-group terms stand). The embedding and head frozen or trained (PEFT's modules_to_save wraps only them, the
    layers are the same modules): a real FSDP2 step of debug-llama with trained embeddings saves 1,585,152 B more
    than without, all at the ends (the head's bf16 input, the final norm's fp32 one, the ids), tests/probes/
    test_fsdp_peak.py."""
    return bool(
        knobs.lora_rank
        and ((knobs.fsdp != "off" and knobs.precision == "bf16") or (knobs.zero_stage and knobs.precision != "fp32"))
        and not dropout_runs(knobs)
        and knobs.lora_variant == "lora"
        and knobs.lora_targets == "all-linear"
        and knobs.quant == "none"
    ) and _dense_layer(model)


def cast_layer_delta_bytes(model, knobs, tokens: int) -> int:
    """A LoRA layer whose adapters run in half beside the half base (cast_layer_examined), against the fully trained
    layer activations.layer_bytes counts: the adapters read the layer's inputs in their own dtype and save those same
    tensors, as the fully trained linears would; each lora_B saves lora_A's output (tokens x r, 2 bytes); a frozen
    RMSNorm weight keeps no normalized output (2 bytes an element less per norm). Sim trace, the module cast, FSDP
    and ZeRO alike (Llama-3.2-1B 1 x 2048, all-linear r16: 0.44 - 16 MiB a layer; per module input_layernorm and
    post_attention_layernorm 8 MiB less each, the lora_A modules 1/16 MiB each)."""
    t, r = model.text, knobs.lora_rank
    return 2 * tokens * r * len(_adapted(model, knobs)) - t.traits.norms_per_layer * 2 * tokens * t.hidden


def _adapted(model, knobs) -> list[tuple[int, int]]:
    """(input width, output width) of one layer's adapted linears."""
    return [
        (x.shape[1], x.shape[0])
        for x in model.tensors
        if x.role == "layer" and x.lora and len(x.shape) == 2 and x.adapted(knobs.lora_targets)
    ]


def half_layer_delta_bytes(model, knobs, tokens: int) -> int:
    """A LoRA layer in half precision against the fully trained layer activations.layer_bytes counts (sim trace,
    Llama-3.2-1B and Qwen2.5-0.5B at 2 x 2048, all-linear, attention and q,v targets: within 0.03 MiB a layer):
    - each adapted linear's lora_A saves its own copy of its input, 2 bytes under autocast (PEFT's fp32 cast, cast
      back), 4 under bf16-pure (the fp32 cast), o_proj's included; the frozen base linears save none: the shared
      q/k/v and gate/up inputs and down_proj's input the full layer counts are not saved;
    - a frozen RMSNorm weight keeps no normalized output (weight * x saves only the weight): 2 bytes less an element
      per norm;
    - each lora_B saves lora_A's output (tokens x r) and, under autocast, the adapters' bf16 weight copies."""
    t, r = model.text, knobs.lora_rank
    adapted = _adapted(model, knobs)
    a = 4 if knobs.precision == "bf16-pure" else 2
    out = a * tokens * sum(d for d, _ in adapted) + a * tokens * r * len(adapted)
    out -= 2 * tokens * (2 * t.hidden + t.intermediate) + t.traits.norms_per_layer * 2 * tokens * t.hidden
    if a == 2:
        out += 2 * r * sum(d + o for d, o in adapted)
    return out


def adapter_outputs_bytes(model, knobs, tokens: int) -> int:
    """fp32: each lora_B saves lora_A's output (tokens x r, 4 bytes)."""
    return 4 * tokens * knobs.lora_rank * len(_adapted(model, knobs))


# -- DoRA (PEFT use_dora; peft 0.21.2 tuners/lora/dora.py, tuners/lora/variants.py:138-260) ------------------------


def dora(knobs) -> bool:
    return bool(knobs.lora_rank) and knobs.lora_variant == "dora"


def dora_magnitude_params(model, knobs) -> int:
    """DoRA's trained magnitude vectors: one element per output feature of each adapted linear (DoraLinearLayer
    .update_layer makes nn.Parameter(weight_norm), dora.py:101-130)."""
    if not dora(knobs):
        return 0
    return sum(x.shape[-2] * x.count * prod(x.shape[:-2]) for x in model.tensors if x.adapted(knobs.lora_targets))


def adapter_mode(knobs) -> str:
    """How the adapters' tensors are held (DoRA's, lora_ends'): fp32, half (DeepSpeed casts the module, adapters included, to half; FSDP's
    MixedPrecisionPolicy casts the unsharded parameters, adapters included), bf16-pure (a half base, fp32 adapters,
    no autocast) or torch AMP."""
    if knobs.precision == "fp32":
        return "fp32"
    if knobs.zero_stage or knobs.fsdp != "off":
        return "half"
    return knobs.precision if knobs.precision == "bf16-pure" else "amp"


def dora_saved_layer_bytes(model, knobs, tokens: int) -> int:
    """What DoRA's forward saves beyond LoRA's, per layer (dora.py:153-165): `(mag_norm_scale - 1) * base_result`
    saves the base linear's output and `mag_norm_scale * lora_result` lora_B's output, tokens x out_features each
    (the base's output in the compute dtype, lora_B's in the adapters': fp32 but under torch AMP), and three fp32
    out_features vectors (the detached norm, the scale less one, the scale). Sim trace, debug-llama 2 x 512, rank 16:
    DoRA keeps 37.62 MiB more than LoRA under bf16 AMP (this: 37.61), 56.50 under bf16-pure (56.36), 75.25 under
    fp32 (75.11)."""
    if not dora(knobs):
        return 0
    mode = adapter_mode(knobs)
    base = 4 if mode == "fp32" else 2
    adapter = 2 if mode in ("amp", "half") else 4
    outs = sum(o for _, o in _adapted(model, knobs))
    return (base + adapter) * tokens * outs + 3 * 4 * outs


def dora_norm_linear_bytes(d_in: int, d_out: int, mode: str) -> int:
    """The weight-norm temporaries of one DoRA linear's forward (d_in -> d_out; `mode` amp, half, bf16-pure or fp32):
    get_lora_weight runs the adapters over an identity matrix (torch.eye(d_in) in the adapters' fp32 and, under
    autocast, its half copy: dora.py:96-98, cast to the input's dtype at :138) to build the d_out x d_in LoRA weight, which get_weight_norm scales and
    adds to the base weight before its row norms (dora.py:86-90); all freed before the next linear. Measured on one
    PEFT linear, real CPU tensors with CUDA's autocast replayed and the live-bytes tracker (tests/probes/
    test_dora.py), within 1%."""
    if mode == "amp":
        return max(6 * d_in * d_in + 2 * d_in * d_out, 2 * d_in * d_in + 12 * d_in * d_out)
    if mode == "fp32":
        return 4 * d_in * d_in + 12 * d_in * d_out
    if mode == "half":
        return 2 * d_in * d_in + 6 * d_in * d_out
    return max(6 * d_in * d_in, 4 * d_in * d_in + 16 * d_in * d_out)


def dora_norm_temp_bytes(model, knobs) -> int:
    """DoRA's weight-norm temporaries at its largest adapted linear (dora_norm_linear_bytes), on top of what the
    forward holds: the last layer's forward, or a layer recomputed in backward under checkpointing. Under ZeRO-3 or
    FSDP the norm reads the whole gathered weight (ZeRO-3 gathers it again as an external parameter of the DoRA
    module, deepspeed 0.19.8 runtime/zero/parameter_offload.py:80-89, released after its forward): the temporaries
    are the same, beside the gathered parameters (memory.gathered_params_bytes). The norm is detached, so its
    backward keeps no copy of the weight: peft 0.12.0 (LLaMA-Factory 0.9.2's pin) tuners/lora/dora.py:80, 87; 0.15.0
    (its main from 2025-03-25, #7469) :78, 85; 0.18.1 :79, 86; 0.21.2 :144, 152. 0.12.0 and 0.15.0 build the identity
    in the input's dtype (:74, :72), as the half module's adapters are; 0.12.0 recomputes the base output (:89-91)
    where later releases reuse it, the same bytes saved. Sim trace,
    Llama-3.2-1B 1 x 256 tokens, rank 16: -0.25% (bf16 AMP), -0.11% (bf16-pure), -1.6% (full checkpointing),
    -0.7% (every-2), -3.4% (offload)."""
    if not dora(knobs):
        return 0
    mode = adapter_mode(knobs)
    return max((dora_norm_linear_bytes(d, o, mode) for d, o in _adapted(model, knobs)), default=0)
