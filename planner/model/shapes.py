"""What every family reader shares: parameter tensor groups (`Tensors`), the family traits (`Traits`, a row per
model_type that sets them), and the checked readers of sizes and numbers in a config.json (a bad value is a
one-line BadInput naming the key, never a traceback)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import prod
from typing import NamedTuple

from planner.errors import BadInput

ATTENTION_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "attn.c_attn", "attn.c_proj")


@dataclass(frozen=True)
class Traits:
    """How a family's decoder layer differs from Llama's (transformers modeling_llama.py: the defaults) in what
    the memory terms count. Set once by the family reader (FAMILY_TRAITS); the terms read these, never a family
    name (tests/planner/model/test_traits.py greps for one)."""

    fused_qkv: bool = False  # q, k, v from one Linear: one autocast copy of its input, v a slice of its output
    #                                 (Phi-3's qkv_proj, modeling_phi3.py; GPT-2's c_attn, modeling_gpt2.py)
    fused_gate_up: bool = False  # gate and up from one Linear: one autocast copy of its input (Phi-3's gate_up_proj)
    gated_mlp: bool = True  # down(act(gate) * up); False: GPT-2's c_proj(gelu_new(c_fc)), gelu_new written
    #                                 in Python (transformers activations.py NewGELUActivation: pow runs in fp32)
    conv1d: bool = False  # linears are transformers' Conv1D (pytorch_utils.py): torch.addmm whatever the
    #                                 bias; the layer's saved tensors are GPT-2's block's (activations.gpt2_layer_bytes)
    layernorm: bool = False  # LayerNorm (weight and bias) where Llama has RMSNorm (GPT-2's ln_1, ln_2, ln_f)
    fp32_norms: bool = False  # RMSNorm computed and kept in fp32, (1 + w) * norm(x.float()): 8 bytes an element
    #                                 saved whatever the precision (Gemma2RMSNorm, modeling_gemma2.py; Gemma-3's)
    norms_per_layer: int = 2  # RMSNorms in a decoder layer: 4 with post-attention and post-feedforward norms
    #                                 (Gemma2DecoderLayer, Gemma3DecoderLayer)
    sliding_window_masks: bool = False  # eager attention builds a second 4-D mask for the sliding-window layers
    #                                 (Gemma2Model.forward, Gemma3TextModel.forward: create_sliding_window_causal_mask)
    learned_positions: bool = False  # a learned table of max_positions positions (GPT-2's wpe): no longer sequence runs
    flash: bool = True  # transformers builds it with flash-attention 2 (Llama-4: _supports_flash_attn False, :453)
    image_lora_rank: int = 0  # a low-rank pair on every decoder Linear over the image tokens alone (XComposer2's PLoRA)
    l2_qk_norm: bool = False  # a weightless fp32 RMSNorm of q and k after RoPE, on the RoPE layers only (Llama-4's
    #                                 use_qk_norm: Llama4TextL2Norm, modeling_llama4.py:318-319, 361-363)
    # the transformers versions [first, gone) whose model class computes the training loss with nn.CrossEntropyLoss over
    # the logits in the model's dtype, no fp32 upcast (Llama4ForConditionalGeneration from the class's first release,
    # 4.51.0, until 5.17.0: planner.model.llama4.HALF_LOSS); () where the class upcasts (HF's ForCausalLMLoss)
    half_loss: tuple[tuple[int, ...], tuple[int, ...]] | tuple = ()


# The families whose traits are not Llama's (a model_type not here has the defaults). Gemma-1's norms are counted
# as Llama's, as before this table (its GemmaRMSNorm also upcasts; not measured).
FAMILY_TRAITS = {
    "gpt2": Traits(fused_qkv=True, gated_mlp=False, conv1d=True, layernorm=True, learned_positions=True),
    "phi3": Traits(fused_qkv=True, fused_gate_up=True),
    "gemma2": Traits(fp32_norms=True, norms_per_layer=4, sliding_window_masks=True),
    "gemma3_text": Traits(fp32_norms=True, norms_per_layer=4, sliding_window_masks=True),
    # GLM-4: gate_up_proj, and post_self_attn_layernorm / post_mlp_layernorm beside Llama's two (modeling_glm4.py:54,
    # 74-77, transformers 5.25)
    "glm4": Traits(fused_gate_up=True, norms_per_layer=4),
    # GLM (glm-4-9b-chat's ChatGLM layout in transformers' classes): gate_up_proj, Llama's two norms
    # (modeling_glm.py:53, 293-294, transformers 5.25)
    "glm": Traits(fused_gate_up=True),
    # Qwen v1 (remote code, planner/model/qwen1.py): c_attn one Linear for q, k and v; w1 and w2 two gated Linears
    "qwen": Traits(fused_qkv=True),
    "internlmxcomposer2": Traits(fused_qkv=True, image_lora_rank=256),  # wqkv; PLoRA (planner/model/xcomposer.py)
    # Qwen3-Next / Qwen3.5: zero-centred RMSNorms in fp32, (1 + w) * norm(x.float()) (modeling_qwen3_5.py:917-934)
    "qwen3_next": Traits(fp32_norms=True),
    "qwen3_5_text": Traits(fp32_norms=True),
    "qwen3_5_moe_text": Traits(fp32_norms=True),
}

# Families transformers has no class for: only their repository's own code builds them (trust_remote_code), so
# nothing here is checked against a transformers build; each is pinned to its checkpoint's modules instead
# (tests/planner/model/test_remote_families.py). Qwen v1: planner/model/qwen1.py.
REMOTE_CODE_ONLY = frozenset({"qwen", "minicpmv", "internlmxcomposer2"})

# The FSDP units per model_type: transformers' decoder-layer (and vision-block) classes, each model class's
# `_no_split_modules` (tests/planner/estimate/test_fsdp.py checks them against the installed transformers). A VLM's
# language model adds its own, by text_config's model_type (ModelSpec.fsdp_units).
FSDP_UNITS = {
    "gpt2": ("GPT2Block",),
    "llama": ("LlamaDecoderLayer",),
    "gemma2": ("Gemma2DecoderLayer",),
    "gemma3_text": ("Gemma3DecoderLayer",),
    "glm": ("GlmDecoderLayer",),
    "qwen": ("QWenBlock",),  # modeling_qwen.py's QWenPreTrainedModel._no_split_modules
    "glm4": ("Glm4DecoderLayer",),
    "mistral": ("MistralDecoderLayer",),
    "phi3": ("Phi3DecoderLayer",),
    "qwen2": ("Qwen2DecoderLayer",),
    "qwen3": ("Qwen3DecoderLayer",),
    "qwen2_5_vl": ("Qwen2_5_VLDecoderLayer", "Qwen2_5_VLVisionBlock"),
    "qwen2_vl": ("Qwen2VLDecoderLayer", "Qwen2VLVisionBlock"),
    # Qwen2_5OmniPreTrainedModel._no_split_modules (modeling_qwen2_5_omni.py:138), the thinker's
    "qwen2_5_omni_thinker": ("Qwen2_5OmniDecoderLayer", "Qwen2_5OmniVisionBlock"),
    "qwen2_5_omni": ("Qwen2_5OmniDecoderLayer", "Qwen2_5OmniVisionBlock"),
    # Qwen3-Omni's thinker: its decoder layer and vision block (modeling_qwen3_omni_moe.py:1520, 1079)
    "qwen3_omni_moe_thinker": ("Qwen3OmniMoeThinkerTextDecoderLayer", "Qwen3OmniMoeVisionBlock"),
    "qwen3_omni_moe": ("Qwen3OmniMoeThinkerTextDecoderLayer", "Qwen3OmniMoeVisionBlock"),
    "internvl": ("InternVLVisionLayer",),
    "mixtral": ("MixtralDecoderLayer",),
    "qwen2_moe": ("Qwen2MoeDecoderLayer",),
    "qwen3_moe": ("Qwen3MoeDecoderLayer",),
    "olmoe": ("OlmoeDecoderLayer",),
    "gpt_oss": ("GptOssDecoderLayer",),
    "deepseek_v2": ("DeepseekV2DecoderLayer",),
    "deepseek_v3": ("DeepseekV3DecoderLayer",),
    "glm4_moe": ("Glm4MoeDecoderLayer",),
    "qwen3_next": ("Qwen3NextDecoderLayer",),
    "qwen3_5_text": ("Qwen3_5DecoderLayer",),
    "qwen3_5_moe_text": ("Qwen3_5MoeDecoderLayer",),
}


def fsdp_units(model_type: str, text_model_type: str | None = None) -> tuple[str, ...]:
    """A model's FSDP units: its own layer classes, then its language model's (a VLM's text_config) not among them."""
    own = FSDP_UNITS.get(model_type, ())
    return own + tuple(c for c in FSDP_UNITS.get(text_model_type or "", ()) if c not in own)


def module_name_matches(name: str, target: str) -> bool:
    """A linear's name against a --lora-targets entry, as PEFT matches target_modules: equal, or a dotted suffix."""
    return name == target or name.endswith("." + target) or target.endswith("." + name)


@dataclass(frozen=True)
class Tensors:
    """`count` parameter tensors of one shape. role: embed | layer | head | norm | vision | audio | projector, or an
    Omni's resident talker | token2wav (modelspec.RESIDENT_ROLES)."""

    role: str
    shape: tuple[int, ...]
    count: int = 1
    lora: bool = False  # a decoder linear weight that LoRA ("all-linear") adapts
    name: str = ""  # a linear's module name in transformers (q_proj, ..., GPT-2's attn.c_proj): LoRA targets
    all_linear: int = 1  # PEFT's rank multiple under target_modules="all-linear" (0: not adapted; MoE: moespec)
    tower_linear: bool = False  # an nn.Linear weight of a VLM's tower or projector (what --lora-vision adapts)
    # an MoE decoder's "mlp" (a dense layer's or shared expert's linear), "router" or "experts": all_linear's reach
    # there is the framework line's PEFT's (planner.frameworks.peft.reached); "" elsewhere
    moe_part: str = ""

    def adapted(self, targets: str) -> bool:
        """Whether LoRA with --lora-targets `targets` adapts this weight: all-linear, attention (q/k/v/o), or a
        comma list of module names matched as PEFT matches them (the name or its dotted suffix)."""
        if targets == "all-linear":  # a router PEFT maps is no nn.Linear, but adapted (planner.frameworks.peft)
            return self.all_linear > 0 and (self.lora or self.moe_part == "router")
        if not self.lora:
            return False
        if self.experts:  # named stacked experts are PEFT's target_parameters
            return any(module_name_matches(self.name, n) for n in targets.split(",") if n.startswith("experts"))
        if self.name.startswith("router."):  # not an nn.Linear: adapted only by PEFT's all-linear (moespec)
            return False
        names = ATTENTION_LINEARS if targets == "attention" else targets.split(",")
        return any(module_name_matches(self.name, n) for n in names)

    def lora_rank_multiple(self, targets: str) -> int:
        return self.all_linear if targets == "all-linear" else 1

    @property
    def experts(self) -> bool:
        """Stacked expert weights (experts x out x in): one nn.Parameter in transformers, no nn.Linear."""
        return len(self.shape) == 3 and self.lora

    @cached_property
    def numel(self) -> int:  # once per tensor: a search asks about 650,000 times when nothing fits
        return prod(self.shape) * self.count


# Past these a config describes no trainable model (and the arithmetic stops meaning anything).
MAX_SIZE = {
    "hidden": 10**6,
    "layers": 10**4,
    "heads": 10**4,
    "vocab": 10**8,
    "intermediate": 10**7,
    "positions": 1 << 24,
    "other": 10**6,
}


def size_kind(key: str) -> str:
    for kind, words in (
        ("layers", ("layer", "depth")),
        ("heads", ("head",)),
        ("vocab", ("vocab",)),
        ("intermediate", ("intermediate", "inner")),
        ("positions", ("position",)),
        ("hidden", ("hidden", "embd", "embed_dim", "head_dim")),
    ):
        if any(w in key for w in words) and not (kind == "heads" and key == "head_dim"):
            return kind
    return "other"


def size(cfg: dict, key: str, *alts: str, default=None):
    """A size from a config: a positive integer (not a bool, float, NaN or string) within MAX_SIZE."""
    for k in (key, *alts):
        if k in cfg and cfg[k] is not None:
            return checked_size(cfg, k, cfg[k])
    if default is not None:
        return default
    raise BadInput(f"config.json lacks '{key}' (needed for a {cfg.get('model_type', '?')} model)", "model")


def checked_size(cfg: dict, key: str, v):
    if isinstance(v, (list, tuple, dict)):
        return v  # shapes such as image_size [448, 448] are checked where they are read
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadInput(f"config.json: {key} = {v!r} must be a positive integer", "model")
    limit = MAX_SIZE[size_kind(key)]
    if not 1 <= v <= limit:
        raise BadInput(f"config.json: {key} = {v} must be an integer from 1 to {limit}", "model")
    return v


def number(cfg: dict, key: str, default: float, low: float = 0.0, high: float = 1e6) -> float:
    """A real-valued setting (rates, ratios, caps): a finite number in [low, high]."""
    v = cfg.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not low <= v <= high:
        raise BadInput(f"config.json: {key} = {v!r} must be a number from {low:g} to {high:g}", "model")
    return float(v)


def sub(cfg: dict, key: str, required: bool = True) -> dict:
    """A nested config (text_config, vision_config): a JSON object."""
    v = cfg.get(key)
    if v is None and not required:
        return {}
    if not isinstance(v, dict):
        raise BadInput(f"config.json: {key} must be a JSON object" + (" (missing)" if v is None else ""), "model")
    return v


class TextFields(NamedTuple):
    """The sizes every language model's TextSpec starts from, by TextSpec's names (text_fields reads them)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int

    def spec(self, text_spec: type, **fields):
        """A TextSpec (modelspec's class, given: shapes sits below modelspec) of these sizes and a family's `fields`."""
        return text_spec(hidden=self.hidden, layers=self.layers, heads=self.heads, kv_heads=self.kv_heads, **fields)


def text_fields(cfg: dict, kv_key: str | None = "num_key_value_heads", kv_required: bool = False) -> TextFields:
    """A config's common text fields, read in this order: hidden_size, num_hidden_layers, num_attention_heads and
    the key-value heads under `kv_key` (absent: as many as the heads, unless kv_required); kv_key None: a family
    without grouped-query attention, as many key-value heads as heads, nothing read."""
    h, L, heads = size(cfg, "hidden_size"), size(cfg, "num_hidden_layers"), size(cfg, "num_attention_heads")
    if kv_key is None:
        return TextFields(h, L, heads, heads)
    return TextFields(h, L, heads, size(cfg, kv_key) if kv_required else size(cfg, kv_key, default=heads))


def divides(whole: int, whole_key: str, part: int, part_key: str) -> None:
    if whole % part:
        raise BadInput(f"config.json: {part_key} = {part} does not divide {whole_key} = {whole}", "model")


def linear(role: str, d_out: int, d_in: int, n: int, bias: bool, lora: bool = False, name: str = "") -> list[Tensors]:
    out = [Tensors(role, (d_out, d_in), n, lora, name, tower_linear=role in ("vision", "audio", "projector"))]
    return out + [Tensors(role, (d_out,), n)] if bias else out
