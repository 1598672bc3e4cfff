"""The RL roles on the CLI (issue 35 acceptance): `check --config` on a verl PPO script and an OpenRLHF GRPO command
names the GPU group and phase that run out of memory and the smallest change in the framework's own keys that fits;
the role flags (one a Roles field) reach the request and a bad one is a one-line error."""

import json

from tests.planner.cli.helpers import ROOT, one_line_error, planner

VERL = ROOT / "docs/examples/rl/run_qwen2.5-3b_seq_balance.sh"
OPENRLHF = ROOT / "docs/examples/rl/grpo_colocate.sh"


def out_of_memory(config, *flags: str) -> str:
    """`check --config CONFIG FLAGS --brief`, which does not fit (exit 3): its answer on one line."""
    r = planner("check", "--config", str(config), *flags, "--brief")
    assert r.returncode == 3, r.stderr[-2000:]
    return " ".join(r.stdout.split())


def test_check_names_the_group_phase_and_a_fix_in_verls_keys():
    out = out_of_memory(VERL, "--gpu", "rtx4090")
    assert "colocated (8 GPUs) runs out of memory in critic-update" in out
    assert "critic.ppo_max_token_len_per_gpu=12288 (not applied by verl 0.9.1's default trainer" in out
    assert (
        "actor states offloaded between phases, in verl's keys: actor_rollout_ref.actor.fsdp_config.param_offload: "
        "true; actor_rollout_ref.actor.fsdp_config.optimizer_offload: true"
    ) in out


def test_check_names_the_group_phase_and_a_fix_in_openrlhfs_flags():
    out = out_of_memory(OPENRLHF, "--gpu", "h100")
    assert "colocated (8 GPUs) runs out of memory in old-logps" in out
    assert "log-prob token budget 32,768, in openrlhf's keys: --rollout.micro_batch_size: 4" in out
    assert "its largest term is the old log-prob pass (68.5 GiB): a smaller --logprob-max-tokens-per-gpu" in out
    assert "(--fused-kernels true)" not in out


def test_a_verl_run_out_of_memory_in_its_log_probs_is_offered_the_fused_head():
    """verl's own Qwen2.5-VL-7B GRPO example with its fused head turned off beside the file: the old log-probs run out of
    memory on an H100 and the changes that fit include verl's chunked head, in verl's key."""
    example = ROOT / "tests/data/frameworks/verl/examples/run_qwen2_5_vl-7b.sh"
    out = out_of_memory(example, "--gpu", "h100", "--fused-kernels", "false")
    assert "colocated (8 GPUs) runs out of memory in old-logps" in out
    assert "fused log-prob head, in verl's keys: actor_rollout_ref.model.use_fused_kernels: true" in out
    # the largest-term hint names it too (OpenRLHF's, which has no fused head, names the budget alone: above)
    assert (
        "its largest term is the old log-prob pass (68.4 GiB): a smaller --logprob-max-tokens-per-gpu, or verl's fused "
        "log-prob head (--fused-kernels true)"
    ) in out


def test_role_flags_reach_the_plan_and_its_phases():
    r = planner(
        "suggest",
        "--model",
        "qwen2.5-1.5b",
        "--gpu",
        "h100",
        "--gpus-per-node",
        "8",
        "--global-batch",
        "256",
        "--framework",
        "openrlhf",
        "--workload",
        "ppo",
        "--num-generations",
        "4",
        "--max-prompt-length",
        "512",
        "--max-completion-length",
        "1024",
        "--beta",
        "0.01",
        "--placement",
        "actor+ref:4,critic:2,rollout:2",
        "--rollout-memory",
        "0.8",
        "--role-offload",
        "ref",
        "--top",
        "1",
        "--json",
    )
    assert r.returncode == 0, r.stderr[-2000:]
    plan = json.loads(r.stdout)["plans"][0]
    assert plan["workload"]["roles"]["placement"] == "actor+ref:4,critic:2,rollout:2"
    assert plan["micro_batch"] * plan["grad_accum"] * 4 == 256  # the actor's 4 GPUs are the data-parallel ranks
    assert {k.split(": ")[0] for k in plan["memory"]["phases"]} == {
        "actor+ref (4 GPUs)",
        "critic (2 GPUs)",
        "rollout (2 GPUs)",
    }


def test_a_bad_role_flag_is_one_line():
    one_line_error(
        planner(
            "suggest",
            "--model",
            "qwen2.5-1.5b",
            "--gpu",
            "h100",
            "--global-batch",
            "8",
            "--framework",
            "verl",
            "--workload",
            "grpo",
            "--placement",
            "actor:4,vllm:4",
        ),
        "unknown role 'vllm'",
    )
    one_line_error(
        planner("suggest", "--model", "qwen2.5-1.5b", "--gpu", "h100", "--global-batch", "8", "--workload", "ppo"),
        "give --framework llamafactory or swift or verl or openrlhf",
    )
