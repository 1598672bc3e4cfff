"""A VLM's frozen language model (--frozen language or language+vision; LLaMA-Factory's freeze_language_model,
ms-swift's freeze_llm): its weights take no gradient, but the loss's gradient still flows back through every decoder
layer to the image features, so each layer saves what its input's gradient needs and none of what its weights' would.

What that drops, per layer (sim traces of Qwen2.5-VL-3B and LLaVA-1.5-7B at 2,048 tokens, none against language;
tests/probes/test_frozen_lm_terms.py pins each term to the sim):
- each RMSNorm's normalized tensor and output (`weight * x` saves x only for the weight's gradient, and the frozen
  linears reading the output save nothing): 4 bytes an element in half precision (2 + 2) and under torch AMP (the
  fp32 normalized tensor), 8 in fp32;
- under AMP, each linear reading the normalized hidden state saved its own bf16 copy of it (autocast casts the input
  per op; it caches only the weights): 2 bytes an element for each of q, k, v, gate and up. The weights' bf16 copies
  stay: the input's gradient multiplies by them;
- down_proj's input (the gated product), in the matmul dtype.
The final norm drops what a layer's norm drops, and under AMP the head's copy of its input goes too. Nothing else
changes: attention and the MLP's activation still save their inputs for the input's gradient. Llama-3.2-Vision's
layers below its first cross-attention layer save nothing: their hidden state does not depend on the image
(activation_terms.text_shape leaves them out).
"""

from __future__ import annotations

from planner.estimate import activations as act

HIDDEN_READERS = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "qkv_proj", "gate_up_proj")


def language_frozen(knobs) -> bool:
    return knobs.frozen.startswith("language")


def norm_dropped_bytes_per_element(profile: str) -> int:
    """Bytes per element one RMSNorm with a frozen weight no longer saves (its normalized tensor and its output)."""
    return 8 if profile == "fp32" else 4


def layer_dropped_bytes(model, profile: str, tokens: int) -> int:
    """What one decoder layer of a frozen language model saves less than a trained one (a positive number)."""
    t = model.text
    norms = t.traits.norms_per_layer * norm_dropped_bytes_per_element(profile) * tokens * t.hidden
    readers = sum(x.count for x in model.tensors if x.role == "layer" and x.name in HIDDEN_READERS) // t.layers
    copies = 2 * tokens * t.hidden * readers if profile == "amp" else 0
    down = act.saved_dtype_bytes(profile)[1] * tokens * t.intermediate
    return norms + copies + down


def ends_dropped_bytes(model, profile: str, tokens: int) -> int:
    """The final norm's dropped tensors, and under AMP the head's bf16 copy of its input."""
    head_copy = 2 * tokens * model.text.hidden if profile == "amp" else 0
    return norm_dropped_bytes_per_element(profile) * tokens * model.text.hidden + head_copy
