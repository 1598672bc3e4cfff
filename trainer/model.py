"""The model a run trains and the loss it takes: the plan's model built from a local folder or a config (with
its LoRA/QLoRA adapters, attention implementation and checkpointing), and the summed next-token loss under the
plan's --loss (recipe.knobs), for the bundled trainer (trainer/loop.py)."""
from __future__ import annotations

from pathlib import Path

import torch

from planner.spec import Knobs


def build_model(cfg):
    """`cfg`: trainer.loop.RunConfig. A local HF folder with weights loads them; a catalog name or config.json
    gets a seeded random init."""
    import transformers

    from planner.catalog import load_model
    from recipe import HALF, hf_config, lora_config
    from recipe import knobs as recipe_knobs

    path = Path(cfg.model)
    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if cfg.knobs.attention == "flash" and device != "cuda":
        from planner.errors import BadInput

        raise BadInput("--attention flash runs flash-attn's CUDA kernels: train on a GPU host, or use sdpa on CPU",
                       "attention")
    impl = recipe_knobs.attn_implementation(cfg.knobs, device)
    kw = {"attn_implementation": impl} if impl else {}
    dtype = HALF["bf16-pure"] if cfg.knobs.precision == "bf16-pure" else torch.float32
    torch.manual_seed(cfg.seed)
    if path.is_dir() and any(path.glob("*.safetensors")) or (path / "pytorch_model.bin").exists():
        model = transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype, **kw)
    else:
        spec = load_model(cfg.model)
        model = transformers.AutoModelForCausalLM.from_config(hf_config(spec.config), dtype=dtype, **kw)
    if cfg.knobs.lora_rank:
        from peft import get_peft_model

        model = get_peft_model(model, lora_config(cfg.knobs))
        recipe_knobs.quantize_base(model, cfg.knobs, fake=False)     # QLoRA: bitsandbytes' Linear4bit
    recipe_knobs.apply_checkpointing(model, cfg.knobs)
    model.config.use_cache = False
    return model


def token_loss_sum(model, batch, knobs: Knobs) -> torch.Tensor:
    """Summed next-token loss under the plan's --loss (recipe.knobs.loss_sum); a packed row passes its
    position_ids, a padded batch its attention mask. Under --checkpointing offload the forward's saved tensors go
    to the host."""
    from recipe import knobs as recipe_knobs

    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids") if k in batch}
    with recipe_knobs.offload_context(knobs, batch["input_ids"].device.type):
        return recipe_knobs.loss_sum(model, inputs, batch["labels"], knobs)
