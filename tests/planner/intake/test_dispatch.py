"""Several files read as one run (planner/intake/dispatch.py): a file's note that asks for what another given file
supplies (the model, the length, the launch script that runs it) is answered, not printed; alone, it still asks."""

from pathlib import Path

from planner import intake

LAUNCH = """accelerate launch --num_processes 4 train_sft.py \\
  --model_name_or_path Qwen/Qwen2.5-7B-Instruct \\
  --per_device_train_batch_size 2 \\
  --bf16 \\
  --output_dir out
"""
SCRIPT = """from datasets import load_dataset
from trl import ModelConfig, ScriptArguments, SFTConfig, SFTTrainer, TrlParser

parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
script_args, training_args, model_args = parser.parse_args_and_config()
trainer = SFTTrainer(model=model_args.model_name_or_path, args=training_args, train_dataset=load_dataset("x")["train"])
trainer.train()
"""


def _files(tmp_path: Path) -> tuple[str, str]:
    (tmp_path / "run.sh").write_text(LAUNCH)
    (tmp_path / "train_sft.py").write_text(SCRIPT)
    (tmp_path / "requirements.txt").write_text("trl==0.22.2\n")
    return str(tmp_path / "run.sh"), str(tmp_path / "train_sft.py")


def test_a_script_s_questions_answered_by_its_launcher_are_not_printed(tmp_path):
    run, script = _files(tmp_path)
    alone = intake.read([script])
    assert any("pass --model" in n for n in alone.unplanned)  # the script alone does not name the model
    assert any("read the launch script that runs it" in n for n in alone.unplanned)
    both = intake.read([run, script])
    assert both.request["model"] == "qwen2.5-7b" and both.request["seq_len"] == 1024
    assert not any("pass --model" in n or "read the launch script" in n for n in both.unplanned), both.unplanned
    assert not any("no sequence length" in n for n in both.unplanned), both.unplanned
