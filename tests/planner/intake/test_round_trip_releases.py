"""Round trip at a release (issue 46): `suggest --framework F@R --emit` writes release R's keys and pins R
(requirements.txt), and `check --config` on what it wrote reads R and the same plan; a setting R has no key for is
refused in one line and never ranked; the lines read but not written say so."""

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from planner import advise, checkconfig
from planner.errors import BadInput
from planner.export import launch
from planner.frameworks import FRAMEWORKS
from tests.planner.intake.test_round_trip import knobs_read_back

GRPO = {"workload": {"kind": "grpo", "num_generations": 4}}


def kind(body: dict) -> str:
    return body.get("workload", {}).get("kind", "lora" if "lora_rank" in body else "sft")


# each framework whose files its release changes, with a plan it runs at every line: LLaMA-Factory's and ms-swift's
# LoRA, TRL's GRPO (0.14 counts the batch in prompts) and SFT, OpenRLHF's SFT and DPO (flat flags at 0.10); ms-swift 2.x and
# OpenRLHF 0.9.x are read, never written (their writers refuse them); verl's SFT: test_verl_0_6_sft_script_composes...
LORA = {"lora_rank": 8, "seq_len": 1024}
DPO = {"workload": {"kind": "dpo", "max_length": 1024}}
AT_RELEASES = (
    ("llamafactory", LORA),
    ("swift", LORA),
    ("trl", GRPO),
    # TRL's SFT: the same TrainingArguments flags as HF's Trainer, read back as TRL's by memplan's requirements.txt
    # (pins.planned_for), its loss TRL's (the fused head from 1.0, the full logits before)
    ("trl", {"seq_len": 1024}),
    ("openrlhf", {"seq_len": 1024}),
    ("openrlhf", DPO),
)
# LLaMA-Factory's bool flash_attn (to v0.6.3) spells flash and eager, no sdpa (keys.py OLD_FLASH_ATTN: False is eager)
NO_SDPA = {("llamafactory", "0.5"), ("llamafactory", "0.6")}
# OpenRLHF 0.8.x's attention is its --flash_attn switch (flash-attn or eager): the search's sdpa is not written there
AT_08 = {"attention": ["flash"]}
LINES = [
    (fw, r.name, {**extra, **(AT_08 if (fw, r.name) == ("openrlhf", "0.8") else {})})
    for fw, extra in AT_RELEASES
    for r in FRAMEWORKS[fw].releases
    if r.first is not None and (fw, r.name) not in (("swift", "2"), ("openrlhf", "0.9"))
]


@pytest.mark.parametrize(("framework", "line", "extra"), LINES, ids=[f"{f}@{r}-{kind(x)}" for f, r, x in LINES])
def test_a_plan_written_at_a_release_reads_back_at_that_release(framework, line, extra, tmp_path):
    """Issue 46: `suggest --framework F@R --emit` writes release R's keys and pins R (requirements.txt), so `check
    --config` on what it wrote reads R and the same plan: the split, every knob, the same peak. The smallest catalog
    model: a line costs a plan and a reading (~0.2 s)."""
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "top": 1, **extra}
    body |= {"framework": f"{framework}@{line}", "evidence": "analytic"}
    body |= {"attention": ["eager"]} if (framework, line) in NO_SDPA else {}
    res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    plan, (model, hw, goal) = res.plans[0], res.context
    files = launch.files(plan, hw, model, goal.seq_len)
    if launch.exporter(framework) is None:  # HF's command, as the web page and the API hand it out
        files["command.sh"] = f"#!/bin/bash\n{launch.with_launch(plan, model, hw, goal).launch.command}\n"
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    main = next((n for n in (launch.LAUNCH_NAME, "command.sh") if n in files), next(iter(files)))
    back = checkconfig.check_config([str(tmp_path / main)], {"gpu": "h100"}).plan
    assert back.release == plan.release == FRAMEWORKS[framework].line(line)
    assert (back.micro_batch, back.grad_accum, back.world_size) == (plan.micro_batch, plan.grad_accum, 2)
    assert dict(back.knobs) == knobs_read_back(plan, files)
    assert back.memory.peak_allocated_bytes == plan.memory.peak_allocated_bytes


RL = {"workload": {**GRPO["workload"], "roles": {"rollout_memory": 0.8}}}
VERL_CONFIGS = Path(__file__).resolve().parents[2] / "data" / "verl_configs"  # v0.6.0's and v0.6.1's (SOURCE.md)
COMPOSE = """import sys
from hydra import compose, initialize_config_dir
with initialize_config_dir(config_dir=sys.argv[1], version_base=None):
    cfg = compose(config_name="sft_trainer_engine", overrides=sys.argv[2:])
print("OK", cfg.optim.lr, cfg.trainer.total_epochs)
"""


def _compose(python: str, tag: str, script: str) -> subprocess.CompletedProcess:
    """verl's Hydra composing `script`'s overrides (after `-m verl.trainer.sft_trainer`) over the config at `tag`."""
    toks = shlex.split(script.replace("\\\n", " "), comments=True)
    overrides = toks[toks.index("-m") + 2 :]
    cmd = [python, "-c", COMPOSE, str(VERL_CONFIGS / tag), *overrides]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("lora", [0, 8])
def test_verl_0_6_sft_script_composes_over_the_lines_own_configs(lora):
    """Issue 46: verl 0.6's SFT line is written, less the keys its configs lack (writer.py SFT_LEFT_OUT:
    optim.optimizer_impl, optim.optimizer from v0.6.1, trainer.nnodes from v0.7.0). memplan reads no verl SFT script,
    so the round trip is verl's own Hydra (MEMPLAN_VERL_PYTHON): the script's overrides compose over v0.6.0's and
    v0.6.1's sft_trainer_engine.yaml (struct mode refuses a key the config lacks), and the newest line's script does
    not compose over v0.6.0's. Another optimizer than torch's AdamW is never ranked at the line (its rule)."""
    python = os.environ.get("MEMPLAN_VERL_PYTHON")
    if not python:
        pytest.skip("MEMPLAN_VERL_PYTHON is not set: the python of a venv with verl (its Hydra) runs this check")
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "top": 1}
    body |= {"seq_len": 1024, "evidence": "analytic", "lora_rank": lora}
    scripts = {}
    for line in ("0.6", ""):
        res = advise.suggest(advise.parse(advise.SuggestRequest, {**body, "framework": f"verl@{line}".rstrip("@")}))
        plan, (model, hw, goal) = res.plans[0], res.context
        assert (plan.release, plan.workload.kind) == (line, "sft")
        scripts[line] = launch.files(plan, hw, model, goal.seq_len)["verl_sft.sh"]
    fused = {**body, "framework": "verl@0.6", "optimizer": "adamw-fused"}
    with pytest.raises(BadInput, match="builds torch's AdamW alone"):
        advise.suggest(advise.parse(advise.SuggestRequest, fused))
    assert "optim.optimizer_impl" not in scripts["0.6"] and "optim.optimizer_impl" in scripts[""]
    for tag in ("v0.6.0", "v0.6.1"):
        run = _compose(python, tag, scripts["0.6"])
        assert run.returncode == 0 and run.stdout.startswith("OK"), (tag, run.stderr[-3000:])
    newest = _compose(python, "v0.6.0", scripts[""])
    assert newest.returncode != 0 and "optimizer_impl" in newest.stderr, newest.stderr[-3000:]


@pytest.mark.parametrize(
    ("framework", "line", "script", "old_flag"),
    [("openrlhf", "0.10", "openrlhf_ppo.sh", "--micro_train_batch_size"), ("verl", "0.6", "verl_ppo.sh", "")],
)
def test_an_older_lines_rl_script_reads_back_as_the_newest_ones(framework, line, script, old_flag, tmp_path):
    """OpenRLHF 0.10's GRPO script names every flag flat (--micro_train_batch_size, --pretrain: keys.py renames);
    verl 0.6's takes the same keys as 0.9.1's (each checked in v0.6.0's config). Each reads back at its line as the
    newest's script reads back at the newest: the same split, knobs and peak (both readings fill in the same roles'
    defaults)."""
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 8, "global_batch": 64, "top": 1}
    body |= {"evidence": "analytic", **RL}
    backs = {}
    for at in (line, ""):
        res = advise.suggest(
            advise.parse(advise.SuggestRequest, {**body, "framework": f"{framework}@{at}".rstrip("@")})
        )
        plan, (model, hw, goal) = res.plans[0], res.context
        files = launch.files(plan, hw, model, goal.seq_len)
        folder = tmp_path / (at or "newest")
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text)
        assert not old_flag or (old_flag in files[script]) == bool(at)
        backs[at] = checkconfig.check_config([str(folder / script)], {"gpu": "h100"}).plan
    old, new = backs[line], backs[""]
    assert (old.release, new.release) == (line, "")
    assert {**dict(old.knobs), "release": ""} == dict(new.knobs) and old.split_text == new.split_text
    assert old.memory.peak_allocated_bytes == new.memory.peak_allocated_bytes


UNWRITTEN = [
    ("swift@2", LORA, "ms-swift 2.x scripts are read, not written"),
    ("openrlhf@0.9", {"seq_len": 1024}, "OpenRLHF 0.9.x scripts are read, not written"),
    ("openrlhf@mm-eureka", {"seq_len": 1024}, "MM-Eureka's launch scripts are read, not written"),
    ("openrlhf@lmm-r1", {"seq_len": 1024}, "LMM-R1's launch scripts are read, not written"),
    ("openrlhf@mm-eureka-internvl", {"seq_len": 1024}, "MM-Eureka's internvl branch's launch scripts are read"),
    ("openrlhf@lmm-r1-dev", {"seq_len": 1024}, "LMM-R1 dev's launch scripts are read, not written"),
    ("openrlhf@openrlhf-m", {"seq_len": 1024}, "OpenRLHF-M's launch scripts are read, not written"),
    ("verl@0.5", RL, "verl 0.2.x-0.3.x have no FSDP2"),
    ("swift@3", GRPO, "GRPO scripts are read, not written"),
    # sdpa asked: with no attention named the search tries the line's own, eager (test_release_attention.py)
    ("openrlhf@0.8", {"seq_len": 1024, "attention": ["sdpa"]}, "OpenRLHF 0.8.x's --bf16 and --flash_attn are switches"),
    ("verl@0.6", {"workload": {"kind": "ppo", "roles": {"reward_model": "qwen2.5-0.5b"}}}, "reward model is an FSDP"),
]


@pytest.mark.parametrize(("framework", "body", "says"), UNWRITTEN)
def test_a_line_read_but_not_written_is_never_ranked_and_says_so_in_one_line(framework, body, says):
    """Lines whose versions take no one file (their flags moved inside the line, or a key the writer needs came
    later): `suggest` at the line ranks no plan and says why in one line (the line's rule of scope "written"); `check`
    at the line still plans, with its alternatives (a user's own file of the line is read and planned), and its writer
    refuses that plan in one line naming the release, so launch() carries HF's material with that note."""
    req = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 8, "global_batch": 64, "top": 1, **body}
    req |= {"framework": framework, "evidence": "analytic"}
    with pytest.raises(BadInput, match=says) as e:
        advise.suggest(advise.parse(advise.SuggestRequest, req))
    assert "\n" not in str(e.value)
    one = {k: v[0] if isinstance(v, list) else v for k, v in req.items() if k not in ("global_batch", "top")}
    one |= {"micro_batch": 1}
    one |= {"fsdp": "full"} if framework.startswith("verl") else {}
    res = advise.check(advise.parse(advise.CheckRequest, one))
    assert res.plan.release == framework.split("@")[1] and res.suggestions  # alternatives to edit the user's file by
    with pytest.raises(ValueError, match=says) as e:
        launch.framework_launch(res.plan, *res.context[:2], 1024)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(("line", "flags", "setting"), [("0.8", {"loss": "fused"}, "--loss fused"),
    ("0.7.1", {"checkpointing": "offload-inputs"}, "--checkpointing offload-inputs"),
    ("0.5", {"precision": "bf16-pure"}, "--precision bf16-pure")])  # fmt: skip
def test_a_setting_an_older_release_has_no_key_for_is_refused_in_one_line(line, flags, setting):
    """The release's rules (planner.frameworks.llamafactory.lines) refuse it before any file is written, and the
    search ranks no plan with it; the newest line writes each."""
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "micro_batch": 1, "seq_len": 1024, **flags}
    with pytest.raises(BadInput) as e:
        advise.check(advise.parse(advise.CheckRequest, {**body, "framework": f"llamafactory@{line}"}))
    assert "\n" not in str(e.value) and f"release {line}" in str(e.value) and setting in str(e.value)
    res = advise.check(advise.parse(advise.CheckRequest, {**body, "framework": "llamafactory"}))
    assert launch.framework_launch(res.plan, *res.context[:2], 1024)[1]["llamafactory_train.yaml"]


@pytest.mark.parametrize("line", ["0.5", "0.6", "0.8"])
def test_suggest_at_an_older_release_ranks_only_plans_its_yaml_writes(line):
    """Issue 46 item 4 at a release: offered every value the lines differ on, the search at an older line ranks none it
    has no key or word for (fused loss, checkpointing offload-inputs, pure bf16 at 0.5, flash_attn's words), and every plan it
    ranks is written in the line's own files, never refused; the newest line ranks the fused loss."""
    space = {"loss": ["standard", "fused"], "checkpointing": ["off", "full", "offload-inputs"]}
    space |= {"attention": ["sdpa", "flash", "eager"], "precision": ["bf16", "bf16-pure"]}
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "seq_len": 1024, "top": 20}
    body |= {"framework": f"llamafactory@{line}", "evidence": "analytic", **space}
    res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    refused = {r.field for r in FRAMEWORKS["llamafactory"].at(line).rules[2:]}
    assert res.plans and "loss" in refused and "checkpointing_offload" in refused
    for plan in res.plans:
        assert plan.loss == "standard" and plan.checkpointing != "offload-inputs", plan.recipe
        assert plan.attention in (("flash", "eager") if line in ("0.5", "0.6") else ("sdpa", "flash"))
        assert plan.precision == "bf16" or line != "0.5"
        text = launch.framework_launch(plan, *res.context[:2], 1024)[1]["llamafactory_train.yaml"]
        assert f"llamafactory@{line}" in text
    newest = advise.suggest(advise.parse(advise.SuggestRequest, {**body, "framework": "llamafactory"}))
    assert {p.loss for p in newest.plans} == {"standard", "fused"}


def test_trl_before_0_18_writes_no_vllm_mode_and_refuses_what_needs_it(tmp_path):
    """TRL's vllm_mode came in v0.18.0 (GRPO_SPANS): a trl@0.15 GRPO plan on a vLLM server writes use_vllm alone (the
    one mode then) and reads back as written; colocated vLLM and --num-iterations 2 have no key at 0.15, refused in
    one line naming the release (planner.frameworks.trl.lines), while trl@0.19 writes vllm_mode."""
    work = {**GRPO["workload"], "generation": "vllm-server"}
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "top": 1}
    body |= {"evidence": "analytic", "workload": work}
    for line, has_mode in (("0.15", False), ("0.19", True)):
        res = advise.suggest(advise.parse(advise.SuggestRequest, {**body, "framework": f"trl@{line}"}))
        plan, (model, hw, goal) = res.plans[0], res.context
        args = launch.export.hf_args(plan, model, hw)
        assert args["use_vllm"] is True and ("vllm_mode" in args) == has_mode
        files = {
            **launch.files(plan, hw, model, goal.seq_len),
            "command.sh": launch.with_launch(plan, model, hw, goal).launch.command,
        }
        folder = tmp_path / line
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text)
        back = checkconfig.check_config([str(folder / "command.sh")], {"gpu": "h100"}).plan
        assert (back.release, back.workload.generation) == (plan.release, "vllm-server") == (line, "vllm-server")
        assert back.memory.peak_allocated_bytes == plan.memory.peak_allocated_bytes
    for change in ({"generation": "vllm-colocate"}, {"num_iterations": 2}):
        req = {"model": "qwen2.5-0.5b", "gpu": "h100", "micro_batch": 8, "framework": "trl@0.15"}
        with pytest.raises(BadInput) as e:
            advise.check(advise.parse(advise.CheckRequest, {**req, "workload": {**work, **change}}))
        assert "\n" not in str(e.value) and "release 0.15's GRPOConfig has no" in str(e.value)


SHOWN = {u[0] for u in UNWRITTEN}
EVERY_LINE = [
    (name, line, extra)
    for name, fw in FRAMEWORKS.items()
    for line in ["", *(r.name for r in fw.releases if r is not fw.newest)]
    for extra in ({"seq_len": 1024}, GRPO if name not in ("verl", "openrlhf") else RL)
    if kind(extra) in fw.at(line).runs.get("workload", ("sft",))
]
# torchtitan 0.3.0 defines its own families (the smallest catalog one) and runs flash attention on packed rows only
OWN = {"torchtitan": {"model": "qwen3-8b", "attention": ["flash"], "batching": ["packed"]}}


@pytest.mark.parametrize(
    ("framework", "line", "extra"), EVERY_LINE, ids=[f"{f}@{r}-{kind(x)}" for f, r, x in EVERY_LINE]
)
def test_suggest_at_every_line_ranks_only_plans_its_writer_writes(framework, line, extra):
    """Issue 46 item 4 at every framework x release line (one small model, one shape, SFT and GRPO where it runs
    them, ZeRO and FSDP offered): every plan `suggest` ranks is written in the line's own files (no fallback to HF's
    material); a line whose writer writes no such plan ranks none and says so in one line."""
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, **OWN.get(framework, {})}
    body |= {"top": 6, **extra, "zero_stage": [0, 2, 3], "fsdp": ["off", "full"], "evidence": "analytic"}
    body |= {"attention": ["sdpa", "eager"]} if (framework, line) in NO_SDPA else {}
    body["framework"] = f"{framework}@{line}" if line else framework
    try:
        res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    except BadInput as e:
        assert "read, not written" in str(e) and "\n" not in str(e), e
        assert any(body["framework"] == u[0] for u in UNWRITTEN), body["framework"]
        return
    assert res.plans
    for plan in res.plans:
        made = launch.launch(plan, *res.context[:2], 1024)
        assert launch.exporter(framework) is None or made.framework_files, (plan.recipe, made.note)


LF_LINES = ["", *(r.name for r in FRAMEWORKS["llamafactory"].releases if r is not FRAMEWORKS["llamafactory"].newest)]


@pytest.mark.parametrize("line", LF_LINES)
@pytest.mark.parametrize("lora", [0, 8])
def test_a_vision_model_at_every_llamafactory_line_ranks_only_what_its_yaml_writes(line, lora):
    """A vision model's frozen parts (freeze_multi_modal_projector, freeze_language_model from v0.9.2) and FSDP (the
    accelerate config written is FSDP2's, from v0.9.3's accelerate) at every LLaMA-Factory line: every plan ranked is
    written in the line's files; the lines before ran and read full fine-tuning of a vision model or FSDP, never
    ranked where the writer has no file for them (their rules of scope "written")."""
    body = {"model": "qwen2.5-vl-3b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "seq_len": 1024}
    body |= {"top": 8, "zero_stage": [0, 2, 3], "fsdp": ["off", "full"], "evidence": "analytic", "lora_rank": lora}
    body |= {"attention": ["sdpa", "eager"]} if ("llamafactory", line) in NO_SDPA else {}
    body["framework"] = f"llamafactory@{line}".rstrip("@")
    try:
        res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    except BadInput as e:  # every plan of the line refused: only full fine-tuning of the VLM before v0.9.2
        assert not lora and FRAMEWORKS["llamafactory"].release(line).first < (0, 9, 2), e
        assert "frozen parts" in str(e) and "\n" not in str(e)
        return
    early = FRAMEWORKS["llamafactory"].release(line).first < (0, 9, 3) if line else False
    assert res.plans and not (early and any(p.fsdp != "off" for p in res.plans))
    assert early or any(p.fsdp != "off" for p in res.plans) or lora  # the newer lines rank FSDP
    for plan in res.plans:
        made = launch.launch(plan, *res.context[:2], 1024)
        assert made.framework_files, (plan.recipe, made.note)


def test_the_pin_file_given_beside_its_files_is_read_as_their_pin_not_a_config(tmp_path):
    """The API's upload and `check --config` with every file of a plan: requirements.txt beside the script is the
    release's pin (read from the folder), never a configuration to refuse; given alone, it is refused as one."""
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "top": 1}
    body |= {"framework": "llamafactory@0.8", "evidence": "analytic", "seq_len": 1024}
    res = advise.suggest(advise.parse(advise.SuggestRequest, body), with_nearest=False)
    plan, (model, hw, goal) = res.plans[0], res.context
    files = launch.files(plan, hw, model, goal.seq_len)
    assert "requirements.txt" in files
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    back = checkconfig.check_config([str(tmp_path / n) for n in files], {"gpu": "h100"}).plan
    assert back.release == plan.release == FRAMEWORKS["llamafactory"].line("0.8")
    with pytest.raises(BadInput, match="requirements.txt: neither a training configuration"):
        checkconfig.check_config([str(tmp_path / "requirements.txt")], {"gpu": "h100"})
