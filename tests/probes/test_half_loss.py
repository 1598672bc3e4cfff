"""Llama4ForConditionalGeneration's loss in the logits' dtype (Traits.half_loss, activations.half_loss_bytes) against
the real class, and which plans take it (loss_dtype.half_loss, each framework line's newest transformers pin).

transformers 4.51.0 .. 5.16.x: the composite's forward runs the language model without labels (bf16 logits), keeps
the shifted logits of the tokens whose attention_mask is not 0 and calls nn.CrossEntropyLoss on them (4.51.1
models/llama4/modeling_llama4.py:1784-1800, 5.16.1 :1330-1346); 5.17.0 calls self.loss_function, which upcasts to
fp32 (:1317). Measured when pinned (tests/probes/half_loss_step.py, a tiny real model, 256 tokens, vocabulary 8,192
against 16,384, probes.tracker, torch 2.13 CPU): 5.984 bytes per token per vocabulary entry at 5.16.1 (axolotl
0.19.0's pin) and 4.53.0, (2 x 255 + 256) x 2 / 256 (two copies over the shifted tokens), where 5.25 measures 12.0
(HF's fp32 loss, activations.logits_loss_bytes); 5.984 too at LLaMA-Factory's pins (4.52.4 v0.9.3, 4.57.1 v0.9.4,
5.6.0 v0.9.5: tools/fwenv_old.sh lf-0.9.3, lf-0.9.4, .fwenv/llamafactory). The evaluation forward with labels under
no_grad (nograd.eval_head_bytes) runs the same loss: 5.984 at 4.52.4, 4.57.1 and 5.16.1, the logits, their shifted
copy and log_softmax's output, (256 + 2 x 255) x 2 / 256, against 10.0 at 5.25 (logits, fp32 upcast, fp32
log-softmax). Tolerance: the shifted-out token (1/256)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from planner.config.spec import Knobs
from planner.estimate import activations as act
from planner.estimate import nograd
from planner.estimate.setup import Setup
from planner.estimate.temp_terms import half_loss, logits_loss_bytes
from planner.model import catalog

ROOT = Path(__file__).resolve().parents[2]
STEP = Path(__file__).with_name("half_loss_step.py")


def measured(python: str, *mode: str) -> dict:
    run = subprocess.run([python, str(STEP), str(ROOT), *mode], capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.sweep
@pytest.mark.skipif(
    not os.environ.get("MEMPLAN_AXOLOTL_PYTHON"), reason="axolotl's own venv (Makefile FRAMEWORK_PYTHONS)"
)
def test_the_composites_bf16_loss_is_three_half_copies_of_the_logits():
    t = catalog.load_model("llama-4-scout-17b-16e").text
    per_entry = act.half_loss_bytes(t, 1, "half") / t.vocab
    got = measured(os.environ["MEMPLAN_AXOLOTL_PYTHON"])
    assert got["transformers"] == "5.16.1" and per_entry == 6
    # two of the three copies span the 255 shifted tokens, one (the logits' gradient) all 256: (2 x 255 + 256) x 2 / 256
    assert got["bytes_per_token_entry"] == (2 * 255 + 256) * 2 / 256
    assert per_entry == pytest.approx(got["bytes_per_token_entry"], abs=per_entry / 256)


@pytest.mark.sweep
def test_transformers_525_upcasts_the_composites_loss():
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    got = measured(sys.executable)
    assert transformers.__version__ >= "5.17" and got["transformers"] == transformers.__version__
    t = catalog.load_model("llama-4-scout-17b-16e").text
    per_entry = act.logits_loss_bytes(t, 1, 1, "half") / t.vocab
    assert per_entry == pytest.approx(got["bytes_per_token_entry"], abs=per_entry / 256)


@pytest.mark.sweep
@pytest.mark.skipif(
    not os.environ.get("MEMPLAN_AXOLOTL_PYTHON"), reason="axolotl's own venv (Makefile FRAMEWORK_PYTHONS)"
)
def test_the_evaluation_forward_takes_the_same_half_loss():
    s, plain = setup("llama-4-scout-17b-16e", "axolotl"), setup("llama-4-scout-17b-16e", "memplan")
    t = s.model.text
    per_entry = {x: (nograd.eval_head_bytes(x, 1) - 2 * t.hidden) / t.vocab for x in (s, plain)}
    got = measured(os.environ["MEMPLAN_AXOLOTL_PYTHON"], "eval")
    assert got["transformers"] == "5.16.1" and per_entry[s] == 6
    assert per_entry[s] == pytest.approx(got["bytes_per_token_entry"], abs=per_entry[s] / 256)
    upcast = measured(sys.executable, "eval")  # transformers 5.25: HF's fp32 loss
    assert per_entry[plain] == pytest.approx(upcast["bytes_per_token_entry"], abs=per_entry[plain] / 256)


def setup(model: str, framework: str, release: str = "") -> Setup:
    knobs = Knobs(precision="bf16", lora_rank=32, quant="nf4", framework=framework, release=release)
    return Setup(catalog.load_model(model), knobs, 1, 1, 4096)


@pytest.mark.parametrize(
    "model,framework,release,half",
    [
        ("llama-4-scout-17b-16e", "axolotl", "", True),  # 0.19.0 pins transformers 5.16.1
        ("llama-4-scout-17b-16e", "axolotl", "0.8", True),  # v0.11.0.post1 pins 4.53.1
        ("llama-4-scout-17b-16e", "axolotl", "0.5", False),  # v0.6.0: transformers>=4.46.3, any newer one
        ("llama-4-scout-17b-16e", "axolotl", "0.7", False),  # 4.49.0: no Llama-4 class; the fp32 loss as before
        ("llama-4-scout-17b-16e", "memplan", "", False),  # the bundled trainer, transformers 5.25
        ("llama-4-scout-17b-16e", "llamafactory", "", True),  # v0.9.5 pyproject.toml:43 transformers<=5.6.0
        ("llama-4-scout-17b-16e", "llamafactory", "0.9.3", True),  # requirements.txt:1 <=4.52.4
        ("llama-4-scout-17b-16e", "llamafactory", "0.9.4", True),  # pyproject.toml:44 <=4.57.1
        ("llama-4-scout-17b-16e", "llamafactory", "0.8", False),  # >=4.41.2: unsaid, the fp32 loss (the hungrier)
        ("llama-4-scout-17b-16e", "swift", "3.4", True),  # v3.6.4 requirements/framework.txt:34 <4.53
        ("llama-4-scout-17b-16e", "swift", "3.9", True),  # v3.12.6 requirements/framework.txt:37 <4.58
        ("llama-4-scout-17b-16e", "swift", "", False),  # 4.6.0: <5.20.0, past 5.17's upcast
        ("llama-4-scout-17b-16e", "hf", "4.54", True),  # transformers 4.54 .. 4.57
        ("llama-4-scout-17b-16e", "hf", "5", True),  # 5.0 .. 5.9
        ("llama-4-scout-17b-16e", "hf", "", False),  # 5.10 .. 5.23: the newest upcasts
        ("llama-4-scout-17b-16e", "trl", "0.19", False),  # transformers>=4.51.0, no upper pin: unsaid
        ("llama-3.1-8b", "axolotl", "", False),  # LlamaForCausalLM: HF's ForCausalLMLoss
    ],
)
def test_the_half_loss_is_planned_where_every_pin_of_the_line_runs_it(model, framework, release, half):
    s = setup(model, framework, release)
    assert half_loss(s) is half
    t = s.model.text
    expected = act.half_loss_bytes(t, 4096, "amp") if half else None
    if half:
        assert logits_loss_bytes(s) == expected == 6 * 4096 * t.vocab
        assert nograd.eval_head_bytes(s, 4096) == 2 * 4096 * t.hidden + expected  # the evaluation forward's too
    else:
        assert logits_loss_bytes(s) >= act.logits_loss_bytes(t, 1, 4096, "amp")
        assert nograd.eval_head_bytes(s, 4096) == 2 * 4096 * t.hidden + 10 * 4096 * t.vocab
