"""Check ms-swift 4.6.0 launch scripts (`NAME=value \\` lines, then `swift sft|rlhf --flag value ...`) with swift's own
argument parser, offline: no model download, no GPU.

Usage: python swift_validate.py A.sh [B.sh ...]   (the python of a venv with ms-swift==4.6.0)

For each script:
1. shlex splits it (line continuations joined, comments dropped); the leading environment assignments are set aside and the command must be
   `swift sft` or `swift rlhf` (swift/cli/main.py:14-27);
2. HfArgumentParser over swift's SftArguments / RLHFArguments parses the flags (the "minimal offline validation" of
  ms-swift 4.6.0 swift/utils/utils.py:178-187): a wrong type or choice exits 2, an unknown flag is an error (swift raises on
   leftovers, pipelines/base.py:31-41);
3. swift's own packing rule runs on the parsed values (SftArguments._check_padding_free, sft_args.py:186-197);
4. a --deepspeed / --fsdp value that is not one of swift's presets must be a JSON file beside the script (FSDP: with
   "fsdp" and "fsdp_config", sft_args.py:312-321);
5. the --model built on the meta device as swift builds it (swift/model/register.py:161,253,295: trust_remote_code
   True, so a remote-code checkpoint is its own code), with the FSDP JSON's transformer_layer_cls_to_wrap (the fsdp2
   preset: the model's _no_split_modules) and --target_modules applied, and swift's model_arch module paths for it
   (the tower and aligner it freezes) found in it (meta_model.py).
Exits 1 with the framework's error on the first bad script.
"""

import json
import re
import shlex
import sys
from pathlib import Path

from meta_model import check_names
from verdict import verdicts

DS_PRESETS = {"zero0", "zero1", "zero2", "zero3", "zero2_offload", "zero3_offload"}
FSDP_PRESETS = {"fsdp2"}


def argv_of(path: Path) -> tuple[dict, str, list[str]]:
    toks = shlex.split(path.read_text().replace("\\\n", " "), comments=True)  # bash's line continuation
    env = {}
    while toks and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", toks[0]):
        key, _, value = toks.pop(0).partition("=")
        env[key] = value
    if toks[:1] != ["swift"] or len(toks) < 2 or toks[1] not in ("sft", "rlhf"):
        raise ValueError(f"not a `swift sft|rlhf` command: {toks[:2]}")
    return env, toks[1], toks[2:]


def parse(sub: str, argv: list[str]):
    from swift.arguments import RLHFArguments, SftArguments
    from swift.utils.utils import _patch_get_type_hints
    from transformers import HfArgumentParser

    cls = SftArguments if sub == "sft" else RLHFArguments
    with _patch_get_type_hints():
        parser = HfArgumentParser([cls])
    ns, unknown = parser.parse_known_args(argv)
    if unknown:
        raise ValueError(f"remaining_argv: {unknown}")
    SftArguments._check_padding_free(ns)
    return ns


def check_files(ns, folder: Path) -> None:
    for flag, presets in (("deepspeed", DS_PRESETS), ("fsdp", FSDP_PRESETS)):
        value = getattr(ns, flag, None)
        if not value or value in presets:
            continue
        cfg = json.loads((folder / value).read_text())
        if flag == "fsdp" and not {"fsdp", "fsdp_config"} <= set(cfg):
            raise ValueError(f"--fsdp {value}: needs 'fsdp' and 'fsdp_config'")
        if flag == "deepspeed" and "zero_optimization" not in cfg:
            raise ValueError(f"--deepspeed {value}: no zero_optimization")


def wrap_classes(ns, folder: Path) -> list[str] | None:
    if not ns.fsdp or ns.fsdp in FSDP_PRESETS:
        return None
    return json.loads((folder / ns.fsdp).read_text())["fsdp_config"].get("transformer_layer_cls_to_wrap")


def arch_modules(model_id: str) -> list[str]:
    """The module paths swift's model_arch gives a multimodal model_type (swift/model/model_arch.py, e.g. :424-428
    internvl: language_model, vision_model, mlp1): what --freeze_vit / --freeze_aligner and its all-linear find."""
    from swift.model.model_meta import get_matched_model_meta

    meta = get_matched_model_meta(model_id)
    arch = meta.model_arch if meta is not None else None
    if arch is None or not hasattr(arch, "vision_tower"):
        return []
    return [m for part in (arch.language_model, arch.vision_tower, arch.aligner) for m in part or []]


def check(path: Path) -> str:
    env, sub, argv = argv_of(path)
    ns = parse(sub, argv)
    check_files(ns, path.parent)
    targets = ns.target_modules if ns.tuner_type in ("lora", "qlora") else None
    names = check_names(ns.model, True, bool(ns.fsdp), wrap_classes(ns, path.parent), targets, arch_modules(ns.model))
    return (
        f"swift {sub} env={sorted(env)} tuner_type={ns.tuner_type} torch_dtype={ns.torch_dtype} "
        f"deepspeed={ns.deepspeed} fsdp={ns.fsdp}; {names}"
    )


def main(paths: list[str]) -> int:
    return verdicts(paths, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
