"""TRL v1.8.0 .. 1.13.x's KTO from the whole logits (planner/estimate/kto_entropy.py, Framework.kto_entropy_copy on
the trl@1.0, trl@1.7 and trl@1.10 lines): the entropy metric's flattened copy of the policy's logits with the
reference's live (v1.0.0 .. v1.5.x and v1.7.x keep index copies of them instead: planner/frameworks/trl/releases.py).
Pinned by
(1) TRL 1.9.0's own selective_log_softmax and entropy_from_logits under probes.tracker (2 rows x 96 tokens, vocabulary
4,096; the head's peak moment, inputs excluded: 12,554,240 bytes in fp32, 7,834,112 in bf16), and (2) whole KTOTrainer
steps on CPU (probes/rl.py, micro 2 x accum 2, fp32, the tiny Llama of tests/probes/test_rl.py): trl 1.9.0 (axolotl's
venv) 95,500,288 bytes at training with vocabulary 4,096 and 153,139,200 with 8,192; trl 1.10.0 (.fwenv-old) and
1.13.0 the same bytes in every phase. The other releases' steps (RELEASE_STEPS) ran tests/probes/kto_steps.py's script
under .fwenv-old/trl-1.10.0's python with that release's wheel first on PYTHONPATH (`pip download --no-deps
trl==X`, unzipped; its transformers 5.19.0, accelerate 1.15.0, torch 2.13.0), 0.22.2's and 1.0.0's under their own
.fwenv-old venvs (0.22.2's with max_prompt_length 32, as kto_steps passes it: the 0.x lines,
tests/planner/frameworks/trl/test_kto_zero.py). The KTO probes' tolerance, 5% (tests/probes/test_kto.py)."""

import os
from pathlib import Path

import pytest

from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.estimate import kto_entropy
from planner.estimate.rl import breakdown
from planner.estimate.setup import Setup
from planner.frameworks import adapter
from planner.model.families import from_config
from tests.probes.test_rl import COMPLETION, PROMPT, TINY  # the KTO probes' tiny Llama (its vocabulary set here)

MEASURED = {4096: 95_500_288, 8192: 153_139_200}  # trl 1.9.0's training phase, bytes (the docstring's command)
PHASES = ("training", "kl-forward", "reference-forward")
# each release's step, bytes by PHASES (the docstring's command): (version, vocabulary) -> (the line memplan reads it
# as, the bytes). 1.7.x's reference forward is 1.9.0's plus one logits copy, 2 x 96 x vocabulary x 4 bytes (its index
# copies, releases.py): under the 1.7 plan there by 1.7% at 4,096 and 2.2% at 8,192, its peak under the plan's
RELEASE_STEPS = {
    ("0.22.2", 4096): ("0.22", (92_169_728, 74_743_808, 89_288_192)),
    ("1.0.0", 4096): ("1.0", (92_390_400, 74_350_080, 89_438_720)),
    ("1.0.0", 8192): ("1.0", (146_916_352, 119_438_848, 140_818_944)),
    ("1.3.0", 4096): ("1.0", (92_382_208, 74_341_888, 89_430_528)),
    ("1.5.1", 4096): ("1.0", (92_382_208, 74_341_888, 89_430_528)),
    ("1.6.0", 4096): ("1.6", (95_470_592, 77_262_848, 95_072_256)),
    ("1.7.1", 4096): ("1.7", (91_883_520, 74_341_888, 89_430_528)),
    ("1.7.1", 8192): ("1.7", (146_311_168, 119_430_656, 140_810_752)),
    ("1.9.0", 4096): ("1.7", (95_500_288, 74_341_888, 86_284_800)),
    ("1.9.0", 8192): ("1.7", (153_139_200, 119_430_656, 134_519_296)),
    ("1.10.0", 4096): ("1.10", (95_500_288, 74_341_888, 86_284_800)),
    ("1.13.0", 4096): ("1.10", (95_500_288, 74_341_888, 86_284_800)),
}


def _plan(vocab: int, release: str = "1.7", completion: int = COMPLETION) -> dict[str, int]:
    w = Workload(kind="kto", max_length=PROMPT + completion, max_prompt_length=PROMPT, logprobs="full")
    knobs = Knobs(framework="trl", release=release, precision="fp32", workload=w)
    s = Setup(from_config({**TINY, "vocab_size": vocab}, "tiny"), knobs, 2, 2, w.seq_len())
    return {k.split(":")[0]: v for k, v in breakdown(s, 80 * 2**30).phases.items()}


def test_entropy_moment_matches_trl_1_9_functions_under_the_tracker():
    """Without the reference's logits (the tracked snippet had none): within 0.5% of the tracker's peaks."""
    fp32 = kto_entropy.entropy_moment_bytes(2, 96, 4096, 4, reference_logits=False)
    bf16 = kto_entropy.entropy_moment_bytes(2, 96, 4096, 2, reference_logits=False)
    assert abs(fp32 - 12_554_240) / 12_554_240 < 0.005, fp32
    assert abs(bf16 - 7_834_112) / 7_834_112 < 0.005, bf16


def test_the_1_7_line_plans_trl_1_9_kto_step_within_5_percent():
    for vocab, measured in MEASURED.items():
        plan = _plan(vocab)["training"]
        assert abs(measured - plan) / plan < 0.05, (vocab, measured, plan)
    # the newest's whole-logits KTO terms (no entropy copy) fall short by more than the tolerance
    assert MEASURED[4096] > _plan(4096, "1.16")["training"] * 1.05


def test_each_planned_releases_kto_step_within_5_percent_of_its_lines_plan():
    """0.22.2, 1.0.0 .. 1.5.1 and 1.7.x (index copies, no entropy), 1.9.0 and 1.10.0 .. 1.13.0 (the entropy copy): every
    phase within 5% of the plan of the line memplan reads them as; the 0.22, 1.0 and 1.10 lines plan KTO with the 1.7
    line's terms, byte for byte."""
    assert _plan(4096, "1.10") == _plan(4096, "1.7") == _plan(4096, "1.0") == _plan(4096, "0.22")
    for (version, vocab), (line, measured) in RELEASE_STEPS.items():
        if line == "1.6":
            continue  # refused (releases.py KTO_WHOLE): below
        plan = _plan(vocab, line)
        for phase, got in zip(PHASES, measured, strict=True):
            assert abs(got - plan[phase]) / plan[phase] < 0.05, (version, vocab, phase, got, plan[phase])
        assert max(measured) <= max(plan.values()), (version, vocab)  # the peak: the plan's at least


# 1.10.0's step with 448-token completions (vocabulary 4,096; the docstring's command, COMPLETION 448), the probe's
# labels in turn and every row desirable (its rows' labels set True), where the logits metrics gather every row's
# completion positions beside the index copies (v1.9.0 kto_trainer.py:1616-1622): training-phase bytes
LONG_COMPLETIONS = {"alternating": 175_878_144, "all-desirable": 176_892_928}


def test_the_1_10_line_holds_long_completions_with_every_row_desirable_within_5_percent():
    plan = _plan(4096, "1.10", completion=448)["training"]
    for labels, measured in LONG_COMPLETIONS.items():
        assert abs(measured - plan) / plan < 0.05, (labels, measured, plan)


def test_the_1_6_and_1_14_lines_refuse_kto():
    """1.6.0's .contiguous() copies overrun the 1.7 terms (reference forward +8.1%): the 1.6 line refuses KTO; 1.14.x's
    Triton-kernel path is not measured."""
    plans = {v: _plan(v, "1.7") for v in (4096, 8192)}
    within = {
        key: all(abs(m - plans[key[1]][p]) / plans[key[1]][p] < 0.05 for p, m in zip(PHASES, ms, strict=True))
        for key, (_, ms) in RELEASE_STEPS.items()
    }
    assert within["1.0.0", 4096] and within["1.5.1", 4096] and not within["1.6.0", 4096]
    assert RELEASE_STEPS["1.6.0", 4096][1][2] > plans[4096]["reference-forward"] * 1.08
    knobs = Knobs(framework="trl", precision="fp32", workload=Workload(kind="kto", max_length=96))
    for line in ("1.6", "1.14"):
        field, why = adapter("trl", line).cannot(dict(knobs))
        assert field == "workload" and "not planned" in why and "kto_trainer.py" in why, (line, why)


@pytest.mark.sweep
@pytest.mark.skipif(not os.environ.get("MEMPLAN_AXOLOTL_PYTHON"), reason="axolotl's own venv (trl 1.9.0)")
def test_trl_1_9_kto_step_on_cpu_within_5_percent_of_the_1_7_line():
    """The measurement itself: every phase of TRL 1.9.0's KTOTrainer step within 5% of the trl@1.7 plan."""
    from tests.probes.kto_steps import measured_kto_steps

    measured = measured_kto_steps(os.environ["MEMPLAN_AXOLOTL_PYTHON"], {**TINY, "vocab_size": 4096})
    plan = _plan(4096)
    for phase in ("training", "kl-forward", "reference-forward"):
        assert abs(measured[phase] - plan[phase]) / plan[phase] < 0.05, (phase, measured, plan)


FWENV_OLD = Path(os.environ.get("MEMPLAN_FWENV_OLD", Path(__file__).resolve().parents[4] / ".fwenv-old"))


@pytest.mark.sweep
@pytest.mark.parametrize("version", ["0.22.2", "1.0.0", "1.10.0"])
def test_a_trl_venvs_kto_step_on_cpu_within_5_percent_of_its_line(version):
    """The measurement itself at 0.22.2, 1.0.0 and 1.10.0 (tools/fwenv_old.sh's venvs): every phase as RELEASE_STEPS records
    it (0.5%), and within 5% of its line's plan."""
    from tests.probes.kto_steps import measured_kto_steps

    python = FWENV_OLD / f"trl-{version}" / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"tools/fwenv_old.sh's trl-{version} venv")
    measured = measured_kto_steps(str(python), {**TINY, "vocab_size": 4096})
    line, recorded = RELEASE_STEPS[version, 4096]
    plan = _plan(4096, line)
    assert tuple(measured[p] for p in PHASES) == pytest.approx(recorded, rel=0.005)
    for phase in PHASES:
        assert abs(measured[phase] - plan[phase]) / plan[phase] < 0.05, (phase, measured, plan)
