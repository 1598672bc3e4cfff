"""--fsdp-load whole (planner.estimate.lifecycle.load_gpu_transient_bytes) against what LLaMA-Factory 0.9.5's v1 trainer
loads onto a rank's device before FSDP2 shards it under its default init_config (probes/lf_v1_load.py, in
LLaMA-Factory's venv, MEMPLAN_LLAMAFACTORY_PYTHON): a v1 YAML over the same tiny Qwen2, read by memplan's v1 reader,
plans a load phase of exactly those bytes, full fine-tuning (fp32) and LoRA (the bf16 base and fp32 adapters).

Measured when pinned (2026-12-07, LLaMA-Factory 0.9.5, transformers 5.6.0): full 821,504 B (fp32), LoRA 476,288 B
(bf16 and fp32): the plan's, byte for byte."""

import json
import os
from functools import cache
from pathlib import Path

import pytest

from planner import advise, intake
from planner.estimate import lifecycle, state_terms
from planner.estimate.setup import Setup
from tests.probes.venvprobe import run_probe

YAML = """model: {model}
model_class: llm
template: qwen3_nothink
{peft}dist_config:
  name: fsdp2
train_dataset: data/v1_sft_demo.yaml
output_dir: outputs/test_fsdp2
micro_batch_size: 1
cutoff_len: 256
"""
LORA = "peft_config:\n  name: lora\n  r: 8\n  target_modules: all\n"


@cache
def measured() -> dict:
    python = os.environ.get("MEMPLAN_LLAMAFACTORY_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip("MEMPLAN_LLAMAFACTORY_PYTHON names no LLaMA-Factory venv (make fwenv builds .fwenv/llamafactory)")
    return run_probe(python, "lf_v1_load.py")


@pytest.mark.parametrize("case,peft", [("full", ""), ("lora", LORA)])
def test_the_load_phase_is_the_whole_model_v1_loads(case, peft, tmp_path):
    got = measured()
    model = tmp_path / "tiny-qwen2"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(got["config"]))  # the tiny Qwen2's, as saved
    cfg = tmp_path / "train.yaml"
    cfg.write_text(YAML.format(model=model, peft=peft))
    r = intake.read([str(cfg)])
    assert r.request["fsdp_load"] == "whole"  # init_config unset: init_on_default
    result = advise.check(advise.parse(advise.CheckRequest, {**r.request, "gpu": "h100", "gpus_per_node": 2}))
    plan, spec = result.plan, result.context[0]
    s = Setup(spec, plan.knobs, plan.micro_batch, plan.grad_accum, 256, gpus_per_node=2)
    assert got[case]["init"] == "init_on_default"
    assert state_terms.whole_params_bytes(s) == got[case]["bytes"]
    whole = state_terms.params_bytes(s) + lifecycle.load_gpu_transient_bytes(s)
    assert whole == got[case]["bytes"]
