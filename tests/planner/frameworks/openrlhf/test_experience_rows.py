"""OpenRLHF's experience passes (logprob of the actor, the reference, the critic) run the rollout micro-batch's rows,
each as long as the rollout made it: at 0.8.x with no --max_len the prompt's and the completion's limits
(v0.8.9 cli/train_ppo_ray.py:44 max_len = prompt_max_len + generate_max_len), not the newest's --max_len 2048."""

from planner import intake

CMD = (
    "python3 -m openrlhf.cli.train_ppo_ray --pretrain meta-llama/Meta-Llama-3-8B --micro_rollout_batch_size 4 "
    "--prompt_max_len 1024 --generate_max_len 4096 --zero_stage 2 --bf16 --actor_num_gpus_per_node 8 {extra}\n"
)


def _rows(tmp_path, extra: str = "") -> int:
    (tmp_path / "requirements.txt").write_text("openrlhf==0.8.9\n")
    (tmp_path / "run.sh").write_text(CMD.format(extra=extra))
    r = intake.read([str(tmp_path / "run.sh"), str(tmp_path / "requirements.txt")])
    return next(s.value for s in r.settings if s.field == "workload.roles.logprob_max_tokens_per_gpu")


def test_0_8_rows_are_the_prompt_and_completion_limits(tmp_path):
    assert _rows(tmp_path) == 4 * (1024 + 4096)


def test_a_given_max_len_sizes_the_rows(tmp_path):
    assert _rows(tmp_path, "--max_len 3000") == 4 * 3000
