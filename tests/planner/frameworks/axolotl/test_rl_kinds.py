"""axolotl's rl values beyond DPO and GRPO (planner/frameworks/axolotl/reader.py RL, REFUSED): kto read as KTO,
planned from v0.17.0 with an adapter as the TRL line of its pin plans it (planner/frameworks/axolotl/kto.py) and
refused in one line naming the pin before it, gdpo planned as GRPO from v0.14.0, ebft refused in one line; none planned
as SFT."""

from pathlib import Path

import pytest

from planner import checkconfig, intake
from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.errors import BadInput
from planner.estimate.rl import breakdown
from planner.estimate.setup import Setup
from planner.model.catalog import load_model

EXAMPLES = Path(__file__).resolve().parents[3] / "data/frameworks/axolotl/examples"
KTO = EXAMPLES / "llama-3/qlora-1b-kto.yaml"
GDPO = EXAMPLES / "llama-3/qlora-1b-gdpo.yaml"


def _refusal(path: Path, **given) -> str:
    with pytest.raises(BadInput) as e:
        checkconfig.check_config([str(path)], {"gpu": "h100", **given})
    assert "\n" not in str(e.value) and e.value.field == "workload"
    return str(e.value)


def test_kto_is_read_as_kto_planned_from_0_17_and_refused_naming_the_pin_before():
    """v0.18.0's own KTO example: the reading says kto (not SFT); the newest line (v0.17.0 .. 0.19.0: trl 1.5.1 ..
    1.9.0) plans it; each earlier line refuses it naming the TRL it pins; v0.4.0 has no KTOTrainer (rl kto_pair alone,
    core/trainer_builder.py:1047-1048): the line's workloads named."""
    assert intake.read([str(KTO)]).request["workload"] == {"kind": "kto", "max_length": 2048}
    for line in ("", "axolotl@0.17.0", "axolotl@0.19.0"):
        plan = checkconfig.check_config([str(KTO)], {"gpu": "h100", **({"framework": line} if line else {})}).plan
        assert plan.workload.kind == "kto" and plan.lora_rank == 32
    pins = {"0.5.0": "trl==0.12.0", "0.7.1": "trl==0.15.0", "0.11.0": "trl==0.16.0", "0.12.0": "trl==0.21.0"}
    pins |= {"0.16.1": "trl==0.27.1"}
    for version, pin in pins.items():
        why = _refusal(KTO, framework=f"axolotl@{version}")
        assert pin in why and "not planned; give --framework axolotl@0.17" in why, why
    assert "builder at these pins" in _refusal(KTO, framework="axolotl@0.14.0")  # TRL's 0.22 line, planned there
    assert "cannot run --workload kto: it runs sft, dpo" in _refusal(KTO, framework="axolotl@0.4.0")


def test_kto_plans_as_trl_1_0_and_1_7_whose_steps_are_measured():
    """axolotl 0.17's pins (trl 1.5.1, 1.8.0, 1.9.0) are TRL's 1.0 and 1.7 lines, whose KTO CPU steps lie within 5% of
    their plans (tests/planner/frameworks/trl/test_kto_entropy.py RELEASE_STEPS: 1.5.1, 1.9.0); AxolotlKTOTrainer's
    mixins change no forward: the same plan, byte for byte, phase by phase."""
    w = Workload(kind="kto", max_length=2048, logprobs="full")

    def phases(framework: str, release: str) -> dict:
        k = Knobs(framework=framework, release=release, workload=w, lora_rank=32, checkpointing="full")
        return breakdown(Setup(load_model("llama-3.2-1b"), k, 2, 1, w.seq_len()), 80 * 2**30).phases

    assert phases("axolotl", "") == phases("axolotl", "0.17") == phases("trl", "1.7") == phases("trl", "1.0")
    peak = next(v for p, v in phases("axolotl", "").items() if p.startswith("training"))
    assert peak > 1.05 * next(v for p, v in phases("trl", "").items() if p.startswith("training"))  # not 1.15+'s


def test_kto_without_an_adapter_at_micro_1_or_precomputed_is_refused_in_one_line(tmp_path):
    """Without an adapter two references run (one axolotl loads and never hands the trainer, one TRL loads in fp32);
    TRL's KL term needs two rows a device; axolotl hands precompute_ref_log_probs to DPO alone."""
    full = tmp_path / "full.yaml"
    full.write_text(KTO.read_text().replace("adapter: qlora", "").replace("load_in_4bit: true", "load_in_4bit: false"))
    with pytest.raises(BadInput) as e:
        checkconfig.check_config([str(full)], {"gpu": "h100"})
    assert e.value.field == "lora_rank" and "float32" in str(e.value) and "train.py:143-164" in str(e.value)
    with pytest.raises(BadInput) as e:
        checkconfig.check_config([str(KTO)], {"gpu": "h100", "micro_batch": 1})
    assert e.value.field == "micro_batch" and "kto_trainer.py:806-809" in str(e.value)
    w = Workload(kind="kto", max_length=512, precompute_ref_log_probs=True)
    with pytest.raises(ValueError, match="precompute_ref_log_probs to DPO alone"):  # pydantic wraps the BadInput
        Knobs(framework="axolotl", workload=w, lora_rank=8)


def test_gdpo_before_0_14_is_refused_naming_the_line_that_runs_it():
    assert "give --framework axolotl@0.14" in _refusal(GDPO, framework="axolotl@0.12.0")
