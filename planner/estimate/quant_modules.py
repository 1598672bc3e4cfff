"""Which decoder weights a quantized base (--quant) stores quantized: every quantizer memplan plans replaces
nn.Linear modules only, so a weight held as an nn.Parameter of another module stays dense in the load dtype.

- bitsandbytes (nf4, fp4, int8): transformers 5.25 integrations/bitsandbytes.py:189 (`type(module) is nn.Linear`),
  4.57.1 :167; AWQ: 5.23 integrations/awq.py:96; HQQ: 4.57.1 integrations/hqq.py:54; compressed-tensors: its
  config groups target Linear (llm-compressor's schemes). A GPTQ or AWQ checkpoint of a stacked-experts family on
  transformers 5 loads none of its packed experts (measured, tests/probes/awq_moe.py) and is refused
  (planner.frameworks.rules.stacked_experts_prequant); its dense count here holds where a plan is still made.
- transformers 5 builds the routed experts of every MoE family memplan plans as two stacked parameters of one experts
  module (experts.gate_up_proj, experts.down_proj: planner.model.moespec), and their routers as a TopKRouter module
  with a weight parameter: both stay dense. transformers 4 builds one nn.Linear an expert (ModuleList) and an nn.Linear
  router (Qwen-MoE, Mixtral, OLMoE), except gpt-oss (GptOssExperts, stacked from its first release) and
  Qwen3-VL-MoE (Qwen3VLMoeTextExperts, 4.57.1 modeling_qwen3_vl_moe.py:67-74), and DeepSeek's and GLM-4.5's routers
  (TopkRouter modules at 4.57.1 too). Measured (tests/probes/test_fused_experts.py): at 5.25 bitsandbytes 4- and
  8-bit leave a tiny Qwen3-MoE's, Qwen1.5-MoE's and Mixtral's experts and routers in bf16, 2 bytes a weight; the
  layouts at 4.57.1 and 5.25 of each family read off the built modules there.
- Llama-4's stacked experts are swapped for one Llama4TextMLP an expert before compressed-tensors or bitsandbytes
  quantizes (MODULES_TO_PATCH_FOR_QUANTIZATION: transformers 5.25 quantizers/base.py:425-436, 4.57.1 :384-392), so
  those two quantize them; GPTQ, AWQ and HQQ leave them dense.

The transformers a plan runs is its framework line's (planner.frameworks.rules.runs_transformers_5).
"""

from __future__ import annotations

from planner.frameworks.rules import runs_transformers_5
from planner.model.moespec import quant_layout

EXPERTS = ("experts.gate_up_proj", "experts.down_proj")
ROUTER = "router.weight"  # moespec's name for the router (transformers' mlp.gate)


def dense_weight_names(model_type: str, quant: str, transformers_5: bool) -> tuple[str, ...]:
    """The decoder weights (moespec's names) `quant` leaves dense in `model_type` on transformers 5 or 4."""
    if quant == "none":
        return ()
    layout = quant_layout(model_type)
    if layout.patched_for:
        return () if quant.startswith(layout.patched_for) else EXPERTS
    experts = EXPERTS if transformers_5 or layout.stacked_at_4 else ()
    router = (ROUTER,) if transformers_5 or layout.router_module_at_4 else ()
    return experts + router


def dense_names(s) -> tuple[str, ...]:
    """dense_weight_names for the plan `s` (a Setup): its model, --quant and framework line."""
    k = s.knobs
    return dense_weight_names(s.model.model_type, k.quant, runs_transformers_5(k.framework, k.release))
