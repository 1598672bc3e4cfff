"""Mixture-of-experts and multi-head latent attention shapes, read from a config.json the way transformers 5.23
builds the modules (models/<family>/modeling_<family>.py), without torch.

Every family here stores a layer's routed experts as two stacked parameters, `experts.gate_up_proj`
(experts x 2*inter x hidden) and `experts.down_proj` (experts x hidden x inter) (gpt-oss: transposed, with
biases), beside a router weight (experts x hidden). Some layers are dense: DeepSeek's first
`first_k_dense_replace`, Qwen-MoE's `mlp_only_layers` and those off `decoder_sparse_step`. Shared experts
(Qwen1.5-MoE's gated `shared_expert`, DeepSeek's `shared_experts`) are plain gated MLPs that every token runs.

Dispatch: each family's experts class is decorated with `@use_experts_implementation`, and transformers
5.23 picks "grouped_mm" (one sort of the token-expert pairs, then `torch.nn.functional.grouped_mm` over
them) unless the device cannot dispatch it, then "eager" (a Python loop over the experts hit). A config.json's
`experts_implementation` (transformers' own key) picks one of the two.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise
from typing import NamedTuple

from planner.errors import BadInput
from planner.frameworks.peft import PEFT_0_22, reached_at
from planner.model.shapes import Tensors, linear, number, size

MOE_FAMILIES = ("deepseek_v2", "deepseek_v3", "glm4_moe", "gpt_oss", "mixtral", "olmoe", "qwen2_moe", "qwen3_moe")
# DeepSeek-V3's MoE block: dense first_k_dense_replace layers, n_shared_experts shared experts, an fp32 sigmoid router
# over groups. GLM-4.5 (glm4_moe) routes as it does (modeling_glm4_moe.py:269-310,371-393,402, transformers 5.25)
# beside grouped-query attention
DEEPSEEK_ROUTING = ("deepseek_v2", "deepseek_v3", "glm4_moe")
# Which MoE tensors PEFT's LoraConfig(target_modules="all-linear") adapts beside the attention linears is the framework
# line's PEFT's (planner.frameworks.peft): the tensors carry their part (moe_part) and are built at the newest PEFT,
# 0.22.0 (tests/probes/test_moe.py checks the counts). ALL_LINEAR_EXPERTS: the families whose router is an adapted
# module in the quantized layouts (planner.estimate.quant, quant_modules), as PEFT 0.21 adapted them.
ALL_LINEAR_EXPERTS = {"mixtral", "qwen3_moe", "olmoe", "deepseek_v2", "deepseek_v3", "glm4_moe"}
# Language models of composite (VLM) families laid out as a family above: Qwen3-VL-MoE's text model is Qwen3-MoE's
# (models/qwen3_vl_moe/modeling_qwen3_vl_moe.py:114-123 stacked experts, :153-159 router, :283-288 q/k norms,
# :352-353 mlp_only_layers and decoder_sparse_step, transformers 5.25). PEFT's all-linear adapts no expert there
# (the VLM's LoRA targets are a pattern over the language model's nn.Linear modules: lora_targets.peft_target_modules).
# GLM-4.5V's is GLM-4.5's without q/k norms (glm4v.py); Qwen3-Omni's thinker's is Qwen3-MoE's (qwen3omni.py).
# The families whose v4 expert names PEFT maps onto the stacked experts and router (transformers 5.25
# conversion_mapping._MODEL_TO_CONVERSION_PATTERN onto mixtral / qwen2_moe, which PEFT's
# utils/transformers_weight_conversion.py reads), from the first PEFT measured doing it: 0.20.0 (ms-swift's and
# axolotl's venvs), Qwen2-MoE's own from 0.22.0 (:44-46). planner.frameworks.peft decides each line's reach.
PEFT_MAPS = {f: (0, 20, 0) for f in ("mixtral", "qwen3_moe", "olmoe", "deepseek_v2", "deepseek_v3", "glm4_moe")}
PEFT_MAPS |= {"qwen3_next": (0, 20, 0), "qwen2_moe": (0, 22, 0)}
# VLMs transformers maps so (glm4v_moe, qwen3_omni_moe: conversion_mapping.py), whose language model memplan adapts by
# a pattern of its module names (planner.model.lora_targets): PEFT maps the MLP names the pattern spells onto the
# experts, as it maps a framework's own list (planner.frameworks.peft, `names`). GLM-4.5V on PEFT 0.21.2 (a two-layer
# cut): attention and experts; Qwen3-Omni's pattern spells no MLP name (attention alone).
PATTERN_MAPS = {"glm4v_moe_text": (0, 20, 0), "qwen3_omni_moe_text": (0, 20, 0)}
ROUTER_LINEAR_5_6 = ("deepseek_v2",)  # transformers 5.6 modeling_deepseek_v2.py:90: self.gate = nn.Linear(...)
LAYOUT = {"qwen3_vl_moe_text": "qwen3_moe", "glm4v_moe_text": "glm4_moe", "qwen3_omni_moe_text": "qwen3_moe"}
DISPATCHES = ("grouped_mm", "eager")  # transformers 5.23's default (get_correct_experts_implementation), its fallback


@dataclass(frozen=True)
class MoESpec:
    experts: int  # routed experts in an MoE layer
    top_k: int  # experts each token is routed to
    expert_inter: int  # one routed expert's intermediate width
    moe_layers: int  # decoder layers whose MLP is routed; the others run a dense MLP of `intermediate`
    shared_inter: int = 0  # width of the shared expert(s) every token also runs (0: none)
    shared_gate: bool = False  # Qwen1.5-MoE: sigmoid(Linear(hidden, 1)) scales the shared expert
    bias: bool = False  # gpt-oss: router and expert biases; its own clamped SwiGLU
    aux_loss_coef: float = 0.0  # router_aux_loss_coef, added to the loss only when output_router_logits
    router_fp32: bool = False  # DeepSeek: the router casts its input and weight to fp32
    dispatch: str = "grouped_mm"
    imbalance: float = 2.0  # as the knobs run it: the busiest expert takes this many times its fair share
    experts_grad: str = "full"  # as the knobs run it: "full" (trained), "frozen" (LoRA elsewhere), "lora" (adapted)
    ep: int = 1  # as the knobs run it (recipe_terms.text_spec): ranks the experts are split over
    load: float = 1.0  # pairs the busiest rank's experts run, over this rank's own (imbalance, at most ep)
    # two routed layers run back to back somewhere (False: none does, as where routed and dense layers alternate,
    # Llama-4 Maverick's interleave_moe_layer_step 2): the largest two adjacent FSDP units (planner.estimate.fsdp)
    routed_adjacent: bool = True
    # the first PEFT that maps the family's v4 expert names onto its stacked experts and router (PEFT_MAPS); () none
    peft_maps_from: tuple[int, ...] = ()
    router_linear_5_6: bool = False  # its router an nn.Linear in transformers 5.6 (LLaMA-Factory 0.9.5's)
    pattern: bool = False  # a VLM's language model, adapted by a pattern of names (PATTERN_MAPS)


@dataclass(frozen=True)
class MLASpec:
    """DeepSeek's multi-head latent attention (DeepSeek-V2 paper, section 2.1; modeling_deepseek_v2.py)."""

    q_lora_rank: int  # 0: q_proj straight from the hidden size (DeepSeek-V2-Lite)
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim


def _layer_kinds(cfg: dict, mt: str, layers: int) -> list[bool]:
    """Which decoder layers are routed (True) in transformers' construction order."""
    if mt in DEEPSEEK_ROUTING:
        first = size(cfg, "first_k_dense_replace", default=0) if cfg.get("first_k_dense_replace") else 0
        return [i >= first for i in range(layers)]
    if mt in ("qwen2_moe", "qwen3_moe"):
        step = size(cfg, "decoder_sparse_step", default=1)
        dense = cfg.get("mlp_only_layers") or []
        if not isinstance(dense, list) or not all(isinstance(i, int) for i in dense):
            raise BadInput("config.json: mlp_only_layers must be a list of layer indices", "model")
        return [i not in dense and (i + 1) % step == 0 for i in range(layers)]
    return [True] * layers


def moe_mlp(
    cfg: dict, mt: str, hidden: int, layers: int, vlm: bool = False, family: str = ""
) -> tuple[MoESpec, list[Tensors]]:
    """The routed MLP's spec and tensors, and the dense layers' MLP tensors (gate/up/down of intermediate_size).
    A VLM's language model (`vlm`) is adapted by a pattern over its nn.Linear modules, which names no expert: its
    tensors carry no moe_part. `family`: the model_type PEFT maps by, where `mt` is another family's layout."""
    t, spec = _moe_tensors(cfg, LAYOUT.get(mt, mt), hidden, layers, mt in ALL_LINEAR_EXPERTS and not vlm)
    if vlm:
        return spec, [replace(x, moe_part="", all_linear=int(x.moe_part not in ("router", "experts"))) for x in t]
    key = family or mt
    maps = PEFT_MAPS.get(key) or PATTERN_MAPS.get(key, ())
    spec = replace(spec, peft_maps_from=maps, router_linear_5_6=mt in ROUTER_LINEAR_5_6, pattern=key in PATTERN_MAPS)
    return spec, list(reached_at(t, spec, PEFT_0_22, names=False))


def _moe_tensors(cfg: dict, mt: str, hidden: int, layers: int, peft: bool) -> tuple[list[Tensors], MoESpec]:
    """The tensors, each MoE part marked (all_linear set by reached_at), and the spec; `peft`: the router is an
    adapted module in the quantized layouts (ALL_LINEAR_EXPERTS)."""
    kinds = _layer_kinds(cfg, mt, layers)
    n_moe, n_dense = sum(kinds), layers - sum(kinds)
    e = size(cfg, "num_local_experts", "num_experts", "n_routed_experts")  # transformers' attribute_map aliases
    k = size(cfg, "num_experts_per_tok", "experts_per_token")
    if k > e:
        raise BadInput(f"config.json: num_experts_per_tok = {k} exceeds the {e} experts", "model")
    inter = size(cfg, "intermediate_size")
    ie = inter if mt in ("mixtral", "olmoe", "gpt_oss") else size(cfg, "moe_intermediate_size")
    shared, gate = 0, False
    if mt == "qwen2_moe":
        shared, gate = size(cfg, "shared_expert_intermediate_size"), True
    elif mt in DEEPSEEK_ROUTING and cfg.get("n_shared_experts"):
        shared = ie * size(cfg, "n_shared_experts")
    bias = mt == "gpt_oss"
    t = [Tensors("layer", (e, hidden), n_moe, lora=peft, name="router.weight", moe_part="router")]
    if bias:
        t += [
            Tensors("layer", (e,), n_moe, name="router.bias"),
            Tensors("layer", (e, hidden, 2 * ie), n_moe, True, "experts.gate_up_proj", moe_part="experts"),
            Tensors("layer", (e, 2 * ie), n_moe, name="experts.gate_up_proj_bias"),
            Tensors("layer", (e, ie, hidden), n_moe, True, "experts.down_proj", moe_part="experts"),
            Tensors("layer", (e, hidden), n_moe, name="experts.down_proj_bias"),
        ]
    else:
        t += [
            Tensors("layer", (e, 2 * ie, hidden), n_moe, True, "experts.gate_up_proj", moe_part="experts"),
            Tensors("layer", (e, hidden, ie), n_moe, True, "experts.down_proj", moe_part="experts"),
        ]
    mlp_bias = bool(cfg.get("mlp_bias", False)) and mt == "deepseek_v2"
    prefix = "shared_expert" if mt == "qwen2_moe" else "shared_experts"
    mlp = []
    for width, n, pre in ((shared, n_moe, prefix + "."), (inter, n_dense, "mlp.")):
        if width and n:
            mlp += linear("layer", width, hidden, n, mlp_bias, True, pre + "gate_proj")
            mlp += linear("layer", width, hidden, n, mlp_bias, True, pre + "up_proj")
            mlp += linear("layer", hidden, width, n, mlp_bias, True, pre + "down_proj")
    t += [replace(x, moe_part="mlp") if x.lora else x for x in mlp]
    if gate and n_moe:
        t += [Tensors("layer", (1, hidden), n_moe, True, "shared_expert_gate")]
    aux = number(cfg, "router_aux_loss_coef", 0.0) if cfg.get("output_router_logits") else 0.0
    adjacent = any(a and b for a, b in pairwise(kinds))
    spec = MoESpec(e, k, ie, n_moe, shared, gate, bias, aux, mt in DEEPSEEK_ROUTING, dispatch(cfg))
    return t, replace(spec, routed_adjacent=adjacent)


def dispatch(cfg: dict) -> str:
    """The experts' dispatch transformers runs: the config's `experts_implementation`, grouped_mm by default."""
    impl = cfg.get("experts_implementation") or "grouped_mm"
    if impl not in DISPATCHES:
        raise BadInput(
            f"config.json: experts_implementation {impl!r} is not modelled; memplan plans "
            f"{' and '.join(DISPATCHES)} (transformers' default and its loop over experts)",
            "model",
        )
    return impl


def mla_attention(cfg: dict, hidden: int, heads: int, layers: int) -> tuple[MLASpec, list[Tensors]]:
    """DeepSeek-V2/V3 attention: q through an optional low-rank bottleneck, k and v from a shared latent."""
    q_rank = size(cfg, "q_lora_rank") if cfg.get("q_lora_rank") else 0
    spec = MLASpec(
        q_rank,
        size(cfg, "kv_lora_rank"),
        size(cfg, "qk_nope_head_dim"),
        size(cfg, "qk_rope_head_dim"),
        size(cfg, "v_head_dim"),
    )
    bias, L = bool(cfg.get("attention_bias", False)), layers
    if q_rank:
        t = linear("layer", q_rank, hidden, L, bias, True, "q_a_proj") + [Tensors("layer", (q_rank,), L)]
        t += linear("layer", heads * spec.qk_head_dim, q_rank, L, False, True, "q_b_proj")
    else:
        t = linear("layer", heads * spec.qk_head_dim, hidden, L, False, True, "q_proj")
    t += linear("layer", spec.kv_lora_rank + spec.qk_rope_head_dim, hidden, L, bias, True, "kv_a_proj_with_mqa")
    t += [Tensors("layer", (spec.kv_lora_rank,), L)]
    t += linear(
        "layer", heads * (spec.qk_nope_head_dim + spec.v_head_dim), spec.kv_lora_rank, L, False, True, "kv_b_proj"
    )
    t += linear("layer", hidden, heads * spec.v_head_dim, L, bias, True, "o_proj")
    return spec, t


MOE_BLOCK = ("router", "experts", "shared_expert", "shared_experts", "shared_expert_gate")


def in_moe_block(name: str) -> bool:
    """Whether a tensor (by its module name) belongs to a routed layer's MLP block."""
    return name.split(".")[0] in MOE_BLOCK


class QuantLayout(NamedTuple):
    """What a quantizer that replaces nn.Linear finds in a family's MoE layers (planner.estimate.quant_modules):
    stacked experts already on transformers 4.57.1 (gpt-oss's GptOssExperts, Qwen3-VL-MoE's Qwen3VLMoeTextExperts,
    4.57.1 modeling_qwen3_vl_moe.py:67-74), a router that is no nn.Linear on 4.57.1 too (DeepSeek's and GLM-4.5's
    TopkRouter, gpt-oss's), and the quantizers transformers splits the stacked experts into Linears for (Llama-4:
    MODULES_TO_PATCH_FOR_QUANTIZATION, 5.25 quantizers/base.py:425-436, 4.57.1 :384-392; --quant prefixes)."""

    stacked_at_4: bool = False
    router_module_at_4: bool = False
    patched_for: tuple[str, ...] = ()


QUANT_LAYOUTS = {
    "gpt_oss": QuantLayout(stacked_at_4=True, router_module_at_4=True),
    "qwen3_vl_moe": QuantLayout(stacked_at_4=True),
    "qwen3_vl_moe_text": QuantLayout(stacked_at_4=True),
    **dict.fromkeys(
        ("deepseek_v2", "deepseek_v3", "glm4_moe", "glm4v_moe", "glm4v_moe_text"), QuantLayout(False, True)
    ),
    # Llama4TextExperts stacks its experts on 4 too (4.53.0 modeling_llama4.py:51-52: gate_up_proj, down_proj
    # nn.Parameters); patched_for decides its quantization first (quant_modules.dense_weight_names)
    **dict.fromkeys(
        ("llama4", "llama4_text"), QuantLayout(stacked_at_4=True, patched_for=("nf4", "fp4", "int8", "ct-"))
    ),
}


def quant_layout(model_type: str) -> QuantLayout:
    """QUANT_LAYOUTS' entry for a model_type (every other MoE family: Linears on 4.57.1, stacked on 5)."""
    return QUANT_LAYOUTS.get(model_type, QuantLayout())
