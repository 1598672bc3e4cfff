"""The checkpointing knob as the probes and the bundled trainer run it (planner/estimate/recipe_terms.py plans it):

- selective-op: torchtitan's op-level policy (torchtitan/distributed/activation_checkpoint.py, `_custom_policy`)
  through torch's selective checkpoint contexts: outputs of the attention kernel and of every mm but every
  second one are kept, the rest recomputed;
- every-N: transformers' per-layer checkpointing left on for layers N, 2N, ... (1-based, torchtitan's ac_freq);
- offload: saved tensors go to pinned host memory (torch.autograd.graph.save_on_cpu's hooks, keeping parameters
  and tensors under 1 KiB on the device as torchtune's OffloadActivations does);
- offload-inputs: full checkpointing with the same hooks around each layer's checkpoint alone, so only what the
  checkpoint saves, the layer's inputs, goes to the host (axolotl's Unsloth checkpointer keeps the same tensors).
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager, nullcontext
from functools import partial

import torch

from planner.estimate import recipe_terms

_SAVE_OPS = {
    "mm",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
}


def selective_contexts(extra=None):
    """torchtitan's op-level policy: save the outputs of the ops above, except every second mm (counted
    separately in forward and in recomputation). `extra`: a context_fn whose recompute context is entered too."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    meta = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        name = func.overloadpacket.__name__
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm"
        if name == "mm":
            meta[key] += 1
        save = name in _SAVE_OPS and not (name == "mm" and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE

    fwd, rec = create_selective_checkpoint_contexts(policy)
    if extra is None:
        return fwd, rec
    efwd, erec = extra()
    return _both(fwd, efwd), _both(rec, erec)


@contextmanager
def _both(a, b):
    with a, b:
        yield


def apply_checkpointing(model, knobs, context_fn=None) -> None:
    """Turn on the plan's checkpointing (not offload: offload_context wraps the step instead). `context_fn`:
    the probes' recomputation context (checkpoint's context_fn)."""
    mode = knobs.checkpointing
    if mode in ("off", "offload"):
        return
    kw = {"use_reentrant": False}
    if mode == "selective-op":
        kw["context_fn"] = partial(selective_contexts, context_fn)
    elif context_fn is not None:
        kw["context_fn"] = context_fn
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
    if mode == "offload-inputs":
        _inputs_to_host(model)
    if mode.startswith("every-"):
        from transformers.modeling_layers import GradientCheckpointingLayer

        n = int(mode.removeprefix("every-"))
        layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
        for i, layer in enumerate(layers, start=1):
            layer.gradient_checkpointing = i % n == 0


def _inputs_to_host(model) -> None:
    """Each layer's checkpoint run under the host hooks: torch's non-reentrant checkpoint saves the layer's inputs
    outside its own hooks (torch/utils/checkpoint.py _NoopSaveInputs), the hooks nearest the save take them, and
    the layer's own tensors stay under the checkpoint's."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    for layer in model.modules():
        if isinstance(layer, GradientCheckpointingLayer):
            layer._gradient_checkpointing_func = partial(_hosted, layer._gradient_checkpointing_func)


def _hosted(checkpoint, *args, **kwargs):
    pin = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
    with torch.autograd.graph.saved_tensors_hooks(*_host_hooks(pin)):
        return checkpoint(*args, **kwargs)


def offload_context(knobs, device_type: str):
    """--checkpointing offload: saved tensors to pinned host memory until backward brings them back."""
    if knobs.checkpointing != "offload":
        return nullcontext()
    return torch.autograd.graph.saved_tensors_hooks(*_host_hooks(device_type == "cuda"))


def _host_hooks(pin: bool):
    """Pack to host memory (pinned on CUDA), unpack to the tensor's device; parameters and tensors under
    OFFLOAD_MIN_BYTES stay."""
    from torch._subclasses.fake_tensor import FakeTensor

    def pack(t):
        if isinstance(t, torch.nn.Parameter) or t.untyped_storage().nbytes() < recipe_terms.OFFLOAD_MIN_BYTES:
            return (None, t)
        if isinstance(t, FakeTensor):  # the sim: the host copy holds no device memory; backward allocates anew
            return (t.device, (t.size(), t.stride(), t.dtype))
        host = torch.empty(t.size(), dtype=t.dtype, layout=t.layout, pin_memory=pin)
        host.copy_(t)
        return (t.device, host)

    def unpack(packed):
        device, t = packed
        if device is None:
            return t
        if isinstance(t, tuple):
            return torch.empty_strided(t[0], t[1], dtype=t[2], device=device)
        return t.to(device, non_blocking=pin)

    return pack, unpack
