"""Issue 47 items 1 and 8, issue 49: verl's own v0.7.0 examples read as verl runs them (planner/frameworks/verl/
reader_sft.py, reader_megatron.py; fixtures: tests/data/frameworks/verl/SOURCES.md). Its SFT trainers under torchrun
(fsdp_sft_trainer over sft_trainer.yaml, sft_trainer over sft_trainer_engine.yaml, what writer.py writes), its
Megatron engine refused in one line, GRPO with rollout.n 1 planned as verl runs it, and a GPU count the files leave to
a variable they do not set asked for, never planned on a count memplan would invent."""

from pathlib import Path

import pytest

from planner import advise, checkconfig, intake
from planner.errors import BadInput
from planner.export import launch

DATA = Path(__file__).resolve().parents[2] / "data" / "frameworks" / "verl" / "examples"


def settings(path) -> dict:
    return {s.field: s for s in intake.read([str(path)]).settings}


def test_verls_fsdp_sft_peft_example_is_read_as_verl_runs_it():
    """examples/sft/gsm8k/run_qwen_05_peft.sh: LoRA 32 on all-linear over a base in sft_trainer.yaml:37's fp32
    (fsdp_sft_trainer.py:285 casts the PEFT model to model_dtype), micro 4, rows of 1024 (sft_trainer.yaml:24), its
    world torchrun's `--nproc_per_node=$1`: asked, then data.train_batch_size 256 split over the GPUs given."""
    path = DATA / "sft_gsm8k_run_qwen_05_peft.sh"
    s = settings(path)
    assert s["framework"].value == "verl" and s["workload.kind"].value == "sft"
    assert (s["lora_rank"].value, s["lora_targets"].value, s["lora_base_fp32"].value) == (32, "all-linear", True)
    assert (s["micro_batch"].value, s["seq_len"].value, s["fsdp"].value) == (4, 1024, "full")
    assert "sft_trainer.yaml:37" in s["lora_base_fp32"].source and "gpus_per_node" not in s
    with pytest.raises(BadInput, match=r"how many GPUs does it run on\? .*--nproc_per_node .*pass --gpus-per-node N"):
        checkconfig.check_config([str(path)], {"gpu": "h100"})
    plan = checkconfig.check_config([str(path)], {"gpu": "h100", "gpus_per_node": 4}).plan
    assert (plan.micro_batch, plan.grad_accum, plan.world_size, plan.knobs.lora_base_fp32) == (4, 16, 4, True)


def test_ulysses_and_liger_in_verls_sft_example():
    """run_qwen_05_sp2_liger.sh: Ulysses 2 with use_remove_padding; Liger's kernels are patched in but the model is
    called without labels (fsdp_sft_trainer.py:389-391): a line, the logits planned; data.micro_batch_size is read
    by neither trainer at v0.7.0 (micro_batch_size_per_gpu's default 4 decides)."""
    reading = intake.read([str(DATA / "sft_gsm8k_run_qwen_05_sp2_liger.sh")])
    s = {x.field: x for x in reading.settings}
    assert (s["sequence_parallel"].value, s["micro_batch"].value) == (2, 4) and "loss" not in s  # standard
    said = " ".join(reading.unplanned)
    assert "model.use_liger=True" in said and "data.micro_batch_size=4 (not read" in said


def test_ulysses_without_remove_padding_is_refused_as_verl_asserts(tmp_path):
    script = tmp_path / "sft.sh"
    script.write_text(
        "torchrun --nproc_per_node=8 -m verl.trainer.fsdp_sft_trainer model.partial_pretrain=Qwen/Qwen2.5-0.5B "
        "ulysses_sequence_parallel_size=2\n"
    )
    with pytest.raises(BadInput, match=r"Ulysses needs use_remove_padding=true .*fsdp_sft_trainer.py:231-232"):
        intake.read([str(script)])


@pytest.mark.parametrize(
    "words",
    [
        "python3 -m verl.trainer.main_ppo --config-path=config --config-name='ppo_megatron_trainer.yaml'",
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.actor.strategy=megatron",
        "torchrun --nproc_per_node=8 -m verl.trainer.sft_trainer engine=megatron model.path=Qwen/Qwen2.5-0.5B",
        # sglang_multiturn/run_qwen2.5-3b_megatron_gsm8k_multiturn.sh: its config not found, its Megatron section set
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
    ],
    ids=["ppo_megatron_trainer", "actor.strategy", "sft engine", "megatron section"],
)
def test_verls_megatron_engine_is_refused_in_one_line(words, tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(words + " actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B trainer.n_gpus_per_node=8\n")
    with pytest.raises(BadInput, match="verl's Megatron engine is not planned") as e:
        intake.read([str(script)])
    assert "\n" not in str(e.value)


def test_an_rl_world_left_to_a_variable_is_asked_then_planned_on_the_gpus_given(tmp_path):
    """examples/gspo_trainer/run_qwen30b_gspo.sh's trainer.n_gpus_per_node=$ARNOLD_WORKER_GPU was planned on 1 GPU
    and refused (`--rollout-tp 4 does not divide the 1 GPUs`): now a question, and the GPUs given plan it."""
    script = tmp_path / "grpo.sh"
    script.write_text(
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B "
        "actor_rollout_ref.rollout.n=4 actor_rollout_ref.actor.ppo_mini_batch_size=16 data.train_batch_size=32 "
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 actor_rollout_ref.rollout.tensor_model_parallel_size=4 "
        "trainer.n_gpus_per_node=$ARNOLD_WORKER_GPU trainer.nnodes=1\n"
    )
    with pytest.raises(
        BadInput, match=r"trainer.n_gpus_per_node=\?: not known from the files: pass --gpus-per-node N$"
    ):
        checkconfig.check_config([str(script)], {"gpu": "h100"})
    plan = checkconfig.check_config([str(script)], {"gpu": "h100", "gpus_per_node": 8}).plan
    assert (plan.world_size, plan.micro_batch, plan.grad_accum) == (8, 2, 4)  # 16 prompts x 4 / (8 GPUs x micro 2)


def test_grpo_with_one_sample_a_prompt_is_planned_as_verl_runs_it():
    """examples/tuning/0.5b/qwen2-0.5b_grpo-lora_1_h100_fsdp_vllm.sh: actor_rollout_ref.rollout.n=1. verl's GRPO takes
    a group of one (mean 0, std 1: its raw score, v0.7.0 trainer/ppo/core_algos.py:312-314): planned, with a line."""
    path = DATA / "tuning_qwen2-0.5b_grpo-lora_1_h100_fsdp_vllm.sh"
    reading = intake.read([str(path)])
    assert any("one sample a prompt" in line and "core_algos.py:312-314" in line for line in reading.unplanned)
    plan = checkconfig.check_config([str(path)], {"gpu": "h100"}).plan
    assert plan.knobs.workload.kind == "grpo" and plan.knobs.workload.num_generations == 1


@pytest.mark.parametrize(
    "case",
    [{"lora_rank": 16}, {"checkpointing": "off", "optimizer": "adamw-fused"}, {"fsdp": "hybrid", "nodes": 2}],
)
def test_what_verls_sft_writer_writes_reads_back_as_the_same_plan(case, tmp_path):
    """writer.py's verl_sft.sh (`-m verl.trainer.sft_trainer`, use_dynamic_bsz false, fsdp2, the LoRA base in bf16)
    read back by the engine trainer's reader: the same split over the same GPUs and every knob."""
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 2, "grad_accum": 4}
    body |= {"seq_len": 2048, "framework": "verl", "fsdp": "full", "checkpointing": "full", **case}
    body |= {"grad_accum": 2} if "nodes" in case else {}  # 256 rows over 16 GPUs
    res = advise.check(advise.parse(advise.CheckRequest, body))
    model, hw, goal = res.context
    for name, text in launch.files(res.plan, hw, model, goal.seq_len).items():
        (tmp_path / name).write_text(text)
    back = checkconfig.check_config([str(tmp_path / "verl_sft.sh")], {"gpu": "h100"}).plan
    assert back.split_text == res.plan.split_text
    assert dict(back.knobs) == dict(res.plan.knobs)


def test_a_verl_trainer_config_read_alone_is_read_as_main_ppo_reads_it(tmp_path):
    """Issue 49: examples/split_placement/config/ppo_trainer_split.yaml and sglang_multiturn/config/*.yaml are Hydra
    configs over verl's ppo_trainer.yaml (hydra defaults list + actor_rollout_ref): read as verl's, the model asked
    where they name none; one over ppo_megatron_trainer refused; a tool config named as what it is."""
    over = "defaults:\n  - ppo_trainer\n  - _self_\nalgorithm:\n  adv_estimator: grpo\ndata:\n  train_batch_size: 64\n"
    over += "actor_rollout_ref:\n  rollout:\n    n: 4\n  actor:\n    ppo_mini_batch_size: 16\n"
    (tmp_path / "grpo.yaml").write_text(over)
    with pytest.raises(BadInput, match=r"which model does it train\? grpo.yaml names none: give --model"):
        checkconfig.check_config([str(tmp_path / "grpo.yaml")], {"gpu": "h100"})
    plan = checkconfig.check_config([str(tmp_path / "grpo.yaml")], {"gpu": "h100", "model": "qwen2.5-0.5b"}).plan
    assert (plan.knobs.framework, plan.knobs.workload.kind, plan.knobs.workload.num_generations) == ("verl", "grpo", 4)
    assert (plan.world_size, plan.micro_batch, plan.grad_accum) == (8, 1, 8)  # trainer.n_gpus_per_node's 8
    (tmp_path / "mega.yaml").write_text(over.replace("- ppo_trainer", "- ppo_megatron_trainer"))
    with pytest.raises(BadInput, match="mega.yaml: defaults: .*verl's Megatron engine is not planned"):
        intake.read([str(tmp_path / "mega.yaml")])
    (tmp_path / "tool.yaml").write_text("tools:\n  - class_name: verl.tools.gsm8k_tool.Gsm8kTool\n    config: {}\n")
    with pytest.raises(BadInput, match="verl's multi-turn tool or interaction config"):
        intake.read([str(tmp_path / "tool.yaml")])


def test_verls_generation_entry_point_is_refused_as_no_training(tmp_path):
    """examples/generation/*.sh (`python3 -m verl.trainer.main_generation`) was read as a plain Trainer's script."""
    script = tmp_path / "gen.sh"
    script.write_text(
        "python3 -m verl.trainer.main_generation trainer.n_gpus_per_node=8 model.path=Qwen/Qwen2.5-0.5B\n"
    )
    with pytest.raises(BadInput, match=r"gen.sh:1 python -m verl.trainer.main_generation runs generation .*"):
        intake.read([str(script)])
