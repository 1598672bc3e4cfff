"""TRL 0.x's KTOTrainer by release line (planner/frameworks/trl/kto_zero.py): v0.17.0 .. v0.29.1 planned with the 1.0
line's terms on the 0.19 and 0.22 lines, v0.12.0 .. v0.16.x (the KL pass's logits held through the policy's forward)
refused on the 0.14 and 0.15 lines, rows past max_length (KTOConfig's max_prompt_length over max_length - 2) refused.
Pinned by CPU steps of each release's own KTOTrainer (tests/probes/kto_steps.py under tools/fwenv_old.sh's
.fwenv-old/trl-X venvs: fp32, micro 2 x accum 2, the tiny Llama of tests/probes/test_rl.py, rows of 96 tokens with
max_prompt_length 32; trl 0.14.0 and 0.15.2 have no kl-forward of their own, the KL pass runs inside the step).
Tolerance: the KTO probes' 5% every phase (tests/probes/test_kto.py), the measured peak at most the plan's."""

import pytest

from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.frameworks import adapter
from tests.planner.frameworks.trl.test_kto_entropy import FWENV_OLD, PHASES, _plan
from tests.probes.test_rl import TINY

# (version, vocabulary) -> (the line whose KTOTrainer it runs, bytes by PHASES; None: no such phase). 0.17.0 is read
# as the 0.15 line, which refuses KTO and names the 0.19 line for it
STEPS = {
    ("0.14.0", 4096): ("0.14", (96_048_128, None, 93_128_192)),
    ("0.14.0", 8192): ("0.14", (153_555_968, None, 147_523_072)),
    ("0.15.2", 4096): ("0.14", (96_081_920, None, 93_161_984)),
    ("0.17.0", 4096): ("0.19", (92_937_216, 74_733_056, 90_055_680)),
    ("0.19.1", 4096): ("0.19", (92_937_216, 74_733_056, 90_055_680)),
    ("0.19.1", 8192): ("0.19", (147_332_096, 119_821_824, 141_370_368)),
}


def _within(version: str, vocab: int, line: str) -> bool:
    plan = _plan(vocab, line)
    measured = STEPS[version, vocab][1]
    return all(abs(m - plan[p]) / plan[p] < 0.05 for p, m in zip(PHASES, measured, strict=True) if m is not None)


def _cannot(line: str, **workload) -> tuple | None:
    knobs = Knobs(framework="trl", precision="fp32", workload=Workload(kind="kto", **workload))
    return adapter("trl", line).cannot(dict(knobs))


def test_the_0_19_line_plans_kto_with_the_1_0_terms_within_5_percent_of_017_and_019_steps():
    for vocab in (4096, 8192):
        assert _plan(vocab, "0.19") == _plan(vocab, "0.22") == _plan(vocab, "1.0")
    for (version, vocab), (line, measured) in STEPS.items():
        if line == "0.19":
            assert _within(version, vocab, line), (version, vocab)
            assert max(m for m in measured if m is not None) <= max(_plan(vocab, line).values()), (version, vocab)


def test_the_0_14_and_0_15_lines_refuse_kto_their_steps_over_the_terms():
    """0.14.0's and 0.15.2's reference forward lies more than 5% over the 1.0 terms (the KL logits held), the peak over
    the plan's: refused in one line naming the held logits and the lines that plan 0.17 on."""
    for version in ("0.14.0", "0.15.2"):
        assert not _within(version, 4096, "1.0"), version
        assert max(m for m in STEPS[version, 4096][1] if m is not None) > max(_plan(4096, "1.0").values()), version
    for line in ("0.14", "0.15"):
        field, why = _cannot(line, max_length=1024)
        assert field == "workload" and "\n" not in why and "not planned" in why, (line, why)
        assert "kto_trainer.py:1061-1063" in why and "trl@0.19" in why, (line, why)


def test_the_0_19_and_0_22_lines_refuse_rows_the_prompt_cut_leaves_past_max_length():
    """v0.12 .. v0.26's completion cut, max_length - max_prompt_length (512 by default), slices from the end when
    negative: refused where max_length - 2 < max_prompt_length, planned otherwise."""
    for line in ("0.19", "0.22"):
        assert _cannot(line, max_length=1024) is None
        assert _cannot(line, max_length=96, max_prompt_length=32) is None
        assert _cannot(line, max_length=514) is None
        for workload in ({"max_length": 512}, {"max_length": 96}, {"max_length": 300, "max_prompt_length": 299}):
            field, why = _cannot(line, **workload)
            assert field == "workload" and "kto_trainer.py:200-217" in why and "\n" not in why, (line, workload)


def test_the_0_19_and_0_22_lines_write_no_kto_file_its_default_prompt_cut_leaves_rows_past_max_length():
    """memplan's KTO file names max_length alone: KTOConfig's max_prompt_length 512 then applies, so a plan under 514
    is planned from the user's own max_prompt_length but not written (scope "written": suggest never ranks it)."""
    from planner.frameworks.rules import Where

    for line in ("0.19", "0.22"):
        short = Knobs(
            framework="trl", precision="fp32", workload=Workload(kind="kto", max_length=256, max_prompt_length=128)
        )
        assert _cannot(line, max_length=256, max_prompt_length=128) is None
        field, why = adapter("trl", line).unwritten(dict(short), Where())
        assert field == "workload" and "not written" in why and "kto_config.py:123-124" in why, (line, why)
        long = Knobs(framework="trl", precision="fp32", workload=Workload(kind="kto", max_length=514))
        assert adapter("trl", line).unwritten(dict(long), Where()) is None


@pytest.mark.sweep
@pytest.mark.parametrize("version", ["0.14.0", "0.19.1"])
def test_a_0x_venvs_kto_step_on_cpu_as_recorded(version):
    """The measurement itself (about 30 s a venv on CPU): every phase as STEPS records it (0.5%)."""
    from tests.probes.kto_steps import measured_kto_steps

    python = FWENV_OLD / f"trl-{version}" / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"tools/fwenv_old.sh's trl-{version} venv")
    measured = measured_kto_steps(str(python), {**TINY, "vocab_size": 4096})
    recorded = STEPS[version, 4096][1]
    assert set(measured) == {p for p, m in zip(PHASES, recorded, strict=True) if m is not None}
    for phase, want in zip(PHASES, recorded, strict=True):
        if want is not None:
            assert measured[phase] == pytest.approx(want, rel=0.005), (phase, measured)
