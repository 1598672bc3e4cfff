"""Framework releases (Framework.releases, planner.config.release): a release is named by its line, an alias or a
version inside a line, a bad one is one line naming what is accepted, and `--framework NAME@RELEASE` plans in that
release's terms: TRL 0.14's GRPO micro-batch counts prompts (x num_generations completions), 0.14-0.18 keep a reference
model (beta 0.04), 0.x's max_completion_length is 256; ms-swift 3 writes --train_type."""

import json

import pytest

from planner import advise
from planner.config.requests import CheckRequest, SuggestRequest
from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS, adapter, frameworks_json
from planner.frameworks.base import MEANINGS
from tests.planner.cli.helpers import one_line_error, planner

GRPO = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 8, "evidence": "analytic"}


@pytest.mark.parametrize(
    ("text", "line"),
    [("", "1.15"), ("0.14", "0.14"), ("0.14.2", "0.14"), ("v0.17.0", "0.15"), ("0.18.2", "0.15"), ("0.19.1", "0.19"),
     ("0.29.1", "0.22"), ("0", "0.22"), ("1.2.0", "1.0"), ("1.6.0", "1.6"), ("1.13.0", "1.10"), ("1.14.2", "1.14"), ("1.16.0", "1.15"), ("qwen2vl-grpo", "r1-v"), ("vlm-r1", "vlm-r1")],
)  # fmt: skip
def test_a_trl_release_is_its_line_an_alias_or_a_version_inside_a_line(text, line):
    assert FRAMEWORKS["trl"].release(text).name == line


@pytest.mark.parametrize("text", ["0.13", "0.13.9", "banana", "latest"])
def test_a_release_memplan_does_not_list_is_one_line_naming_the_accepted(text):
    with pytest.raises(BadInput) as e:
        FRAMEWORKS["trl"].release(text)
    msg = str(e.value)
    assert "\n" not in msg and f"no release {text!r}" in msg and "0.14, 0.15" in msg and "r1-v" in msg
    assert "or a version from 0.14" in msg and e.value.field == "framework"


@pytest.mark.parametrize("name,text", [("hf", "\n"), ("memplan", "\n"), ("trl", "0.1\r4")])
def test_a_release_holding_a_line_break_is_still_a_one_line_error(name, text):
    """Hypothesis found `--framework hf@\\n` echoed raw, a two-line error (test_advise_suggest, 2026-12-04)."""
    with pytest.raises(BadInput) as e:
        FRAMEWORKS[name].release(text)
    msg = str(e.value)
    assert "\n" not in msg and "\r" not in msg and msg.startswith(f"--framework {name}@{repr(text)[1:-1]}: ")


def test_every_release_cites_where_it_was_read_and_means_only_known_things():
    for f in FRAMEWORKS.values():
        for r in f.releases:
            assert r.source and (r.first is not None or r.aliases or "@" in r.source or " " in r.source)
            for d in (*r.defaults.values(), *r.workload.values()):
                assert ".py:" in d.source or ".yaml:" in d.source, (f.name, r.name, d.source)  # verl's are YAML
            assert set(r.meaning) <= set(MEANINGS)
        firsts = [r.first for r in f.releases if r.first is not None]
        assert firsts == sorted(firsts), f.name  # lines oldest first: a version falls in the last line at or below


def test_trl_0_is_trl_0_22_by_its_old_name():
    old, line = FRAMEWORKS["trl-0"], adapter("trl", "0.22")
    assert (old.runs, old.sft_head, old.rules, old.defaults) == (line.runs, line.sft_head, line.rules, line.defaults)
    assert adapter("trl").sft_head == "fused-logprob" and old.sft_head == "recipe"


def test_the_request_is_made_memplans_once_and_a_dump_reads_back_the_same():
    body = {**GRPO, "micro_batch": 2, "framework": "trl@0.14.1", "workload": {"kind": "grpo", "num_generations": 4}}
    req = CheckRequest.model_validate(body)
    assert (req.framework, req.release, req.micro_batch) == ("trl", "0.14", 8)  # 2 prompts x 4 completions
    assert (req.workload.beta, req.workload.max_completion_length) == (0.04, 256)
    again = CheckRequest.model_validate(req.model_dump())
    assert (again.micro_batch, again.release, again.workload.beta) == (8, "0.14", 0.04)
    # the newest, by its version: the same request as plain trl
    assert CheckRequest.model_validate({**body, "framework": "trl@1.16.0"}).release == ""
    with pytest.raises(BadInput, match="give the release once"):
        advise.parse(CheckRequest, {**body, "release": "0.19"})


def test_a_grpo_run_planned_by_its_release_is_the_run_it_starts():
    """trl@0.14 with 1 prompt of 8 a device is trl with 8 completions, a reference model and 256-token completions:
    the same memory, where the newest release's reading of the same numbers (1 completion, no reference) is less."""
    work = {"kind": "grpo", "num_generations": 8, "max_prompt_length": 512}
    old = advise.check(
        advise.parse(CheckRequest, {**GRPO, "micro_batch": 1, "framework": "trl@0.14", "workload": work})
    )
    same = {**work, "beta": 0.04, "max_completion_length": 256, "logprobs": "full"}  # 0.14 scored the whole logits
    new = advise.check(advise.parse(CheckRequest, {**GRPO, "micro_batch": 8, "framework": "trl", "workload": same}))
    naive = advise.check(advise.parse(CheckRequest, {**GRPO, "micro_batch": 1, "framework": "trl", "workload": work}))
    assert old.plan.micro_batch == 8 and old.plan.knobs.release == "0.14"
    assert old.plan.memory.peak_allocated_bytes == new.plan.memory.peak_allocated_bytes
    assert naive.plan.memory.peak_allocated_bytes < old.plan.memory.peak_allocated_bytes


def test_suggest_under_a_release_counting_prompts_ranks_only_whole_prompts():
    body = {**GRPO, "global_batch": 8, "framework": "trl@0.14", "workload": {"kind": "grpo", "num_generations": 4}}
    req = advise.parse(SuggestRequest, body)
    assert req.global_batch == 32  # 8 prompts of 4
    plans = advise.suggest(req, with_nearest=False).plans
    assert plans and all(p.micro_batch % 4 == 0 and p.knobs.release == "0.14" for p in plans)
    assert advise.parse(SuggestRequest, {**body, "framework": "trl@0.15"}).global_batch == 8  # completions there


def test_ms_swift_3_writes_its_own_tuner_flag(tmp_path):
    body = {"model": "qwen2.5-0.5b", "gpu": "rtx4090", "gpus_per_node": 2, "global_batch": 16, "seq_len": 1024}
    for fw, flag in (("swift@3.8.1", "--train_type lora"), ("swift", "--tuner_type lora")):
        out = tmp_path / fw
        r = planner("suggest", *_flags(body), "--lora-rank", "8", "--framework", fw, "--emit", str(out))
        assert r.returncode == 0, r.stderr
        text = (out / "swift_train.sh").read_text()
        assert flag in text and ("--tuner_type" in text) == (fw == "swift")


def _flags(body: dict) -> list[str]:
    return [x for k, v in body.items() for x in (f"--{k.replace('_', '-')}", str(v))]


def test_the_cli_takes_name_at_release_and_lists_releases():
    r = planner("check", *_flags({**GRPO, "micro_batch": 1}), "--workload", "grpo", "--framework", "trl@0.13")
    one_line_error(r, "no release '0.13'")
    assert "0.14, 0.15, 0.19, 0.22 (0), 1.0, 1.6, 1.7, 1.10, 1.14" in r.stderr
    data = json.loads(planner("frameworks", "--json").stdout)
    trl = next(f for f in data["frameworks"] if f["name"] == "trl")
    assert [x["name"] for x in trl["releases"]] == [
        "0.14",
        "0.15",
        "0.19",
        "0.22",
        "1.0",
        "1.6",
        "1.7",
        "1.10",
        "1.14",
        "1.15",
        "r1-v",
        "vlm-r1",
        "unsloth",
    ]
    first = trl["releases"][0]
    assert (
        first["meaning"] == {"grpo_batch_counts": "prompts", "fsdp_config_version": "ignored", "fsdp2_hybrid": "full"}
        and first["workload"]["beta"]["value"] == 0.04
    )
    assert frameworks_json() == data
    table = planner("frameworks").stdout
    assert "releases" in table and "r1-v" in table


def test_a_release_line_s_vllm_mode_is_no_generation_of_a_request_naming_none():
    """trl@0.19's GRPO ran vLLM on GPUs of its own when a script turned it on (use_vllm) naming no mode; a request at
    that release naming no --generation still generates with HF's generate() on the training GPUs."""
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 8, "global_batch": 16, "top": 1}
    body |= {"framework": "trl@0.19", "workload": {"kind": "grpo", "num_generations": 8}}
    assert advise.suggest(advise.parse(advise.SuggestRequest, body)).plans[0].workload.generation == "hf"
    assert FRAMEWORKS["trl"].release("0.19").workload["generation"].value == "vllm-server"
