"""Check axolotl 0.19.0 YAMLs with axolotl's own validator, on a host without a GPU.

Usage: python axolotl_validate.py A.yaml [B.yaml ...]   (the python of a venv with axolotl==0.19.0)

For each file (axolotl 0.19.0 axolotl/utils/config/__init__.py validate_config):
1. the YAML as axolotl's CLI reads it (yaml.safe_load into DictDefault, cli/config.py:254);
2. plugins registered first (prepare_plugins, utils/config/__init__.py:521-536), so plugin keys are validated too;
3. validate_config with an 8-GPU bf16 sm_90 host's capabilities (utils/config/__init__.py:457-518): pydantic errors
   (types, literals, axolotl's cross-key rules) fail the file;
4. axolotl drops unknown keys silently (pydantic extra="ignore"), so every key written, top level and one level
   down (fsdp_config, trl, vllm), must come back from validation, else the file fails;
5. a `deepspeed:` path must be a JSON file beside the YAML with a zero_optimization section;
6. base_model built on the meta device as axolotl loads it (loaders/model.py:689,951: trust_remote_code or False),
   with fsdp_config.transformer_layer_cls_to_wrap and lora_target_modules applied (meta_model.py).
Telemetry is off (AXOLOTL_DO_NOT_TRACK=1). Exits 1 with the framework's error on the first bad file.
"""

import json
import os
import sys
from pathlib import Path

from meta_model import check_names
from verdict import verdicts

os.environ.setdefault("AXOLOTL_DO_NOT_TRACK", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")

CAPABILITIES = {"bf16": True, "fp8": False, "tf32": True, "n_gpu": 8, "compute_capability": "sm_90"}
ENV_CAPABILITIES = {"torch_version": "2.13.0"}
NESTED = ("fsdp_config", "trl", "vllm")
RENAMED = {"flash_attention", "sdp_attention", "fsdp_version"}  # moved by axolotl's own normalisation


def dropped(cfg: dict, out: dict) -> list[str]:
    lost = [k for k, v in cfg.items() if v is not None and k not in out and k not in RENAMED]
    for key in NESTED:
        if isinstance(cfg.get(key), dict):
            back = out.get(key) or {}
            lost += [f"{key}.{k}" for k, v in cfg[key].items() if v is not None and k not in back]
    return lost


def check(path: Path) -> str:
    import yaml
    from axolotl.utils.config import prepare_plugins, validate_config
    from axolotl.utils.dict import DictDefault

    raw = yaml.safe_load(path.read_text())
    cfg = DictDefault(raw)
    if cfg.plugins:
        prepare_plugins(cfg)
    out = validate_config(cfg, capabilities=CAPABILITIES, env_capabilities=ENV_CAPABILITIES)
    lost = dropped(raw, out)
    if lost:
        raise ValueError(f"keys axolotl dropped (unknown to its schema): {lost}")
    if raw.get("deepspeed"):
        ds = json.loads((path.parent / raw["deepspeed"]).read_text())
        if "zero_optimization" not in ds:
            raise ValueError(f"deepspeed {raw['deepspeed']}: no zero_optimization")
    fsdp = raw.get("fsdp_config")
    wrap = (fsdp or {}).get("transformer_layer_cls_to_wrap")
    names = check_names(
        raw["base_model"],
        bool(raw.get("trust_remote_code")),
        fsdp is not None,
        wrap.split(",") if wrap else None,
        raw.get("lora_target_modules") if raw.get("adapter") else None,
    )
    return (
        f"adapter={out.get('adapter')} rl={out.get('rl')} micro_batch_size={out.get('micro_batch_size')} "
        f"gradient_checkpointing={out.get('gradient_checkpointing')} deepspeed={out.get('deepspeed')} "
        f"fsdp_version={out.get('fsdp_version')}; {names}"
    )


def main(paths: list[str]) -> int:
    return verdicts(paths, check)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
