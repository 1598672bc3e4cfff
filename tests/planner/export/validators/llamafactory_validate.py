"""Check LLaMA-Factory 0.9.5 training YAMLs with LLaMA-Factory's own parser, on a host without a GPU.

Usage: python llamafactory_validate.py A.yaml [B.yaml ...]   (the python of a venv with llamafactory==0.9.5)

For each file, run from the file's folder (LF resolves `deepspeed:` against the working directory):
1. the YAML read as LF reads it (OmegaConf, hparams/parser.py:85-99);
2. `_parse_train_args(dict)`: LF's dict path (the one `llamafactory-cli train x.yaml` takes), which builds the five
   dataclasses and raises on unknown keys (transformers hf_argparser.py:382-383);
3. `_parse_train_args(argv)`: the argv path, which also enforces choices (flash_attn, stage, quantization_method...);
4. LF's `_verify_model_args` (parser.py:180-202);
5. with a DeepSpeed JSON: HF's DeepSpeed config against the arguments (every mismatch but train_batch_size, which
   depends on the world size this check does not have; transformers integrations/deepspeed.py:105-133);
6. the model built on the meta device as LF loads it (model/loader.py:64,170: trust_remote_code as written), with the
   accelerate config's fsdp_transformer_layer_cls_to_wrap (accelerate_fsdp_config.yaml beside the file) and
   lora_target applied (meta_model.py).
bf16 is reported available (HF refuses bf16 on a host without a bf16 GPU, training_args.py:1734). Exits 1 with the
framework's error on the first bad file.
"""

import contextlib
import importlib
import os
import sys
from pathlib import Path

from meta_model import check_names
from verdict import verdicts

ACCELERATE = "accelerate_fsdp_config.yaml"


def patch_host() -> None:
    import transformers.training_args as ta

    ta.is_torch_bf16_gpu_available = lambda *a, **k: True
    with contextlib.suppress(Exception):  # DeepSpeed builds a shared-memory op on import on CPU-only hosts
        importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None


def argv_of(cfg: dict) -> list[str]:
    out = []
    for key, value in cfg.items():
        out += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return out


def check(path: Path) -> str:
    from llamafactory.hparams.parser import _parse_train_args, _verify_model_args
    from omegaconf import OmegaConf

    os.chdir(path.parent)
    cfg = OmegaConf.to_container(OmegaConf.load(path.name))
    model_args, data_args, training_args, finetuning_args, _ = _parse_train_args(dict(cfg))
    _parse_train_args(argv_of(cfg))
    _verify_model_args(model_args, data_args, finetuning_args)
    ds = getattr(training_args, "hf_deepspeed_config", None)
    if ds is not None:
        bad = [m for m in ds.mismatches if "train_batch_size=" not in m]
        if bad:
            raise ValueError("DeepSpeed config disagrees with the arguments:\n" + "\n".join(bad))
    return (
        f"stage={finetuning_args.stage} finetuning_type={finetuning_args.finetuning_type} "
        f"cutoff_len={data_args.cutoff_len} gc_disabled={model_args.disable_gradient_checkpointing} "
        f"deepspeed={bool(training_args.deepspeed)}; {names_of(path, model_args, finetuning_args)}"
    )


def names_of(path: Path, model_args, finetuning_args) -> str:
    import yaml

    acc = path.parent / ACCELERATE
    fsdp = yaml.safe_load(acc.read_text()).get("fsdp_config", {}) if acc.is_file() else None
    wrap = fsdp.get("fsdp_transformer_layer_cls_to_wrap") if fsdp else None
    targets = finetuning_args.lora_target if finetuning_args.finetuning_type == "lora" else None
    return check_names(
        model_args.model_name_or_path,
        model_args.trust_remote_code,
        fsdp is not None,
        wrap.split(",") if wrap else None,
        list(targets) if targets else None,
    )


def main(paths: list[str]) -> int:
    patch_host()
    return verdicts(paths, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
