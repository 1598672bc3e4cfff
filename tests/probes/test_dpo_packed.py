"""DPO padding-free (TRL 0.14-0.28's `padding_free`, ms-swift's `--padding_free`): chosen and rejected rows run as one
packed row (probes/rl_sim.py), its phases measured on real CPU tensors and traced on fake ones, against
planner/estimate/rl.py's phases within 5%; a 2-layer Llama of vocabulary 4,096 (tests/probes/test_rl.py's FULL), fp32,
2 pairs x 96 tokens, accumulation 2, the flash stand-in (recipe.attention.FLASH_STANDIN)."""

import pytest

pytest.importorskip("trl")
from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.estimate.rl import breakdown
from planner.estimate.setup import Setup
from planner.model.families import from_config
from probes import rl_sim
from probes.step import Case
from tests.probes.test_rl import COMPLETION, FULL, PROMPT, WITHIN


def _case(logprobs: str) -> Case:
    w = Workload(kind="dpo", max_length=PROMPT + COMPLETION, max_prompt_length=PROMPT, logprobs=logprobs)
    k = Knobs(precision="fp32", workload=w, batching="packed", attention="flash", framework="trl", release="0.19")
    return Case(FULL, k, 2, 2, w.seq_len())


def _analytic(case: Case) -> dict[str, int]:
    s = Setup(from_config(FULL, "tiny"), case.knobs, case.micro_batch, case.grad_accum, case.seq_len)
    return {k.split(":")[0]: v for k, v in breakdown(s, 80 * 2**30).phases.items()}


def test_padding_free_dpo_with_whole_logits_within_5_percent_of_real_cpu_steps():
    """TRL 0.14-0.28's DPO (whole logits, one packed row's log_softmax): measured 106,638,336 bytes at training and
    106,655,232 at the reference forward; the analytic plan within 0.1% and 0.3%."""
    case = _case("full")
    measured, analytic = rl_sim.simulate(case, real=True), _analytic(case)
    assert set(measured) == set(analytic) == {"training", "reference-forward"}
    for phase, bytes_ in measured.items():
        assert analytic[phase] == pytest.approx(bytes_, rel=WITHIN), phase


def test_padding_free_dpo_with_the_fused_head_within_5_percent_of_the_sim_with_cuda_paths():
    """The fused log-prob head over each packed row's scored tokens (CUDA's paths; on CPU its torch fold differs)."""
    case = _case("fused")
    sim, analytic = rl_sim.simulate(case), _analytic(case)
    assert set(sim) == set(analytic)
    for phase, bytes_ in sim.items():
        assert analytic[phase] == pytest.approx(bytes_, rel=WITHIN), phase
