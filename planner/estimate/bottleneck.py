"""ms-swift's bottleneck adapter (--lora-variant adapter, --lora-rank its adapter_length): ms-swift's own
AdapterModule (Houlsby et al. 2019), read in the 4.6.0 wheel and at v3.12.6:

- --tuner_type adapter (3.x --train_type) builds AdapterConfig(dim = the text hidden size, target_modules = the
  architecture's MLP path, hidden_pos 0, adapter_length, act_layer = --adapter_act) (4.6.0
  swift/pipelines/train/tuner.py:280-293; v3.12.6 swift/llm/train/tuner.py:298-308): one adapter after each decoder
  layer's MLP, whatever --target_modules says;
- AdapterModule (swift/tuners/adapter.py:143-188, the same file at v3.12.6): linear1 (dim -> adapter_length) with
  its bias, the activation, linear2 (adapter_length -> dim) with its bias, in fp32 (nn.Linear's default; nothing
  casts them, and tuner.py:401-407 only lifts fp16 to fp32); its forward, patched over the MLP's (adapter.py:81-93),
  casts the MLP output to fp32, adds linear2(act(linear1(x))) to it and casts back.

What one adapter's forward keeps (measured on ms-swift's own AdapterModule, CPU tensors, CUDA's autocast replayed,
the live-bytes tracker: tests/probes/test_adapter.py, exact): under bf16 AMP linear1's bf16 copy of its input
(tokens x dim), the activation's input and linear2's input (tokens x adapter_length each) and autocast's bf16
copies of the two weights; under bf16-pure the same in fp32 (the fp32 cast of the input saved, no weight copies).
gelu (the default) and silu save their input; relu, tanh and sigmoid save their output, which is linear2's input:
one tokens x adapter_length tensor fewer, which the plan holds.
"""

from __future__ import annotations


def bottleneck(knobs) -> bool:
    return bool(knobs.lora_rank) and knobs.lora_variant == "adapter"


def adapter_params(dim: int, length: int) -> int:
    """One AdapterModule's trained parameters: linear1's weight and bias, linear2's weight and bias."""
    return 2 * dim * length + length + dim


def trained_params(model, knobs) -> int:
    """One adapter a decoder layer (the MLP's)."""
    return model.text.layers * adapter_params(model.text.hidden, knobs.lora_rank) if bottleneck(knobs) else 0


def tensor_sizes(model, knobs) -> list[tuple[int, int]]:
    """(elements, how many) of the trained tensors: two weights and two biases a layer."""
    if not bottleneck(knobs):
        return []
    h, n, length = model.text.hidden, model.text.layers, knobs.lora_rank
    return [(h * length, 2 * n), (length, n), (h, n)]


def saved_bytes(dim: int, length: int, tokens: int, precision: str) -> int:
    """What one adapter's forward keeps for backward beyond its output (gelu): bf16 AMP 2 bytes an element of its
    input copy, the activation's input and linear2's input, and the two weights' bf16 copies; bf16-pure 4 bytes an
    element of the same activations and no copies."""
    if precision == "bf16-pure":
        return 4 * tokens * (dim + 2 * length)
    return 2 * tokens * (dim + 2 * length) + 4 * dim * length


def layer_delta_bytes(model, knobs, tokens: int) -> int:
    """One adapted layer's saved tensors against the fully trained layer activations.layer_bytes counts (16-bit
    base): the adapter's saved_bytes, less what the frozen linears and norms do not save (the shared q/k/v and
    gate/up inputs, down_proj's input, each norm's normalized output: as planner.estimate.lora's
    half_layer_delta_bytes and planner.estimate.oft's layer_delta_bytes). The first layer, whose attention and MLP
    have no trained parameter below them, saves less still (first_layer_idle_bytes)."""
    t = model.text
    out = saved_bytes(t.hidden, knobs.lora_rank, tokens, knobs.precision)
    return out - 2 * tokens * (2 * t.hidden + t.intermediate) - t.traits.norms_per_layer * 2 * tokens * t.hidden


def first_layer_idle_bytes(model, knobs, layer_bytes: int, tokens: int) -> int:
    """What the first decoder layer does not save of an adapted layer's `layer_bytes`: nothing below its adapter
    is trained, so its attention and MLP record no graph and only the adapter's own tensors stay; where the
    embedding's output requires a gradient (ms-swift turns input gradients on under checkpointing: v4.5.2
    swift/trainers/mixin.py:939-941) the layer is a checkpointed one like the others (0)."""
    if not bottleneck(knobs) or knobs.checkpointing != "off":
        return 0
    return layer_bytes - saved_bytes(model.text.hidden, knobs.lora_rank, tokens, knobs.precision)
