"""The release a run targets where the user says it beside the files (issue 47 item 7: `check --config FILE --framework
NAME@RELEASE` reads the files again with that release's defaults and meanings, each re-filled default naming the
release given), and where the files leave it open (item 1: the releases they allow, narrowed by the flags only some
releases take; each planned, the hungrier verdict answered and the release choice that decides it named). On users'
files as posted (tests/field, tests/data/frameworks/scripts)."""

from planner import checkconfig, intake
from planner.cli import build_parser, check
from planner.config.release import choice_text
from tests.planner.intake.conftest import DATA

FIELD = DATA.parents[1] / "field"
VLM_R1_REC = FIELD / "vlmr1-151-qwen25vl3b-grpo-4x4090" / "train.sh"  # VLM-R1's grpo_rec.py, its script not posted
OPEN_R1_SFT = FIELD / "openr1-506-qwen25-1.5b-sft-8xh20" / "train.sh"  # open-r1's sft.py with --max_seq_length
TRL_SFT = DATA / "scripts" / "trl" / "sft_py_full_training.sh"  # TRL's own sft.py example: no checkpointing, no bf16


def _settings(reading) -> dict:
    return {s.field: s for s in reading.settings}


def _rows(result) -> dict:
    return {r["field"]: r for r in result.config["settings"]}


def test_a_release_given_beside_the_files_refills_their_defaults_at_that_release():
    """TRL's sft.py example sets neither checkpointing nor bf16: trl 1.16 turns both on (base_config.py:62, 68);
    trl 0.15-0.18's SFTConfig subclassed TrainingArguments, both off (transformers 4.49 training_args.py:1068-1080,
    1374-1375). `--framework trl@0.15` reads the file again at 0.15, each re-filled default naming the release given."""
    flags = {"gpu": "a10", "model": "qwen2.5-0.5b"}
    newest = checkconfig.check_config([str(TRL_SFT)], flags)
    old = checkconfig.check_config([str(TRL_SFT)], {**flags, "framework": "trl@0.15"})
    rows = _rows(old)
    assert (newest.plan.checkpointing, newest.plan.precision) == ("full", "bf16")
    assert (old.plan.checkpointing, old.plan.precision, old.plan.knobs.release) == ("off", "fp32", "0.15")
    for field in ("checkpointing", "optimizer"):
        assert (
            rows[field]["source"].startswith("trl@0.15 default (")
            and "(--framework trl@0.15, given)" in (rows[field]["source"])
        ), rows[field]
    assert "--framework trl@0.15, given" in rows["framework"]["source"]
    assert old.plan.memory.grads_bytes > newest.plan.memory.grads_bytes  # fp32 grads where bf16 AMP kept none apart
    assert "releases" not in old.config  # the user decided the release: no sweep


def test_trl_0_is_read_at_its_line():
    """`--framework trl-0` (trl@0.22 by its old name) beside TRL's example reads it at 0.22: checkpointing on from
    0.22's SFTConfig (sft_config.py:111-116), the 0.x adapter (SFT's loss from the full logits) planned."""
    r = intake.read([str(TRL_SFT)], given={"framework": "trl-0", "model": "qwen2.5-0.5b"})
    s = _settings(r)
    assert s["framework"].value == "trl@0.22" and "--framework trl-0, given" in s["framework"].source
    assert s["checkpointing"].source.startswith("trl@0.22 default (trl v0.22.0") and "sft_config.py:111-116" in (
        s["checkpointing"].source
    )
    out = checkconfig.check_config([str(TRL_SFT)], {"gpu": "a10", "model": "qwen2.5-0.5b", "framework": "trl-0"})
    assert out.plan.knobs.framework == "trl-0" and "releases" not in out.config


def test_trl_0_14_counts_the_posted_batch_in_prompts_and_keeps_a_reference_model():
    """The VLM-R1 REC script (4 generations, --per_device_train_batch_size 1) given --framework trl@0.14: the batch is
    prompts (trl v0.14.0 grpo_trainer.py:335,417), 4 completions a micro-batch; beta 0.04 (grpo_config.py:173-174)."""
    r = intake.read([str(VLM_R1_REC)], given={"framework": "trl@0.14"})
    s = _settings(r)
    assert s["workload.beta"].value == 0.04 and "(--framework trl@0.14, given)" in s["workload.beta"].source
    assert s["workload.max_completion_length"].value == 256 and r.releases == ()
    out = checkconfig.check_config([str(VLM_R1_REC)], {"gpu": "rtx4090", "framework": "trl@0.14"})
    assert out.plan.micro_batch == 4 and out.plan.knobs.release == "0.14" and out.plan.workload.beta == 0.04


def test_the_framework_name_alone_keeps_the_release_the_files_show():
    """--framework trl names no release: the files' choice stays open (read at vlm-r1, both lines planned, the
    hungrier r1-v answered)."""
    r = intake.read([str(VLM_R1_REC)])
    planned = checkconfig.check_config([str(VLM_R1_REC)], {"gpu": "rtx4090", "framework": "trl"})
    assert _settings(r)["framework"].value == "trl@vlm-r1" and planned.config["releases"]["read"] == "vlm-r1"
    assert planned.plan.knobs.release == "r1-v"


def test_a_flag_only_older_releases_take_narrows_the_releases_and_the_newest_of_them_is_assumed():
    """open-r1's sft.py run with --max_seq_length, which SFTConfig dropped at v0.20.0: the files allow trl 0.14 to
    0.19 (not today's 1.x, whose SFT loss is the fused head), and 0.19 is assumed, said with the flag that narrowed it."""
    r = intake.read([str(OPEN_R1_SFT)])
    s = _settings(r)["framework"]
    assert r.releases == ("0.14", "0.15", "0.19") and s.value == "trl@0.19"
    assert "release assumed: TRL (SFT, DPO, GRPO trainers) 0.19, the newest of 0.14, 0.15, 0.19" in s.source
    assert "train.sh:7 --max_seq_length 16384: taken by" in s.source


def test_where_the_releases_the_files_allow_disagree_the_hungrier_verdict_is_answered_and_named():
    """VLM-R1's grpo_rec.py ran Qwen2VLGRPOTrainer (a batch of prompts, each sampled num_generations times) until
    0586aee, then VLMGRPOTrainer (completions); the posted script's trainer is not among the files. On 4 x A100 80G the
    VLMGRPOTrainer run fits and the early one does not: the verdict is "does NOT fit", with trl@r1-v named."""
    out = checkconfig.check_config([str(VLM_R1_REC)], {"gpu": "a100-80gb"})
    releases = out.config["releases"]
    assert (releases["allowed"], releases["fits"], releases["does_not_fit"]) == (
        ["vlm-r1", "r1-v"],
        ["vlm-r1"],
        ["r1-v"],
    )
    assert releases["planned"] == "r1-v" and not out.plan.fits and out.plan.micro_batch == 4
    assert checkconfig.check_config([str(VLM_R1_REC)], {"gpu": "a100-80gb", "framework": "trl@vlm-r1"}).plan.fits
    line = choice_text("trl", releases)
    assert line.startswith(" with trl@r1-v (the files allow vlm-r1, r1-v") and "it fits with trl@vlm-r1" in line
    _, by_cli = check.gather(build_parser().parse_args(["check", "--config", str(VLM_R1_REC), "--gpu", "a100-80gb"]))
    assert check._verdict(by_cli).startswith("does NOT fit with trl@r1-v (")


def test_where_every_release_the_files_allow_agrees_the_hungriest_is_answered_and_named():
    """On the 4 x RTX 4090 the user ran (out of memory), neither trainer fits: the plan answered is the hungrier line's
    (r1-v: a batch of prompts, each sampled num_generations times), named though the files were read at vlm-r1; where
    the line read is the hungriest, the verdict names none."""
    out = checkconfig.check_config([str(VLM_R1_REC)], {"gpu": "rtx4090"})
    releases = out.config["releases"]
    assert releases["fits"] == [] and (releases["planned"], releases["read"]) == ("r1-v", "vlm-r1")
    assert not out.plan.fits and out.plan.knobs.release == "r1-v"
    read = checkconfig.check_config([str(VLM_R1_REC)], {"gpu": "rtx4090", "framework": "trl@vlm-r1"})
    assert out.plan.memory.device_total_bytes > read.plan.memory.device_total_bytes
    assert choice_text("trl", releases).startswith(
        " with trl@r1-v, the hungriest of the lines the files allow (vlm-r1, r1-v, pin none; none fits"
    )
    assert choice_text("trl", {**releases, "read": "r1-v"}) == ""
