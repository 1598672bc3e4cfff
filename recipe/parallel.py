"""Tensor and Ulysses sequence parallelism as the bundled trainer runs them (the planner's terms:
planner/estimate/parallel.py), on gloo or NCCL.

The ranks form a (dp, sp, tp) mesh, tensor parallel innermost: the ranks of one sample are consecutive.
- Tensor parallel: torch's DTensor plan of transformers' `base_model_tp_plan` for a decoder (q/k/v and gate/up
  column-wise, o and down row-wise), the embedding vocabulary-parallel and the head column-wise with its logits
  gathered (transformers' `embedding_rowwise` and `colwise_gather_output`); norms stay plain replicated tensors.
- Ulysses (Jacobs et al. 2023): each rank of a sequence group keeps 1/S of every row outside attention; attention
  all-to-alls q, k and v to the whole row for 1/S of the heads, runs causal SDPA, and all-to-alls the output back.
  The labels are shifted on the whole row before it is cut, so each rank's loss is its slice's (ALST's recipe).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F

ATTENTION = "memplan_ulysses"
ROWWISE = ("o_proj", "down_proj")  # every other decoder linear is column-wise (planner.estimate.parallel.ROWWISE)


@dataclass
class Mesh:
    """This rank's place: the data-parallel index and size, and the device mesh of (dp, sp, tp)."""

    dp: int
    dp_rank: int
    sp: int
    tp: int
    mesh: object = None  # torch DeviceMesh (None on one GPU per sample)

    @classmethod
    def make(cls, world: int, rank: int, sp: int, tp: int, device_type: str) -> Mesh:
        dp = world // (sp * tp)
        if sp * tp == 1:
            return cls(dp, rank, 1, 1)
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device_type, (dp, sp, tp), mesh_dim_names=("dp", "sp", "tp"))
        return cls(dp, rank // (sp * tp), sp, tp, mesh)

    def group(self, dim: str):
        return self.mesh[dim].get_group()

    def shard_mesh(self):
        """The ranks FSDP2 shards over beside tensor parallel: data x sequence parallel, flattened."""
        return self.mesh["dp", "sp"]._flatten("dp_sp")


# -- Ulysses ---------------------------------------------------------------------------------------------------
def _all_to_all(x: torch.Tensor, group, scatter: int, gather: int) -> torch.Tensor:
    n = dist.get_world_size(group)
    send = torch.stack([c.contiguous() for c in x.chunk(n, dim=scatter)])
    got = torch.empty_like(send)
    dist.all_to_all_single(got, send, group=group)
    return torch.cat(list(got.unbind(0)), dim=gather)


class _SeqAllToAll(torch.autograd.Function):
    """Scatter one dimension over the group and gather another; backward is the reverse exchange."""

    @staticmethod
    def forward(ctx, x, group, scatter: int, gather: int):
        ctx.group, ctx.scatter, ctx.gather = group, scatter, gather
        return _all_to_all(x, group, scatter, gather)

    @staticmethod
    def backward(ctx, grad):
        return _all_to_all(grad, ctx.group, ctx.gather, ctx.scatter), None, None, None


def ulysses_attention(group):
    """A transformers attention function (AttentionInterface): q, k, v [batch, heads, local, dim] to [batch,
    heads / S, row, dim], causal SDPA with GQA, the output [batch, row, heads / S, dim] back to [batch, local,
    heads, dim]. KV heads fewer than S are repeated to S first (each rank then gets one)."""
    n = dist.get_world_size(group)

    def attend(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0, **kwargs):
        kv = key.shape[1]
        if kv < n:
            key, value = (t.repeat_interleave(n // kv, dim=1) for t in (key, value))
        q, k, v = (_SeqAllToAll.apply(t, group, 1, 2) for t in (query, key, value))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling, enable_gqa=True)
        return _SeqAllToAll.apply(out.transpose(1, 2), group, 1, 2), None

    return attend


def use_ulysses(model, group) -> None:
    """Route the model's attention through Ulysses over `group`."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, ulysses_attention(group))
    model.set_attn_implementation(ATTENTION)


def local_slice(batch: dict, sp: int, sp_rank: int) -> dict:
    """This rank's slice of a right-padded micro-batch: the labels shifted on the whole row first (as `targets`),
    the row padded to a multiple of S, then input ids, positions and targets cut; no padding mask (causal attention
    over right padding leaves every real token's output as it is)."""
    from recipe.loss import shifted_labels

    ids, targets = batch["input_ids"], shifted_labels(batch["labels"])
    width = -(-ids.shape[1] // sp) * sp
    pad = width - ids.shape[1]
    ids, targets = F.pad(ids, (0, pad)), F.pad(targets, (0, pad), value=-100)
    positions = torch.arange(width, device=ids.device).expand_as(ids)
    cut = slice(sp_rank * width // sp, (sp_rank + 1) * width // sp)
    return {"input_ids": ids[:, cut], "position_ids": positions[:, cut], "targets": targets[:, cut]}


# -- tensor parallel ---------------------------------------------------------------------------------------------
def tp_plan(model) -> dict:
    """torch ParallelStyles by module name: each decoder linear, the embedding and the head."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan = {}
    layers = model.get_decoder().layers
    prefix = next(n for n, m in model.named_modules() if m is layers)
    for name, module in layers[0].named_modules():
        if isinstance(module, torch.nn.Linear):
            style = RowwiseParallel() if name.split(".")[-1] in ROWWISE else ColwiseParallel()
            plan[f"{prefix}.*.{name}"] = style
    embed = next(n for n, m in model.named_modules() if m is model.get_input_embeddings())
    head = next(n for n, m in model.named_modules() if m is model.get_output_embeddings())
    plan[embed] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())
    plan[head] = ColwiseParallel(output_layouts=Replicate())
    return plan


def shard_tensor_parallel(model, mesh) -> None:
    """Split the model over the tp mesh (in place). Tied embeddings are refused: one weight cannot be split as both
    the vocabulary-parallel embedding and the column-wise head."""
    from torch.distributed.tensor.parallel import parallelize_module

    if model.get_output_embeddings().weight is model.get_input_embeddings().weight:
        from planner.errors import BadInput

        raise BadInput(
            "--tensor-parallel with tied input and output embeddings: the bundled trainer splits them as two weights; "
            "give a model with tie_word_embeddings false",
            "tensor_parallel",
        )
    parallelize_module(model, mesh, tp_plan(model))


def clip_grad_norm_(params, max_norm: float) -> float:
    """torch's clip_grad_norm_ over parameters on several meshes (tensor-parallel weights on the 2-D mesh, FSDP-only
    norms on the data mesh: torch's own refuses to stack their norms): each mesh's norm, then the whole, then the
    same coefficient max_norm / (norm + 1e-6), at most 1 (torch/nn/utils/clip_grad.py)."""
    from torch.distributed.tensor import DTensor

    groups: dict = {}
    for p in params:
        if p.grad is not None:
            groups.setdefault(p.grad.device_mesh if isinstance(p.grad, DTensor) else None, []).append(p.grad)
    square = 0.0
    for grads in groups.values():
        norm = torch.nn.utils.get_total_norm(grads, 2.0)
        square += float(norm.full_tensor() if isinstance(norm, DTensor) else norm) ** 2
    total = square**0.5
    coef = min(1.0, max_norm / (total + 1e-6))
    if coef < 1.0:
        for grads in groups.values():
            for g in grads:
                g.mul_(coef)
    return total
