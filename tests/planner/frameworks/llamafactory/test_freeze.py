"""LLaMA-Factory's freeze tuning read from its own example (tests/data/frameworks/llamafactory/examples/extras/
llama_pro/llama3_freeze_sft.yaml, v0.9.5, with the expanded checkpoint's config beside it as scripts/llama_pro.py
writes it: Llama-3-8B's 32 layers and 8 new blocks) and planned: LLaMA-Pro's 8 interleaved blocks trained, the frozen
layers between them in backward's path."""

import json
import shutil
from pathlib import Path

import pytest

from planner import advise, intake
from planner.config.spec import GIB, Knobs
from planner.estimate.activation_terms import activations_bytes
from planner.estimate.setup import Setup
from planner.estimate.trained import trainable_params
from planner.model.catalog import load_model
from planner.model.families import from_config

EXAMPLE = Path(__file__).parents[3] / "data/frameworks/llamafactory/examples/extras/llama_pro/llama3_freeze_sft.yaml"


def _expanded(tmp_path: Path) -> Path:
    """The example beside models/llama3-8b-pro/config.json: Llama-3.1-8B's shapes at 40 layers (32 + num_expand 8)."""
    config = {**load_model("llama-3.1-8b").config, "num_hidden_layers": 40}
    folder = tmp_path / "models" / "llama3-8b-pro"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return Path(shutil.copy(EXAMPLE, tmp_path / EXAMPLE.name))


def test_llama_pro_example_reads_as_its_interleaved_blocks(tmp_path):
    reading = intake.read([str(_expanded(tmp_path))])
    assert (reading.request["trained_layers"], reading.request["trained_layout"]) == (8, "interleaved")
    assert reading.request["lora_rank"] == 0


def test_llama_pros_frozen_layers_in_the_path_cost_more_than_the_last_layers():
    """The same 8 trained layers of the 40: interleaved, backward passes through 28 frozen layers (never
    checkpointed by LLaMA-Factory), the last 8 through none; the trained parameters are the same."""
    spec = from_config({**load_model("llama-3.1-8b").config, "num_hidden_layers": 40}, "llama3-8b-pro")
    pro = Setup(spec, Knobs(trained_layers=8, trained_layout="interleaved", checkpointing="full"), 1, 1, 2048)
    last = Setup(spec, Knobs(trained_layers=8, checkpointing="full"), 1, 1, 2048)
    assert trainable_params(pro) == trainable_params(last) == spec.params_by_role()["layer"] // 5
    # what backward keeps (the peak itself is the optimizer step's here since the trained blocks are checkpointed)
    assert activations_bytes(pro) > activations_bytes(last) + 28 * GIB // 100


def test_llama_pro_needs_the_layers_divisible_by_its_blocks():
    base = {"model": "qwen2.5-0.5b", "gpu": "h100", "micro_batch": 1, "seq_len": 256, "trained_layers": 5}
    with pytest.raises(Exception, match="divisible"):
        advise.check(advise.parse(advise.CheckRequest, {**base, "trained_layout": "interleaved"}))


FIRST = """### model
model_name_or_path: Qwen/Qwen2.5-7B-Instruct

### method
stage: sft
do_train: true
finetuning_type: freeze
freeze_trainable_layers: -2
freeze_trainable_modules: all

### dataset
dataset: identity,alpaca_en_demo
template: qwen
cutoff_len: 2048

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-5
bf16: true
"""


def test_a_negative_count_reads_as_the_first_layers(tmp_path):
    """freeze_trainable_layers -2: the first 2 layers trained (model/adapter.py:91-92)."""
    path = tmp_path / "qwen_freeze_first.yaml"
    path.write_text(FIRST)
    r = intake.read([str(path)]).request
    assert (r["trained_layers"], r["trained_layout"], r["lora_rank"]) == (2, "first", 0)


def test_the_first_layers_put_every_frozen_layer_above_in_backwards_path():
    """The same 2 trained layers of Qwen2.5-7B's 28: the first 2 leave 26 frozen layers in backward's path (never
    checkpointed by LLaMA-Factory), the last 2 none; the trained parameters are the same."""
    spec = load_model("qwen2.5-7b")
    first = Setup(spec, Knobs(trained_layers=2, trained_layout="first", checkpointing="full"), 1, 1, 2048)
    last = Setup(spec, Knobs(trained_layers=2, checkpointing="full"), 1, 1, 2048)
    assert trainable_params(first) == trainable_params(last) == spec.params_by_role()["layer"] // 14
    assert activations_bytes(first) > activations_bytes(last) + 26 * GIB // 10
