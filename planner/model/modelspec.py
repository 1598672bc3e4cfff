"""HF config.json -> ModelSpec: the shapes the memory and speed models need, without torch.

Parameters are listed as tensor groups (shape x count, with a role), built per architecture family
from the config the way transformers builds the modules; their sum equals
`sum(p.numel() for p in model.parameters())` of the real model (tests/planner/model/test_catalog.py
instantiates every catalog entry on the meta device and compares).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from math import prod

from planner.errors import BadInput
from planner.model import (
    glm4v,
    hybrid,
    llama4,
    minicpmv,
    mllama,
    pending,
    prequant,
    qwen1,
    qwen3omni,
    qwenomni,
    qwenvl,
    vila,
    vlm,
    xcomposer,
)
from planner.model.moespec import LAYOUT as MOE_LAYOUT
from planner.model.moespec import MOE_FAMILIES, MLASpec, MoESpec, in_moe_block, mla_attention, moe_mlp
from planner.model.shapes import ATTENTION_LINEARS, FAMILY_TRAITS, Tensors, Traits, fsdp_units
from planner.model.shapes import checked_size as _checked_size
from planner.model.shapes import divides as _divides
from planner.model.shapes import linear as _linear
from planner.model.shapes import number as _number
from planner.model.shapes import size as _get
from planner.model.shapes import sub as _sub

LLAMA_LIKE = {
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "gemma2",
    "gemma3_text",
    "phi3",
    "qwen2_5_vl",
    "qwen2_5_vl_text",
    "qwen2_vl",
    "qwen2_vl_text",
    "glm",
    "glm4",
}
# Families whose q/k/v carry a bias unless config.json says attention_bias false (the config class's default) and
# whose o_proj never does: GLM-4 (configuration_glm4.py:73; modeling_glm4.py:211-220, transformers 5.25) and the
# ChatGLM-architecture glm-4-9b-chat as transformers' GlmForCausalLM (configuration_glm.py:73; modeling_glm.py:211-220)
QKV_BIAS_ONLY = {"glm", "glm4", "glm4_moe"}
# Families whose rotary rotates the first partial_rotary_factor of each head and concatenates the rest back, with the
# factor's default: GLM, GLM-4 and GLM-4.5 (configuration_glm.py:76, configuration_glm4.py:76,
# configuration_glm4_moe.py:119)
ROTARY_CAT = {"glm": 0.5, "glm4": 0.5, "glm4_moe": 0.5}


def rotary_cat_dim(cfg: dict, model_type: str, head_dim: int) -> int:
    """The rotated dims of a ROTARY_CAT family's heads: int(head_dim x partial_rotary_factor), the factor at the top
    level or in rope_parameters (modeling_glm4.py:293-295); 0 for the others."""
    if model_type not in ROTARY_CAT:
        return 0
    rope = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
    factor = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", ROTARY_CAT[model_type]))
    return int(head_dim * _number({"partial_rotary_factor": factor}, "partial_rotary_factor", 1.0, high=1.0))


def peft_target_modules(targets: str, model: ModelSpec | None = None, vision: bool = False) -> str | list[str] | None:
    """PEFT's target_modules for --lora-targets (the probes, the trainer and the exports adapt the same linears);
    stacked experts named there go to target_parameters instead. A VLM's are a pattern over its language model's
    linears alone: PEFT's all-linear, or a bare name such as gate_proj, also adapts the vision tower and the projector
    (PEFT 0.21 on Qwen2.5-VL and InternVL: tests/planner/model/test_vlm_lora.py), which the plan keeps frozen; PEFT
    matches a string target_modules as a regular expression over the whole module name (and TRL passes a single
    --lora_target_modules value as that string: trl/trainer/model_config.py:177-178). `vision` (--lora-vision, with
    all-linear): PEFT's all-linear itself, over the tower and projector too."""
    if vision:
        return "all-linear"
    if model is not None and model.vision is not None:
        names = sorted({t.name for t in model.tensors if t.role == "layer" and t.lora and t.adapted(targets)})
        modules = {**vlm.TEXT_MODULE, **vila.TEXT_MODULE, **minicpmv.TEXT_MODULE, xcomposer.MODEL_TYPE: "model"}
        text = modules.get(model.model_type, "language_model")
        return rf"(?:.*\.)?{text}\..*\.(?:{'|'.join(names)})" if names else None
    if targets == "all-linear":
        return "all-linear"
    names = list(ATTENTION_LINEARS) if targets == "attention" else targets.split(",")
    return [n for n in names if not n.startswith("experts")] or None


def peft_target_parameters(targets: str) -> list[str] | None:
    """PEFT's target_parameters: the stacked expert weights --lora-targets names (experts.gate_up_proj,
    experts.down_proj), one LoRA pair per expert (PEFT's ParamWrapper)."""
    names = [n for n in targets.split(",") if n.startswith("experts")]
    return names or None


QK_NORM = {"qwen3", "gemma3_text"}  # an RMSNorm over each head of q and k before RoPE
ALL_FAMILIES = sorted(
    LLAMA_LIKE
    | {"gpt2", "internvl", "mllama", qwen1.MODEL_TYPE, xcomposer.MODEL_TYPE}
    | set(MOE_FAMILIES)
    | set(vlm.FAMILIES)
    | set(vila.MODEL_TYPES)
    | set(minicpmv.MODEL_TYPES)
    | set(hybrid.TEXT_TYPES)
    | set(glm4v.MODEL_TYPES)
    | set(llama4.MODEL_TYPES)
    | set(qwenomni.MODEL_TYPES)
    | set(qwen3omni.MODEL_TYPES)
)


@dataclass(frozen=True)
class TextSpec:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    max_positions: int
    attention: str = "sdpa"  # "sdpa" (flash / memory-efficient kernels) or "eager" (s^2 scores saved)
    final_logit_softcap: float | None = None
    dropout: float = 0.0
    qk_norm: bool = False  # Qwen3, Gemma-3: RMSNorm over each head of q and k (q_norm, k_norm) before RoPE
    biases: tuple[bool, bool, bool] = (False, False, False)  # (q/k/v, o, MLP) linears have a bias
    moe: MoESpec | None = None  # routed MLPs (planner/model/moespec.py); `intermediate` is then the dense layers' width
    mla: MLASpec | None = None  # DeepSeek's latent attention (head_dim is then q/k's: nope + rope)
    sinks: bool = False  # gpt-oss: eager attention with a learned sink logit per head
    rotary_cat_dim: int = 0  # GLM-4: rotary on each head's first dims, concatenated back (activations.rotary_cat_...)
    cross_layers: int = 0  # Llama-3.2-Vision: decoder layers that attend to the image (planner/model/mllama.py)
    first_cross_layer: int = 0  # the lowest of them (below it the hidden state does not depend on the image)
    final_norm: bool = True  # the last norm and the head's input are here (a device_map GPU before the head's: no)
    traits: Traits = field(default_factory=Traits)  # the family's differences from Llama (shapes.py), set by the reader
    linear: hybrid.LinearAttentionSpec | None = None  # Qwen3-Next / Qwen3.5: its Gated DeltaNet layers (hybrid.py)
    nope_layers: int = 0  # Llama-4: layers without RoPE (chunked attention), which skip Traits.l2_qk_norm (llama4.py)

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim


@dataclass(frozen=True)
class VisionSpec:
    layers: int
    hidden: int
    intermediate: int
    heads: int
    gated_mlp: bool
    patches_per_token: int  # vision-encoder tokens per LLM image token (spatial merge / pixel shuffle)
    # transformers' module names of the tower and of its projector (freezing them: Knobs.frozen); the tensors of
    # roles "vision" and "projector" are exactly these modules' parameters
    tower_modules: tuple[str, ...] = ()
    projector_modules: tuple[str, ...] = ()
    checkpointed: bool = True  # the tower's layers checkpoint with the decoder's (Llama-3.2-Vision's never do)
    block: str = "generic"  # the kind of tower block (planner.estimate.vision): what each layer saves
    unused_layers: int = 0  # layers past the one the projector reads (LLaVA's vision_feature_layer -2: one)
    gated_layers: int = 0  # layers with gated outputs among `layers` (Mllama's global ones)
    anyres: str = ""  # any-resolution tiling (--image-rule name): encoder tokens from images.anyres_encoder_tokens
    cross_tokens_per_token: int = 0  # keys and values per LLM image token in each cross-attention layer (mllama)
    # what one attention call of a block spans (planner.estimate.vision.eager_attention_bytes): a tile or fixed-size
    # image of this many encoder tokens; 0: each sample's image whole (Qwen); windows of window_tokens in all but
    # full_attention_layers of the blocks (Qwen2.5-VL)
    attention_tokens: int = 0
    window_tokens: int = 0
    full_attention_layers: int = 0
    tiled: bool = False  # an image cut into fixed tiles a count caps (InternVL's dynamic tiling: MAX_NUM)

    def frozen(self, parameter: str, frozen: str) -> bool:
        """Whether `frozen` (Knobs.frozen) freezes the parameter of this name: the tower's, the projector's, or the
        language model's (every parameter outside the tower and the projector)."""
        projector = any(p in parameter for p in self.projector_modules)
        tower = not projector and any(p in parameter for p in self.tower_modules)
        part = "projector" if projector else "vision" if tower else "language"
        return part in frozen_roles(frozen) or (part == "language" and "language" in frozen)


LANGUAGE_ROLES = ("embed", "layer", "norm", "head")
# the tensor roles each Knobs.frozen setting freezes; an audio tower (Qwen2.5-Omni's) freezes with the vision tower,
# as LLaMA-Factory's freeze_vision_tower (vision_model_keys) and ms-swift's freeze_vit (vision_tower) do
FROZEN_ROLES = {
    "none": (),
    "vision": ("vision", "audio"),
    "vision+projector": ("vision", "audio", "projector"),
    "language": LANGUAGE_ROLES,
    "language+vision": (*LANGUAGE_ROLES, "vision", "audio"),
}
IDLE_HEAD = "+head"  # appended by planner.estimate.trained.frozen_modules: a head that takes no gradient (embedding)
IDLE_AUDIO = "+audio"  # appended there too: an audio tower that rows without audio never run (Qwen2.5-Omni's)


def frozen_roles(frozen: str) -> tuple[str, ...]:
    """The tensor roles a frozen_modules value freezes: a Knobs.frozen setting, with "+head" the head's too and
    "+audio" the audio tower's."""
    extra: tuple[str, ...] = ()
    for suffix, role in ((IDLE_HEAD, "head"), (IDLE_AUDIO, "audio")):
        if frozen.endswith(suffix):
            frozen, extra = frozen.removesuffix(suffix), (*extra, role)
    return (*FROZEN_ROLES[frozen], *extra)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    model_type: str
    text: TextSpec
    tensors: tuple[Tensors, ...]
    vision: VisionSpec | None = None
    exact: bool = True  # False for an unknown family counted with the generic llama-like formula
    config: dict = field(default_factory=dict, repr=False, compare=False)
    fsdp_units: tuple[str, ...] = ()  # the layer classes FSDP wraps (shapes.FSDP_UNITS), set by the reader
    # the folder the user named the model by (catalog.load_model), which the exports' model path is; "" for a name
    source: str = field(default="", compare=False)

    @cached_property
    def params(self) -> int:
        return sum(t.numel for t in self.tensors)

    @cached_property
    def _params_by_role(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.role] = out.get(t.role, 0) + t.numel
        return out

    def params_by_role(self) -> dict[str, int]:
        return dict(self._params_by_role)  # counted once: the search asks per candidate and per term

    def frozen_params(self, frozen: str) -> int:
        """Parameters Knobs.frozen keeps frozen: the vision tower's (role vision), and its projector's."""
        return sum(n for role, n in self._params_by_role.items() if role in frozen_roles(frozen))

    def lora_params(self, rank: int, targets: str = "all-linear") -> int:
        """Adapter parameters of LoRA on the targeted decoder linears: r x (d_in + d_out) per weight (Hu et al. 2021);
        PEFT's ParamWrapper gives stacked experts one such pair per expert (lora_A: in -> r*experts)."""
        return sum(
            rank * t.lora_rank_multiple(targets) * (t.shape[-2] + t.shape[-1]) * prod(t.shape[:-2]) * t.count
            for t in self.tensors
            if t.adapted(targets)
        )

    def tower_lora_params(self, rank: int) -> int:
        """Adapter parameters of LoRA on every nn.Linear of a VLM's tower and projector (--lora-vision: PEFT's
        all-linear over the whole model adapts them; tests/planner/model/test_vlm_lora.py builds it)."""
        return sum(rank * (t.shape[0] + t.shape[1]) * t.count for t in self.tensors if t.tower_linear)

    @cached_property
    def active_params(self) -> int:
        """Parameters one token runs through: all of a dense model; an MoE model's routed experts count top-k of
        each layer's experts (the compute the speed model charges; memory and communication use `params`); the dense
        dispatch (Llama-4's) runs every expert on every token."""
        m = self.text.moe
        if m is None or m.dispatch == "dense":
            return self.params
        per_expert = 3 * self.text.hidden * m.expert_inter + (2 * m.expert_inter + self.text.hidden if m.bias else 0)
        idle = (m.experts - m.top_k) * per_expert * m.moe_layers
        return self.params - idle

    def linear_names(self) -> set[str]:
        """The decoder linears' module names, and stacked experts' (what --lora-targets may list)."""
        return {t.name for t in self.tensors if t.lora and not t.name.startswith("router.")}

    def layer_unit_params(self, quantized: bool = False) -> int:
        """Parameters of the largest decoder layer (FSDP's unit, ZeRO-3's gather): every layer alike in a dense
        model; an MoE model's routed layer (DeepSeek's first layers are dense and smaller). `quantized`: only its
        decoder linears' weights (what a quantized base stores packed: planner.estimate.quant.quantized_weights)."""
        layer = [t for t in self.tensors if t.role == "layer" and (t.lora or not quantized)]
        L, m = self.text.layers, self.text.moe
        if m is None or not m.moe_layers:
            return sum(t.numel for t in layer) // L
        block = sum(t.numel for t in layer if in_moe_block(t.name))
        # the dense layers' MLP: "mlp." (DeepSeek, Qwen-MoE), or the unprefixed linears only the dense layers hold
        # (Llama-4's interleaved feed_forward: planner.model.llama4)
        only_dense = m.moe_layers < L
        dense = sum(
            t.numel
            for t in layer
            if t.name.startswith("mlp.") or (only_dense and t.count == L - m.moe_layers and not in_moe_block(t.name))
        )
        return (sum(t.numel for t in layer) - block - dense) // L + block // m.moe_layers

    def expert_params_per_layer(self) -> int:
        """A routed layer's expert weights (and biases): what expert parallelism splits over its ranks."""
        m = self.text.moe
        if m is None or not m.moe_layers:
            return 0
        return sum(t.numel for t in self.tensors if t.name.startswith("experts.")) // m.moe_layers

    def largest_matrix_params(self) -> int:
        return self._largest_matrix

    @cached_property
    def _largest_matrix(self) -> int:  # once per model: ZeRO-3's terms ask per candidate, several times each
        return max(prod(t.shape) for t in self.tensors)

    def elements_of_tensors_at_most(self, limit: int) -> int:
        """Elements of the parameters of at most `limit` elements each (ZeRO-3's persistent ones: planner.estimate.zero),
        counted once per limit."""
        memo = self.memo
        if ("at most", limit) not in memo:
            memo["at most", limit] = sum(t.numel for t in self.tensors if t.numel // t.count <= limit)
        return memo["at most", limit]

    @cached_property
    def memo(self) -> dict:
        """What the estimates derive from this model alone, kept with it (planner.estimate.parallel tp_model, and the
        sums above): not a field, so neither equality nor dataclasses.replace sees it."""
        return {}

    def summary(self) -> dict:
        roles = self.params_by_role()
        return {
            "name": self.name,
            "model_type": self.model_type,
            "params": self.params,
            "layers": self.text.layers,
            "hidden_size": self.text.hidden,
            "vocab_size": self.text.vocab,
            "vision_params": roles.get("vision", 0) + roles.get("projector", 0),
            "params_exact": self.exact,
            "exact": self.exact,
            **self._moe_summary(),
            **self._quant_summary(),
            **self._hybrid_summary(),
        }

    def _hybrid_summary(self) -> dict:
        """Qwen3-Next / Qwen3.5: which layers are Gated DeltaNet, and what their activations are planned as."""
        la = self.text.linear
        if la is None:
            return {}
        return {
            "linear_attention_layers": la.layers,
            "linear_attention": f"{la.layers} of {self.text.layers} layers Gated DeltaNet (a recurrent state, no KV "
            "cache), planned as transformers runs them without flash-linear-attention (its torch chunked rule, fp32 "
            "saved tensors); a run with fla installed saves less and is over-planned",
        }

    def _quant_summary(self) -> dict:
        """A prequantized checkpoint's method, and the line of one planned dequantized (planner.model.prequant)."""
        qc = self.config.get("quantization_config")
        if not isinstance(qc, dict):
            return {}
        note = prequant.dequantized_note(self.config)
        return {"quantization": str(qc.get("quant_method", "")), **({"quantization_note": note} if note else {})}

    def _moe_summary(self) -> dict:
        m = self.text.moe
        if m is None:
            return {}
        return {
            "active_params": self.active_params,
            "experts": m.experts,
            "experts_per_token": m.top_k,
            "moe_layers": m.moe_layers,
            "shared_expert_width": m.shared_inter,
            "experts_dispatch": m.dispatch,
        }


# Keys that mean a mixture-of-experts model: counted as dense they would be off by the expert count.
MOE_KEYS = (
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "moe_num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "n_shared_experts",
)


def _llama_text(cfg: dict, model_type: str) -> tuple[TextSpec, list[Tensors]]:
    h, L = _get(cfg, "hidden_size"), _get(cfg, "num_hidden_layers")
    heads = _get(cfg, "num_attention_heads")
    kv = _get(cfg, "num_key_value_heads", default=heads)
    if "head_dim" not in cfg or cfg["head_dim"] is None:
        _divides(h, "hidden_size", heads, "num_attention_heads")
    _divides(heads, "num_attention_heads", kv, "num_key_value_heads")
    hd = _get(cfg, "head_dim", default=h // heads)
    inter, vocab = _get(cfg, "intermediate_size"), _get(cfg, "vocab_size")
    tied = bool(cfg.get("tie_word_embeddings", model_type in {"gemma", "gemma2", "gemma3_text"}))
    attention_bias = bool(cfg.get("attention_bias", model_type in QKV_BIAS_ONLY))
    qkv_bias = model_type.startswith("qwen2") or attention_bias
    o_bias = attention_bias and not model_type.startswith("qwen2") and model_type not in QKV_BIAS_ONLY
    mlp_bias = bool(cfg.get("mlp_bias", False))
    gemma2 = model_type == "gemma2"
    traits = FAMILY_TRAITS.get(model_type, Traits())
    t: list[Tensors] = [Tensors("embed", (vocab, h))]
    if traits.fused_qkv:  # Phi-3's qkv_proj: one Linear (what LoRA adapts)
        t += _linear("layer", (heads + 2 * kv) * hd, h, L, qkv_bias, lora=True, name="qkv_proj")
    else:
        for d_out, name in ((heads * hd, "q_proj"), (kv * hd, "k_proj"), (kv * hd, "v_proj")):
            t += _linear("layer", d_out, h, L, qkv_bias, lora=True, name=name)
    t += _linear("layer", h, heads * hd, L, o_bias, lora=True, name="o_proj")
    if traits.fused_gate_up:  # Phi-3's gate_up_proj
        t += _linear("layer", 2 * inter, h, L, mlp_bias, lora=True, name="gate_up_proj")
    else:
        t += _linear("layer", inter, h, L, mlp_bias, lora=True, name="gate_proj")
        t += _linear("layer", inter, h, L, mlp_bias, lora=True, name="up_proj")
    t += _linear("layer", h, inter, L, mlp_bias, lora=True, name="down_proj")
    t.append(Tensors("layer", (h,), L * traits.norms_per_layer))
    if model_type in QK_NORM:
        t.append(Tensors("layer", (hd,), 2 * L))
    t.append(Tensors("norm", (h,)))
    if not tied:
        t.append(Tensors("head", (vocab, h)))
    spec = TextSpec(
        hidden=h,
        layers=L,
        heads=heads,
        kv_heads=kv,
        head_dim=hd,
        intermediate=inter,
        vocab=vocab,
        tied=tied,
        max_positions=_get(cfg, "max_position_embeddings", default=0),
        attention="eager" if gemma2 else "sdpa",
        final_logit_softcap=_number(cfg, "final_logit_softcapping", 0.0) or None if gemma2 else None,
        dropout=_number(cfg, "attention_dropout", 0.0, high=1.0),
        qk_norm=model_type in QK_NORM,
        biases=(qkv_bias, o_bias, mlp_bias),
        traits=traits,
        rotary_cat_dim=rotary_cat_dim(cfg, model_type, hd),
    )
    return spec, t


def _gqa_attention(
    cfg: dict, mt: str, h: int, heads: int, kv: int, L: int, qk_norm: bool
) -> tuple[int, tuple[bool, bool, bool], list[Tensors]]:
    """An MoE family's grouped-query attention: (head_dim, the (q/k/v, o, MLP) biases, its tensors). GLM-4.5's o_proj
    has no bias whatever attention_bias says (modeling_glm4_moe.py:188-201)."""
    if cfg.get("head_dim") is None:
        _divides(h, "hidden_size", heads, "num_attention_heads")
    hd = _get(cfg, "head_dim", default=h // heads)
    ab = bool(cfg.get("qkv_bias", True)) if mt == "qwen2_moe" else bool(cfg.get("attention_bias", mt == "gpt_oss"))
    bias = (ab, ab and mt not in ("qwen2_moe", "glm4_moe"), False)
    attn = []
    for d_out, name in ((heads * hd, "q_proj"), (kv * hd, "k_proj"), (kv * hd, "v_proj")):
        attn += _linear("layer", d_out, h, L, bias[0], lora=True, name=name)
    attn += _linear("layer", h, heads * hd, L, bias[1], lora=True, name="o_proj")
    attn += [Tensors("layer", (hd,), 2 * L)] if qk_norm and mt != "olmoe" else []
    attn += [Tensors("layer", (heads * hd,), L), Tensors("layer", (kv * hd,), L)] if mt == "olmoe" else []
    attn += [Tensors("layer", (heads,), L)] if mt == "gpt_oss" else []  # attention sinks
    return hd, bias, attn


def _moe_text(cfg: dict, family: str, vlm: bool = False) -> tuple[TextSpec, list[Tensors]]:
    """Mixtral, Qwen1.5/Qwen3-MoE, OLMoE, gpt-oss (grouped-query attention) and DeepSeek-V2/V3 (latent attention),
    and the language models laid out as one of them (moespec.LAYOUT)."""
    mt = MOE_LAYOUT.get(family, family)
    h, L, heads = _get(cfg, "hidden_size"), _get(cfg, "num_hidden_layers"), _get(cfg, "num_attention_heads")
    kv = _get(cfg, "num_key_value_heads", default=heads)
    _divides(heads, "num_attention_heads", kv, "num_key_value_heads")
    vocab = _get(cfg, "vocab_size")
    # OLMoE: one norm over all of q, one over all of k; GLM-4.5: per-head ones with use_qk_norm
    mla, qk_norm = None, mt in ("qwen3_moe", "olmoe") or (mt == "glm4_moe" and bool(cfg.get("use_qk_norm")))
    t: list[Tensors] = [Tensors("embed", (vocab, h))]
    if mt.startswith("deepseek"):
        mla, attn = mla_attention(cfg, h, heads, L)
        hd, kv, bias = mla.qk_head_dim, heads, (False, False, False)
    else:
        hd, bias, attn = _gqa_attention(cfg, mt, h, heads, kv, L, qk_norm)
    moe, mlp = moe_mlp(cfg, family, h, L, vlm)
    t += attn + mlp + [Tensors("layer", (h,), 2 * L), Tensors("norm", (h,))]
    tied = bool(cfg.get("tie_word_embeddings", False))
    if not tied:
        t.append(Tensors("head", (vocab, h)))
    spec = TextSpec(
        hidden=h,
        layers=L,
        heads=heads,
        kv_heads=kv,
        head_dim=hd,
        intermediate=_get(cfg, "intermediate_size"),
        vocab=vocab,
        tied=tied,
        max_positions=_get(cfg, "max_position_embeddings", default=0),
        attention="eager" if mt == "gpt_oss" else "sdpa",  # gpt-oss: _supports_sdpa = False (sinks)
        dropout=_number(cfg, "attention_dropout", 0.0, high=1.0),
        qk_norm=qk_norm,
        biases=bias,
        moe=moe,
        mla=mla,
        sinks=mt == "gpt_oss",
        rotary_cat_dim=rotary_cat_dim(cfg, mt, hd),
    )
    return spec, t


def _gpt2_text(cfg: dict) -> tuple[TextSpec, list[Tensors]]:
    h, L, heads = _get(cfg, "n_embd", "hidden_size"), _get(cfg, "n_layer", "num_hidden_layers"), _get(cfg, "n_head")
    _divides(h, "n_embd", heads, "n_head")
    inter = _get(cfg, "n_inner", default=4 * h)
    vocab, npos = _get(cfg, "vocab_size"), _get(cfg, "n_positions", default=1024)
    t = [Tensors("embed", (vocab, h)), Tensors("embed", (npos, h))]
    t += [Tensors("layer", (h,), 4 * L)]  # ln_1, ln_2 weight and bias
    t += _linear("layer", 3 * h, h, L, True, lora=True, name="attn.c_attn")
    t += _linear("layer", h, h, L, True, lora=True, name="attn.c_proj")
    t += _linear("layer", inter, h, L, True, lora=True, name="mlp.c_fc")
    t += _linear("layer", h, inter, L, True, lora=True, name="mlp.c_proj")
    t += [Tensors("norm", (h,), 2)]
    tied = bool(cfg.get("tie_word_embeddings", True))
    if not tied:
        t.append(Tensors("head", (vocab, h)))
    spec = TextSpec(
        hidden=h,
        layers=L,
        heads=heads,
        kv_heads=heads,
        head_dim=h // heads,
        intermediate=inter,
        vocab=vocab,
        tied=tied,
        max_positions=npos,
        dropout=_number(cfg, "resid_pdrop", 0.1, high=1.0),
        biases=(True, True, True),
        traits=FAMILY_TRAITS["gpt2"],
    )
    return spec, t


def _internvl_vision(cfg: dict, v: dict, text_hidden: int) -> tuple[VisionSpec, list[Tensors]]:
    hv, L, iv = _get(v, "hidden_size"), _get(v, "num_hidden_layers"), _get(v, "intermediate_size")
    img, patch = _get(v, "image_size", default=[448, 448]), _get(v, "patch_size", default=[14, 14])
    img = [_checked_size(v, "image_size", x) for x in (img if isinstance(img, (list, tuple)) else [img, img])][:2]
    patch = [
        _checked_size(v, "patch_size", x) for x in (patch if isinstance(patch, (list, tuple)) else [patch, patch])
    ][:2]
    if len(img) < 2 or len(patch) < 2:
        raise BadInput("config.json: vision_config image_size and patch_size need two sides", "model")
    npatch = (img[0] // patch[0]) * (img[1] // patch[1])
    bias = bool(v.get("attention_bias", True))
    t = [
        Tensors("vision", (1, 1, hv)),
        Tensors("vision", (1, npatch + 1, hv)),
        Tensors("vision", (hv, _get(v, "num_channels", default=3), patch[0], patch[1])),
        Tensors("vision", (hv,)),
    ]
    t += [Tensors("vision", (hv,), 2 * L)]  # layer-scale lambdas
    t += _linear("vision", hv, hv, 4 * L, bias) + _linear("vision", iv, hv, L, True)
    t += _linear("vision", hv, iv, L, True) + [Tensors("vision", (hv,), 4 * L)]
    if v.get("use_qk_norm"):
        t += [Tensors("vision", (hv,), 2 * L)]
    if not v.get("use_mean_pooling", True):
        t += [Tensors("vision", (hv,), 2)]
    shuffle = round(1 / _number(cfg, "downsample_ratio", 0.5, low=1e-3, high=1.0) ** 2)
    t += [Tensors("projector", (hv * shuffle,), 2)] + _linear("projector", text_hidden, hv * shuffle, 1, True)
    t += _linear("projector", text_hidden, text_hidden, 1, True)
    heads = _get(v, "num_attention_heads")
    spec = VisionSpec(
        L, hv, iv, heads, False, shuffle, ("vision_tower.",), ("multi_modal_projector.",), block="layer-scale"
    )
    unused = vlm.unused_layers(cfg.get("vision_feature_layer", -1), L)
    return replace(spec, unused_layers=unused, attention_tokens=npatch + 1, tiled=True), t  # a tile and its CLS


def _refuse_experts(cfg: dict, mt: str) -> None:
    """A mixture-of-experts config of a family memplan does not read (moespec.MOE_FAMILIES) is refused: counted
    as dense it would be priced as one expert."""
    for part in (cfg, cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}):
        found = [k for k in MOE_KEYS if part.get(k) not in (None, 0, 1, False)]
        if found or "moe" in str(part.get("model_type", mt)).lower():
            raise BadInput(
                f"config.json: model_type {part.get('model_type', mt)!r} is a mixture-of-experts model "
                f"({', '.join(found) or 'moe'}) of a family memplan does not count (MoE families: "
                f"{', '.join(MOE_FAMILIES)}); counting it as a dense model would understate its memory "
                "several times over",
                "model",
            )


def _from_config(cfg: dict, name: str) -> ModelSpec:
    if not isinstance(cfg, dict):
        raise BadInput(f"config for {name!r} is not a JSON object", "model")
    pending.refuse_pending(cfg)
    mt = str(cfg.get("model_type", ""))
    vision, vt = None, []
    tc = cfg.get("text_config")
    units = fsdp_units(mt, tc.get("model_type") if isinstance(tc, dict) else None)
    if mt in llama4.MODEL_TYPES:  # Llama-4: its own MoE layout, every token through every expert
        text, t, vision, vt, units = llama4.read(cfg, TextSpec, VisionSpec)
        return ModelSpec(name, mt, text, tuple(vt + t), vision, exact=True, config=cfg, fsdp_units=units)
    if mt in qwen3omni.MODEL_TYPES:  # Qwen3-Omni's thinker: a Qwen3-MoE decoder beside its towers (moespec.LAYOUT)
        tc, vision, vt = qwen3omni.read(cfg, VisionSpec)
        text, t = _moe_text(tc, qwen3omni.TEXT_TYPE)
        return ModelSpec(name, mt, text, tuple(vt + t), vision, exact=True, config=cfg, fsdp_units=units)
    if mt in MOE_FAMILIES or mt in hybrid.TEXT_TYPES:
        text, t = hybrid.read(cfg, mt, TextSpec) if mt in hybrid.TEXT_TYPES else _moe_text(cfg, mt)
        return ModelSpec(name, mt, text, tuple(t), None, exact=True, config=cfg, fsdp_units=units)
    routed_text = mt == "internvl" and isinstance(tc, dict) and tc.get("model_type") in MOE_FAMILIES
    if mt not in vlm.MOE_VLMS and mt != "glm4v_moe" and not routed_text:
        _refuse_experts(cfg, mt)
    if mt == "gpt2":
        text, t = _gpt2_text(cfg)
    elif mt == qwen1.MODEL_TYPE:
        text, t = qwen1.read(cfg, TextSpec)
    elif mt == xcomposer.MODEL_TYPE:
        text, t, vision, vt = xcomposer.read(cfg, TextSpec, VisionSpec)
        units = xcomposer.UNITS
    elif mt == "internvl":
        # transformers 5 ties the composite's head by its own top-level flag, whatever text_config says
        # (5.25 modeling_utils.py:2494 reads self.config; configuration_internvl.py:122 defaults it to True)
        tc = {**_sub(cfg, "text_config"), "tie_word_embeddings": bool(cfg.get("tie_word_embeddings", True))}
        tmt = str(tc.get("model_type", "qwen2"))  # InternVL3.5's MoE models: a Qwen3-MoE or gpt-oss language model
        text, t = _moe_text(tc, tmt, vlm=True) if tmt in MOE_FAMILIES else _llama_text(tc, tmt)
        vision, vt = _internvl_vision(cfg, _sub(cfg, "vision_config"), text.hidden)
    elif mt == "mllama":
        tc, vision, vt, units = mllama.read(cfg, VisionSpec)
        text, t = _llama_text(tc, tc["model_type"])
        t = mllama.text_tensors(tc, t, text.head_dim)
        text = replace(text, cross_layers=mllama.cross_layers(tc), first_cross_layer=mllama.first_cross_layer(tc))
    elif mt in glm4v.MODEL_TYPES:
        tc, vision, vt, units = glm4v.read(cfg, VisionSpec)
        if mt == "glm4v_moe":  # GLM-4.5's language model (moespec.LAYOUT), its rotary cut and concatenated back
            text, t = _moe_text(tc, "glm4v_moe_text")
        else:
            text, t = _llama_text(tc, "glm4")
            text = replace(text, rotary_cat_dim=0)  # M-RoPE over whole head pairs, not GLM-4's cut-and-repeat
    elif mt in qwenomni.MODEL_TYPES:  # the thinker (a whole Omni with its talker is refused)
        tc, vision, vt = qwenomni.read(cfg, VisionSpec)
        text, t = _llama_text(tc, "qwen2")
    elif mt in vila.MODEL_TYPES or mt in minicpmv.MODEL_TYPES:
        tc, vision, vt, units = (vila if mt in vila.MODEL_TYPES else minicpmv).read(cfg, VisionSpec)
        text, t = _llama_text(tc, tc["model_type"])
    elif mt in vlm.FAMILIES:
        tc, vision, vt, units = vlm.read(cfg, VisionSpec)
        if tc["model_type"] in hybrid.TEXT_TYPES:
            text, t = hybrid.read(tc, tc["model_type"], TextSpec)
        elif tc["model_type"] in MOE_LAYOUT:
            text, t = _moe_text(tc, tc["model_type"])
        else:
            text, t = _llama_text(tc, {"qwen3_vl_text": "qwen3"}.get(tc["model_type"], tc["model_type"]))
    elif mt in LLAMA_LIKE:
        tc = _sub(cfg, "text_config", required=False) or cfg
        text, t = _llama_text(tc, mt)
        if mt in {"qwen2_5_vl", "qwen2_vl"}:
            vision, vt = qwenvl.read(mt, _sub(cfg, "vision_config"), text.hidden, VisionSpec)
    elif "hidden_size" in cfg and "num_hidden_layers" in cfg:
        text, t = _llama_text(cfg, mt or "generic")
        return ModelSpec(name, mt or "generic", text, tuple(t), None, exact=False, config=cfg, fsdp_units=units)
    else:
        raise BadInput(
            f"config for {name!r}: model_type {mt!r} is not a decoder-only language model "
            f"memplan knows (known: {', '.join(ALL_FAMILIES)}; others need hidden_size and "
            "num_hidden_layers)",
            "model",
        )
    return ModelSpec(name, mt, text, tuple(vt + t), vision, exact=True, config=cfg, fsdp_units=units)


def from_config(cfg: dict, name: str) -> ModelSpec:
    """Build a ModelSpec from a config.json dict; a config it cannot read is a BadInput naming the model,
    never a traceback. Unknown families use the generic llama-like count (exact False)."""
    try:
        return _from_config(cfg, name)
    except BadInput:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, ZeroDivisionError, OverflowError) as e:
        raise BadInput(f"config for {name!r} is not understood ({e.__class__.__name__}: {e})", "model") from None


# transformers ran Gemma-2 with SDPA, its attention softcap dropped, up to 5.20 (models/gemma2/modeling_gemma2.py:352
# `_supports_sdpa = True` in 5.20.0; :360 in 5.17.0) and runs it eager from 5.21 (:352 `_supports_sdpa = False  # sdpa
# does not support softcapping`). The catalog counts the transformers memplan pins (eager).
GEMMA2_EAGER_SINCE = (5, 21)


def as_run_by(model: ModelSpec, transformers_version: str) -> ModelSpec:
    """The model as an older transformers runs it (a measurement made with it is compared with this): Gemma-2
    attends with SDPA before 5.21, saving no s x s scores."""
    try:
        version = tuple(int(x) for x in transformers_version.split(".")[:2])
    except ValueError:
        return model
    if model.model_type == "gemma2" and len(version) == 2 and version < GEMMA2_EAGER_SINCE:
        return replace(model, text=replace(model.text, attention="sdpa"))
    return model
