"""One real CPU training step of a model frozen for freeze tuning and checkpointed by ms-swift's own code, counted by
the live-bytes tracker (probes.cpu.measure with the model handed in): the trained layers as the recipe freezes them
(--freeze_parameters_ratio 1 --trainable_parameters model.layers.I.), or LLaMA-Pro's blocks inserted by ms-swift's own
Swift.prepare_model (--tuner_type llamapro, --trained-layout inserted: the base frozen first, 4.6.0
swift/pipelines/train/tuner.py:378-382, 271-276), then SwiftMixin._fix_gradient_checkpointing
(reentrant on one process: 4.6.0 swift/trainers/mixin.py:941-968) and _prepare_gradient_checkpointing (:970-1001:
its dynamic checkpointing, transformers' gradient_checkpointing_enable and enable_input_require_grads), called on a
stand-in trainer that carries only the arguments they read.
`python probes/swift_freeze_step.py CONFIG_JSON KNOBS_LIST_JSON MICRO SEQ` under ms-swift's venv (PYTHONPATH the
repository) prints, for each knobs, {"swift": peak, "ours": the recipe's build's peak} as a JSON list
(tests/probes/test_freeze.py compares them with the plan)."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace


def swift_model(config: dict, knobs):
    """The model as ms-swift's trainer leaves it for a text model (model_meta: not multimodal)."""
    from swift.trainers.mixin import SwiftMixin

    from probes.lf_freeze_step import base_model
    from recipe.model import _freeze_layers

    model = base_model(config, knobs)
    if knobs.trained_layout == "inserted":  # LLaMA-Pro: ms-swift's own tuner (probes/swift_llamapro.py)
        from swift.model.model_arch import ModelArch  # tuner.py:274-277 passes model_meta.model_arch.arch_name
        from swift.tuners import Swift
        from swift.tuners.llamapro import LLaMAProConfig

        model.requires_grad_(False)
        Swift.prepare_model(model, LLaMAProConfig(model_type=ModelArch.llama, num_new_blocks=knobs.trained_layers))
    else:
        _freeze_layers(model, knobs)
    model.model_meta = SimpleNamespace(is_multimodal=False, model_arch=None)
    args = SimpleNamespace(
        gradient_checkpointing=True, vit_gradient_checkpointing=False, gradient_checkpointing_kwargs=None
    )
    trainer = SimpleNamespace(args=args, is_deepspeed_enabled=False, is_fsdp_enabled=False)
    SwiftMixin._fix_gradient_checkpointing(trainer)
    SwiftMixin._prepare_gradient_checkpointing(trainer, model)
    model.train()
    return model


def _unpatch() -> None:
    """Undo _fix_gradient_checkpointing's patch of torch's checkpoint (the recipe's build runs after)."""
    import torch
    import transformers.modeling_utils

    old = torch.utils.checkpoint.__dict__.pop("_old_checkpoint", None)
    if old is not None:
        torch.utils.checkpoint.checkpoint = transformers.modeling_utils.checkpoint = old


def run(config: dict, knobs_kw: dict, micro: int, seq: int) -> dict:
    from planner.config.spec import Knobs
    from probes.cpu import measure
    from probes.step import Case

    case = Case(config, Knobs(**knobs_kw), micro, 1, seq, 0)
    swift = measure(case, model=swift_model(config, case.knobs))["peak_allocated_bytes"]
    _unpatch()
    return {"swift": swift, "ours": measure(case)["peak_allocated_bytes"]}


if __name__ == "__main__":
    config, micro, seq = json.loads(sys.argv[1]), int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps([run(config, kw, micro, seq) for kw in json.loads(sys.argv[2])]))
