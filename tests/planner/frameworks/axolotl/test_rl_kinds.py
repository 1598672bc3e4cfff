"""axolotl's rl values beyond DPO and GRPO (planner/frameworks/axolotl/reader.py RL, REFUSED): kto read as KTO and
refused in one line (TRL's KTOTrainer at axolotl's pins, measured outside memplan's KTO terms), gdpo planned as GRPO
from v0.14.0, ebft refused in one line; none planned as SFT."""

import os
from pathlib import Path

import pytest

from planner import checkconfig, intake
from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.errors import BadInput
from planner.estimate.rl import breakdown
from planner.estimate.setup import Setup
from planner.model.families import from_config

EXAMPLES = Path(__file__).resolve().parents[3] / "data/frameworks/axolotl/examples"
KTO = EXAMPLES / "llama-3/qlora-1b-kto.yaml"
GDPO = EXAMPLES / "llama-3/qlora-1b-gdpo.yaml"


def _refusal(path: Path, **given) -> str:
    with pytest.raises(BadInput) as e:
        checkconfig.check_config([str(path)], {"gpu": "h100", **given})
    assert "\n" not in str(e.value) and e.value.field == "workload"
    return str(e.value)


def test_kto_is_read_as_kto_and_refused_in_one_line_at_every_line():
    """v0.18.0's own KTO example: the reading says kto (not SFT), check refuses it, naming the trainer; v0.4.0 has no
    KTOTrainer (rl kto_pair alone, core/trainer_builder.py:1047-1048): the line's workloads named."""
    assert intake.read([str(KTO)]).request["workload"] == {"kind": "kto", "max_length": 2048}
    for line in ("", "axolotl@0.5.0", "axolotl@0.12.0"):
        assert "runs rl kto on TRL's KTOTrainer" in _refusal(KTO, **({"framework": line} if line else {}))
    assert "cannot run --workload kto: it runs sft, dpo" in _refusal(KTO, framework="axolotl@0.4.0")


def test_gdpo_before_0_14_is_refused_naming_the_line_that_runs_it():
    assert "give --framework axolotl@0.14" in _refusal(GDPO, framework="axolotl@0.12.0")


@pytest.mark.sweep
@pytest.mark.skipif(not os.environ.get("MEMPLAN_AXOLOTL_PYTHON"), reason="axolotl's own venv (FRAMEWORK_PYTHONS)")
def test_trl_1_9_kto_trainer_runs_outside_memplans_kto_terms():
    """The refusal's measurement: axolotl 0.19.0's TRL (1.9.0) KTOTrainer on real CPU steps against memplan's
    whole-logits KTO (logprobs full, ms-swift's). Measured 95,500,288 bytes at training, +10.8% above the plan's
    86,187,008 (kl-forward -2.0%, reference-forward -1.9%); trl 0.22.2 (axolotl 0.12's pins, .fwenv-old) -8.1% at
    training, -12.1% at reference-forward. Outside the 5% tolerance the KTO probes hold (tests/probes/test_kto.py)."""
    from tests.probes.kto_steps import measured_kto_steps
    from tests.probes.test_rl import COMPLETION, FULL, PROMPT  # its vocabulary large enough for the logits to weigh

    measured = measured_kto_steps(os.environ["MEMPLAN_AXOLOTL_PYTHON"], FULL)
    w = Workload(kind="kto", max_length=PROMPT + COMPLETION, max_prompt_length=PROMPT, logprobs="full")
    s = Setup(from_config(FULL, "tiny"), Knobs(framework="trl", precision="fp32", workload=w), 2, 2, w.seq_len())
    plan = {k.split(":")[0]: v for k, v in breakdown(s, 80 * 2**30).phases.items()}
    assert measured["training"] > plan["training"] * 1.05, (measured, plan)
