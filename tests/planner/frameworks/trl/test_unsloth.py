"""unsloth scripts (planner/frameworks/trl/reader_unsloth.py): unsloth's published notebooks as scripts, read from their
syntax tree as trl@unsloth (not a plain TRL script): the model and its 4-bit base from `from_pretrained`, LoRA from
`get_peft_model`, the SFTConfig batch, unsloth's offloaded checkpointing, and a `not planned:` line for its kernels."""

from pathlib import Path

import pytest

from planner import advise, intake
from planner.errors import BadInput
from tests.planner.intake.conftest import DATA

UNSLOTH = DATA / "scripts" / "unsloth"
ALPACA = UNSLOTH / "Llama3.1_(8B)-Alpaca.py"
VISION = UNSLOTH / "Qwen2.5_VL_(7B)-Vision.py"
HEAD = "from unsloth import FastLanguageModel\nfrom trl import SFTConfig, SFTTrainer\n"
TRAIN = "trainer = SFTTrainer(model=model, args=SFTConfig(per_device_train_batch_size=4))\n"


def _settings(reading) -> dict:
    return {s.field: s for s in reading.settings}


def _script(tmp_path: Path, load: str, peft: str = "r=8") -> str:
    path = tmp_path / "train.py"
    path.write_text(
        f"{HEAD}model, tok = FastLanguageModel.from_pretrained(model_name='meta-llama/Llama-3.1-8B', {load})\n"
        f"model = FastLanguageModel.get_peft_model(model, {peft})\n{TRAIN}"
    )
    return str(path)


def test_the_alpaca_notebook_is_read_as_unsloth_over_trl_field_by_field():
    r = intake.read([str(ALPACA)])
    s = _settings(r)
    assert r.request["framework"] == "trl@unsloth"
    assert "FastLanguageModel.from_pretrained" in s["framework"].source
    assert r.request["model"] == "llama-3.1-8b" and "model_name=unsloth/Llama-3.1-8B" in s["model"].source
    assert (r.request["quant"], r.request["quant_absmax"]) == ("nf4", "8bit")  # load_in_4bit, unsloth's double quant
    assert "load_in_4bit=True" in s["quant"].source and "llama.py:2620-2626" in s["quant_absmax"].source
    assert r.request["lora_rank"] == 16 and r.request["lora_dropout"] == 0
    assert r.request["lora_targets"] == "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
    assert r.request["seq_len"] == 2048 and "max_seq_length=2048" in s["seq_len"].source
    assert (r.request["micro_batch"], r.request["grad_accum"], r.request["optimizer"]) == (2, 4, "adamw-8bit")
    assert r.request["checkpointing"] == "offload-inputs"
    assert "use_gradient_checkpointing=unsloth" in s["checkpointing"].source
    assert "UnslothCheckpointFunction" in s["checkpointing"].source
    assert any("unsloth's own kernels" in line for line in r.unplanned)
    assert not any("fused chunked head" in line for line in r.unplanned)  # TRL 1.16's head is not unsloth's loss


def test_the_notebooks_if_false_reload_cell_is_not_the_model_trained():
    """The notebook reloads "lora_model" under `if False:`: never run, so the trained model stays Llama-3.1-8B."""
    r = intake.read([str(ALPACA)])
    assert "lora_model" not in str(r.request["model"]) and "lora_model" not in " ".join(r.unplanned)


def test_the_vision_notebook_adapts_every_linear_the_tower_included():
    r = intake.read([str(VISION)])
    s = _settings(r)
    assert r.request["framework"] == "trl@unsloth" and "FastVisionModel" in s["framework"].source
    assert r.request["model"].startswith("unsloth/Qwen2.5-VL-7B-Instruct") or "qwen2.5-vl-7b" in r.request["model"]
    assert r.request["quant"] == "nf4" and r.request["lora_rank"] == 16
    assert r.request["lora_targets"] == "all-linear" and "get_peft_regex" in s["lora_targets"].source
    assert r.request["lora_vision"] is True
    assert r.request["seq_len"] == 2048 and "SFTConfig(max_length=2048)" in s["seq_len"].source
    assert r.request["checkpointing"] == "offload-inputs"


@pytest.mark.parametrize(
    ("load", "peft", "checkpointing", "why"),
    [
        ("max_seq_length=4096", "use_gradient_checkpointing=True", "full", "use_gradient_checkpointing=True"),
        ("max_seq_length=4096", "use_gradient_checkpointing=False", "off", "use_gradient_checkpointing=False"),
        ("max_seq_length=256", "use_gradient_checkpointing='unsloth'", "full", "_utils.py:374-378"),
        ("max_seq_length=4096", "r=8", "offload-inputs", "llama.py:3079"),
        ("max_seq_length=4096, use_gradient_checkpointing=False", "r=8", "offload-inputs", "llama.py:3079"),
    ],
)
def test_unsloths_checkpointing_as_the_script_sets_it(tmp_path, load, peft, checkpointing, why):
    r = intake.read([_script(tmp_path, load, peft)])
    assert r.request["checkpointing"] == checkpointing and why in _settings(r)["checkpointing"].source


def test_a_base_is_4_bit_unless_the_script_says_otherwise(tmp_path):
    r = intake.read([_script(tmp_path, "max_seq_length=1024")])
    s = _settings(r)
    assert r.request["quant"] == "nf4" and "loader.py:414" in s["quant"].source
    assert r.request["seq_len"] == 1024 and r.request["lora_rank"] == 8
    assert "quant" not in intake.read([_script(tmp_path, "load_in_4bit=False")]).request
    for load in ("load_in_16bit=True", "full_finetuning=True"):  # either turns the 4-bit default off
        r = intake.read([_script(tmp_path, load)])
        assert r.request["quant"] == "none" and load in _settings(r)["quant"].source, load
    assert intake.read([_script(tmp_path, "load_in_8bit=True")]).request["quant"] == "int8"


def test_unsloth_settings_memplan_does_not_plan_are_one_line_each(tmp_path):
    r = intake.read([_script(tmp_path, "offload_embedding=True, fast_inference=True", "r=8, loftq_config={'bits': 4}")])
    for key in ("offload_embedding=True", "fast_inference=True", "loftq_config="):
        assert sum(key in line for line in r.unplanned) == 1, key
    assert intake.read([_script(tmp_path, "max_seq_length=1024")]).request["seq_len"] == 1024


def test_a_vision_script_that_leaves_the_tower_out_plans_no_adapters_on_it(tmp_path):
    path = tmp_path / "vision.py"
    path.write_text(
        "from unsloth import FastVisionModel\nfrom trl import SFTConfig, SFTTrainer\n"
        "model, tok = FastVisionModel.from_pretrained('Qwen/Qwen2.5-VL-7B-Instruct')\n"
        "model = FastVisionModel.get_peft_model(model, finetune_vision_layers=False, finetune_mlp_modules=False)\n"
        f"{TRAIN}"
    )
    r = intake.read([str(path)])
    assert r.request["lora_vision"] is False and "finetune_vision_layers=False" in _settings(r)["lora_vision"].source
    assert sum("finetune_mlp_modules=False" in line for line in r.unplanned) == 1


def test_a_plain_trl_script_is_not_unsloth(tmp_path):
    path = tmp_path / "sft.py"
    path.write_text(
        "from transformers import AutoModelForCausalLM\nfrom trl import SFTConfig, SFTTrainer\n"
        "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B')\n" + TRAIN
    )
    r = intake.read([str(path)])
    assert r.request["framework"] in ("trl", "trl@1.10") and r.request["checkpointing"] == "full"
    assert "quant" not in r.request


def test_on_a_gpu_without_bf16_unsloth_trains_in_fp16():
    """The notebook's own target, a Colab T4: unsloth's dtype None and its patched trainer pick float16 there."""
    t4 = intake.read([str(ALPACA)], given={"gpu": "t4"})
    assert t4.request["precision"] == "fp16" and "rl.py:2414-2418" in _settings(t4)["precision"].source
    assert intake.read([str(ALPACA)], given={"gpu": "l4"}).request["precision"] == "bf16"


def test_the_grpo_notebook_reads_its_arithmetic_and_names_its_vllm_engine():
    r = intake.read([str(UNSLOTH / "Llama3.1_(8B)-GRPO.py")])
    w = r.request["workload"]
    assert r.request["framework"] == "trl@unsloth" and w["kind"] == "grpo"
    assert (w["num_generations"], w["max_prompt_length"], w["max_completion_length"]) == (6, 256, 1024 - 256)
    assert r.request["lora_rank"] == 32 and r.request["quant"] == "nf4"
    # per_device_train_batch_size 1 is no multiple of 6: unsloth's patched GRPOConfig makes it 6 (TRL would refuse it)
    assert r.request["micro_batch"] == 6 and "rl.py:3466-3482" in _settings(r)["micro_batch"].source
    for key in ("fast_inference=True", "gpu_memory_utilization=0.9", "max_lora_rank=32"):
        assert sum(key in line for line in r.unplanned) == 1, key
    # offloaded checkpointing under GRPO: one line, planned as full (more memory on the GPU, never less)
    assert r.request["checkpointing"] == "full" and any("offload-inputs in GRPO" in line for line in r.unplanned)


def test_sftconfig_fields_given_to_the_trainer_win_under_unsloth_only(tmp_path):
    """unsloth's patched SFTTrainer sets them on the config over its own (unsloth/trainer.py:714-780); plain TRL's
    SFTTrainer takes no packing, so a plain script's is not read."""
    trainer = "trainer = SFTTrainer(model=model, packing=True, args=SFTConfig(packing=False))\n"
    path = tmp_path / "train.py"
    path.write_text(f"{HEAD}model, tok = FastLanguageModel.from_pretrained('meta-llama/Llama-3.1-8B')\n{trainer}")
    r = intake.read([str(path)])
    assert r.request["batching"] == "packed" and "SFTTrainer(packing=True)" in _settings(r)["batching"].source
    path.write_text(f"{HEAD}from transformers import AutoModelForCausalLM\n"
                    f"model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B')\n{trainer}")  # fmt: skip
    assert intake.read([str(path)]).request.get("batching", "padded") == "padded"


def test_unsloths_line_runs_each_layers_input_on_the_host_never_every_saved_tensor():
    """trl@unsloth's checkpointing values (planner.frameworks.trl.releases): "unsloth" is offload-inputs; no setting it
    is read from keeps every saved tensor on the host, so --checkpointing offload is refused in one line. The files
    written are TRL's, whose checkpointing keeps the inputs on the device: the bundled trainer runs the plan
    (planner.export.export.bundled_only), as it ran unsloth's plans read as offload before."""
    body = {"model": "llama-3.1-8b", "gpu": "h100", "micro_batch": 1, "seq_len": 4096, "framework": "trl@unsloth"}
    res = advise.check(advise.parse(advise.CheckRequest, {**body, "checkpointing": "offload-inputs"}))
    assert res.plan.checkpointing == "offload-inputs"
    assert (
        res.plan.launch.command.startswith("planner train")
        and "--checkpointing offload-inputs" in res.plan.launch.command
    )
    with pytest.raises(BadInput, match="cannot run --checkpointing offload: it runs off, full, offload-inputs") as e:
        advise.check(advise.parse(advise.CheckRequest, {**body, "checkpointing": "offload"}))
    assert "\n" not in str(e.value)
