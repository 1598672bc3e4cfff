"""Freeze tuning (--trained-layers N; LLaMA-Factory's finetuning_type freeze): the last N decoder layers trained in
full, everything else frozen. Read at LLaMA-Factory v0.9.5 (src/llamafactory/):
- which parameters train: model/adapter.py:89-90 (freeze_trainable_layers N > 0: layers L-N .. L-1), :112-113 and
  :129-136 (every parameter whose name holds ".{i}." of a trained layer; the embedding, final norm and head frozen
  unless freeze_extra_modules names them);
- their dtype: the model is loaded in the compute dtype (bf16 under bf16) and only the trained parameters are upcast
  to fp32 (model/adapter.py:316-325, :133-134) unless pure_bf16: the frozen majority stays in half precision;
- what backward reaches: its checkpointing function checkpoints only layers with a trained parameter and runs the
  others plainly (model/model_utils/checkpointing.py:80-103), and nothing below the lowest trained layer needs a
  gradient (no enable_input_require_grads on the new checkpointing format, :129-134), so the frozen layers record no
  graph and save nothing: the step saves what the N trained layers save (activation_terms.text_shape).
ms-swift (--tuner_type full, --freeze_parameters_ratio 1, --trainable_parameters) instead calls
enable_input_require_grads under checkpointing (v4.5.2 swift/trainers/mixin.py:939-941, Framework.input_grads): the
embedding's output requires a gradient, so every frozen layer is checkpointed, keeps its input and is recomputed in
backward; its step saves what full fine-tuning's checkpointed layers save (4.6.0 :980-981 the same; its own
checkpointing run on a CPU step: probes/swift_freeze_step.py).
The first N (--trained-layout first; a negative freeze_trainable_layers, model/adapter.py:91-92, the same at every
release line from v0.5.3 src/llmtuner/model/adapter.py:61): the frozen layers above them all in backward's path,
as LLaMA-Pro's are.
LLaMA-Pro (--trained-layout interleaved; use_llama_pro on the checkpoint scripts/llama_pro.py expanded): the N trained
blocks are every (L/N)-th layer, L/N - 1, 2L/N - 1, ... (model/adapter.py:80-88), so the frozen layers above the lowest
one are in backward's path: they save what their input's gradient needs (planner.estimate.frozen_lm's layer), and
LLaMA-Factory's checkpointing function runs them without a checkpoint whatever the checkpointing, while it checkpoints
the trained blocks (they save their input alone, as any checkpointed layer).
tests/probes/test_freeze.py pins the step's peak to a real CPU step of a transformers model frozen by this rule and to
one of a model LLaMA-Factory itself prepared (probes/lf_freeze_step.py)."""

from __future__ import annotations

from dataclasses import replace

INSERTED = " + {} LLaMA-Pro blocks"


def freeze_tuned(k) -> bool:
    return bool(getattr(k, "trained_layers", 0))


def below_trained_layers_idle(k) -> bool:
    """Freeze tuning whose frozen layers below the trained ones record no graph: all but a framework that makes the
    embedding's output require a gradient under checkpointing (Framework.input_grads)."""
    from planner.frameworks import FRAMEWORKS

    if not freeze_tuned(k):
        return False
    return not (FRAMEWORKS[k.framework].input_grads and k.checkpointing != "off")


def trained_layer_ids(layers: int, n: int, layout: str) -> range:
    """The trained layers' indices (LLaMA-Factory 0.9.5 model/adapter.py:87-92)."""
    if layout in ("interleaved", "inserted"):  # inserted: of the expanded model (expanded_model), the same places
        stride = layers // n
        return range(stride - 1, layers + stride - 1, stride)
    if layout == "first":  # a negative freeze_trainable_layers (:91-92)
        return range(min(n, layers))
    return range(max(0, layers - n), layers)


def expanded_model(model, k):
    """The model ms-swift's LLaMA-Pro trains (--trained-layout inserted, --tuner_type llamapro): after every
    layers/N of its layers a copy of the layer before is inserted, o_proj and down_proj zeroed (4.6.0
    swift/tuners/llamapro.py:61, :86-95, :204-219; the same at v3.0.0 :61-69, :147-152), so the model holds layers + N
    decoder layers, the N new ones trained (:120-126) and every other parameter frozen (swift/pipelines/train/
    tuner.py:378-382). Each dense layer alike: the layers' tensors counted layers + N times. Idempotent (Setup)."""
    n = getattr(k, "trained_layers", 0)
    if getattr(k, "trained_layout", "last") != "inserted" or not n or model.name.endswith(INSERTED.format(n)):
        return model
    layers = model.text.layers
    tensors = tuple(
        replace(t, count=t.count * (layers + n) // layers) if t.role == "layer" else t for t in model.tensors
    )
    config = {**model.config, "num_hidden_layers": layers + n} if "num_hidden_layers" in model.config else model.config
    text = replace(model.text, layers=layers + n)
    return replace(model, name=model.name + INSERTED.format(n), text=text, tensors=tensors, config=config)


def path_frozen_layers(k, layers: int) -> int:
    """Frozen layers above the lowest trained one (backward passes through them): none for the last N."""
    if not freeze_tuned(k):
        return 0
    ids = trained_layer_ids(layers, k.trained_layers, k.trained_layout)
    return layers - ids[0] - len(ids)


def path_frozen_bytes(model, k, layer_bytes: int, profile: str, tokens: int) -> int:
    """What the frozen layers in backward's path save: a trained layer's tensors less those only its weights'
    gradients need (planner.estimate.frozen_lm), never under a checkpoint (LLaMA-Factory's checkpointing function)."""
    from planner.estimate import frozen_lm

    n = path_frozen_layers(k, model.text.layers)
    return n * (layer_bytes - frozen_lm.layer_dropped_bytes(model, profile, tokens)) if n else 0


def trained_layer_params(model, n: int) -> int:
    """Parameters of the last n decoder layers (each dense layer alike: the layers' parameters over their count)."""
    layer = sum(t.numel for t in model.tensors if t.role == "layer")
    return layer * n // model.text.layers


def trained_tensor_sizes(model, n: int) -> list[tuple[int, int]]:
    """(elements of one tensor, how many) of the trained layers' tensors."""
    out = []
    for t in model.tensors:
        if t.role == "layer":
            out.append((t.numel // t.count, t.count * n // model.text.layers))
    return out


def largest_trained_matrix_params(model) -> int:
    """Elements of the largest weight of a decoder layer."""
    return max(t.numel // t.count for t in model.tensors if t.role == "layer" and len(t.shape) == 2)
