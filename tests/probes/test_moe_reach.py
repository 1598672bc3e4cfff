"""planner.frameworks.peft.reached_at against what each framework's "all linear" LoRA adapts in MoE decoders with
its own target finder and PEFT, in its own venv (probes/moe_reach.py): LLaMA-Factory 0.9.5's find_all_linear_modules
on PEFT 0.18.1 (MEMPLAN_LLAMAFACTORY_PYTHON), ms-swift 4.6.0's find_all_linears on PEFT 0.20.0 (MEMPLAN_SWIFT_PYTHON),
PEFT's own all-linear at 0.21.2 (verl's venv, MEMPLAN_VERL_PYTHON) and at 0.22.0 (memplan's). Exact counts at rank 8.

Measured when pinned (2026-12-07; Qwen1.5-MoE, DeepSeek-V2-Lite, GLM-4.5-Air, Mixtral, OLMoE, gpt-oss, Qwen3-MoE cut
to 2 layers of width 64, 4 experts): LLaMA-Factory 14,608 / 13,728 / 14,336 / 8,192 x 4; ms-swift 14,608 / 17,536 /
19,456 / 8,192 x 4 (axolotl 0.19.0's find_all_linear_names on PEFT 0.20.0 the same, run with bitsandbytes added to
its venv, which `make fwenv` leaves out); PEFT 0.21.2 14,608 / 18,080 / 20,000 / 52,288 / 52,288 / 8,192 / 31,808;
0.22.0 38,224 / 24,992 / 26,144 / 52,288 / 52,288 / 8,192 / 31,808."""

import json
import os
import sys
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from planner.frameworks.peft import reached_at
from planner.model import catalog
from planner.model.families import from_config
from tests.probes.test_moe import SMALL
from tests.probes.venvprobe import run_probe

NAMES = ["qwen1.5-moe-a2.7b", "deepseek-v2-lite", "glm-4.5-air", "mixtral-8x7b", "olmoe-1b-7b", "gpt-oss-20b"]
NAMES += ["qwen3-30b-a3b"]
# (the venv's variable, "" for memplan's; the framework the probe runs; whether it hands PEFT its own name list)
VENVS = [
    ("MEMPLAN_LLAMAFACTORY_PYTHON", "llamafactory", True),
    ("MEMPLAN_SWIFT_PYTHON", "ms-swift", True),
    ("MEMPLAN_VERL_PYTHON", "peft", False),
    ("", "peft", False),
]


def small(name: str) -> dict:
    base = catalog.model_config(name)
    cfg = {**base, **{k: v for k, v in SMALL.items() if k in base}, "num_hidden_layers": 2, "num_experts_per_tok": 2}
    cfg.update({k: 4 for k in ("num_local_experts", "num_experts", "n_routed_experts") if k in base})
    cfg.update({"layer_types": base["layer_types"][:2]} if "layer_types" in base else {})
    return {**cfg, **({"pad_token_id": 0} if "pad_token_id" in base else {})}


@cache
def measured(env: str, framework: str, folder: str) -> dict:
    pytest.importorskip("peft")
    python = os.environ.get(env) if env else sys.executable
    if not python or not Path(python).exists():
        pytest.skip(f"{env} names no venv (make fwenv builds them)")
    configs = Path(folder) / "moe-configs.json"
    configs.write_text(json.dumps({n: small(n) for n in NAMES}))
    return run_probe(python, "moe_reach.py", framework, str(configs))


@pytest.mark.parametrize("env,framework,names", VENVS)
def test_all_linear_reaches_what_each_frameworks_own_finder_and_peft_adapt(env, framework, names, tmp_path_factory):
    got = measured(env, framework, str(tmp_path_factory.mktemp("moe")))
    version = tuple(int(x) for x in got["peft"].split(".")[:3])
    for name in NAMES:
        spec = from_config(small(name), name)
        spec = replace(spec, tensors=reached_at(spec.tensors, spec.text.moe, version, names))
        assert spec.lora_params(8, "all-linear") == got["trained"][name], (name, got["peft"])
