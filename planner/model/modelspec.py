"""The model's spec, what the memory and speed models read of it (without torch): ModelSpec (its tensor groups,
each shape x count with a role, its text and tower specs, its FSDP units), TextSpec, VisionSpec, the roles a
--frozen setting leaves untrained, and the model as an older transformers runs it (PEFT's targets for
--lora-targets: lora_targets.py).
Built from a config.json by planner.model.families.from_config, family by family.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from math import prod

from planner.model import (
    hybrid,
    prequant,
)
from planner.model.moespec import MLASpec, MoESpec, in_moe_block
from planner.model.shapes import Tensors, Traits


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
    # the width of what the projector reads where no tower block saves it: Mllama's vision_output_dim (its last and
    # intermediate layers' states concatenated; planner.estimate.vision.projector_input_bytes), 0 elsewhere
    projector_input: int = 0
    # what one attention call of a block spans (planner.estimate.vision.eager_attention_bytes): a tile or fixed-size
    # image of this many encoder tokens; 0: each sample's image whole (Qwen); windows of window_tokens in all but
    # full_attention_layers of the blocks (Qwen2.5-VL)
    attention_tokens: int = 0
    window_tokens: int = 0
    full_attention_layers: int = 0
    tiled: bool = False  # an image cut into fixed tiles a count caps (InternVL's dynamic tiling: MAX_NUM)
    # the tower's class defines get_input_embeddings, so enable_input_require_grads on it takes (where a framework
    # calls it on a frozen tower: Framework.frozen_tower_input_grads), at the transformers ms-swift 2.5-3.x pins: set
    # per family by its reader (tests/probes/test_frozen_tower_hook.py measures each class in those lines' venvs)
    input_embeddings: bool = False
    # the transformers from which its layers stop checkpointing, where `checkpointed` (read at the newest) is False:
    # Mllama's encoder calls _gradient_checkpointing_func at 4.53.0 (modeling_mllama.py:391), not at 4.55.4 (:353-357)
    checkpointed_until: tuple[int, ...] = ()

    def frozen(self, parameter: str, frozen: str) -> bool:
        """Whether `frozen` (Knobs.frozen) freezes the parameter of this name: the tower's, the projector's, or the
        language model's (every parameter outside the tower and the projector)."""
        projector = any(p in parameter for p in self.projector_modules)
        tower = not projector and any(p in parameter for p in self.tower_modules)
        part = "projector" if projector else "vision" if tower else "language"
        return part in frozen_roles(frozen) or (part == "language" and "language" in frozen)


LANGUAGE_ROLES = ("embed", "layer", "norm", "head")
# an Omni's talker and vocoder (planner/model/omnitalker.py, omni3talker.py): frozen under every setting, as ms-swift
# keeps them (4.5.2 swift/arguments/tuner_args.py:216); FP32_ROLES in fp32 whatever the load dtype (token2wav.float())
RESIDENT_ROLES = ("talker", "token2wav")
FP32_ROLES = ("token2wav",)
# the tensor roles each Knobs.frozen setting freezes; an audio tower (Qwen2.5-Omni's) freezes with the vision tower,
# as LLaMA-Factory's freeze_vision_tower (vision_model_keys) and ms-swift's freeze_vit (vision_tower) do
FROZEN_ROLES = {
    "none": RESIDENT_ROLES,
    "vision": ("vision", "audio", *RESIDENT_ROLES),
    "vision+projector": ("vision", "audio", "projector", *RESIDENT_ROLES),
    "language": (*LANGUAGE_ROLES, *RESIDENT_ROLES),
    "language+vision": (*LANGUAGE_ROLES, "vision", "audio", *RESIDENT_ROLES),
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
        """Parameters Knobs.frozen keeps frozen: the vision tower's (role vision), and its projector's; an Omni's
        resident talker and vocoder always (RESIDENT_ROLES)."""
        return sum(n for role, n in self._params_by_role.items() if role in frozen_roles(frozen))

    def resident_params(self, fp32: bool = False) -> int:
        """An Omni's talker and vocoder, resident and frozen (RESIDENT_ROLES; with `fp32` those held in fp32,
        FP32_ROLES: Qwen2.5-Omni's token2wav); 0 for any other model."""
        return sum(n for r, n in self._params_by_role.items() if r in (FP32_ROLES if fp32 else RESIDENT_ROLES))

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
        dispatch (Llama-4's) runs every expert on every token. An Omni's resident talker runs in no training step
        (ms-swift's forward is the thinker's: use_submodel_func(model, 'thinker'), 4.5.2 swift/model/models/qwen.py:1587)."""
        m, run = self.text.moe, self.params - self.resident_params()
        if m is None or m.dispatch == "dense":
            return run
        per_expert = 3 * self.text.hidden * m.expert_inter + (2 * m.expert_inter + self.text.hidden if m.bias else 0)
        return run - (m.experts - m.top_k) * per_expert * m.moe_layers

    def linear_names(self) -> set[str]:
        """The decoder linears' module names, and stacked experts' (what --lora-targets may list)."""
        return {t.name for t in self.tensors if t.lora and not t.name.startswith("router.")}

    def layer_unit_params(self, quantized: bool = False, dense: tuple[str, ...] = (), routed: bool = True) -> int:
        """Parameters of the largest decoder layer (FSDP's unit, ZeRO-3's gather): every layer alike in a dense
        model; an MoE model's routed layer (DeepSeek's first layers are dense and smaller), or with `routed` False
        its dense layer (the routed one where every layer is routed). `quantized`: only its decoder linears'
        weights (what a quantized base stores packed: planner.estimate.quant.quantized_weights), but those the
        format leaves `dense`."""
        layer = [t for t in self.tensors if t.role == "layer" and ((t.lora and t.name not in dense) or not quantized)]
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
        common = (sum(t.numel for t in layer) - block - dense) // L
        return common + (block // m.moe_layers if routed or not only_dense else dense // (L - m.moe_layers))

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
