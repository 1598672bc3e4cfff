"""Exports checked by the libraries that consume them: DeepSpeed's config models, HF TrainingArguments."""

import dataclasses
from pathlib import Path

import pytest

from planner.config.spec import Goal, Knobs
from planner.export.launch import with_launch
from planner.model import catalog, hardware
from planner.search.estimates import make_plan

ROOT = Path(__file__).resolve().parents[3]


def plan(zero, offload="none", precision="bf16", nodes=1, optimizer="adamw"):
    hw, model, goal = (
        hardware.resolve("a100-80gb", 8, nodes),
        catalog.load_model("llama-2-7b"),
        Goal(global_batch=64 * nodes, seq_len=2048),
    )
    knobs = Knobs(zero_stage=zero, offload=offload, precision=precision, optimizer=optimizer, checkpointing="full")
    return with_launch(make_plan(model, hw, goal, knobs, 2), model, hw, goal), hw


@pytest.mark.parametrize("zero,offload", [(1, "none"), (2, "optimizer"), (3, "none"), (3, "optimizer+params")])
def test_deepspeed_config_validates_with_deepspeed(zero, offload):
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    p, _ = plan(zero, offload)
    ds = p.launch.deepspeed_config
    z = DeepSpeedZeroConfig(**ds["zero_optimization"])
    assert int(z.stage) == zero
    assert (z.offload_optimizer is not None) == (offload != "none")
    assert (z.offload_param is not None) == (offload == "optimizer+params")
    assert ds["train_batch_size"] == ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * 8
    assert ds["bf16"] == {"enabled": True}


def test_ddp_plan_has_no_deepspeed_and_uses_torchrun():
    p, _ = plan(0)
    assert p.launch.deepspeed_config is None
    assert p.launch.command.startswith("torchrun --nproc_per_node 8 train.py")
    p2, _ = plan(0, nodes=2)
    assert "--nnodes 2" in p2.launch.command and "--rdzv_endpoint" in p2.launch.command
    p3, _ = plan(2, nodes=2)
    assert p3.launch.command.startswith("deepspeed --num_gpus 8 --num_nodes 2")


def test_hf_args_are_training_arguments_fields():
    transformers = pytest.importorskip("transformers")
    fields = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}
    for zero, opt in ((0, "adamw"), (2, "adamw-fused"), (0, "adafactor"), (0, "adamw-8bit"), (0, "sgd")):
        args = plan(zero, optimizer=opt)[0].launch.hf_args
        assert set(args) <= fields
        assert args["optim"] in {o.value for o in transformers.training_args.OptimizerNames}


def test_fp16_config_has_loss_scaling():
    ds = plan(2, precision="fp16")[0].launch.deepspeed_config
    assert ds["fp16"]["enabled"] and ds["fp16"]["loss_scale"] == 0 and "bf16" not in ds


def recipe_plan(precision="bf16", **fields):
    hw, model, goal = (
        hardware.resolve("h100", 1, 1),
        catalog.load_model("llama-3.2-1b"),
        Goal(global_batch=4, seq_len=2048),
    )
    return with_launch(make_plan(model, hw, goal, Knobs.make(precision=precision, **fields), 2), model, hw, goal)


@pytest.mark.parametrize(
    "fields",
    [
        {"loss": "fused"},
        {"attention": "flash"},
        {"attention": "eager"},
        {"batching": "packed", "attention": "flash"},
        {"checkpointing": "selective-op"},
        {"optimizer": "paged-adamw-8bit", "lora_rank": 8},
    ],
)
def test_recipe_hf_args_load_in_trls_sft_config(fields, tmp_path):
    """The recipe knobs' HF arguments (attention and packing are TRL's SFTConfig fields) are what TRL accepts."""
    trl = pytest.importorskip("trl")
    import transformers

    args = recipe_plan(**fields).launch.hf_args
    cfg = trl.SFTConfig(output_dir=str(tmp_path), use_cpu=True, report_to=[], **{**args, "bf16": False})
    assert cfg.per_device_train_batch_size == args["per_device_train_batch_size"]
    assert cfg.optim in {o.value for o in transformers.training_args.OptimizerNames}
    assert getattr(cfg, "padding_free", False) == args.get("padding_free", False)


def test_lora_and_qlora_configs_load_in_peft_and_transformers():
    pytest.importorskip("peft")
    from peft import LoraConfig
    from transformers import BitsAndBytesConfig

    launch = recipe_plan(
        lora_rank=16, quant="nf4", lora_targets="q_proj,v_proj", lora_train_embeddings=True, lora_dropout=0.05
    ).launch
    lc = LoraConfig(**launch.peft_config)
    assert (
        lc.r == 16
        and set(lc.target_modules) == {"q_proj", "v_proj"}
        and lc.modules_to_save == ["embed_tokens", "lm_head"]
    )
    bc = BitsAndBytesConfig(**launch.quantization_config)
    assert bc.load_in_4bit and bc.bnb_4bit_quant_type == "nf4" and bc.bnb_4bit_use_double_quant


def test_expandable_segments_reach_every_launch_form():
    """The allocator setting is environment, read when CUDA starts: the command sets it before the launcher, the
    sbatch script exports it, the bundled trainer's command passes the knob."""
    from planner.export import commands

    hw, model, goal = (
        hardware.resolve("h100", 2, 1),
        catalog.load_model("llama-3.2-1b"),
        Goal(global_batch=8, seq_len=1024),
    )
    p = with_launch(make_plan(model, hw, goal, Knobs(expandable_segments=True), 2), model, hw, goal)
    assert p.launch.command.startswith("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True torchrun ")
    assert "\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n" in commands.sbatch(p, hw)
    assert "--expandable-segments" in commands.bundled_command(p, hw, model, 1024)
    plain = with_launch(make_plan(model, hw, goal, Knobs(), 2), model, hw, goal)
    assert "PYTORCH_CUDA_ALLOC_CONF" not in plain.launch.command + commands.sbatch(plain, hw)


def test_a_vila_model_named_by_its_folder_runs_vilas_entry_point_on_that_folder(tmp_path):
    """Issue 50: the VILA export wrote `--model_name_or_path model` (the folder's base name) and a generic train.py."""
    folder = tmp_path / "runs" / "nvila-8b-pretrain" / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text((ROOT / "docs/examples/models/NVILA-8B/config.json").read_text())
    model = catalog.load_model(str(folder))
    hw = hardware.resolve("h100", 8, 1)
    goal = Goal(global_batch=16, seq_len=4096)
    p = with_launch(make_plan(model, hw, goal, Knobs(zero_stage=3), 2), model, hw, goal)
    words = p.launch.command.split()
    assert words[words.index("--model_name_or_path") + 1] == str(folder)
    assert "llava/train/train_mem.py" in words and "train.py" not in words
    assert catalog.load_model(str(folder / "config.json")).source == str(folder)  # the file names its folder


def test_a_catalog_model_is_named_by_its_hub_id_and_runs_your_train_py():
    words = plan(0)[0].launch.command.split()
    assert words[words.index("--model_name_or_path") + 1] == catalog.hf_id("llama-2-7b") == "meta-llama/Llama-2-7b-hf"
    assert "train.py" in words


def test_a_client_optimizer_plan_exports_a_deepspeed_config_without_an_optimizer():
    """memplan's own ZeRO plans name DeepSpeed's AdamW (fused Adam, no step temporaries); a plan read from a user's
    config that names none (client_optimizer) exports none, so HF's Trainer builds --optim as the plan counted it."""
    from planner.export.configs import deepspeed_config_for

    model = catalog.load_model("llama-2-7b")
    own = deepspeed_config_for(Knobs(zero_stage=2, precision="bf16"), 1, 1, 8, model)
    client = Knobs(zero_stage=2, precision="bf16", client_optimizer=True, framework="deepspeed")
    theirs = deepspeed_config_for(client, 1, 1, 8, model)
    assert own["optimizer"]["type"] == "AdamW" and "optimizer" not in theirs


@pytest.mark.parametrize(
    "fields,config",
    [
        ({"precision": "bf16-pure", "lora_rank": 8, "lora_dropout": 0.05}, "SFTConfig"),
        ({"batching": "packed", "attention": "flash", "loss": "fused"}, "SFTConfig"),
        ({"quant": "nf4", "lora_rank": 16, "lora_train_embeddings": True}, "SFTConfig"),
        ({"lora_rank": 16, "lora_variant": "dora", "precision": "fp16"}, "SFTConfig"),
        ({"eval_batch": 2, "eval_logits_steps": 4}, "SFTConfig"),
        ({"workload": {"kind": "grpo", "num_generations": 4, "generation": "vllm-colocate"}}, "GRPOConfig"),
        ({"workload": {"kind": "dpo", "max_length": 1024}}, "DPOConfig"),
        ({"framework": "trl", "workload": {"kind": "kto", "max_length": 1024}}, "KTOConfig"),
    ],
)
def test_the_hf_commands_flags_parse_with_trls_own_parser(fields, config, tmp_path):
    """The command's flags (commands.script_args, named by planner/frameworks/hf/keys.py) through TRL 1.16's TrlParser
    with its ModelConfig, as a TRL script parses them: an unknown flag is an error there. It caught --torch_dtype,
    which TRL 1.16 names dtype (trl/trainer/model_config.py:89)."""
    trl = pytest.importorskip("trl")
    from planner.export import commands

    p = recipe_plan(**fields)
    flags = commands.script_args(p, model=catalog.load_model("llama-3.2-1b"))
    parser = trl.TrlParser((trl.ScriptArguments, getattr(trl, config), trl.ModelConfig))
    _, cfg, model_cfg = parser.parse_args_and_config(
        [*flags, "--output_dir", str(tmp_path), "--dataset_name", "d", "--use_cpu", "--report_to", "none"]
    )[:3]
    assert cfg.per_device_train_batch_size == p.micro_batch and cfg.gradient_accumulation_steps == p.grad_accum
    assert (model_cfg.dtype == "bfloat16") == (p.precision == "bf16-pure")
    assert model_cfg.use_peft == bool(p.lora_rank) and (model_cfg.lora_r == p.lora_rank or not p.lora_rank)


def test_galores_projection_is_written_in_optim_args_and_read_back(tmp_path):
    """optim_args rank=N,proj_type=left (transformers 5.25 trainer_optimizer.py:369-375 pops both from it), on the
    command line and in hf_args; the command read back gives the same optimizer_projection."""
    from planner import intake
    from planner.export import commands

    p = recipe_plan(framework="hf", optimizer="galore-adamw", optimizer_projection="left")
    flags = commands.script_args(p, model=catalog.load_model("llama-3.2-1b"))
    assert flags[flags.index("--optim_args") + 1] == "rank=128,proj_type=left"
    assert p.launch.hf_args["optim_args"] == "rank=128,proj_type=left"
    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nproc_per_node 1 train.py --model_name_or_path meta-llama/Llama-3.2-1B " + " ".join(flags)
    )
    assert intake.read([str(script)]).request["optimizer_projection"] == "left"
