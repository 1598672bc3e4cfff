"""Check verl 0.9.1 SFT launch scripts (`torchrun ... -m verl.trainer.sft_trainer key=value ...`) with verl's own config
code, offline: no model download, no GPU, no process group.

Usage: python verl_validate.py --heads H --kv-heads K A.sh [B.sh ...]   (the python of a venv with verl==0.9.1; H and K:
the planned model's attention and KV heads, which a tiny stand-in model carries)

For each script:
1. shlex splits it (continuations joined, comments dropped); the command must be torchrun with --nnodes and
   --nproc_per_node, then `-m verl.trainer.sft_trainer`, then Hydra overrides;
2. Hydra composes verl's sft_trainer_engine.yaml with the overrides (what the trainer's @hydra.main does,
   trainer/sft_trainer.py:461): an unknown key (struct mode), a bad override or a wrong type fails the file;
   model.path is pointed at a tiny local model with the planned heads (config.json and a tokenizer, written here);
3. the sections become verl's dataclasses as the trainer builds them (sft_trainer.py:141-145, omega_conf_to_dataclass):
   FSDPEngineConfig checks its strategy (workers/config/engine.py:304-306), HFModelConfig loads the config and tokenizer;
4. the engine's own rules before it shards: Ulysses needs use_remove_padding (engine/fsdp/transformer_impl.py:148-152),
   model_dtype is a dtype verl knows (transformer_impl.py:264, utils/torch_dtypes.py:61-69);
5. the heads rule, by verl's own apply_monkey_patch on the tiny model (models/transformers/monkey_patch.py:343-349);
6. the batch split: data.train_batch_size over world / Ulysses data-parallel ranks (sft_trainer.py:234-241), each
   rank's rows cut into micro-batches by verl's prepare_micro_batches (workers/engine/utils.py:93-130);
7. a torch.optim optimizer is built by verl's build_optimizer (workers/config/optimizer.py:298-345) with its kwargs.
Exits 1 with the framework's error on the first bad script.
"""

import os
import shlex
import sys
import tempfile
from pathlib import Path

from verdict import verdicts

os.environ.setdefault("WANDB_MODE", "disabled")
ENTRY = "verl.trainer.sft_trainer"


def argv_of(path: Path) -> tuple[int, list[str]]:
    """(world size, the Hydra overrides) of a launch script."""
    toks = shlex.split(path.read_text().replace("\\\n", " "), comments=True)
    if toks[:1] != ["torchrun"] or "-m" not in toks or toks[toks.index("-m") + 1] != ENTRY:
        raise ValueError(f"not `torchrun ... -m {ENTRY}`: {toks[:3]}")
    flags = toks[1 : toks.index("-m")]
    opts = dict(zip(flags[::2], flags[1::2]))
    return int(opts["--nnodes"]) * int(opts["--nproc_per_node"]), toks[toks.index("-m") + 2 :]


def tiny_model(folder: Path, heads: int, kv_heads: int) -> str:
    """A one-layer Qwen2 with the planned heads and a word-level tokenizer, saved where HFModelConfig can load it."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", *[f"w{i}" for i in range(61)]])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    fast.save_pretrained(folder)
    Qwen2Config(
        vocab_size=64,
        hidden_size=8 * heads,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        architectures=["Qwen2ForCausalLM"],
    ).save_pretrained(folder)
    return str(folder)


def compose(overrides: list[str]):
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra_files import parse_each_file_once

    parse_each_file_once()
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(config_name="sft_trainer_engine", overrides=overrides)


def check_engine(cfg, engine, model_cfg) -> None:
    from verl.utils.torch_dtypes import PrecisionType

    if engine.ulysses_sequence_parallel_size > 1 and not model_cfg.use_remove_padding:
        raise ValueError("ulysses_sequence_parallel_size > 1 needs model.use_remove_padding (transformer_impl.py:148)")
    PrecisionType.to_dtype(engine.model_dtype)


def check_heads(model_cfg, sp: int, remove_padding: bool) -> None:
    import torch
    from transformers import AutoModelForCausalLM
    from verl.models.transformers.monkey_patch import apply_monkey_patch

    torch.manual_seed(0)  # built with sdpa: flash-attn is CUDA-only; the patch reads the heads from the config
    model = AutoModelForCausalLM.from_config(model_cfg.hf_config, attn_implementation="sdpa")
    apply_monkey_patch(model=model, ulysses_sp_size=sp, use_remove_padding=remove_padding)


def check_split(cfg, world: int, sp: int) -> int:
    import torch
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches

    dp = world // sp
    if world % sp or cfg.data.train_batch_size % dp:
        raise ValueError(
            f"train_batch_size {cfg.data.train_batch_size} over {dp} data-parallel ranks leaves a remainder"
        )
    rows = cfg.data.train_batch_size // dp
    meta = {"use_dynamic_bsz": cfg.data.use_dynamic_bsz, "micro_batch_size_per_gpu": cfg.data.micro_batch_size_per_gpu}
    data = tu.get_tensordict(tensor_dict={"input_ids": torch.zeros(rows, 4, dtype=torch.long)}, non_tensor_dict=meta)
    micro, _ = prepare_micro_batches(data)
    return len(micro)


def check_optimizer(optim) -> None:
    import torch

    try:
        from verl.workers.config.optimizer import build_optimizer
    except (
        ImportError
    ):  # v0.6.0: the engine builds torch's AdamW itself (workers/engine/fsdp/transformer_impl.py:355-364)
        kwargs = {"lr": optim.lr, "betas": optim.betas, "weight_decay": optim.weight_decay}
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], **kwargs)
        return
    if optim.optimizer_impl == "torch.optim":
        build_optimizer([torch.nn.Parameter(torch.zeros(2))], optim)


def check(path: Path, heads: int, kv_heads: int, scratch: Path) -> str:
    from verl.utils.config import omega_conf_to_dataclass

    world, overrides = argv_of(path)
    local = tiny_model(scratch / path.stem, heads, kv_heads)
    overrides = [f"model.path={local}" if o.startswith("model.path=") else o for o in overrides]
    cfg = compose(overrides)
    model_cfg = omega_conf_to_dataclass(cfg.model)
    engine = omega_conf_to_dataclass(cfg.engine)
    optim = omega_conf_to_dataclass(cfg.optim)
    omega_conf_to_dataclass(cfg.checkpoint)
    if "profiler" in cfg:  # v0.6.x's sft_trainer_engine.yaml has no profiler section (verl@0.6's SFT scripts)
        omega_conf_to_dataclass(cfg.profiler)
    check_engine(cfg, engine, model_cfg)
    sp = engine.ulysses_sequence_parallel_size
    check_heads(model_cfg, sp, model_cfg.use_remove_padding)
    steps = check_split(cfg, world, sp)
    check_optimizer(optim)
    return (
        f"world={world} strategy={engine.strategy} ulysses={sp} micro={cfg.data.micro_batch_size_per_gpu} "
        f"accum={steps} lora_rank={model_cfg.lora_rank} gc={model_cfg.enable_gradient_checkpointing}"
    )


def main(argv: list[str]) -> int:
    """--heads H --kv-heads K for every file, or a file named PATH@H,K with its own (one run for several models)."""
    heads = int(argv[argv.index("--heads") + 1]) if "--heads" in argv else None
    kv_heads = int(argv[argv.index("--kv-heads") + 1]) if "--kv-heads" in argv else None
    paths = [a for i, a in enumerate(argv) if not a.startswith("--") and argv[i - 1] not in ("--heads", "--kv-heads")]

    def one(arg: str, scratch: Path) -> str:
        path, _, own = arg.partition("@")
        h, k = (int(x) for x in own.split(",")) if own else (heads, kv_heads)
        return check(Path(path).resolve(), h, k, scratch)

    each = ["--each"] if "--each" in argv else []  # verdict.verdicts: every file checked
    with tempfile.TemporaryDirectory() as scratch:
        return verdicts(paths + each, lambda arg: one(str(arg), Path(scratch)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
