"""planner.estimate.frozen_lm against the sim: what a VLM's frozen language model saves less, per decoder layer and at
its final norm and head, traced with images on the real models of Qwen2.5-VL and LLaVA (tests/probes/tiny_vlms.py
widths), --frozen none against --frozen language, in half precision, under torch AMP and in fp32. Tolerance 1%.

Measured when pinned (python -m pytest tests/probes/test_frozen_lm_terms.py -s): every row exact (0.00%)."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate import frozen_lm
from planner.estimate.activation_terms import activation_profile
from planner.model.families import from_config
from probes.sim import simulate
from probes.step import Case
from tests.probes.tiny_vlms import tiny_vlm

TOLERANCE = 0.01
SEQ = 1024
ENDS = ("model.language_model.norm", "lm_head")


def _saved(name: str, precision: str, frozen: str, tokens: int):
    cfg = tiny_vlm(name)
    sim = simulate(Case(cfg, Knobs(precision=precision, frozen=frozen), 1, 1, SEQ, image_tokens=tokens))
    ends = sum(b for m, b in sim.other_modules.items() if m in ENDS)
    return cfg, sum(sim.layer_modules.values()), ends


@pytest.mark.parametrize("name,tokens", [("qwen2.5-vl-3b", 64), ("llava-1.5-7b", 576)])
@pytest.mark.parametrize("precision", ["bf16-pure", "bf16", "fp32"])
def test_what_a_frozen_language_model_does_not_save_matches_the_sim(name, tokens, precision):
    cfg, layer, ends = _saved(name, precision, "none", tokens)
    _, frozen_layer, frozen_ends = _saved(name, precision, "language", tokens)
    spec, profile = from_config(cfg, name), activation_profile(Knobs(precision=precision))
    dropped = frozen_lm.layer_dropped_bytes(spec, profile, SEQ)
    print(f"{name} {precision}: layer {dropped / (layer - frozen_layer) - 1:+.2%}")
    assert dropped == pytest.approx(layer - frozen_layer, rel=TOLERANCE)
    assert frozen_lm.ends_dropped_bytes(spec, profile, SEQ) == pytest.approx(ends - frozen_ends, rel=TOLERANCE)
