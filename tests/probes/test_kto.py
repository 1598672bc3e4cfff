"""KTO's per-phase peaks (planner/estimate/rl.py, probes/rl_sim.py) pinned to real steps of TRL 1.16's own KTOTrainer
on CPU with a tiny Llama (probes/rl.py, every allocation counted): the training step over one completion a row, the
policy's no-grad pass over the KL batch (kl-forward) and the reference model's passes over both batches
(reference-forward), with a reference model and with precomputed reference log-probs (none kept). Tolerance 5%, as
DPO's and GRPO's (tests/probes/test_rl.py); measured: analytic within 1.7% of the real steps, the sim within 0.7%.
At debug-llama's 8,192-entry vocabulary the analytic model is pinned to the sim with CUDA's paths (within 0.2%)."""

import pytest

pytest.importorskip("trl")
from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.estimate.rl import breakdown
from planner.estimate.setup import Setup
from planner.model.families import from_config
from probes import rl_sim
from probes.step import Case
from tests.probes.test_rl import COMPLETION, PROMPT, TINY, WITHIN, _real

CASES = {  # id: workload; micro-batch 2 (TRL's KL term needs 2 rows a device), accumulation 2, two steps
    "kto-reference": Workload(kind="kto", max_length=PROMPT + COMPLETION, max_prompt_length=PROMPT),
    "kto-precomputed": Workload(
        kind="kto", max_length=PROMPT + COMPLETION, max_prompt_length=PROMPT, precompute_ref_log_probs=True
    ),
}


def _knobs(w: Workload) -> Knobs:
    return Knobs(framework="trl", precision="fp32", workload=w)


@pytest.fixture(scope="module")
def measured():
    return {name: _real(w, 2, 2, 2) for name, w in CASES.items()}


def test_analytic_and_sim_phases_within_5_percent_of_real_kto_trainer_steps(measured):
    for name, w in CASES.items():
        s = Setup(from_config(TINY, "tiny"), _knobs(w), 2, 2, w.seq_len())
        analytic = {k.split(":")[0]: v for k, v in breakdown(s, 80 * 2**30).phases.items()}
        sim = rl_sim.simulate(Case(TINY, _knobs(w), 2, 2, w.seq_len()), paths="cpu")
        assert set(analytic) == set(sim) == set(measured[name]), name  # the same phases run
        for phase, bytes_ in measured[name].items():
            assert analytic[phase] == pytest.approx(bytes_, rel=WITHIN), (name, phase)
            assert sim[phase] == pytest.approx(bytes_, rel=WITHIN), (name, phase)
    assert "kl-forward" in measured["kto-precomputed"]  # the policy's KL pass runs without a reference model too
    assert "reference-forward" not in measured["kto-precomputed"]


def test_analytic_kto_phases_within_5_percent_of_the_sim_with_cuda_paths():
    from planner.model.catalog import load_model

    model = load_model("debug-llama")
    w = Workload(kind="kto", max_length=192, max_prompt_length=64)
    sim = rl_sim.simulate(Case(model.config, _knobs(w), 2, 2, w.seq_len()))
    got = {
        k.split(":")[0]: v for k, v in breakdown(Setup(model, _knobs(w), 2, 2, w.seq_len()), 80 * 2**30).phases.items()
    }
    assert set(got) == set(sim) == {"training", "kl-forward", "reference-forward"}
    for phase, bytes_ in sim.items():
        assert got[phase] == pytest.approx(bytes_, rel=WITHIN), phase


def test_kto_rows_are_half_of_dpos_pairs():
    """One completion a row against DPO's chosen and rejected: KTO's training step holds half of DPO's saved
    activations at the same micro-batch and row length, and adds the KL pass."""
    from planner.model.catalog import load_model

    model = load_model("debug-llama")
    peaks = {}
    for kind in ("dpo", "kto"):
        w = Workload(kind=kind, max_length=192, max_prompt_length=64)
        peaks[kind] = breakdown(Setup(model, _knobs(w), 2, 1, w.seq_len()), 80 * 2**30)
    assert peaks["kto"].activations_bytes * 2 == pytest.approx(peaks["dpo"].activations_bytes, rel=0.01)
    assert "kl-forward" in peaks["kto"].phases and "kl-forward" not in peaks["dpo"].phases


def test_kto_with_whole_logits_within_5_percent_of_real_cpu_steps():
    """ms-swift's KTO (Framework.kto_logprobs "full": rlhf_trainers/kto_trainer.py:53,59-61,128) scores the KL batch and
    the rows from the whole logits, as `--logprobs full` plans; TRL 1.16 has no such path, so the sim's steps on real
    CPU tensors (a 4,096-entry vocabulary, where the logits weigh) are the measurement. Measured: sim within 0.01%,
    analytic within 1.5% (training -1.4%, kl-forward +0.3%, reference-forward +0.2%)."""
    from tests.probes.test_rl import FULL

    w = Workload(kind="kto", max_length=PROMPT + COMPLETION, max_prompt_length=PROMPT, logprobs="full")
    case = Case(FULL, _knobs(w), 2, 2, w.seq_len())
    measured, sim = rl_sim.simulate(case, real=True), rl_sim.simulate(case)
    got = breakdown(Setup(from_config(FULL, "tiny"), case.knobs, 2, 2, w.seq_len()), 80 * 2**30).phases
    analytic = {k.split(":")[0]: v for k, v in got.items()}
    assert set(sim) == set(measured) == set(analytic) == {"training", "kl-forward", "reference-forward"}
    for phase, bytes_ in measured.items():
        assert sim[phase] == pytest.approx(bytes_, rel=WITHIN), phase
        assert analytic[phase] == pytest.approx(bytes_, rel=WITHIN), phase


def test_llamafactorys_kto_order_within_5_percent_of_real_cpu_steps():
    """LLaMA-Factory 0.9.5's KTO (train/kto/trainer.py:187-189) runs the KL batch after the rows' forward, the policy's
    saved activations and whole logits live beside it (Framework.kto_kl_after): the sim's steps in that order on real
    CPU tensors, with its own head (probes/lf_logps.sim_loss: the fp32 logits, their index copies, Framework.fp32_logps)
    are the measurement. Measured 89,314,816 bytes at training, 92,430,336 at kl-forward, 95,577,088 at
    reference-forward; the plan within 0.3% (the compute-dtype plan before fp32_logps: -3.5%, -4.9%, -8.0%)."""
    from tests.probes.test_rl import FULL

    w = Workload(kind="kto", max_length=PROMPT + COMPLETION, max_prompt_length=PROMPT, logprobs="full")
    measured = _whole_logits_steps_match(Knobs(framework="llamafactory", precision="fp32", workload=w))
    trl = breakdown(Setup(from_config(FULL, "tiny"), _knobs(w), 2, 2, w.seq_len()), 80 * 2**30).phases["kl-forward"]
    assert measured["kl-forward"] > trl * 1.1  # the policy's activations and logits are live at the KL pass


def test_padding_free_kto_with_whole_logits_within_5_percent_of_real_cpu_steps():
    """ms-swift 3.9+'s KTO padding-free (swift/arguments/rlhf_args.py:710-717): its collator packs the micro-batch's
    rows into one row and their KL rows into another (template/base.py:1884-1893, packing_row), scored from the whole
    logits; TRL's KTOTrainer has no padding_free at any release, so the sim's steps on real CPU tensors (flash stand-in,
    one packed row of 2 x 96 tokens for each batch) are the measurement. Measured 88,780,800 bytes at training,
    77,244,416 at kl-forward, 88,797,184 at reference-forward; the analytic plan within 0.3%."""
    w = Workload(kind="kto", max_length=PROMPT + COMPLETION, max_prompt_length=PROMPT, logprobs="full")
    _whole_logits_steps_match(
        Knobs(framework="swift", precision="fp32", workload=w, batching="packed", attention="flash")
    )


def _whole_logits_steps_match(knobs: Knobs) -> dict[str, int]:
    """The sim's 2 x 2 KTO steps on real CPU tensors (FULL's 4,096-entry vocabulary) against the analytic phases
    within WITHIN; the measured peaks."""
    from tests.probes.test_rl import FULL

    seq = knobs.workload.seq_len()
    measured = rl_sim.simulate(Case(FULL, knobs, 2, 2, seq), real=True)
    got = breakdown(Setup(from_config(FULL, "tiny"), knobs, 2, 2, seq), 80 * 2**30).phases
    analytic = {k.split(":")[0]: v for k, v in got.items()}
    assert set(measured) == set(analytic) == {"training", "kl-forward", "reference-forward"}
    for phase, bytes_ in measured.items():
        assert analytic[phase] == pytest.approx(bytes_, rel=WITHIN), phase
    return measured
