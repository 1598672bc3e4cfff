"""LLaMA-Factory v0.9.5's own examples read as launched (issue 47; issue 49's "check --config on each framework's own
example"): a YAML given alone leaves its processes to the launch, and the reading asks for them (--gpus-per-node, or
the accelerate config its comment launches it with) rather than planning a world it invented; an AWQ checkpoint under
`bf16: true` is read in the fp16 transformers loads it in, and planned as the awq base."""

import pytest

from planner import checkconfig, intake
from planner.errors import BadInput
from planner.frameworks.llamafactory import writer as llamafactory
from tests.planner.intake.conftest import DATA

LF = DATA / "llamafactory/examples"
ASCEND = LF / "ascend/qwen3_full_sft_fsdp2.yaml"  # comment: accelerate launch --config_file .../fsdp2_config.yaml
ASKED = "pass --gpus-per-node)"
yaml = pytest.importorskip("yaml")


def test_a_yaml_alone_asks_for_the_gpus_of_its_launch():
    reading = intake.read([str(LF / "train_lora/qwen3_lora_sft.yaml")])
    assert "gpus_per_node" not in reading.request
    assert any("qwen3_lora_sft.yaml alone" in n and "launcher.py:60-66" in n and ASKED in n for n in reading.unplanned)


def test_a_yaml_its_comment_launches_through_accelerate_asks_for_that_config():
    reading = intake.read([str(ASCEND)])
    assert "fsdp" not in reading.request and "gpus_per_node" not in reading.request
    asked = [n for n in reading.unplanned if "--config_file examples/accelerate/fsdp2_config.yaml" in n]
    assert len(asked) == 1 and asked[0].startswith("qwen3_full_sft_fsdp2.yaml:3 ") and ASKED in asked[0], asked


def test_the_accelerate_config_given_beside_it_answers_the_question():
    """The launch examples/README.md and the file's comment give: accelerate's fsdp2_config.yaml (num_processes: 2,
    distributed_type: FSDP) beside the YAML; the question is gone."""
    reading = intake.read([str(ASCEND), str(LF / "accelerate/fsdp2_config.yaml")])
    assert (reading.request["gpus_per_node"], reading.request["fsdp"]) == (2, "full")
    assert not any(ASKED in n for n in reading.unplanned), reading.unplanned


def test_the_flag_answers_the_question():
    result = checkconfig.check_config(
        [str(LF / "train_qlora/llama3_lora_sft_awq.yaml")], {"gpu": "h100", "gpus_per_node": 4}
    )
    assert result.plan.world_size == 4
    assert not any(ASKED in n for n in result.config["unplanned"]), result.config["unplanned"]


def test_an_awq_checkpoint_under_bf16_is_read_in_fp16_and_planned_as_awq():
    """transformers 5.6 (LLaMA-Factory 0.9.5's newest pin) loads an AWQ checkpoint in fp16 whatever dtype LLaMA-Factory
    asks (quantizers/quantizer_awq.py:57-62): the example's `bf16: true` reads as fp16, citing it; before, the
    framework's runs refused --quant awq and the example could not be checked."""
    path = LF / "train_qlora/llama3_lora_sft_awq.yaml"
    reading = intake.read([str(path)])
    precision = next(s for s in reading.settings if s.field == "precision")
    assert precision.value == "fp16" and "bf16: True" in precision.source and "quantizer_awq.py" in precision.source
    plan = checkconfig.check_config([str(path)], {"gpu": "h100"}).plan
    assert (plan.quant, plan.precision, plan.lora_rank) == ("awq", "fp16", 8)


def test_a_yaml_trains_only_under_do_train(tmp_path):
    """LLaMA-Factory trains only under do_train: true (v0.9.5 train/sft/workflow.py:120): the training example with it
    turned off is refused naming the key; with prediction beside training it is read as the training run."""
    text = (LF / "train_lora/qwen3_lora_sft.yaml").read_text()
    off = tmp_path / "off.yaml"
    off.write_text(text.replace("do_train: true", "do_train: false"))
    with pytest.raises(BadInput, match=r"off.yaml: do_train: False: no training, without do_train: true") as e:
        intake.read([str(off)])
    assert "\n" not in str(e.value)
    both = tmp_path / "both.yaml"
    both.write_text(text + "do_predict: true\n")
    assert intake.read([str(both)]).request["lora_rank"] == 8


def test_an_awq_plan_writes_no_bitsandbytes_keys():
    """The AWQ checkpoint's own quantization_config decides (model_utils/quantization.py:117-124), as GPTQ's: the
    written YAML names the checkpoint, in fp16, with no quantization_bit (which would ask bitsandbytes for a 4-bit base)."""
    result = checkconfig.check_config([str(LF / "train_qlora/llama3_lora_sft_awq.yaml")], {"gpu": "h100"})
    model, hw, goal = result.context
    files = llamafactory.files(result.plan, model, hw, goal.seq_len, goal)
    cfg = yaml.safe_load(files[llamafactory.CONFIG_NAME])
    assert cfg["model_name_or_path"] == "TechxGenus/Meta-Llama-3-8B-Instruct-AWQ" and cfg["fp16"] is True
    assert not {"quantization_bit", "quantization_type", "quantization_method"} & set(cfg), cfg
