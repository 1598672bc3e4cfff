"""One process over several visible GPUs read as torch's nn.DataParallel (planner/estimate/dataparallel.py): a plain
`python train.py` HF Trainer script (planner/intake/world.py _python) and LLaMA-Factory before v0.8.0
(planner/frameworks/llamafactory/reader_launch.py processes), on the field corpus's lf-3612 run as its user posted it."""

from pathlib import Path

from planner import checkconfig, intake

LF_3612 = Path(__file__).parents[2] / "field" / "lf-3612-llama3-8b-lora-8k-ddp-8xa800" / "train.sh"
FLAGS = {"gpu": "a800-80gb", "gpus_per_node": 8, "model": "llama-3.1-8b"}
SCRIPT = """from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B"{placed})
Trainer(model=model, args=TrainingArguments(output_dir="out", bf16=True)).train()
"""


def test_lf_07_trains_in_one_process_over_the_visible_gpus_and_later_lines_start_torchrun():
    old = intake.read([str(LF_3612)], given={"framework": "llamafactory@0.7.1"}).request
    new = intake.read([str(LF_3612)], given={"framework": "llamafactory@0.9.4"}).request
    assert (old["gpus_per_node"], old.get("dataparallel")) == (8, True)
    assert (new["gpus_per_node"], new.get("dataparallel")) == (8, None)


def test_lf_3612_at_07_plans_gpu0_with_the_eight_replicas_logits():
    """Both lines fit on an 80 GB A800 at cutoff_len 8192 (so the headline keeps the newest's plan); 0.7.1's GPU 0
    holds the eight replicas' fp32 logits beside a DDP rank's memory."""
    both = checkconfig.check_config([str(LF_3612)], FLAGS)
    assert "0.7.1" in both.config["releases"]["fits"] and not both.config["releases"]["failed"]
    old = checkconfig.check_config([str(LF_3612)], {**FLAGS, "framework": "llamafactory@0.7.1"})
    ddp = checkconfig.check_config([str(LF_3612)], {**FLAGS, "framework": "llamafactory@0.9.4"})
    assert old.plan.sharding == "DataParallel" and old.plan.memory.peak_phase == "forward"
    buckets = ddp.plan.memory.detail["model_states_bytes"] - old.plan.memory.detail["model_states_bytes"]
    # DDP's backward start holds 12 bytes a logit; at the gather GPU 0 holds replica 0's fp32 logits and saved
    # log-softmax (4 + 4) and the eight replicas' fp32 logits (8 x 4), without DDP's buckets
    more = old.plan.memory.peak_allocated_bytes - ddp.plan.memory.peak_allocated_bytes
    assert more == (4 + 4 + 8 * 4 - 12) * 8192 * 128256 - buckets


def _run(tmp_path: Path, placed: str, command: str) -> dict:
    (tmp_path / "train.py").write_text(SCRIPT.format(placed=placed))
    (tmp_path / "run.sh").write_text(command)
    return intake.read([str(tmp_path / "run.sh")])


def test_a_python_trainer_script_over_visible_gpus_is_dataparallel_unless_it_places_the_model(tmp_path):
    plain = _run(tmp_path, "", "CUDA_VISIBLE_DEVICES=0,1,2 python train.py\n")
    assert (plain.request["gpus_per_node"], plain.request.get("dataparallel")) == (3, True)
    placed = _run(tmp_path, ', device_map="auto"', "CUDA_VISIBLE_DEVICES=0,1,2 python train.py\n")
    assert (placed.request["gpus_per_node"], placed.request.get("dataparallel")) == (1, None)
    assert any("device_map" in line for line in placed.unplanned)
    one = _run(tmp_path, "", "CUDA_VISIBLE_DEVICES=0 python train.py\n")
    assert (one.request["gpus_per_node"], one.request.get("dataparallel")) == (1, None)


def test_lf_src_train_py_from_08_is_one_gpu_with_a_line(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(
        "CUDA_VISIBLE_DEVICES=0,1 python src/train.py --stage sft --do_train --model_name_or_path "
        "Qwen/Qwen2.5-0.5B --finetuning_type lora --template qwen --cutoff_len 1024 --use_dora false\n"
    )
    reading = intake.read([str(path)])
    assert (reading.request["gpus_per_node"], reading.request.get("dataparallel")) == (1, None)
    assert any("v0.8.3 refuses it" in line for line in reading.unplanned)
    old = intake.read([str(path)], given={"framework": "llamafactory@0.7.1"})
    assert (old.request["gpus_per_node"], old.request.get("dataparallel")) == (2, True)


def test_on_a_40_gb_card_the_07_line_decides_and_the_answer_names_a_process_a_gpu():
    result = checkconfig.check_config([str(LF_3612)], {**FLAGS, "gpu": "a100-40gb"})
    releases = result.config["releases"]
    assert releases["planned"] == "0.7.1" and releases["does_not_fit"] == ["0.7.1"] and not result.plan.fits
    assert "a process a GPU (torchrun" in result.plan.reason
