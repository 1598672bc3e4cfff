"""device_map model parallelism (issue 49 item 2): one process spreads the model's layers over `device_map` visible
GPUs, as from_pretrained(device_map="auto") places them when no launcher starts a process per GPU (ms-swift with
CUDA_VISIBLE_DEVICES=0,1 and no NPROC_PER_NODE, HF scripts run with python). The GPUs then work in turn: a step
takes what one GPU takes for the whole model, and each GPU holds its layers' weights, gradients, optimizer states
and activations, the first the embeddings, the one with the head the logits.

The placement is accelerate's, read in accelerate 1.16.0 utils/modeling.py (transformers 5.25's _get_device_map
calls get_balanced_memory, then infer_auto_device_map):
- get_balanced_memory (:916-1050): per_gpu = model bytes // N + 1.25 x the largest no-split block (a decoder layer;
  the mean leaf module is smaller), the cap of every GPU but the last, which keeps its whole memory;
- infer_auto_device_map (:1278-1500): the modules in order (embeddings, layers, final norm, rotary, head), each on the
  current GPU while it fits under its cap, else the next GPU; the first GPU (a "main device", :1102) also reserves
  the largest layer still to place (get_max_layer_size :729-765: the embeddings or head while they are to come, else
  a decoder layer); a tied head goes with the embeddings (tied parameters, :1380-1410).
Pinned against accelerate's own functions on the meta-device models (tests/planner/estimate/test_devicemap.py).
Dense text models only: a VLM's tower, MoE layers of two sizes and cross-attention layers are refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.errors import BadInput
from planner.model.modelspec import ModelSpec


@dataclass(frozen=True)
class Device:
    first_layer: int
    layers: int
    embed: bool
    head: bool
    weight_bytes: int


def refusal(m: ModelSpec) -> str | None:
    """Why `m` is not planned under device_map, or None."""
    if m.vision is not None:
        return f"{m.name} has a vision tower: device_map placement is planned for text models only"
    if m.text.moe is not None or m.text.cross_layers:
        return f"{m.name}'s layers differ in size (MoE or cross-attention): device_map placement is not planned for it"
    return None


def _sizes(m: ModelSpec, dtype_bytes: int) -> tuple[int, int, int, int, int]:
    """(embeddings, one decoder layer, final norm, rotary buffer, head) in bytes as accelerate counts them in the
    load dtype; a tied head counts nothing of its own."""
    by_role: dict[str, int] = {}
    for t in m.tensors:
        by_role[t.role] = by_role.get(t.role, 0) + t.numel
    layer = by_role.get("layer", 0) // m.text.layers
    rotary = m.text.head_dim // 2  # inv_freq, a buffer counted in the load dtype (compute_module_sizes)
    return tuple(x * dtype_bytes for x in (by_role.get("embed", 0), layer, by_role.get("norm", 0), rotary,
                                          by_role.get("head", 0)))  # fmt: skip


def split(m: ModelSpec, n: int, dtype_bytes: int, capacity_bytes: int) -> list[Device]:
    """Each GPU's share of the model under accelerate's balanced placement (module docstring)."""
    if (why := refusal(m)) is not None:
        raise BadInput(why, "device_map")
    embed, layer, norm, rotary, head = _sizes(m, dtype_bytes)
    layers = m.text.layers
    total = embed + layers * layer + norm + rotary + head
    per_gpu = total // n + int(1.25 * layer)
    caps = [min(per_gpu, capacity_bytes)] * (n - 1) + [capacity_bytes]
    atoms = [("embed", embed)] + [("layer", layer)] * layers + [("norm", norm), ("rotary", rotary)]
    atoms += [] if m.text.tied else [("head", head)]
    used, placed, d = [0] * n, [[] for _ in range(n)], 0
    for i, (kind, size) in enumerate(atoms):
        while True:
            if d == n:
                raise BadInput(f"device_map over {n} GPUs: {m.name}'s weights do not fit", "device_map")
            reserve = _largest_to_come(atoms, i, kind) if d == 0 else 0
            if used[d] + size <= caps[d] - reserve:
                used[d] += size
                placed[d].append(kind)
                break
            d += 1
    out, start = [], 0
    for d in range(n):
        k = placed[d].count("layer")
        holds_head = "head" in placed[d] or (m.text.tied and "embed" in placed[d])
        out.append(Device(start, k, "embed" in placed[d], holds_head, used[d]))
        start += k
    return out


def _largest_to_come(atoms: list[tuple[str, int]], i: int, kind: str) -> int:
    """accelerate's reservation on the first GPU: the largest module not yet popped; the module being placed leaves
    the list of largest names once popped, and where it was the last of them the largest is taken again among the
    rest (infer_auto_device_map :1352-1360)."""
    rest = [s for _, s in atoms[i + 1 :]]
    here = atoms[i][1]
    largest = max([here, *rest])
    ties_left = sum(1 for s in rest if s == largest)
    if here == largest and ties_left == 0:
        return max(rest, default=0)
    return largest


def device_model(m: ModelSpec, dev: Device) -> ModelSpec:
    """The part of `m` one GPU holds: its decoder layers, the embeddings on the first, the head and its logits (the
    vocabulary) on the one holding it; a GPU without the head computes no logits."""
    layers = m.text.layers
    tensors = []
    for t in m.tensors:
        if t.role == "layer":
            if dev.layers:
                tensors.append(replace(t, count=t.count * dev.layers // layers))
        elif (t.role == "embed" and dev.embed) or (t.role in ("head", "norm") and dev.head):
            tensors.append(t)
    vocab = m.text.vocab if dev.head else 0
    text = replace(m.text, layers=dev.layers, vocab=vocab, final_norm=dev.head)
    return replace(m, name=f"{m.name} (device_map: layers {dev.first_layer}-{dev.first_layer + dev.layers - 1})",
                   text=text, tensors=tuple(tensors))  # fmt: skip


def setups(s, capacity_bytes: int) -> list:
    """A device_map plan's setup on each GPU that holds part of the model (a planner.estimate.setup.Setup, the
    process's view): its share of the model, the whole micro-batch through its layers. The weights are placed in
    the load dtype: fp32 under --precision fp32, else half."""
    dtype_bytes = 4 if s.knobs.precision == "fp32" else 2
    devs = split(s.model, s.knobs.device_map, dtype_bytes, capacity_bytes)
    return [replace(s, model=device_model(s.model, d)) for d in devs if d.layers or d.embed or d.head]
