"""accelerate 1.6.0's FSDP2 preparation on a QLoRA model, run for real on two CPU ranks (gloo): what each rank's
frozen shards weigh after it, and what a forward computes with.

accelerate 1.6.0 utils/fsdp_utils.py:562-565 (fsdp2_prepare_model, the same at 1.7.0 .. 1.12.0; from 1.13.0 only
the parameters that require a gradient) ends with `model = model.to(torch.float32)` where mixed precision is on
and the model's dtype is not fp32, after fully_shard: every floating sharded parameter, frozen ones too, is then an
fp32 shard. A bitsandbytes 4-bit weight stored in bf16 (bnb_4bit_quant_storage bfloat16, as axolotl and
LLaMA-Factory set it for FSDP) is such a floating parameter: its shard doubles, and FSDP2's bf16 param_dtype casts
it back to bf16 when it gathers the unit (the same bits, NaN patterns aside: below), so the run computes as before.

The probe builds a toy QLoRA model (a bf16 embedding, two blocks each with a frozen bnb Linear4bit stored in bf16
and an fp32 LoRA pair), calls accelerate's own fsdp2_prepare_model with a stub accelerator carrying what it reads
(accelerate 1.6.0's bf16 MixedPrecisionPolicy: dataclasses.py:1942-1945, param_dtype and reduce_dtype bf16), and
reports per rank the frozen and trainable shard bytes by dtype, the dtype the 4-bit weight has inside its forward,
and how many of its gathered storage elements differ from the quantized ones: the round trip keeps every bf16
value but NaN, whose payload this CPU's cast does not keep (those are the packed words whose bits read as a NaN).

    PYTHONPATH=<accelerate 1.6.0>:<bitsandbytes>:. python -m torch.distributed.run --nproc_per_node 2 \
        -m probes.fsdp_upcast OUT.json
"""

from __future__ import annotations

import json
import sys

HIDDEN, INTER, VOCAB, RANK, TOKENS = 256, 512, 512, 8, 16


def build():
    """The toy model in bf16 with fp32 adapters; the 4-bit weights quantized on the CPU, stored in bf16."""
    import bitsandbytes as bnb
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = bnb.nn.Linear4bit(
                HIDDEN, INTER, bias=False, compute_dtype=torch.bfloat16, quant_storage=torch.bfloat16
            )
            w = torch.randn(INTER, HIDDEN, dtype=torch.bfloat16) / HIDDEN**0.5
            self.proj.weight = bnb.nn.Params4bit(
                w, requires_grad=False, quant_type="nf4", quant_storage=torch.bfloat16, module=self.proj
            )
            self.proj.to("cpu")  # quantizes
            self.lora_a = nn.Linear(HIDDEN, RANK, bias=False)  # fp32, trained
            self.lora_b = nn.Linear(RANK, INTER, bias=False)
            self.down = nn.Linear(INTER, HIDDEN, bias=False).to(torch.bfloat16).requires_grad_(False)

        def forward(self, x):
            h = self.proj(x) + self.lora_b(self.lora_a(x.to(self.lora_a.weight.dtype))).to(x.dtype)  # PEFT's cast
            return x + self.down(h)

    class Toy(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, HIDDEN).to(torch.bfloat16).requires_grad_(False)
            self.blocks = nn.ModuleList([Block(), Block()])

        @property
        def dtype(self):  # transformers' get_parameter_dtype: the first floating parameter's dtype
            return next(p.dtype for p in self.parameters() if p.is_floating_point())

        def forward(self, ids):
            x = self.embed(ids)
            for b in self.blocks:
                x = b(x)
            return x

    torch.manual_seed(0)
    return Toy()


def shard_bytes(model) -> dict[str, dict[str, int]]:
    """This rank's shard bytes by (frozen | trained) and dtype."""
    out: dict[str, dict[str, int]] = {"frozen": {}, "trained": {}}
    for p in model.parameters():
        local = getattr(p, "_local_tensor", p)
        part = out["trained" if p.requires_grad else "frozen"]
        part[str(local.dtype)] = part.get(str(local.dtype), 0) + local.untyped_storage().nbytes()
    return out


def changed(gathered, packed) -> int:
    """Storage elements of the gathered 4-bit weight whose bits differ from the quantized ones."""
    import torch

    return int((gathered.reshape(-1).view(torch.int16) != packed.reshape(-1).view(torch.int16)).sum())


def prepare(model):
    """accelerate 1.6.0's fsdp2_prepare_model: every Block a unit, then the root."""
    from types import SimpleNamespace

    import torch
    from accelerate.utils.fsdp_utils import fsdp2_prepare_model
    from torch.distributed.fsdp import MixedPrecisionPolicy

    plugin = SimpleNamespace(
        auto_wrap_policy=None,
        set_auto_wrap_policy=lambda m: None,
        activation_checkpointing=False,
        reshard_after_forward=True,
        cpu_offload=None,
        mixed_precision_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16),
        cpu_ram_efficient_loading=False,
        ignored_modules=None,  # read from 1.13.0
    )
    accelerator = SimpleNamespace(
        state=SimpleNamespace(fsdp_plugin=plugin),
        mixed_precision="bf16",
        is_main_process=False,
        device=torch.device("cpu"),  # read from 1.14.0
    )
    from torch.distributed.fsdp import fully_shard

    for b in model.blocks:  # the transformer policy's units (accelerate wraps them in the same call, :548-552)
        fully_shard(b, mp_policy=plugin.mixed_precision_policy)
    return fsdp2_prepare_model(accelerator, model)


def main(out: str) -> None:
    import accelerate
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    model = build()
    ids = torch.arange(TOKENS).view(1, -1)
    before = shard_bytes(model)
    seen = []
    packed = model.blocks[0].proj.weight.detach().clone()  # the 4-bit weight's bf16 storage as quantized
    model.blocks[0].proj.register_forward_pre_hook(
        lambda m, a: seen.append((str(m.weight.dtype), changed(m.weight.detach(), packed)))
    )
    model = prepare(model)
    after = shard_bytes(model)
    with torch.no_grad():
        model(ids)
    row = {
        "accelerate": accelerate.__version__,
        "torch": torch.__version__,
        "rank": dist.get_rank(),
        "unsharded": before,
        "sharded": after,
        "weight_dtype_in_forward": seen[-1][0],
        "gathered_elements_changed": seen[-1][1],
        "storage_nan_elements": int(torch.isnan(packed).sum()),
        "packed_weight_numel": model.blocks[0].proj.weight.numel(),
    }
    dist.barrier()
    if dist.get_rank() == 0:
        rows = [None] * dist.get_world_size()
        dist.gather_object(row, rows)
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)
    else:
        dist.gather_object(row)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
