"""The tuners and tuner-like optimizers the frameworks' configurations name, in one table for every reader: what memplan
plans becomes fields (LoRA, with LoRA+ and rsLoRA, which change only learning rates and scaling: LoRA's memory; DoRA;
full fine-tuning; the embedding and head PEFT's modules_to_save trains beside the adapters), and every other tuner is
refused in one line that names it, never planned as LoRA or as full fine-tuning.
"""

from __future__ import annotations

from typing import NoReturn

from planner.errors import BadInput
from planner.intake.collect import Collector, as_names

PLANNED = (
    "full fine-tuning, freeze tuning of the last layers, LoRA (LoRA+ and rsLoRA alike), DoRA, OFT, and AdaLoRA and "
    "VeRA as ms-swift runs them"
)
# a tuner's name as a framework writes it -> what it is (ms-swift 4.6 base_args.py:56-58 get_supported_tuners;
# LLaMA-Factory 0.9.5 hparams/finetuning_args.py:464 finetuning_type; axolotl 0.21 utils/schemas/peft.py:41 adapter)
UNPLANNED_TUNERS = {
    "adalora": "AdaLoRA (adapters whose rank is reallocated by SVD importance)",
    "vera": "VeRA (frozen shared random matrices, trained scaling vectors)",
    "boft": "BOFT (butterfly orthogonal fine-tuning)",
    "oft": "OFT (orthogonal fine-tuning)",
    "adapter": "bottleneck adapters",
    "llamapro": "LLaMA-Pro's expanded blocks",
    "longlora": "LongLoRA (shifted sparse attention with trained embeddings and norms)",
    "fourierft": "FourierFT",
    "reft": "ReFT (representation interventions)",
    "bone": "Bone (block affine adapters)",
    "freeze": "freeze tuning (the last layers trained in full, the rest frozen)",
    "lora_llm": "LoRA on the language model with the ViT and aligner trained in full",
    "ia3": "IA3",
    "prefix": "prefix tuning",
    "llama-adapter": "LLaMA-Adapter",
}
# optimizer names (transformers' optim, axolotl's optimizer, ms-swift's --optimizer plugin) of the optimizers whose
# states are not AdamW's: refused rather than planned as AdamW
UNPLANNED_OPTIMIZERS = {
    "galore": "GaLore's projected optimizer states",
    "apollo": "APOLLO's optimizer states",
    "muon": "Muon's optimizer states",
    "adam_mini": "Adam-mini's reduced states",
    "adam-mini": "Adam-mini's reduced states",
    "badam": "BAdam's block-wise updates",
    "lomo": "LOMO's fused updates",
}
# PEFT modules_to_save names of the input embedding and the output head (Llama/Qwen, GPT-2, GPT-NeoX, Bloom, InternLM)
EMBEDDINGS = {"embed_tokens", "wte", "embed_in", "word_embeddings", "tok_embeddings"}
HEADS = {"lm_head", "embed_out", "output"}


def refuse(source: str, why: str) -> NoReturn:
    raise BadInput(f"{source}: {why}: not planned (memplan plans {PLANNED}, with AdamW-family optimizers)", "config")


def tuner(source: str, name: object) -> None:
    """Refuse a tuner memplan does not plan (the caller handles lora, dora and full)."""
    key = str(name).strip().lower()
    refuse(source, UNPLANNED_TUNERS.get(key, f"tuner {key}"))


def optimizer(source: str, name: object) -> bool:
    """Refuse an optimizer of the GaLore / APOLLO / Muon families (True where the name is none of them)."""
    key = str(name).strip().lower()
    for stem, why in UNPLANNED_OPTIMIZERS.items():
        if stem in key:
            refuse(source, why)
    return True


def modules_to_save(c: Collector, value: object, source: str, key: str) -> None:
    """PEFT's modules_to_save beside LoRA: the embedding or the head trained in full is --lora-train-embeddings
    (both copies: planner.estimate.lora.embedding_copy_params); other modules are a line of their own."""
    names = {n.rsplit(".", 1)[-1] for n in as_names(value)}
    if not names:
        return
    ends = names & (EMBEDDINGS | HEADS)
    if ends:
        c.set("lora_train_embeddings", True, source, key)
        if not (ends & EMBEDDINGS and ends & HEADS):
            c.note(
                f"{source} (only the {'embedding' if ends & EMBEDDINGS else 'head'} trained in full: planned with both)"
            )
    others = sorted(names - EMBEDDINGS - HEADS)
    if others:
        c.note(f"{source} ({', '.join(others)} trained in full beside the adapters: not counted)")
