"""One process over several GPUs as ms-swift's scripts start it (planner/frameworks/swift/reader_env.py device_map): more visible
GPUs than processes is ms-swift's MP, each process placing the model over its share (swift/utils/env.py:64-84), and the
plans' exports start it the same way."""

from pathlib import Path

import pytest

from planner import advise, checkconfig, intake


def read(tmp_path: Path, text: str):
    path = tmp_path / "train.sh"
    path.write_text(text)
    return intake.read([str(path)]).request


SFT = "swift sft --model Qwen/Qwen2.5-7B-Instruct --tuner_type lora --max_length 2048 --gradient_checkpointing true\n"


@pytest.mark.parametrize(
    ("env", "gpus", "device_map"),
    [
        ("CUDA_VISIBLE_DEVICES=0,1 ", 2, 2),  # one process over two GPUs
        ("NPROC_PER_NODE=2 CUDA_VISIBLE_DEVICES=0,1,2,3 ", 4, 2),  # MP + DDP: two processes of two GPUs
        ("NPROC_PER_NODE=2 CUDA_VISIBLE_DEVICES=0,1 ", 2, None),  # a process a GPU
        ("", 1, None),
    ],
)
def test_visible_gpus_over_processes_is_the_device_map(tmp_path, env, gpus, device_map):
    request = read(tmp_path, env + SFT)
    assert request["gpus_per_node"] == gpus
    assert request.get("device_map") == device_map


def test_the_reading_plans_it_and_the_export_starts_it_again(tmp_path):
    result = checkconfig.check_config([_script(tmp_path)], {"gpu": "rtx4090"})
    plan = result.plan
    assert (plan.device_map, plan.world_size, plan.data_parallel) == (2, 2, 1)
    script = plan.launch.framework_files["swift_train.sh"]
    assert "NPROC_PER_NODE=1 " in script and "CUDA_VISIBLE_DEVICES=0,1 " in script
    hf = advise.check(advise.parse(advise.CheckRequest, {**_body(), "framework": "hf"})).plan.launch
    assert hf.command.startswith("CUDA_VISIBLE_DEVICES=0,1 python train.py") and 'device_map="auto"' in hf.note


def _script(tmp_path: Path) -> str:
    path = tmp_path / "train.sh"
    path.write_text("CUDA_VISIBLE_DEVICES=0,1 " + SFT)
    return str(path)


def _body() -> dict:
    return {
        "model": "qwen2.5-7b",
        "gpu": "rtx4090",
        "gpus_per_node": 2,
        "device_map": 2,
        "micro_batch": 1,
        "seq_len": 2048,
    }
