"""What each reader does beyond the committed examples: bundled presets where a named file is not there, several files
merged, framework defaults that depend on the world size or the model, DeepSpeed "auto" values, accelerate and axolotl
rules, the precision a run trains in, and a Python script's syntax tree."""

import json
import shutil
from pathlib import Path

from planner import intake
from planner.intake.collect import PRESETS
from tests.planner.intake.conftest import DATA


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _source(reading, field: str) -> str:
    return next(s.source for s in reading.settings if s.field == field)


def test_llamafactorys_bundled_deepspeed_config_when_the_file_is_not_there(tmp_path):
    yaml = _write(
        tmp_path,
        "lf.yaml",
        "model_name_or_path: Qwen/Qwen2.5-7B-Instruct\nfinetuning_type: full\n"
        "deepspeed: examples/deepspeed/ds_z3_offload_config.json\nbf16: true\n",
    )
    r = intake.read([yaml])
    assert (r.request["zero_stage"], r.request["offload"], r.request["precision"]) == (3, "optimizer+params", "bf16")
    assert str(PRESETS / "llamafactory_ds_z3_offload_config.json") in r.files
    assert "(bundled llamafactory_ds_z3_offload_config.json)" in _source(r, "zero_stage")


def test_a_missing_deepspeed_file_gives_the_stage_its_name_says_until_the_file_is_passed(tmp_path):
    yaml = _write(
        tmp_path, "lf.yaml", "model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\ndeepspeed: conf/my_zero2.json\n"
    )
    r = intake.read([yaml])
    assert r.request["zero_stage"] == 2 and _source(r, "zero_stage").startswith("memplan assumption")
    assert any("pass the JSON too" in line for line in r.unplanned)
    ds = _write(tmp_path, "my_zero2.json", json.dumps({"zero_optimization": {"stage": 1}}))
    r = intake.read([yaml, ds])
    assert r.framework == "llamafactory" and r.request["zero_stage"] == 1
    assert not any("pass the JSON too" in line for line in r.unplanned) and r.files[-1] == ds


def test_llamafactory_cli_overrides_and_launcher_environment(tmp_path):
    shutil.copy(DATA / "llamafactory/examples/train_lora/qwen3_lora_sft.yaml", tmp_path / "sft.yaml")
    run = _write(
        tmp_path,
        "run.sh",
        "CUDA_VISIBLE_DEVICES=0,1,2,3 llamafactory-cli train sft.yaml lora_rank=32 cutoff_len=1024\n",
    )
    r = intake.read([run])
    assert (r.request["gpus_per_node"], r.request["lora_rank"], r.request["seq_len"]) == (4, 32, 1024)
    assert _source(r, "lora_rank") == "run.sh:1 lora_rank=32"


def test_swift_defaults_follow_the_world_size_and_the_model(tmp_path):
    run = _write(
        tmp_path,
        "run.sh",
        "NPROC_PER_NODE=2 swift sft --model Qwen/Qwen2.5-7B-Instruct --train_type full "
        "--per_device_train_batch_size 1 --deepspeed zero2 --bogus_flag 1\n",
    )
    r = intake.read([run])
    # --train_type: the 3 line, read at v3.0.3, whose accumulation is transformers' 1 (ceil(16 / ...) from v3.2.2)
    assert r.request["grad_accum"] == 1 and "swift@3 default" in _source(r, "grad_accum")
    new = _write(tmp_path, "new.sh", Path(run).read_text().replace("--train_type", "--tuner_type"))
    r4 = intake.read([new])
    assert r4.request["grad_accum"] == 8 and "ceil(16 / 1 per device / 2 processes)" in _source(r4, "grad_accum")
    assert r.request["seq_len"] == 32768 and "the model's context" in _source(r, "seq_len")
    assert r.request["lora_rank"] == 0 and "ms-swift 3's name for --tuner_type" in _source(r, "lora_rank")
    assert r.request["precision"] == "bf16" and r.request["zero_stage"] == 2
    assert any("--bogus_flag 1 (not an ms-swift 3 argument" in line for line in r.unplanned)  # the line its flags read


def test_a_swift_config_file_and_its_env_section(tmp_path):
    _write(
        tmp_path,
        "sft.yaml",
        "model: Qwen/Qwen2.5-VL-7B-Instruct\ntuner_type: full\nfreeze_vit: true\n"
        "freeze_aligner: false\nmax_length: 4096\nENV:\n  MAX_PIXELS: 602112\n",
    )
    r = intake.read(
        [_write(tmp_path, "run.sh", "NPROC_PER_NODE=8 swift sft sft.yaml --per_device_train_batch_size 2\n")]
    )
    assert (r.request["frozen"], r.request["image_tokens"], r.request["micro_batch"]) == ("vision", 768, 2)
    assert r.request["precision"] == "bf16-pure"  # bf16 weights, no DeepSpeed: no fp32 master copy


def test_a_deepspeed_json_alone_resolves_auto_as_transformers_does(tmp_path):
    r = intake.read([str(DATA / "llamafactory/examples/deepspeed/ds_z2_offload_config.json")])
    assert r.framework == "deepspeed"
    assert (r.request["micro_batch"], r.request["grad_accum"], r.request["precision"]) == (8, 1, "fp32")
    assert "transformers 5.23 default per_device_train_batch_size 8" in _source(r, "micro_batch")
    fixed = _write(
        tmp_path,
        "ds.json",
        json.dumps({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True}, "optimizer": {"type": "Lamb"}}),
    )
    r = intake.read([fixed])
    assert (r.request["micro_batch"], r.request["zero_stage"], r.request["precision"]) == (4, 0, "bf16")
    assert any("optimizer.type: Lamb" in line for line in r.unplanned)


def test_accelerate_configs_alone(tmp_path):
    ds = _write(
        tmp_path,
        "ds.yaml",
        "distributed_type: DEEPSPEED\nnum_processes: 16\nnum_machines: 2\n"
        "mixed_precision: fp16\ndeepspeed_config:\n  offload_optimizer_device: cpu\n",
    )
    r = intake.read([ds])
    assert (
        r.request["zero_stage"],
        r.request["offload"],
        r.request["gpus_per_node"],
        r.request["nodes"],
        r.request["precision"],
    ) == (2, "optimizer", 8, 2, "fp16")
    assert "accelerate 1.15 default zero_stage 2" in _source(r, "zero_stage")
    fsdp = _write(
        tmp_path,
        "fsdp.yaml",
        "distributed_type: FSDP\nnum_processes: 4\nbogus: 1\nfsdp_config:\n"
        "  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_offload_params: true\n"
        "  fsdp_activation_checkpointing: true\n",
    )
    r = intake.read([fsdp])
    assert (r.request["fsdp"], r.request["offload"], r.request["checkpointing"]) == (
        "grad-op",
        "optimizer+params",
        "full",
    )
    assert "FSDP1: planned as FSDP2" in _source(r, "fsdp")
    assert any("bogus: 1 (not an accelerate 1.15 config key" in line for line in r.unplanned)


def test_axolotl_batch_size_unknown_keys_and_unplannable_settings(tmp_path):
    cfg = _write(
        tmp_path,
        "ax.yaml",
        "base_model: Qwen/Qwen2.5-1.5B\nmicro_batch_size: 4\nbatch_size: 32\n"
        "sequence_len: 1024\ngradient_checkpointing: offload_disk\nmystery_key: 3\n"
        "torch_compile: true\nrl: kto\n",
    )
    r = intake.read([cfg])
    # rl: kto is read as KTO over rows of sequence_len (max_length: core/builders/base.py:690-691; planned from axolotl
    # 0.17 with an adapter, planner.frameworks.axolotl.kto)
    assert (r.request["grad_accum"], r.request["workload"]) == (8, {"kind": "kto", "max_length": 1024})
    lines = " | ".join(r.unplanned)
    for part in (
        "mystery_key: 3 (not an axolotl 0.19.0 key",
        "torch_compile: True",
        "offloading to disk",
        "checkpointing offload-inputs in KTO is not planned yet; planned as full",
    ):
        assert part in lines


def test_precision_from_the_trainers_flags_the_weights_dtype_and_the_sharding(tmp_path):
    def precision(flags: str) -> str:
        r = intake.read([_write(tmp_path, "run.sh", f"torchrun --nproc_per_node 2 train.py --max_length 64 {flags}\n")])
        return r.request["precision"]

    assert precision("") == "fp32"  # transformers' defaults: no AMP
    assert precision("--bf16 True") == "bf16"
    assert precision("--fp16") == "fp16"
    assert precision("--bf16 --torch_dtype bfloat16") == "bf16-pure"  # no fp32 master copy
    assert precision("--bf16 --torch_dtype bfloat16 --fsdp 'full_shard auto_wrap'") == "bf16"


def test_a_python_script_with_trainingarguments_and_a_parser(tmp_path):
    script = _write(
        tmp_path,
        "train.py",
        (
            "import torch\nfrom transformers import AutoModelForCausalLM, BitsAndBytesConfig, TrainingArguments, "
            "HfArgumentParser\nfrom peft import LoraConfig\nBS = 2\n"
            "q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='fp4')\n"
            "m = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.2-3B', quantization_config=q)\n"
            "lora = LoraConfig(r=8, target_modules=['q_proj', 'v_proj'])\n"
            "args = TrainingArguments(per_device_train_batch_size=BS, gradient_accumulation_steps=get(), bf16=True,\n"
            "    gradient_checkpointing=True, optim='adamw_bnb_8bit')\nHfArgumentParser((TrainingArguments,))\n"
        ),
    )
    r = intake.read([script])
    assert r.framework == "hf"
    want = {
        "model": "llama-3.2-3b",
        "micro_batch": 2,
        "grad_accum": 1,
        "quant": "fp4",
        "lora_rank": 8,
        "lora_targets": "q_proj,v_proj",
        "precision": "bf16",
        "checkpointing": "full",
        "optimizer": "adamw-8bit",
    }
    assert {k: r.request.get(k) for k in want} == want
    lines = " | ".join(r.unplanned)
    assert "gradient_accumulation_steps=get()" in lines and "HfArgumentParser(...)" in lines


def test_peft_picks_the_targets_where_the_configuration_names_none(tmp_path):
    run = _write(
        tmp_path, "run.sh", "python sft.py --model_name_or_path Qwen/Qwen2.5-0.5B --use_peft --max_length 64\n"
    )
    r = intake.read([run])
    assert (r.request["lora_rank"], r.request["lora_targets"]) == (16, "q_proj,v_proj")
    assert "peft 0.21 default target_modules for qwen2 (peft/utils/constants.py:67)" in _source(r, "lora_targets")
    vl = _write(tmp_path, "vl.sh", "python sft.py --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct --use_peft\n")
    assert any("PEFT's default for model_type qwen2_5_vl is not known" in line for line in intake.read([vl]).unplanned)


def test_peft_all_linear_on_a_vlm_adapts_its_tower_unless_the_script_freezes_it(tmp_path):
    """TRL's --lora_target_modules all-linear reaches PEFT's all-linear, which adapts the tower and projector too
    (--lora-vision); VLM-R1's --freeze_vision_modules keeps them out; a text model has no tower to adapt."""
    base = "python sft.py --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct --use_peft --lora_target_modules all-linear"
    r = intake.read([_write(tmp_path, "a.sh", base + "\n")])
    assert r.request["lora_vision"] is True
    assert "PEFT's all-linear adapts the vision tower and projector too" in _source(r, "lora_vision")
    frozen = intake.read([_write(tmp_path, "b.sh", base + " --freeze_vision_modules true\n")])
    assert frozen.request["lora_vision"] is False and "b.sh:1 --freeze_vision_modules true" in _source(
        frozen, "lora_vision"
    )
    text = base.replace("Qwen2.5-VL-3B-Instruct", "Qwen2.5-0.5B")
    assert "lora_vision" not in intake.read([_write(tmp_path, "c.sh", text + "\n")]).request


def test_a_run_that_evaluates_brings_its_evaluation_batch(tmp_path):
    """HF / TRL flags and LLaMA-Factory keys: eval_strategy other than "no" (or do_eval) evaluates at
    per_device_eval_batch_size rows, HF's 8 where it is not set; a run that does not evaluate has no eval_batch."""
    script = "torchrun --nproc_per_node 8 train.py --model_name_or_path meta-llama/Llama-3.1-8B --bf16 {}\n"
    cases = [("--eval_strategy steps", 8), ("--eval_strategy steps --per_device_eval_batch_size 2", 2)]
    cases += [("--do_eval", 8), ("--eval_strategy no", None), ("", None)]
    for flags, expected in cases:
        r = intake.read([_write(tmp_path, "run.sh", script.format(flags))])
        assert r.request.get("eval_batch") == expected, flags
    lf = "model_name_or_path: meta-llama/Llama-3.1-8B\nfinetuning_type: full\nval_size: 0.05\n{}"
    r = intake.read([_write(tmp_path, "lf.yaml", lf.format("eval_strategy: steps\n"))])
    assert r.request["eval_batch"] == 8 and "training_args.py:1111" in _source(r, "eval_batch")
    assert "eval_batch" not in intake.read([_write(tmp_path, "lf.yaml", lf.format(""))]).request


def test_the_allocator_setting_comes_from_the_commands_environment(tmp_path):
    """expandable_segments from PYTORCH_CUDA_ALLOC_CONF (exported, or a prefix of the command) or torch 2.9's
    PYTORCH_ALLOC_CONF, among other options; absent or False, the default allocator."""
    script = "{}torchrun --nproc_per_node 8 train.py --model_name_or_path meta-llama/Llama-3.1-8B --bf16\n"
    cases = [
        ("export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n", True),
        ("PYTORCH_ALLOC_CONF=max_split_size_mb:128,expandable_segments:True ", True),
        ("export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False\n", False),
        ("export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512\n", None),
        ("", None),
    ]
    for head, expected in cases:
        r = intake.read([_write(tmp_path, "run.sh", script.format(head))])
        assert r.request.get("expandable_segments") == expected, head
    r = intake.read([_write(tmp_path, "run.sh", script.format(cases[0][0]))])
    assert _source(r, "expandable_segments").endswith("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")


def test_what_a_save_gathers_follows_each_sources_keys_and_defaults(tmp_path):
    """ZeRO-3: stage3_gather_16bit_weights_on_model_save true gathers (full), false / "auto" / absent save shards
    (DeepSpeed's default false; accelerate fills "auto" with false). FSDP: state_dict_type, else HF's
    TrainingArguments default FULL_STATE_DICT; accelerate's FSDP2 config SHARDED_STATE_DICT."""
    script = "torchrun --nproc_per_node 8 train.py --model_name_or_path meta-llama/Llama-3.1-8B --bf16 {}\n"
    for gather, expected in ((True, "full"), (False, "sharded"), ("auto", "sharded"), (None, "sharded")):
        zero = {"stage": 3} | ({} if gather is None else {"stage3_gather_16bit_weights_on_model_save": gather})
        ds = _write(tmp_path, "ds.json", json.dumps({"zero_optimization": zero}))
        r = intake.read([_write(tmp_path, "run.sh", script.format(f"--deepspeed {ds}"))])
        assert r.request["save_weights"] == expected, gather
    fsdp = "--fsdp 'full_shard auto_wrap' --fsdp_config '{}'"
    r = intake.read([_write(tmp_path, "run.sh", script.format(fsdp.format('{"version": 2}')))])
    assert r.request["save_weights"] == "full" and "training_args.py:2852" in _source(r, "save_weights")
    sharded = '{"version": 2, "state_dict_type": "SHARDED_STATE_DICT"}'
    r = intake.read([_write(tmp_path, "run.sh", script.format(fsdp.format(sharded)))])
    assert r.request["save_weights"] == "sharded"
    acc = "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_version: 2\n"
    r = intake.read([_write(tmp_path, "acc.yaml", acc)])
    assert r.request["save_weights"] == "sharded" and "dataclasses.py:2047-2051" in _source(r, "save_weights")


def test_a_lora_base_loaded_in_fp32_under_mixed_precision_stays_fp32(tmp_path):
    """--dtype float32 (and TRL's CLI default, float32) with --bf16 and LoRA: the base stays fp32; bfloat16 or
    DeepSpeed (which casts the module to half): it does not."""
    run = "torchrun --nproc_per_node 2 train.py --model_name_or_path meta-llama/Llama-3.2-1B --bf16 --use_peft {}\n"
    for extra, expected in (("--dtype float32", True), ("", True), ("--dtype bfloat16", None)):
        r = intake.read([_write(tmp_path, "run.sh", run.format(extra))])
        assert r.request.get("lora_base_fp32") == expected, extra
    ds = _write(tmp_path, "ds.json", json.dumps({"zero_optimization": {"stage": 2}}))
    r = intake.read([_write(tmp_path, "run.sh", run.format(f"--dtype float32 --deepspeed {ds}"))])
    assert "lora_base_fp32" not in r.request


def test_eight_bit_bases_in_each_frameworks_keys(tmp_path):
    """LLaMA-Factory's quantization_bit 8, ms-swift's --quant_bits 8 and TRL's --load_in_8bit: bitsandbytes LLM.int8."""
    shutil.copy(DATA / "llamafactory/examples/train_lora/qwen3_lora_sft.yaml", tmp_path / "sft.yaml")
    lf = _write(tmp_path, "lf.sh", "llamafactory-cli train sft.yaml quantization_bit=8\n")
    sw = _write(
        tmp_path,
        "sw.sh",
        "swift sft --model Qwen/Qwen2.5-7B-Instruct --tuner_type lora --quant_method bnb --quant_bits 8\n",
    )
    trl = _write(
        tmp_path, "trl.sh", "trl sft --model_name_or_path Qwen/Qwen2.5-7B --use_peft --lora_r 8 --load_in_8bit\n"
    )
    for path, key in ((lf, "quantization_bit=8"), (sw, "--quant_bits 8"), (trl, "--load_in_8bit")):
        r = intake.read([path])
        assert r.request["quant"] == "int8" and key in _source(r, "quant"), path


def test_ms_swifts_hqq_example_is_an_hqq_base():
    """ms-swift's examples/train/qlora/hqq.sh: --quant_method hqq --quant_bits 4, HqqConfig(nbits=4) with its groups of
    64 (v3.10.3 swift/llm/argument/base_args/quant_args.py:69-71), planned as --quant hqq."""
    r = intake.read([DATA / "swift/examples/train/qlora/hqq.sh"])
    assert r.request["quant"] == "hqq" and "--quant_method hqq" in _source(r, "quant")


def test_a_deepspeed_config_without_an_optimizer_runs_the_trainers_optim_at_the_files_release(tmp_path):
    """LLaMA-Factory's bundled JSONs name no optimizer: HF's Trainer hands DeepSpeed its `optim` (client_optimizer),
    whose default follows the transformers release the file targets: evaluation_strategy (a key gone at 4.53) means
    adamw_torch (torch's foreach AdamW), else today's adamw_torch_fused. A JSON naming AdamW runs DeepSpeed's own."""
    base = "model_name_or_path: Qwen/Qwen2.5-7B\nfinetuning_type: full\nfp16: true\n"
    ds2 = "deepspeed: examples/deepspeed/ds_z2_config.json\n"
    old = intake.read([_write(tmp_path, "old.yaml", base + ds2 + "evaluation_strategy: steps\n")])
    assert (old.request["optimizer"], old.request["client_optimizer"]) == ("adamw", True)
    # evaluation_strategy narrows LLaMA-Factory to 0.5 .. 0.9.4 and transformers to before 4.53: adamw_torch (0.9.4's
    # own pin resolves to 4.57.1, fused: the key decides)
    assert "evaluation_strategy is a key of transformers releases before 4.53" in _source(old, "optimizer")
    assert "evaluation_strategy: steps: taken by LLaMA-Factory 0.5 .. 0.9.4 only" in _source(old, "framework")
    assert "no optimizer entry" in _source(old, "client_optimizer")
    new = intake.read([_write(tmp_path, "new.yaml", base + ds2)])
    assert (new.request["optimizer"], new.request["client_optimizer"]) == ("adamw-fused", True)
    named = {"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}}
    ds = _write(tmp_path, "named.json", json.dumps(named))
    own = intake.read([_write(tmp_path, "own.yaml", base + "deepspeed: named.json\nevaluation_strategy: steps\n"), ds])
    assert own.request["optimizer"] == "adamw-fused" and not own.request.get("client_optimizer", False)
    z0 = intake.read([_write(tmp_path, "z0.yaml", base + "deepspeed: examples/deepspeed/ds_z0_config.json\n")])
    assert "client_optimizer" not in z0.request  # no ZeRO: the optimizer is torch's already (memory.py)


def test_ms_swift_3_runs_transformers_adamw_torch_as_deepspeeds_client(tmp_path):
    """ms-swift 3.x (--train_type) pinned transformers below 4.58, the foreach adamw_torch default to 4.53; its
    --deepspeed presets name no optimizer, so DeepSpeed steps that one. 4.x (--tuner_type) reads today's fused."""
    cmd = "swift sft --model Qwen/Qwen2.5-7B-Instruct --{} full --deepspeed zero2 --max_length 1024\n"
    old = intake.read([_write(tmp_path, "old.sh", cmd.format("train_type"))])
    assert (old.request["optimizer"], old.request["client_optimizer"]) == ("adamw", True)
    assert "requirements/framework.txt" in _source(old, "optimizer")
    new = intake.read([_write(tmp_path, "new.sh", cmd.format("tuner_type"))])
    assert (new.request["optimizer"], new.request["client_optimizer"]) == ("adamw-fused", True)
