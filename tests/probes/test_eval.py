"""The evaluation phase's transient (planner.estimate.nograd.eval_forward_bytes) against a real model's no-grad forward
with labels, as HF Trainer's prediction_step runs it, measured by the live-bytes tracker on CPU."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate import nograd
from planner.estimate.setup import Setup
from planner.model.catalog import load_model, model_config
from probes.tracker import LiveBytes

# Measured 2.5% over the term at every shape below (about 8 x hidden bytes a token beyond the logits, the fp32
# upcast and the log-softmax, not yet attributed); the peak is the loss's, so the error does not grow with the rows.
WITHIN = 0.05


@pytest.mark.parametrize("rows,seq", [(4, 64), (8, 128), (2, 256)])
def test_eval_forward_term_is_the_measured_no_grad_peak(rows, seq):
    cfg = model_config("debug-llama")
    mt = cfg.pop("model_type")
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(mt, **cfg)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    ids = torch.randint(0, cfg["vocab_size"], (rows, seq))
    with torch.no_grad(), LiveBytes() as tracker:
        model.eval()(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids)
    s = Setup(load_model("debug-llama"), Knobs(precision="bf16-pure", eval_batch=rows), 1, 1, seq)
    assert nograd.eval_forward_bytes(s) == pytest.approx(tracker.peak, rel=WITHIN)
    assert nograd.eval_forward_bytes(s) == nograd.eval_head_bytes(s, rows * seq)  # the loss decides, not a layer
