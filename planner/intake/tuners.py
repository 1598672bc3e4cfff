"""The tuners and tuner-like optimizers the frameworks' configurations name, in one table for every reader: what memplan
plans becomes fields (LoRA, with LoRA+ and rsLoRA, which change only learning rates and scaling: LoRA's memory; DoRA;
full fine-tuning; the embedding and head PEFT's modules_to_save trains beside the adapters), and every other tuner is
refused in one line that names it, never planned as LoRA or as full fine-tuning.
"""

from __future__ import annotations

import re
from typing import NoReturn

from planner.errors import BadInput
from planner.intake.collect import Collector, as_names
from planner.intake.vocab import lora_targets

PLANNED = (
    "full fine-tuning, freeze tuning of the last layers, LoRA (LoRA+ and rsLoRA alike), DoRA, OFT, BOFT, and AdaLoRA, "
    "VeRA and bottleneck adapters as ms-swift runs them"
)
# a tuner's name as a framework writes it -> what it is (ms-swift 4.6 base_args.py:56-58 get_supported_tuners;
# LLaMA-Factory 0.9.5 hparams/finetuning_args.py:464 finetuning_type; axolotl 0.21 utils/schemas/peft.py:41 adapter)
UNPLANNED_TUNERS = {
    "adalora": "AdaLoRA (adapters whose rank is reallocated by SVD importance)",
    "vera": "VeRA (frozen shared random matrices, trained scaling vectors)",
    "boft": "BOFT (butterfly orthogonal fine-tuning)",
    "oft": "OFT (orthogonal fine-tuning)",
    "adapter": "bottleneck adapters (planned as ms-swift's --tuner_type adapter alone)",
    "llamapro": "LLaMA-Pro's expanded blocks",
    "longlora": "LongLoRA (shifted sparse attention with trained embeddings and norms)",
    "fourierft": "FourierFT",
    "reft": "ReFT (representation interventions)",
    "bone": "Bone (block affine adapters)",
    "freeze": "freeze tuning (the last layers trained in full, the rest frozen)",
    # lora_llm is planned (ms-swift's reader: reader_tuners.read_lora_llm, --lora-tower-full); other readers refuse it
    "lora_llm": "LoRA on the language model with the ViT and aligner trained in full (planned as ms-swift 4 runs it)",
    "ia3": "IA3",
    "prefix": "prefix tuning",
    "llama-adapter": "LLaMA-Adapter",
}
# optimizer names (transformers' optim, axolotl's optimizer, ms-swift's --optimizer plugin) whose states memplan does not
# plan, matched as parts of the name: refused rather than planned as AdamW. GaLore's and APOLLO's AdamW and Muon are
# planned (vocab.OPTIMIZERS, planner.estimate.matrix_optim); their layer-wise variants (transformers 5.25
# trainer_optimizer.py:164-184: one optimizer per parameter, stepped in its gradient hook) are optimizer_in_backward
# where HF's and TRL's readers strip the suffix and LLaMA-Factory's reads *_layerwise; elsewhere (axolotl, whose own
# trainer's run of them is not measured) refused
UNPLANNED_OPTIMIZERS = {
    "layerwise": "layer-wise GaLore / APOLLO (one optimizer per parameter, stepped in its gradient hook)",
    "galore_adafactor": "GaLore's projected Adafactor",
    "q_galore": "Q-GaLore's quantized projections",
    "qgalore": "Q-GaLore's quantized projections",
    "muonclip": "MuonClip's QK-clipped Muon outside ms-swift 4",
    "adam_mini": "Adam-mini's reduced states",
    "adam-mini": "Adam-mini's reduced states",
    "badam": "BAdam's block-wise updates",
    "lomo": "LOMO's fused updates",
    # transformers' optim ademamix, ademamix_8bit and their paged_ ones build bitsandbytes' AdEMAMix (5.16.1
    # trainer_optimizer.py:256-259), three states where AdamW keeps two (bitsandbytes 0.50.2 optim/ademamix.py:139-173:
    # the fast and slow EMAs in one double buffer, and nu): planned as AdamW it would under-count a third
    "ademamix": "AdEMAMix's three states (bitsandbytes optim/ademamix.py:139-173: two EMAs and nu, AdamW's two)",
    # axolotl's optimizer optimi_adamw (0.19.0 core/builders/base.py:363-368) is torch-optimi's AdamW (==0.2.1, its
    # optimizers extra), whose Kahan summation, on by default, keeps a third buffer for bf16 / fp16 parameters
    # (optimi/adam.py:94-95): planned as AdamW it would under-count one parameter-sized state
    "optimi_adamw": "torch-optimi's AdamW, a third state for half-precision parameters (optimi/adam.py:94-95)",
    # transformers' optim stable_adamw is torch-optimi's StableAdamW (5.25 trainer_optimizer.py:523-552, kahan_sum
    # unset), which keeps a Kahan compensation buffer beside AdamW's two for bf16 / fp16 parameters (optimi
    # stableadamw.py _init_state: kahan_sum None applies to low-precision parameters)
    "stable_adamw": "torch-optimi's StableAdamW, a third state for half-precision parameters (its Kahan buffer)",
    # transformers' optim grokadamw (trainer_optimizer.py:431-447) is grokadamw's GrokAdamW: three fp32 states
    # (exp_avg, exp_avg_sq, grok_ema) and, for half parameters, a persistent fp32 gradient copy (cognitivecomputations/
    # grokadamw grokadamw/grokadamw.py _update_group): planned as AdamW it would under-count two
    "grokadamw": "GrokAdamW's three fp32 states and an fp32 gradient copy (grokadamw/grokadamw.py _update_group)",
    # transformers' optim adamw_anyprecision (trainer_optimizer.py:296-315): torchdistx's AnyPrecisionAdamW with fp32
    # moments by default whatever the parameters' dtype (optim_args momentum_dtype / variance_dtype), and a Kahan
    # buffer with use_kahan_summation: planned as AdamW, a bf16-pure run's states would count half their bytes
    "anyprecision": "torchdistx's AnyPrecisionAdamW (fp32 moments whatever the parameters, a Kahan buffer on request)",
}
# GaLoreAdamW8bit over a paged 8-bit optim (LLaMA-Factory through transformers 5.25 trainer_optimizer.py:256-289,
# ms-swift 4.6 optimizers/galore/utils.py:214) pages the states of tensors of 1e5 elements and more (bitsandbytes
# optimizer.py:383-390): planned as galore-adamw-8bit, in the allocator, which counts them on the GPU
PAGED_GALORE_NOTE = (
    "{source} (GaLore's paged 8-bit states, of tensors of 1e5 elements and more, live in CUDA unified memory: planned "
    "on the GPU as galore-adamw-8bit's)"
)
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
    """Refuse an optimizer whose states memplan does not plan (True where the name is none of them)."""
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


def optim_args(value: object) -> dict[str, str]:
    """transformers' optim_args string ("rank=64, update_proj_gap=200"; trainer_optimizer.py parses it the same way)."""
    pairs = (p.split("=", 1) for p in str(value or "").replace(" ", "").split(",") if "=" in p)
    return {k: v for k, v in pairs}


def rmsprop_buffers(c: Collector, optimizer: object, parsed: dict, source: str) -> None:
    """torch's RMSprop (transformers' optim rmsprop) with optim_args momentum or centered (trainer_optimizer.py
    :339-349) keeps a momentum buffer or a gradient average beside square_avg (torch 2.13 optim/rmsprop.py:127, :131):
    a parameter-sized state each, not planned (one state is)."""
    if str(optimizer).strip().lower() != "rmsprop":
        return
    extra = [
        n
        for n, on in (("momentum", _positive(parsed.get("momentum"))), ("centered", _true(parsed.get("centered"))))
        if on
    ]
    if extra:
        c.note(f"{source} (RMSprop's {' and '.join(extra)} buffers, a parameter-sized state each: not planned)")


def _positive(value: object) -> bool:
    try:
        return float(str(value)) > 0
    except ValueError:
        return False


def _true(value: object) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def apollo_projector(source: str, optimizer: str, proj: object) -> None:
    """APOLLO's projector: its random one is planned (the default of transformers 5.25 trainer_optimizer.py:398 and
    LLaMA-Factory 0.9.5 finetuning_args.py:330-333); proj svd (apollo-torch 1.0.3 apollo.py:94-100: GaLore's SVD
    projector under APOLLO's scaling, its update temporaries and fp32 factors) is refused."""
    if str(optimizer).startswith("apollo") and str(proj).strip().lower() == "svd":
        raise BadInput(
            f"{source}: APOLLO's proj svd (an SVD projector) is not planned: memplan plans proj random", "config"
        )


def refuse_untargeted(source: str, optim: str) -> None:
    """GaLore or APOLLO through transformers' Trainer with no optim_target_modules: the Trainer refuses it before
    training (transformers 5.25 trainer_optimizer.py:121-122), so
    memplan does too, in one line."""
    raise BadInput(
        f"{source}: optim {optim} without optim_target_modules: transformers' Trainer refuses it (\"You need to "
        f'define `optim_target_modules` to use {optim} optimizers", transformers 5.25 trainer_optimizer.py:121-122); '
        "give optim_target_modules (all-linear, or the linears' names)",
        "optimizer_targets",
    )


def low_rank_fields(c: Collector, rank: tuple | None, targets: tuple | None) -> None:
    """GaLore's and APOLLO's rank and target linears, each (value, source, key) as the framework names it: a rank is
    optimizer_rank, the targets optimizer_targets (all-linear, or module names; a regex is a note)."""
    if rank is not None:
        c.number("optimizer_rank", rank[0], rank[1], rank[2])
    if targets is not None:
        suffixes = re.fullmatch(r"\.\*\\\.\(([\w.|]+)\)", str(targets[0]))  # export.names_regex: .*\.(q_proj|v_proj)
        mapped = lora_targets(suffixes.group(1).split("|") if suffixes else targets[0])
        if mapped:
            c.set("optimizer_targets", mapped, targets[1], targets[2])
        else:
            c.note(f"{targets[1]} (a pattern memplan cannot match: planned with every decoder linear)")


# GaLore's proj_type as transformers' optim_args, LLaMA-Factory and ms-swift write it (galore-torch 1.0
# galore_projector.py:13-42) -> optimizer_projection
PROJ_TYPES = {"std": "std", "reverse_std": "reverse-std", "right": "right", "left": "left", "full": "full"}


def low_rank_projection(c: Collector, value: object, source: str, key: str) -> None:
    """GaLore's / APOLLO's proj_type: the side each target is projected on (optimizer_projection); a name GaLore's
    projector does not branch on leaves its projection unset (galore_projector.py:12-44: low_rank_grad unbound), so
    it is refused in one line."""
    name = str(value).strip().lower()
    if name not in PROJ_TYPES:
        raise BadInput(f"{source}: proj_type {name} is not one GaLore runs: std, reverse_std, right, left or full", key)
    c.set("optimizer_projection", PROJ_TYPES[name], source, key)
