"""Issue 46: HF's --fsdp_config "version" at each transformers release (reading.MEANINGS fsdp_config_version). From
transformers 5.0 TrainingArguments hands it to accelerate's FSDP plugin (5.0.0 training_args.py:2753, 5.10.4 :2736),
so `"version": 2` is FSDP2, read; where it names none, FSDP1 through 5.9 (5.9.0 :2812) and FSDP2 from 5.10.0 (:2736). Through 4.57 it is never read (4.57.1 training_args.py:2003-2043 sets accelerate's
FSDP_* variables, no FSDP_VERSION): the run is FSDP1, the key one "not planned" line. TRL's lines before
transformers 5 (0.14-0.19, R1-V, VLM-R1) the same; TRL 0.22 on and 1.x read it."""

from pathlib import Path

import pytest

from planner import intake
from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS

HF = (
    "torchrun --nproc_per_node 8 train.py --model_name_or_path Qwen/Qwen2.5-7B --per_device_train_batch_size 2 --bf16 "
    """--fsdp "full_shard auto_wrap" --fsdp_config '{"fsdp_version": 2}'\n"""
)
GRPO = (
    "accelerate launch train_grpo.py --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct --per_device_train_batch_size 4 "
    """--num_generations 4 --fsdp full_shard --fsdp_config '{"version": 2}'\n"""
)


def _read(tmp_path: Path, pin: str, command: str):
    (tmp_path / "requirements.txt").write_text(pin + "\n")
    path = tmp_path / "run.sh"
    path.write_text(command)
    r = intake.read([str(path)])
    return {s.field: s for s in r.settings}, r


@pytest.mark.parametrize(
    ("pin", "command", "framework", "read"),
    [
        ("transformers==4.53.0", HF, "hf@4", False),
        ("transformers==4.57.1", HF, "hf@4.54", False),
        ("transformers==5.6.0", HF, "hf@5", True),
        ("transformers==5.23.0", HF, "hf", True),
        ("trl==0.14.0", GRPO, "trl@0.14", False),
        ("trl==0.19.1", GRPO, "trl@0.19", False),
        ("trl==1.2.0", GRPO, "trl@1.0", True),
    ],
)
def test_fsdp_config_version_is_read_where_the_release_reads_it(tmp_path, pin, command, framework, read):
    s, r = _read(tmp_path, pin, command)
    assert s["framework"].value == framework and s["fsdp"].value == "full"
    said = [u for u in r.unplanned if "not planned" in u and "FSDP_VERSION" in u]
    if read:
        assert not said and "FSDP1" not in s["fsdp"].source
    else:
        assert len(said) == 1 and "version 2" in said[0] and "training_args.py:2003-2043" in said[0]
        assert "FSDP1: planned as FSDP2 with the same sharding" in s["fsdp"].source


def test_every_release_of_a_transformers_4_line_says_so():
    """The meaning is declared per release: the hf lines before 5.0 and TRL's lines before 0.22 ignore the key."""
    ignored = {
        f"{name}@{r.name}"
        for name in ("hf", "trl")
        for r in FRAMEWORKS[name].releases
        if r.means("fsdp_config_version") == "ignored"
    }
    assert ignored == {"hf@4", "hf@4.54", "trl@0.14", "trl@0.15", "trl@0.19", "trl@r1-v", "trl@vlm-r1"}


def test_the_commands_fsdp_version_is_read_where_the_config_key_is_not(tmp_path):
    """FSDP_VERSION=2 before the launcher is what accelerate's plugin reads at transformers 4.x (planner.frameworks.hf
    .launchenv): hf@4 plans FSDP2, the config's "version" no longer said unplanned."""
    s, r = _read(tmp_path, "transformers==4.53.0", "FSDP_VERSION=2 " + HF)
    assert s["framework"].value == "hf@4" and s["fsdp"].value == "full" and "FSDP1" not in s["fsdp"].source
    assert not [u for u in r.unplanned if "FSDP_VERSION" in u]


@pytest.mark.parametrize(
    ("framework", "fsdp", "env"),
    [
        ("hf@4", "full", "FSDP_VERSION=2 "),
        ("hf@4.54", "grad-op", "FSDP_VERSION=2 FSDP_RESHARD_AFTER_FORWARD=false "),
        ("trl@0.19", "full", "FSDP_VERSION=2 "),
        # transformers 5 hands the key to accelerate itself; the line runs 4.56.2 too (launchenv), the variable agrees
        ("trl@0.22", "grad-op", "FSDP_VERSION=2 FSDP_RESHARD_AFTER_FORWARD=false "),
        ("hf", "full", "FSDP_VERSION=2 "),
    ],
)
def test_written_fsdp_plans_name_their_version_in_the_environment(framework, fsdp, env):
    """The command and the Slurm script of an FSDP2 plan written as HF's command set FSDP_VERSION=2 (the lines before
    transformers 5 ignore fsdp_config's "version") (and reshard_after_forward false for grad-op, which accelerate's FSDP2 reads from the environment
    alone); the release's own TrainingArguments and accelerate then build FSDP2 (tests/planner/export/validators/
    trl_validate.py fsdp_plugin, in tools/fwenv_old.sh's hf-4.53.0 and hf-4.57.1 venvs). Read back at the line: FSDP2."""
    from planner import advise
    from planner.export import launch

    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "top": 1}
    body |= {"seq_len": 1024, "framework": framework, "evidence": "analytic", "fsdp": [fsdp], "zero": [0]}
    res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    plan, (model, hw, goal) = res.plans[0], res.context
    made = launch.launch(plan, model, hw, goal.seq_len)
    assert plan.fsdp == fsdp and made.command.startswith(f"{env}torchrun ")
    files = launch.files(plan, hw, model, goal.seq_len)
    assert all(f"export {kv}\n" in files["launch.sbatch"] for kv in env.split())
    # the pin: accelerate's FSDP2 (1.6.0), and the hf 4 line from the Trainer's (4.51.0), read back at the line
    pins = files["requirements.txt"].splitlines()
    assert "accelerate>=1.6.0" in pins and ("transformers>=4.51.0,<4.54.0" in pins) == (framework == "hf@4")


@pytest.mark.parametrize("line", ["0.14", "0.15", "r1-v", "vlm-r1"])
def test_lines_before_the_trainers_fsdp2_rank_no_fsdp_plan(line):
    """TRL's lines on transformers before 4.51.0 and accelerate before 1.6.0 (trl.lines NO_FSDP2) build FSDP1 only:
    `suggest` ranks no FSDP plan there, saying why; the 0.19 line (transformers 4.53) ranks one."""
    from planner import advise

    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "top": 1}
    body |= {"seq_len": 1024, "framework": f"trl@{line}", "evidence": "analytic", "fsdp": ["full"], "zero": [0]}
    try:
        res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
        plans, said = res.plans, " ".join(map(str, getattr(res, "notes", []) or []))
    except BadInput as e:
        plans, said = [], str(e)
    assert not plans and "FSDP1 only" in said
    ok = advise.suggest(advise.parse(advise.SuggestRequest, {**body, "framework": "trl@0.19"}), with_nearest=False)
    assert ok.plans and ok.plans[0].fsdp == "full"


HF_UNSAID = HF.replace(""" --fsdp_config '{"fsdp_version": 2}'""", "")


@pytest.mark.parametrize(
    ("pin", "framework", "version"),
    [("transformers==5.0.0", "hf@5", 1), ("transformers==5.9.0", "hf@5", 1), ("transformers==5.10.0", "hf", 2)],
)
def test_an_fsdp_config_naming_no_version_is_fsdp1_through_5_9(tmp_path, pin, framework, version):
    """transformers 5.0-5.9 hand fsdp_config.get("version", 1) to accelerate's plugin (5.9.0 training_args.py:
    2812-2813), 5.10.0 on .get("version", 2) (:2736): a file pinned to 5.0-5.9 with no "version" runs FSDP1, its
    launch's FSDP_VERSION=2 overruled; one naming it is read at both (the parametrization above)."""
    for env in ("", "FSDP_VERSION=2 "):
        s, _r = _read(tmp_path, pin, env + HF_UNSAID)
        assert s["framework"].value == framework and s["fsdp"].value == "full"
        assert ("training_args.py:2812-2813" in s["fsdp"].source) == (version == 1), (pin, env, s["fsdp"].source)
        assert ("FSDP1: planned as FSDP2 with the same sharding" in s["fsdp"].source) == (version == 1)
