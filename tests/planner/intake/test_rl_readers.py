"""verl's main_ppo scripts and OpenRLHF's train_ppo_ray commands read into a request (planner/frameworks/verl/reader.py,
openrlhf.py): the estimator and its roles, the split, the rollout engine, the budgets and offloads, each from the
file or from the framework's cited default; what the framework would not apply is said."""

from pathlib import Path

import pytest

from planner import advise, checkconfig, intake
from planner.export import launch
from planner.export.keys import script_flags

DATA = Path(__file__).parents[2] / "data" / "frameworks"


def settings(path: Path) -> dict:
    return {s.field: s for s in intake.read([str(path)]).settings}


def test_a_verl_grpo_script_with_a_token_budget_and_sglang():
    s = settings(DATA / "verl/examples/run_qwen2-7b_seq_balance.sh")
    value = {k: v.value for k, v in s.items()}
    assert value["workload.kind"] == "grpo" and value["workload.num_generations"] == 5
    assert value["workload.beta"] == 0.001  # use_kl_loss with kl_loss_coef
    assert value["workload.roles.rollout_engine"] == "sglang"  # rollout_name="sglang" set in the script
    assert value["workload.roles.rollout_tp"] == 2 and value["workload.roles.rollout_memory"] == 0.6
    assert value["workload.roles.max_tokens_per_gpu"] == 24000
    assert value["workload.roles.logprob_max_tokens_per_gpu"] == 24000  # follows the actor's (rollout.yaml:117)
    assert value["micro_batch"] == 1 and "cut by tokens" in s["micro_batch"].source
    # 256 prompts x 5 samples a mini-batch over 8 GPUs; 1,024 prompts a generation: 4 mini-batches
    assert value["grad_accum"] == 160 and value["workload.roles.mini_batches"] == 4
    assert "verl 0.9.1 default" in s["workload.roles.sleep_level"].source


def test_a_verl_ppo_script_has_a_critic_whose_micro_batch_keys_verl_does_not_apply():
    reading = intake.read([str(DATA / "verl/examples/run_qwen2.5-3b_seq_balance.sh")])
    value = {s.field: s.value for s in reading.settings}
    assert value["workload.kind"] == "ppo" and value["workload.roles.critic_model"] == "qwen2.5-3b"
    assert value["workload.roles.critic_max_tokens_per_gpu"] == 32768  # the v1 trainer's budget
    assert any("critic.ppo_max_token_len_per_gpu=12288 (not applied" in n for n in reading.unplanned)


def test_an_openrlhf_colocated_grpo_command():
    s = settings(DATA / "openrlhf/grpo_colocate.sh")
    value = {k: v.value for k, v in s.items()}
    assert value["workload.kind"] == "grpo"  # group_norm
    assert value["workload.roles.placement"] == "colocate" and value["gpus_per_node"] == 8
    assert value["workload.roles.sleep_level"] == 1  # --vllm.enable_sleep under --train.colocate_all
    assert value["workload.roles.offload"] == ("actor-optimizer", "critic-optimizer")  # --ds.enable_sleep
    assert value["zero_stage"] == 3 and value["checkpointing"] == "full"
    assert value["workload.max_prompt_length"] == 2048 and value["workload.max_completion_length"] == 6144
    assert value["grad_accum"] == 64  # 1,024 samples / (micro 2 x 8 GPUs)
    assert value["workload.roles.mini_batches"] == 1  # 128 prompts x 8 samples: one optimizer step a generation
    assert value["workload.roles.logprob_max_tokens_per_gpu"] == 8 * 8192  # the experience passes' rows


def test_an_openrlhf_dpo_command_through_the_deepspeed_launcher():
    s = settings(DATA / "openrlhf/dpo_deepspeed.sh")
    value = {k: v.value for k, v in s.items()}
    assert value["framework"] == "openrlhf" and value["workload.kind"] == "dpo"
    assert (value["gpus_per_node"], value["micro_batch"], value["grad_accum"]) == (8, 1, 32)  # 256 pairs
    assert value["workload.max_length"] == 8192 and value["zero_stage"] == 3 and value["checkpointing"] == "full"


def test_openrlhf_flat_names_are_read_and_said_once():
    reading = intake.read([str(DATA / "openrlhf/ppo_flat_names.sh")])
    value = {s.field: s.value for s in reading.settings}
    assert value["workload.kind"] == "ppo"
    assert value["workload.roles.placement"] == "actor:2,ref:2,critic:2,reward:2,rollout:2"
    assert (value["gpus_per_node"], value["nodes"]) == (2, 5)
    assert value["workload.roles.reward_model"] == value["workload.roles.critic_model"] == "llama-3.2-1b"
    (note,) = [n for n in reading.unplanned if "flat flag names" in n]
    assert "--pretrain (--actor.model_name_or_path)" in note and "23 flat flag names" in note


def test_an_openrlhf_dpo_command_with_flat_names_reads_its_model_and_checkpointing(tmp_path):
    """OpenRLHF#384's form (2024-07): `--pretrain` and `--gradient_checkpointing` are train_dpo's model flags."""
    script = tmp_path / "train_dpo.sh"
    script.write_text(
        "deepspeed --module openrlhf.cli.train_dpo --pretrain Qwen/Qwen2.5-7B-Instruct --max_len 2048 "
        "--zero_stage 3 --micro_train_batch_size 1 --train_batch_size 128 --gradient_checkpointing --bf16\n"
    )
    reading = intake.read([str(script)])
    value = {s.field: s.value for s in reading.settings}
    assert value["model"] == "qwen2.5-7b" and value["checkpointing"] == "full"
    assert value["workload.max_length"] == 2048 and value["zero_stage"] == 3
    (note,) = [n for n in reading.unplanned if "flat flag names" in n]
    assert "--pretrain (--model.model_name_or_path)" in note


def test_a_verl_run_with_its_own_hydra_yaml_under_the_command_lines_overrides(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "my_grpo.yaml").write_text(
        "defaults:\n  - ppo_trainer\n  - _self_\nalgorithm:\n  adv_estimator: grpo\n"
        "actor_rollout_ref:\n  actor:\n    ppo_mini_batch_size: 64\n    ppo_micro_batch_size_per_gpu: 4\n"
        "  rollout:\n    n: 8\n    gpu_memory_utilization: 0.6\n"
    )
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo --config-path=conf --config-name=my_grpo \\\n"
        "    actor_rollout_ref.rollout.gpu_memory_utilization=0.5\n"
    )
    reading = intake.read([str(script)])
    s = {x.field: x for x in reading.settings}
    assert s["workload.kind"].value == "grpo" and "my_grpo.yaml: algorithm.adv_estimator" in s["workload.kind"].source
    assert s["micro_batch"].value == 4 and s["workload.num_generations"].value == 8
    assert s["workload.roles.rollout_memory"].value == 0.5  # the command line's override wins over the YAML
    assert any(f.endswith("my_grpo.yaml") for f in reading.files)


def test_verls_reward_model_and_its_engines_share_are_read(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo reward.reward_model.enable=True \\\n"
        "    reward.reward_model.model_path=Qwen/Qwen2.5-0.5B reward.reward_model.rollout.gpu_memory_utilization=0.3\n"
    )
    value = {s.field: s.value for s in intake.read([str(script)]).settings}
    assert value["workload.roles.reward_model"] == "qwen2.5-0.5b" and value["workload.roles.reward_memory"] == 0.3


def test_a_trl_gkd_script_reads_its_teacher_and_gkdconfigs_fields(tmp_path):
    """A script named for GKD with GKDConfig's flags: the teacher (catalog model), lmbda, max_new_tokens as the
    completions, TRL's beta default as the JSD's; GKDConfig's own fields are no unknown argument in a TRL JSON."""
    (tmp_path / "train.sh").write_text(
        "accelerate launch --num_processes 2 gkd.py --model_name_or_path Qwen/Qwen2.5-1.5B "
        "--teacher_model_name_or_path Qwen/Qwen2.5-7B --lmbda 0.3 --max_new_tokens 256 --max_length 2048\n"
    )
    w = intake.read([str(tmp_path / "train.sh")]).request["workload"]
    assert w == {
        "kind": "gkd",
        "teacher_model": "qwen2.5-7b",
        "lmbda": 0.3,
        "jsd_beta": 0.5,
        "max_completion_length": 256,
        "max_length": 2048,
    }
    (tmp_path / "args.json").write_text('{"model_name_or_path": "Qwen/Qwen2.5-1.5B", "lmbda": 0.9, "temperature": 1.0}')
    r = intake.read([str(tmp_path / "args.json")])
    assert r.request["workload"]["teacher_model"] == "qwen2.5-1.5b"  # none given: the student's checkpoint again
    assert not any("refuses" in line for line in r.unplanned), r.unplanned


def test_a_verl_script_pinned_to_an_old_release_reads_that_releases_defaults(tmp_path):
    """verl padded the actor's rows (use_remove_padding false) through v0.6.1 and ran its rollout without CUDA graphs
    (enforce_eager True) through v0.5.0: a pin beside a script that sets neither reads them."""
    lines = (DATA / "verl/examples/run_qwen2-7b_seq_balance.sh").read_text().splitlines(keepends=True)
    script = "".join(x for x in lines if "use_remove_padding" not in x and "enforce_eager" not in x)
    for pin, padded, eager in (
        ("verl==0.4.1", True, True),
        ("verl==0.6.1", True, False),
        ("verl==0.9.1", False, False),
    ):
        folder = tmp_path / pin
        folder.mkdir()
        (folder / "requirements.txt").write_text(pin + "\n")
        (folder / "run.sh").write_text(script)
        s = settings(folder / "run.sh")
        assert s["workload.roles.remove_padding"].value is not padded, pin
        assert s["workload.roles.rollout_eager"].value is eager, pin
        line = {"0.4": "verl@0.5", "0.6": "verl@0.6", "0.9": "verl"}[pin.split("==")[1][:3]]  # the newest line bare
        assert s["framework"].value == line and pin in s["framework"].source
    unpinned = settings(DATA / "verl/examples/run_qwen2-7b_seq_balance.sh")["framework"]
    assert unpinned.value == "verl" and "release assumed: verl sft_trainer and main_ppo 0.7" in unpinned.source


def test_openrlhf_0_9s_micro_batch_default_is_its_own(tmp_path):
    """OpenRLHF 0.9.0's train_ppo_ray defaulted --micro_train_batch_size to 4 (cli/train_ppo_ray.py:338), 0.11.2's
    --train.micro_batch_size to 1: a 0.9 command that sets none trains 4 rows a micro-batch."""
    (tmp_path / "requirements.txt").write_text("openrlhf==0.9.0\n")
    (tmp_path / "run.sh").write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --actor_num_nodes 1 --actor_num_gpus_per_node 2 --vllm_num_engines 2 "
        "--pretrain Qwen/Qwen2.5-0.5B-Instruct --reward_pretrain Qwen/Qwen2.5-0.5B-Instruct --train_batch_size 64 "
        "--rollout_batch_size 64 --bf16 --zero_stage 2 --prompt_max_len 512 --generate_max_len 512\n"
    )
    s = settings(tmp_path / "run.sh")
    assert s["micro_batch"].value == 4 and "openrlhf@0.9 default" in s["micro_batch"].source


def test_trls_kto_script_and_config_read_as_a_kto_workload(tmp_path):
    """KTOConfig(...) in a script, and `trl kto --config` with KTOConfig's own keys (desirable_weight; max_length and
    precompute_ref_log_probs as DPO's): a kto workload, KTOConfig's fields not unknown arguments."""

    (tmp_path / "train_kto.py").write_text(
        "from trl import KTOConfig, KTOTrainer\n"
        "args = KTOConfig(output_dir='o', per_device_train_batch_size=4, max_length=2048, undesirable_weight=1.33)\n"
        "KTOTrainer(model='Qwen/Qwen2.5-0.5B-Instruct', args=args, train_dataset=None).train()\n"
    )
    (tmp_path / "kto.yaml").write_text(
        "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\nper_device_train_batch_size: 8\nmax_length: 1024\n"
        "desirable_weight: 1.0\nprecompute_ref_log_probs: true\noutput_dir: out\n"
    )
    (tmp_path / "run.sh").write_text("trl kto --config kto.yaml\n")
    script = intake.read([str(tmp_path / "train_kto.py")]).request
    assert script["workload"]["kind"] == "kto" and script["workload"]["max_length"] == 2048
    cli = intake.read([str(tmp_path / "run.sh")])
    assert cli.request["workload"] == {"kind": "kto", "max_length": 1024, "precompute_ref_log_probs": True}
    assert not [n for n in cli.unplanned if "desirable_weight" in n]


VERL_PPO = {
    "model": "qwen2.5-0.5b",
    "gpu": "h100",
    "gpus_per_node": 8,
    "micro_batch": 2,
    "grad_accum": 2,
    "fsdp": "full",
    "workload": {"kind": "ppo", "num_generations": 4, "max_completion_length": 256, "beta": 0.001},
}
EVERY_PART = ("actor-optimizer", "actor-params", "critic-optimizer", "critic-params", "ref")


@pytest.mark.parametrize("line", ["0.6", ""])
@pytest.mark.parametrize(("parts", "policy"), [(EVERY_PART, "optimizer+params"), ((), "none"), (("ref",), "none")])
def test_every_verl_offload_key_written_reads_back(line, parts, policy, tmp_path):
    """verl's RL writer spells each role's offload (actor param/optimizer, ref param, critic param/optimizer at the
    line's critic names, both offload_policy keys: planner/frameworks/verl/keys.py, cited per release); `check
    --config` on the script reads every one back: the same roles' offloads and the same --offload."""
    body = {**VERL_PPO, "framework": f"verl@{line}".rstrip("@"), "offload": policy}
    body["workload"] = {**body["workload"], "roles": {"offload": list(parts)}}
    res = advise.check(advise.parse(advise.CheckRequest, body))
    model, hw, goal = res.context
    files = launch.files(res.plan, hw, model, goal.seq_len)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    written = {k: v for k, v in script_flags(files["verl_ppo.sh"]).items() if "offload" in k}
    assert len(written) == 7 and sum(v == "true" for v in written.values()) == len(parts) + 2 * (policy != "none")
    back = checkconfig.check_config([str(tmp_path / "verl_ppo.sh")], {"gpu": "h100"}).plan
    assert (back.workload.roles.offload, back.offload) == (res.plan.workload.roles.offload, policy) == (parts, policy)
    assert back.release == res.plan.release == line


def test_verls_critic_offload_policy_apart_from_the_actors_is_said(tmp_path):
    """memplan plans one --offload: a critic offload_policy other than the actor's is planned as the actor's, said."""
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=gae critic.fsdp.offload_policy=True \\\n"
        "    actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B critic.model.path=Qwen/Qwen2.5-0.5B\n"
    )
    reading = intake.read([str(script)])
    assert "offload" not in {s.field for s in reading.settings}
    assert any("critic.fsdp.offload_policy" in n and "one --offload" in n for n in reading.unplanned)


def test_verl_reads_the_log_prob_passes_micro_batches_and_names_what_it_does_not_plan(tmp_path):
    """verl's example (actor micro-batch 10, log-prob micro-batches 20; v0.7.0 examples/grpo_trainer/
    run_qwen2_5_vl-7b.sh): each pass's own key read (v0.7.0 workers/fsdp_workers.py:1014, :1054); its fused kernels
    read (planned: planner.estimate.role_heads.fused_*). Under use_dynamic_bsz the micro-batch keys are unused and the reference's own budget is named."""
    reading = intake.read([str(DATA / "verl/examples/run_qwen2_5_vl-7b.sh")])
    s = {x.field: x for x in reading.settings}
    assert s["micro_batch"].value == 10
    assert s["workload.roles.logprob_micro_batch"].value == s["workload.roles.ref_logprob_micro_batch"].value == 20
    assert "log_prob_micro_batch_size_per_gpu=20" in s["workload.roles.ref_logprob_micro_batch"].source
    assert s["workload.roles.fused_kernels"].value is True
    assert "use_fused_kernels=True" in s["workload.roles.fused_kernels"].source
    assert not any("use_fused_kernels" in n for n in reading.unplanned)
    script = tmp_path / "run.sh"
    a = "actor_rollout_ref."
    script.write_text(
        f"python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo {a}actor.use_dynamic_bsz=True "
        f"{a}actor.ppo_max_token_len_per_gpu=16000 {a}rollout.log_prob_micro_batch_size_per_gpu=8 "
        f"{a}ref.log_prob_max_token_len_per_gpu=32000\n"
    )
    reading = intake.read([str(script)])
    s = {x.field: x.value for x in reading.settings}
    assert s["workload.roles.logprob_max_tokens_per_gpu"] == 16000 and "workload.roles.logprob_micro_batch" not in s
    assert any("log_prob_micro_batch_size_per_gpu=8 (unused under use_dynamic_bsz" in n for n in reading.unplanned)
    assert s["workload.roles.ref_logprob_max_tokens_per_gpu"] == 32000  # its own, read (dp_actor.py:366-368)
    assert not any("32000" in n for n in reading.unplanned)


def test_verl_divides_a_global_log_prob_micro_batch_by_its_gpus(tmp_path):
    """The deprecated global rollout.log_prob_micro_batch_size is divided by the data-parallel ranks (v0.7.0
    workers/fsdp_workers.py:266-274): 64 over 8 GPUs is 8 rows a GPU."""
    script = tmp_path / "run.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo trainer.n_gpus_per_node=8 "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 actor_rollout_ref.rollout.log_prob_micro_batch_size=64\n"
    )
    s = settings(script)
    assert (
        s["workload.roles.logprob_micro_batch"].value == 8
        and "/ 8 data-parallel groups" in s["workload.roles.logprob_micro_batch"].source
    )
    assert "workload.roles.ref_logprob_micro_batch" not in s  # none given: the actor's micro-batch
