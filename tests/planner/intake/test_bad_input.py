"""What cannot be read is one line naming the file and what is accepted (BadInput, field "config"), never a traceback."""

import json
from pathlib import Path

import pytest

from planner import intake
from planner.errors import BadInput
from tests.planner.intake.conftest import HELPERS


def _bad(paths: list[str]) -> str:
    with pytest.raises(BadInput) as e:
        intake.read(paths)
    assert e.value.field == "config"
    assert "\n" not in str(e.value)
    return str(e.value)


def _write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    return str(path)


def test_no_file_at_all():
    assert "give at least one file" in _bad([])


@pytest.mark.parametrize(
    "name,text,says",
    [
        ("cfg.yaml", "model_name_or_path: [1,\n", "not valid YAML"),
        ("cfg.json", '{"per_device_train_batch_size": 2,', "not valid JSON"),
        ("notes.yaml", "- just\n- a list\n", "not a training configuration memplan knows"),
        ("other.yaml", "colour: blue\nsize: 3\n", "not a training configuration memplan knows"),
        (
            "config.json",
            json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8}),
            "a model's config.json, not a training configuration: pass it as --model",
        ),
        ("v1.yaml", "model: Qwen/Qwen3-4B\nmicro_batch_size: 2\ndist_config: {}\n", "v1 plugin section needs a name"),
        ("empty.sh", "#!/bin/bash\necho hello\n", "no training command found"),
        ("blob.bin", b"\xff\xfe\x00\x81garbage", "cannot be read"),
        ("broken.py", "def f(:\n", "not Python that parses"),
        ("notes.txt", "nothing to see here\n", "neither a training configuration nor a launch script"),
    ],
)
def test_unreadable_or_unknown_files(tmp_path, name, text, says):
    path = _write(tmp_path, name, text)
    message = _bad([path])
    assert says in message and name in message


def test_a_missing_file_and_a_folder(tmp_path):
    message = _bad([str(tmp_path / "nope.yaml")])
    assert "no such file" in message and "accepted:" in message
    assert "a folder, not a file" in _bad([str(tmp_path)])


def test_a_nul_byte_in_the_path():
    assert "NUL byte" in _bad(["a\0b.yaml"])


def test_a_sourced_helper_script_has_no_training_command():
    (helper,) = HELPERS
    assert "no training command found" in _bad([str(helper)])


def test_a_script_naming_a_config_that_is_not_there(tmp_path):
    path = _write(tmp_path, "run.sh", "llamafactory-cli train missing.yaml\n")
    message = _bad([path])
    assert "run.sh" in message and "missing.yaml" in message and "not found" in message


@pytest.mark.parametrize(
    "text, line, quote",
    [  # issue 50: the open quote swallowed the rest of the script, and its flags with it ("--micro-batch: Field required")
        (
            'swift sft --model Qwen/Qwen2.5-7B-Instruct --system "You are \\\n  --per_device_train_batch_size 2\n',
            1,
            '"',
        ),
        (
            "#!/bin/bash\n\ntorchrun --nproc_per_node 2 train.py --run_name 'abc\n --per_device_train_batch_size 2\n",
            3,
            "'",
        ),
        ("export N=`nproc\ntorchrun --nproc_per_node $N train.py --per_device_train_batch_size 2\n", 1, "`"),
    ],
)
def test_an_unclosed_quote_is_one_line_naming_its_line(tmp_path, text, line, quote):
    said = _bad([_write(tmp_path, "run.sh", text)])
    assert said == f"--config run.sh line {line}: No closing quotation (the {quote} opened there is never closed)"


def test_a_closed_quote_across_lines_reads_on(tmp_path):
    text = 'swift sft --model Qwen/Qwen2.5-7B-Instruct --system "You are\n a helper" --per_device_train_batch_size 2\n'
    reading = intake.read([_write(tmp_path, "run.sh", text)])
    assert reading.request["micro_batch"] == 2


@pytest.mark.parametrize(
    "text, says",
    [  # issue 50: planned as 4 processes without a word; torchrun starts 4 and ranks 2 and 3 find no GPU
        (
            "CUDA_VISIBLE_DEVICES=0,1 NPROC_PER_NODE=4 swift sft --model Qwen/Qwen2.5-7B-Instruct\n",
            (
                "run.sh:1 NPROC_PER_NODE=4 with CUDA_VISIBLE_DEVICES=0,1: torchrun starts 4 processes a node and 2 GPUs "
                "are visible, so local ranks 2 to 3 have no GPU of their own (run 2 processes, or make 4 GPUs visible)"
            ),
        ),
        (
            "export CUDA_VISIBLE_DEVICES=0,1\nNPROC_PER_NODE=3 llamafactory-cli train cfg.yaml\n",
            "local rank 2 has no GPU of its own (run 2 processes, or make 3 GPUs visible)",
        ),
        (
            "CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node 2 train.py --per_device_train_batch_size 2\n",
            "--nproc_per_node 2 with CUDA_VISIBLE_DEVICES=0: torchrun starts 2 processes a node and 1 GPUs are visible",
        ),
    ],
)
def test_more_processes_than_visible_gpus_is_refused(tmp_path, text, says):
    (tmp_path / "cfg.yaml").write_text("model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\nfinetuning_type: full\n")
    assert says in _bad([_write(tmp_path, "run.sh", text)])


def test_as_many_processes_as_visible_gpus_reads(tmp_path):
    text = "CUDA_VISIBLE_DEVICES=0,1 NPROC_PER_NODE=2 swift sft --model Qwen/Qwen2.5-7B-Instruct\n"
    assert intake.read([_write(tmp_path, "run.sh", text)]).request["gpus_per_node"] == 2
