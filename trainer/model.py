"""The model a run trains and the loss it takes: the plan's model from a local folder or a config, built by the
builder the probes use (recipe.model: dtypes, LoRA/QLoRA adapters, attention implementation, checkpointing), and
the summed next-token loss under the plan's --loss (recipe.loss), for the bundled trainer (trainer/step.py)."""

from __future__ import annotations

from pathlib import Path

import torch

from planner.config.spec import Knobs


def build_model(cfg):
    """`cfg`: trainer.runconfig.RunConfig. The plan's model as the probes build it (recipe.model): a local HF folder with
    weights loads them, a catalog name or config.json gets a random init seeded by the run."""
    from planner.model.catalog import load_model
    from recipe.model import build_model as build

    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if cfg.knobs.attention == "flash" and device != "cuda":
        from planner.errors import BadInput

        raise BadInput(
            "--attention flash runs flash-attn's CUDA kernels: train on a GPU host, or use sdpa on CPU", "attention"
        )
    torch.manual_seed(cfg.seed)
    return build(load_model(cfg.model).config, cfg.knobs, weights=weights_folder(cfg.model), device_type=device)


def weights_folder(ref: str) -> Path | None:
    """The local HF folder `ref` names when it holds weights (safetensors or pytorch_model.bin), else None."""
    path = Path(ref)
    return path if path.is_dir() and any(path.glob("*.safetensors")) or (path / "pytorch_model.bin").exists() else None


def token_loss_sum(model, batch, knobs: Knobs) -> torch.Tensor:
    """Summed next-token loss under the plan's --loss (recipe.loss.loss_sum); a packed row passes its
    position_ids, a padded batch its attention mask, a batch with images whatever the processor made, a
    sequence-parallel rank its slice with the shifted `targets` (recipe.parallel.local_slice). Under --checkpointing offload the forward's saved tensors go
    to the host."""
    from recipe.checkpointing import offload_context
    from recipe.loss import loss_sum

    inputs = {
        k: v for k, v in batch.items() if k not in ("labels", "router_mask", "targets")
    }  # with images: the processor's
    with offload_context(knobs, batch["input_ids"].device.type):
        return loss_sum(model, inputs, batch.get("labels"), knobs, batch.get("targets"))
