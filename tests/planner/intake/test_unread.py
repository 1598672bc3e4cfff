"""A framework memplan does not read is refused in one line naming it (planner.frameworks.unread, Signs.refused), a
command that trains nothing is said to train nothing (Tool.idle, Framework.idle_modules), and beside a run memplan
reads either is a note while the run is read: never planned with another trainer's defaults. The files are the
projects' own examples (tests/data/frameworks/unread/SOURCES.md); the snippets cite theirs."""

from pathlib import Path

import pytest

from planner import intake
from planner.errors import BadInput
from planner.frameworks.unread import UNREAD

DATA = Path(__file__).resolve().parents[2] / "data" / "frameworks" / "unread"


def _refused(path: Path) -> str:
    with pytest.raises(BadInput) as e:
        intake.read([str(path)])
    assert e.value.field == "config" and "\n" not in str(e.value)
    return str(e.value)


def _script(tmp_path: Path, text: str, name: str = "run.sh") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("copy", "says"),
    [
        ("ms-swift/megatron_lora_dense.sh", "megatron_lora_dense.sh:6 megatron sft is Megatron-SWIFT, ms-swift's"),
        ("ms-swift/ray_grpo_run_colocate.sh", "ray_grpo_run_colocate.sh:7 megatron rlhf is Megatron-SWIFT"),
        # the cached-dataset export before it trains nothing: the refusal names the Megatron-SWIFT run
        ("ms-swift/train_cached_dataset_mcore.sh", "train_cached_dataset_mcore.sh:15 megatron sft is Megatron-SWIFT"),
        ("ms-swift/ray_grpo_colocate.yaml", "a Megatron-SWIFT configuration"),
        ("ms-swift/yaml_megatron_sft.yaml", "a Megatron-SWIFT configuration"),
        ("ms-swift/infer_cli_demo.sh", "infer_cli_demo.sh:2 swift infer runs inference, not training: nothing to plan"),
        (
            "Megatron-LM/train_gpt3_175b_distributed.sh",
            "train_gpt3_175b_distributed.sh:77 torchrun pretrain_gpt.py is Megatron-LM",
        ),
        ("LLaMA-Factory/qwen2_vl_full.yaml", "LLaMA-Factory's Megatron-Core backend (mcore_adapter with USE_MCA=1"),
        (
            "verl/run_deepseek_v2_lite_math.sh",
            "run_deepseek_v2_lite_math.sh:7 python -m verl.trainer.main_generation runs generation",
        ),
    ],
)
def test_a_frameworks_example_memplan_does_not_read_is_refused_naming_it(copy, says):
    said = _refused(DATA / copy)
    assert says in said, said
    if "runs " not in says:  # a trainer memplan does not read: what memplan reads instead is named too
        assert "accepted: " in said


def test_a_command_beside_the_run_is_a_note_and_the_run_is_read():
    """ms-swift v4.5.2 examples/train/cached_dataset/pretrained.sh: `swift export --to_cached_dataset`, then `swift pt`."""
    r = intake.read([str(DATA / "ms-swift/train_cached_dataset_pretrained.sh")])
    assert r.framework == "swift" and r.request["micro_batch"] == 1 and r.request["grad_accum"] == 4
    (note,) = [u for u in r.unplanned if "swift export" in u]
    assert note.startswith("train_cached_dataset_pretrained.sh:2 swift export runs an export") and ":17 is read" in note


def test_an_unread_trainer_beside_a_run_is_a_note_naming_it(tmp_path):
    text = "torchrun pretrain_gpt.py --tensor-model-parallel-size 2\nswift sft --model Qwen/Qwen2.5-7B-Instruct\n"
    r = intake.read([str(_script(tmp_path, text))])
    assert r.framework == "swift"
    (note,) = [u for u in r.unplanned if "Megatron" in u]
    assert note.startswith("run.sh:1 torchrun pretrain_gpt.py is Megatron-LM") and "run.sh:2 is read" in note


@pytest.mark.parametrize(
    ("text", "says"),
    [
        # xtuner v0.2.0 README.md:221
        (
            "NPROC_PER_NODE=${GPU_NUM} xtuner train internlm2_5_chat_7b_qlora_oasst1_e3 --deepspeed deepspeed_zero2\n",
            "run.sh:1 xtuner train is xtuner, InternLM's trainer",
        ),
        # NeMo 2's recipes through nemo_run's CLI (NeMo v2.4.0 setup.py:304-307: `llm = nemo.collections.llm`)
        ("nemo llm finetune --factory llama3_8b\n", "run.sh:1 nemo llm is NeMo"),
        # NeMo 1's example (NeMo v2.4.0 examples/nlp/language_modeling/tuning/megatron_gpt_finetuning.py)
        (
            (
                "torchrun --nproc_per_node=8 examples/nlp/language_modeling/tuning/megatron_gpt_finetuning.py "
                "trainer.devices=8 model.restore_from_path=x.nemo\n"
            ),
            "is NeMo",
        ),
        # Megatron-LM's flags (core_v0.15.0 megatron/training/arguments.py:2561) on a script of another name
        ("torchrun --nproc_per_node 8 my_train.py --tensor-model-parallel-size 2 --num-layers 24\n", "is Megatron-LM"),
        # Megatron-Bridge's recipe runner (NVIDIA-NeMo/Megatron-Bridge scripts/training/run_recipe.py, its examples)
        (
            "uv run python -m torch.distributed.run --nproc_per_node=8 scripts/training/run_recipe.py --recipe X\n",
            "torchrun scripts/training/run_recipe.py is Megatron-Bridge",
        ),
        # two of Megatron-LM's own flags (core_v0.15.0 examples/academic_paper_scripts/detxoify_lm/finetune_gpt_distributed
        # -1.3b.sh:30-35, a script of its own under the launcher)
        (
            "python -m torch.distributed.run examples/detxoify_lm/finetune_gpt.py --num-layers 24 --hidden-size 2048\n",
            "torchrun examples/detxoify_lm/finetune_gpt.py is Megatron-LM",
        ),
        ("srun -N 2 megatron pt --model Qwen/Qwen2.5-7B\n", "run.sh:1 megatron pt is Megatron-SWIFT"),
        ("megatron export --model Qwen/Qwen2.5-7B --to_mcore true\n", "megatron export runs a checkpoint conversion"),
        ("vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000\n", "run.sh:1 vllm serve runs an inference server"),
        (
            "llamafactory-cli export examples/merge_lora/llama3_lora_sft.yaml\n",
            "llamafactory-cli export runs an export",
        ),
        ("axolotl merge-lora config.yml --lora-model-dir out\n", "axolotl merge-lora runs a LoRA merge"),
        ("trl vllm-serve --model Qwen/Qwen2.5-7B\n", "trl vllm-serve runs an inference server (vLLM)"),
    ],
)
def test_a_command_memplan_does_not_read_is_one_line_naming_it(tmp_path, text, says):
    assert says in _refused(_script(tmp_path, text))


def test_a_word_that_names_a_cli_as_an_argument_is_no_command(tmp_path):
    """`pip install vllm` runs no vLLM: the script is refused as having no training command, not as serving."""
    said = _refused(_script(tmp_path, "pip install vllm nemo\necho megatron\n"))
    assert "no training command found" in said


def test_a_python_file_built_on_an_unread_framework_is_refused_naming_its_import(tmp_path):
    """Megatron-LM core_v0.15.0 pretrain_gpt.py:19 `from megatron.training import get_args`."""
    text = "import os\nfrom megatron.training import get_args, pretrain\n\npretrain(None, None, None, None)\n"
    said = _refused(_script(tmp_path, text, "train.py"))
    assert "train.py: line 2 imports megatron.training: Megatron-LM" in said


def test_each_unread_framework_cites_where_it_was_read_and_is_found_some_way():
    for u in UNREAD:
        assert u.source and (u.clis or u.scripts or u.modules or u.imports), u.name
