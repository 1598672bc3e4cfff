"""OpenRLHF 0.10.1 and before offload the reference and the reward model with one switch, --ref_reward_offload (v0.10.1
cli/train_ppo_ray.py:476, trainer/ray/launcher.py:113-120, :167-175), split into --ref.offload / --reward.offload at
0.10.2: a flat-line plan offloading the reference is written with the switch and reads back with both offloaded; one
offloading the reference beside a resident reward model is refused by the line's rule, before any writer runs."""

import shlex

import pytest

from planner import advise, checkconfig
from planner.errors import BadInput
from planner.export import launch
from tests.planner.export.test_rl_exports import BASE, CASES


def _body(line: str, offload: list[str], reward: str | None = None) -> dict:
    case = CASES["openrlhf"]["grpo_colocate"]
    roles = {**case["workload"]["roles"], "offload": offload, **({"reward_model": reward} if reward else {})}
    return {**BASE, **case, "workload": {**case["workload"], "roles": roles}, "framework": f"openrlhf@{line}"}


@pytest.mark.parametrize("line", ["0.8", "0.10"])
def test_a_flat_line_writes_the_one_switch_and_reads_it_back_as_both(line, tmp_path):
    res = advise.check(advise.parse(advise.CheckRequest, _body(line, ["ref"])))
    model, hw, goal = res.context
    files = launch.framework_launch(res.plan, model, hw, goal.seq_len)[1]
    words = shlex.split(files["openrlhf_ppo.sh"].replace("\\\n", " "), comments=True)
    assert words.count("--ref_reward_offload") == 1 and "--ref.offload" not in words
    (tmp_path / "openrlhf_ppo.sh").write_text(files["openrlhf_ppo.sh"])
    back = checkconfig.check_config([str(tmp_path / "openrlhf_ppo.sh")], {"gpu": "h100"}).plan
    assert {"ref", "reward"} <= set(back.workload.roles.offload)


def test_one_of_two_offloaded_is_refused_at_the_flat_lines_and_written_at_the_dotted():
    body = _body("0.10", ["ref"], reward="qwen2.5-0.5b")
    with pytest.raises(BadInput, match="--ref_reward_offload"):
        keep = ("model", "gpu", "gpus_per_node", "workload", "framework")
        ask = {**{k: body[k] for k in keep}, "global_batch": 16}
        advise.suggest(advise.parse(advise.SuggestRequest, ask), with_nearest=False)
    res = advise.check(advise.parse(advise.CheckRequest, {**body, "framework": "openrlhf"}))
    model, hw, goal = res.context
    words = launch.framework_launch(res.plan, model, hw, goal.seq_len)[1]["openrlhf_ppo.sh"].split()
    assert "--ref.offload" in words and "--reward.offload" not in words


@pytest.mark.parametrize(
    "offload,refused",
    [
        (["actor-params"], True),  # no flag offloads the weights (deepspeed_utils.py:178 leaves lp_params out)
        (["actor-optimizer"], True),  # --ds.enable_sleep offloads the critic's too
        (["actor-optimizer", "critic-optimizer"], False),
    ],
)
def test_the_trained_roles_offload_what_ds_enable_sleep_says_and_nothing_else(offload, refused):
    case = CASES["openrlhf"]["ppo_groups"]
    roles = {**case["workload"]["roles"], "offload": offload}
    ask = {"model": BASE["model"], "gpu": "h100", "gpus_per_node": 8, "global_batch": 16, "framework": "openrlhf"}
    ask["workload"] = {**case["workload"], "roles": roles}
    try:
        advise.suggest(advise.parse(advise.SuggestRequest, ask), with_nearest=False)
        said = ""
    except BadInput as e:
        said = str(e)
    assert ("--ds.enable_sleep" in said) if refused else said == "", said
