"""OpenRLHF 0.8.x's files as v0.8.9's parser takes them (tests/planner/export/test_old_releases_parse.py runs that
parser where its venv is built): --bf16 and --flash_attn are store_true switches (cli/train_ppo_ray.py:275, :282),
train_ppo_ray's lengths are --prompt_max_len and --generate_max_len (:320-321; --max_len deprecated, their sum where
unset, :44), and a GRPO script written so reads back with the prompt and completion it was planned with."""

import shlex

from planner import advise, checkconfig
from planner.config.knobfields import choices
from planner.config.spec import Knobs
from planner.export import launch
from planner.frameworks import FRAMEWORKS
from planner.frameworks.base import Where
from planner.frameworks.openrlhf.keys import KEYS
from planner.frameworks.openrlhf.writer import switch_08
from tests.planner.export.test_rl_exports import BASE, CASES


def test_an_08_grpo_script_takes_the_switches_and_the_two_lengths_and_reads_back(tmp_path):
    body = {**BASE, **CASES["openrlhf"]["grpo_colocate"], "framework": "openrlhf@0.8"}
    res = advise.check(advise.parse(advise.CheckRequest, body))
    model, hw, goal = res.context
    files = launch.files(res.plan, hw, model, goal.seq_len)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    words = shlex.split(files["openrlhf_ppo.sh"].replace("\\\n", " "), comments=True)
    after = {w: words[i + 1] if i + 1 < len(words) else "" for i, w in enumerate(words)}
    assert after["--bf16"].startswith("--") and after["--flash_attn"].startswith("--")  # switches: no value
    assert (after["--prompt_max_len"], after["--generate_max_len"]) == ("512", "1024")  # RL's lengths
    assert "--max_len" not in words and "--max_new_tokens" not in words
    back = checkconfig.check_config([str(tmp_path / "openrlhf_ppo.sh")], {"gpu": "h100"}).plan
    assert (back.workload.max_prompt_length, back.workload.max_completion_length) == (512, 1024)


def test_the_08_rules_leave_the_switches_only_their_on_value_or_eager():
    """writer.switch_08 writes --bf16 / --flash_attn or nothing, and has no refusal of its own: the rules its check()
    applies (the framework's bf16-or-fp16, the 0.8 line's no fp16, no sdpa) refuse every other precision and
    attention first, so every pair they pass is one the two switches say."""
    fw = FRAMEWORKS["openrlhf"].at("0.8")
    passed = {
        (p, a)
        for p in choices("precision")
        for a in choices("attention")
        if fw.refusal({**Knobs(precision=p, attention=a).__dict__, "release": "0.8"}, Where()) is None
    }
    assert passed == {("bf16", "flash"), ("bf16", "eager")}
    assert {switch_08("attention", KEYS["attention"].write(a)) for _, a in passed} == {"--flash_attn", ""}
