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
Pinned against accelerate's own functions on the meta-device models (tests/planner/estimate/test_devicemap.py). A
VLM's tower and projector come first (Qwen2.5-VL's `model.visual`, then the language model) and are placed whole: a
tower that does not fit the first GPU's cap is refused. A quantized base's linears weigh their stored bytes
(planner.estimate.quant), which is how transformers' quantizers size them for the placement, approximately (the
caps' margins of each quantizer are not modelled). MoE layers of two sizes and cross-attention layers are refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.errors import BadInput
from planner.estimate import quant as q
from planner.estimate.nograd import compute_dtype_bytes
from planner.model.modelspec import ModelSpec


@dataclass(frozen=True)
class Device:
    first_layer: int
    layers: int
    embed: bool
    head: bool
    weight_bytes: int
    tower: bool = False


def refusal(m: ModelSpec) -> str | None:
    """Why `m` is not planned under device_map, or None."""
    if m.text.moe is not None or m.text.cross_layers:
        return f"{m.name}'s layers differ in size (MoE or cross-attention): device_map placement is not planned for it"
    return None


def _sizes(m: ModelSpec, dtype_bytes: int, quant: str = "none", absmax: str = "8bit") -> dict[str, int]:
    """Bytes by part as accelerate counts them in the load dtype (a quantized base's linears: their stored bytes):
    the tower with its projector, the embeddings, one decoder layer, the final norm, the rotary buffer, the head (a
    tied head counts nothing of its own)."""
    by_role: dict[str, float] = {}
    for t in m.tensors:
        size = q.tensor_stored_bytes(t, quant, absmax) if quant != "none" and t.lora else t.numel * dtype_bytes
        role = "tower" if t.role in ("vision", "audio", "projector") else t.role
        by_role[role] = by_role.get(role, 0) + size
    sizes = {k: int(v) for k, v in by_role.items()}
    sizes["layer"] = sizes.get("layer", 0) // m.text.layers
    sizes["rotary"] = m.text.head_dim // 2 * dtype_bytes  # inv_freq, a buffer counted in the load dtype
    return sizes


def split(m: ModelSpec, n: int, dtype_bytes: int, capacity_bytes: int, quant: str = "none", absmax: str = "8bit"):
    """Each GPU's share of the model under accelerate's balanced placement (module docstring): a list of Device."""
    if (why := refusal(m)) is not None:
        raise BadInput(why, "device_map")
    z, layers = _sizes(m, dtype_bytes, quant, absmax), m.text.layers
    layer = z["layer"]
    total = sum(z.get(k, 0) for k in ("tower", "embed", "norm", "rotary", "head")) + layers * layer
    per_gpu = total // n + int(1.25 * layer)
    caps = [min(per_gpu, capacity_bytes)] * (n - 1) + [capacity_bytes]
    atoms = [("tower", z["tower"])] if "tower" in z else []
    atoms += [("embed", z.get("embed", 0))] + [("layer", layer)] * layers + [("norm", z.get("norm", 0))]
    atoms += [("rotary", z["rotary"])] + ([] if m.text.tied else [("head", z.get("head", 0))])
    used, placed, d = [0] * n, [[] for _ in range(n)], 0
    for i, (kind, size) in enumerate(atoms):
        while True:
            if d == n:
                raise BadInput(f"device_map over {n} GPUs: {m.name}'s weights do not fit", "device_map")
            reserve = _largest_to_come(atoms, i) if d == 0 else 0
            if used[d] + size <= caps[d] - reserve:
                used[d] += size
                placed[d].append(kind)
                break
            if kind == "tower":  # placed whole here (module docstring)
                raise BadInput(
                    f"device_map over {n} GPUs: {m.name}'s vision tower spans GPUs (not planned)", "device_map"
                )
            d += 1
    out, start = [], 0
    for d in range(n):
        k = placed[d].count("layer")
        holds_head = "head" in placed[d] or (m.text.tied and "embed" in placed[d])
        out.append(Device(start, k, "embed" in placed[d], holds_head, used[d], "tower" in placed[d]))
        start += k
    return out


def _largest_to_come(atoms: list[tuple[str, int]], i: int) -> int:
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
        elif _holds(dev, t.role):
            tensors.append(t)
    vocab = m.text.vocab if dev.head else 0
    text = replace(m.text, layers=dev.layers, vocab=vocab, final_norm=dev.head)
    return replace(m, name=f"{m.name} (device_map: layers {dev.first_layer}-{dev.first_layer + dev.layers - 1})",
                   text=text, tensors=tuple(tensors), vision=m.vision if dev.tower else None)  # fmt: skip


def setups(s, capacity_bytes: int) -> list:
    """A device_map plan's setup on each GPU that holds part of the model (a planner.estimate.setup.Setup, the
    process's view): its share of the model, the whole micro-batch through its layers. The weights are placed in
    the load dtype: fp32 under --precision fp32, else half."""
    k = s.knobs
    devs = split(s.model, k.device_map, compute_dtype_bytes(s), capacity_bytes, k.quant, k.quant_absmax)
    return [replace(s, model=device_model(s.model, d)) for d in devs if d.layers or d.embed or d.head or d.tower]


def _holds(dev: Device, role: str) -> bool:
    """Whether a GPU holds the whole tensors of a role: the embeddings, the head and final norm, the tower."""
    return {
        "embed": dev.embed,
        "head": dev.head,
        "norm": dev.head,
        "vision": dev.tower,
        "audio": dev.tower,
        "projector": dev.tower,
    }.get(role, False)
