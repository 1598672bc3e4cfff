"""What each framework's DPO runs beyond padded rows on one rank (planner.frameworks.runs.Runs.dpo_runs), read at each
release line: padding-free rows and Ulysses sequence parallel, or a one-line refusal citing the framework's source."""

import pytest

from planner import intake
from planner.config.knobfields import KnobFields
from planner.frameworks import adapter

DEFAULTS = {k: f.get_default(call_default_factory=True) for k, f in KnobFields.model_fields.items()}
PACKED = {**DEFAULTS, "workload": {"kind": "dpo"}, "batching": "packed", "attention": "flash"}
SPLIT = {**PACKED, "batching": "padded", "sequence_parallel": 2}


@pytest.mark.parametrize(
    ("name", "release", "knobs", "refused"),
    [
        ("trl", "", PACKED, "dpo_trainer.py:732-739"),  # 0.29+: padding_free set back to False
        ("trl", "0.22", PACKED, "v0.29.1 :575-582"),
        ("trl-0", "", PACKED, "v0.29.1 :575-582"),
        ("trl", "0.19", PACKED, None),  # v0.19.0 dpo_trainer.py:1285 flattens the rows
        ("trl", "0.14", PACKED, None),
        ("trl", "0.19", SPLIT, "dpo_trainer.py:971-972"),  # no TRL DPO splits a row over ranks
        ("swift", "", PACKED, None),  # rlhf_args.py:710-717
        ("swift", "", SPLIT, None),  # rlhf_args.py:719-725
        ("swift", "3.7", SPLIT, None),
        ("swift", "3.9", SPLIT, None),  # v3.9.0 rlhf_args.py:376 (grpo, dpo)
        ("swift", "3.4", PACKED, "from v3.6.0"),
        ("llamafactory", "", PACKED, "loader.py:200-201"),
        ("axolotl", "", PACKED, "validation.py:705-708"),
        ("memplan", "", PACKED, "padded"),
        ("swift", "3.4", SPLIT, "sequence parallel from v3.7.0"),
        ("trl", "", SPLIT, "dpo_trainer.py:971-972"),
    ],
)
def test_dpo_padding_free_and_sequence_parallel_by_release(name, release, knobs, refused):
    got = adapter(name, release).cannot({**knobs, "release": release})
    if refused is None:
        assert got is None
    else:
        assert got is not None and got[0] in ("batching", "sequence_parallel") and refused in got[1]


@pytest.mark.parametrize(("pin", "planned"), [("trl==1.16.0", "padded"), ("trl==0.19.1", "packed")])
def test_a_trl_dpo_config_with_padding_free_is_planned_as_its_release_runs_it(tmp_path, pin, planned):
    """TRL 0.29+ warns and pads (trl 1.16.0 dpo_trainer.py:732-739): the reading plans padded rows and says why."""
    (tmp_path / "dpo.yaml").write_text(
        "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\nmax_length: 1024\npadding_free: true\n"
        "attn_implementation: flash_attention_2\n"
    )
    (tmp_path / "run.sh").write_text("trl dpo --config dpo.yaml\n")
    (tmp_path / "requirements.txt").write_text(pin + "\n")
    reading = intake.read([str(tmp_path / f) for f in ("run.sh", "dpo.yaml", "requirements.txt")])
    value = {s.field: s.value for s in reading.settings}
    assert value["workload.kind"] == "dpo" and value.get("batching", "padded") == planned
    assert any("sets padding_free back to False" in n for n in reading.unplanned) == (planned == "padded")


KTO_PACKED = {**PACKED, "workload": {"kind": "kto"}}
KTO_SPLIT = {**SPLIT, "workload": {"kind": "kto"}}


@pytest.mark.parametrize(
    ("name", "release", "knobs", "refused"),
    [
        ("swift", "", KTO_PACKED, None),  # 4.6.0 rlhf_args.py:710-717 lists kto
        ("swift", "3.9", KTO_PACKED, None),  # v3.9.0 rlhf_args.py:368 adds kto
        ("swift", "3.9", KTO_SPLIT, "v3.9.0 :376"),
        ("swift", "3.7", KTO_PACKED, "from v3.9.0"),  # the 3.7 line holds 3.7-3.8, which list grpo, dpo, gkd
        ("swift", "3.4", KTO_PACKED, "from v3.9.0"),
        ("swift", "", KTO_SPLIT, "rlhf_args.py:719-725"),  # grpo and dpo only
        ("trl", "", KTO_PACKED, "kto_config.py"),
        ("trl", "", KTO_SPLIT, "kto_trainer.py:981-982"),
        ("llamafactory", "", KTO_PACKED, "loader.py:200-201"),
    ],
)
def test_kto_padding_free_and_sequence_parallel_by_release(name, release, knobs, refused):
    test_dpo_padding_free_and_sequence_parallel_by_release(name, release, knobs, refused)


@pytest.mark.parametrize(
    ("pin", "planned"),
    [
        ("ms-swift==3.8.0", "padded"),
        ("ms-swift==3.9.0", "packed"),
        ("ms-swift==3.12.6", "packed"),
        ("ms-swift==4.6.0", "packed"),
    ],
)
def test_an_ms_swift_kto_script_with_padding_free_is_planned_as_its_release_runs_it(tmp_path, pin, planned):
    """ms-swift adds kto to padding_free's types at v3.9.0 (swift/llm/argument/rlhf_args.py:368): before, the reading
    plans padded rows and says why."""
    (tmp_path / "run.sh").write_text(
        "swift rlhf --rlhf_type kto --model Qwen/Qwen2.5-0.5B-Instruct --padding_free true --attn_impl flash_attn\n"
    )
    (tmp_path / "requirements.txt").write_text(pin + "\n")
    reading = intake.read([str(tmp_path / f) for f in ("run.sh", "requirements.txt")])
    value = {s.field: s.value for s in reading.settings}
    assert value["workload.kind"] == "kto" and value.get("batching", "padded") == planned
    assert any("from v3.9.0" in n for n in reading.unplanned) == (planned == "padded")


def test_a_trl_kto_config_with_padding_free_is_planned_padded_with_trls_line(tmp_path):
    """KTOConfig has no padding_free at any release: the reading plans padded rows and says so in one line."""
    (tmp_path / "kto.yaml").write_text(
        "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\nmax_length: 1024\npadding_free: true\n"
        "attn_implementation: flash_attention_2\n"
    )
    (tmp_path / "run.sh").write_text("trl kto --config kto.yaml\n")
    reading = intake.read([str(tmp_path / f) for f in ("run.sh", "kto.yaml")])
    value = {s.field: s.value for s in reading.settings}
    assert value["workload.kind"] == "kto" and value["batching"] == "padded"
    assert any("KTOConfig has no padding_free" in n and "planned padded" in n for n in reading.unplanned)
