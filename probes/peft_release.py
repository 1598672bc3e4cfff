"""What the PEFT installed in this venv does where its release changes memory (planner.estimate.peft_release), run in
each venv that holds one (memplan's, and the frameworks' under MEMPLAN_*_PYTHON): `python probes/peft_release.py`
prints as JSON the PEFT version, how many 688 x 256 fp32 matrices a LoRA merge's get_delta_weight allocates (its
ops' fresh outputs, traced by a dispatch mode: views and in-place ops allocate none), and whether AdaLoRA's ranknum
is trained on a bf16 base (get_peft_model's autocast of the adapters to fp32)."""

from __future__ import annotations

import json

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class Fresh(TorchDispatchMode):
    """Bytes of the tensors ops return that share no storage with their inputs."""

    def __init__(self):
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {
            a.untyped_storage().data_ptr()
            for a in torch.utils._pytree.tree_leaves((args, kwargs))
            if torch.is_tensor(a)
        }
        for t in torch.utils._pytree.tree_leaves(out):
            if torch.is_tensor(t) and t.untyped_storage().data_ptr() not in inputs:
                self.bytes += t.numel() * t.element_size()
        return out


def merge_matrices() -> float:
    import peft

    model = torch.nn.Sequential(torch.nn.Linear(256, 688, bias=False))
    lora = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=["0"], init_lora_weights=False))
    layer = lora.base_model.model[0]
    with torch.no_grad(), Fresh() as f:
        layer.get_delta_weight("default")
    return f.bytes / (688 * 256 * 4)


def ranknum_trained() -> bool:
    import peft

    model = torch.nn.Sequential(torch.nn.Linear(64, 64, bias=False)).to(torch.bfloat16)
    config = peft.AdaLoraConfig(init_r=4, target_r=2, target_modules=["0"], total_step=10)
    ada = peft.get_peft_model(model, config)
    return any(p.requires_grad for n, p in ada.named_parameters() if "ranknum" in n)


if __name__ == "__main__":
    import peft

    print(
        json.dumps({"peft": peft.__version__, "merge_matrices": merge_matrices(), "ranknum_trained": ranknum_trained()})
    )
