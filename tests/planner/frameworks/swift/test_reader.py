"""ms-swift's processes under --deepspeed (planner/frameworks/swift/reader_env.py world): ms-swift refuses DeepSpeed where
one process spreads the model over several GPUs (is_mp), so a DeepSpeed run with more visible GPUs than NPROC_PER_NODE
says ran one process a GPU, NPROC_PER_NODE from the launching shell, and is planned so, said in a line."""

from pathlib import Path

import pytest

from planner import intake
from planner.errors import BadInput
from tests.planner.estimate.test_weight_sync import framework_file

FIELD = Path(__file__).parents[3] / "field"


def test_swift_2516s_deepspeed_run_without_nproc_per_node_is_one_process_a_gpu():
    reading = intake.read([str(FIELD / "swift-2516-qwen2-7b-full-z3off-8x4090" / "train.sh")])
    value = {s.field: s.value for s in reading.settings}
    assert value["gpus_per_node"] == 8 and "device_map" not in value
    assert value["zero_stage"] == 3 and value["offload"] == "optimizer+params"
    assert any("planned with NPROC_PER_NODE=8 from the launching shell" in n for n in reading.unplanned)


def test_without_deepspeed_the_visible_gpus_stay_one_processs_device_map(tmp_path):
    path = tmp_path / "train.sh"
    path.write_text("CUDA_VISIBLE_DEVICES=0,1 swift sft --model Qwen/Qwen2.5-7B-Instruct --tuner_type lora\n")
    request = intake.read([str(path)]).request
    assert (request["gpus_per_node"], request["device_map"]) == (2, 2)


def test_the_installed_ms_swift_refuses_deepspeed_under_a_device_map():
    """The rule the reading rests on, in the ms-swift the validators run (4.6.0 swift/arguments/sft_args.py:255)."""
    text = framework_file("MEMPLAN_SWIFT_PYTHON", "swift/arguments/sft_args.py").read_text()
    assert "if is_mp() and not self.use_ray:" in text and "DeepSpeed is not compatible with `device_map`" in text


@pytest.mark.parametrize(
    "hub,name",
    [
        ("Qwen/Qwen2.5-Omni-3B", "qwen2.5-omni-3b"),
        ("Qwen/Qwen2.5-Omni-7B", "qwen2.5-omni-7b"),
        ("Qwen/Qwen3-Omni-30B-A3B-Instruct", "qwen3-omni-30b-a3b"),
    ],
)
def test_an_omni_run_plans_its_talker_resident_unless_audio_output_is_off(tmp_path, hub, name):
    """ms-swift loads Qwen2.5-Omni and Qwen3-Omni whole, talker and vocoder resident unless ENABLE_AUDIO_OUTPUT=0
    (planner/frameworks/swift/reader_env.py omni_talker): the published checkpoint's whole config is planned, its
    talker frozen; with ENABLE_AUDIO_OUTPUT=0 the thinker alone."""
    path = tmp_path / "train.sh"
    for env, planned in (
        ("", f"{name}-with-talker"),
        ("ENABLE_AUDIO_OUTPUT=0 ", name),
        ("ENABLE_AUDIO_OUTPUT=1 ", None),
    ):
        path.write_text(f"{env}swift sft --model {hub} --tuner_type lora\n")
        reading = intake.read([str(path)])
        assert reading.request["model"] == (planned or f"{name}-with-talker")
        assert not [n for n in reading.unplanned if "talker" in n]


def test_a_thinker_only_omni_checkpoint_is_its_thinker(tmp_path):
    path = tmp_path / "train.sh"
    path.write_text("swift sft --model Qwen/Qwen3-Omni-30B-A3B-Thinking --tuner_type lora\n")
    assert intake.read([str(path)]).request["model"] == "qwen3-omni-30b-a3b"  # nothing resident


def test_every_catalog_thinker_with_an_audio_tower_has_its_whole_checkpoint():
    """The ms-swift reading plans a published Omni checkpoint as its whole config (reader_env.WITH_TALKER): every
    catalog thinker with an audio tower names one, with the same thinker and its talker resident."""
    from planner.frameworks.swift.reader_env import WITH_TALKER
    from planner.model import catalog

    for name in catalog.model_names():
        m = catalog.load_model(name)
        if any(t.role == "audio" for t in m.tensors) and m.resident_params() == 0:
            whole = catalog.load_model(WITH_TALKER[name])
            assert whole.resident_params() > 0 and whole.params - whole.resident_params() == m.params


def test_check_config_of_an_omni_command_plans_the_talker_resident(tmp_path):
    """`check --config` of ms-swift's Qwen2.5-Omni LoRA command: the talker's bf16 weights and the token2wav's fp32
    ones resident beside the thinker (1,351,360,256 x 2 + 449,051,264 x 4 = 4,498,925,568 bytes, 4.19 GiB), no
    gradient or optimizer state for them; ENABLE_AUDIO_OUTPUT=0 plans the thinker alone."""
    from planner import advise

    path = tmp_path / "train.sh"
    params, states = {}, {}
    for env in ("", "ENABLE_AUDIO_OUTPUT=0 "):
        path.write_text(f"{env}swift sft --model Qwen/Qwen2.5-Omni-7B --tuner_type lora --torch_dtype bfloat16\n")
        request = {**intake.read([str(path)]).request, "gpu": "h100"}
        memory = advise.check(advise.parse(advise.CheckRequest, request)).plan.memory
        params[env], states[env] = memory.params_bytes, (memory.grads_bytes, memory.optimizer_bytes)
    assert params[""] - params["ENABLE_AUDIO_OUTPUT=0 "] == 1_351_360_256 * 2 + 449_051_264 * 4
    assert states[""] == states["ENABLE_AUDIO_OUTPUT=0 "]


def test_audio_output_off_over_a_config_that_builds_the_talker_is_refused_in_one_line(tmp_path):
    """ENABLE_AUDIO_OUTPUT=0 drops a talker the folder's config.json builds (enable_audio_output true): planned as the
    file says it would count it, so it is refused, naming the edit that plans the thinker."""
    import json

    from planner.model import catalog

    (tmp_path / "omni").mkdir()
    (tmp_path / "omni" / "config.json").write_text(json.dumps(catalog.model_config("qwen2.5-omni-7b-with-talker")))
    path = tmp_path / "train.sh"
    path.write_text(f"ENABLE_AUDIO_OUTPUT=0 swift sft --model {tmp_path / 'omni'} --tuner_type lora\n")
    with pytest.raises(BadInput) as e:
        intake.read([str(path)])
    assert "enable_audio_output false" in str(e.value) and "\n" not in str(e.value)
    path.write_text(f"swift sft --model {tmp_path / 'omni'} --tuner_type lora\n")  # as the file says: talker counted
    assert intake.read([str(path)]).request["model"] == str(tmp_path / "omni" / "config.json")


def test_a_max_length_under_sequence_parallel_is_padded_to_whole_chunks(tmp_path):
    """ms-swift v4.5.2's sequence_parallel_qwen3_5.sh: --max_length 65535 under --sequence_parallel_size 4 runs rows
    padded to 65536 (swift/sequence_parallel/sequence_parallel.py:385-396), not a length memplan refuses."""
    path = tmp_path / "train.sh"
    path.write_text(
        "NPROC_PER_NODE=4 CUDA_VISIBLE_DEVICES=0,1,2,3 swift sft --model Qwen/Qwen2.5-7B-Instruct "
        "--sequence_parallel_size 4 --max_length 65535 --padding_free true --attn_impl flash_attn\n"
    )
    reading = intake.read([str(path)])
    (s,) = [s for s in reading.settings if s.field == "seq_len"]
    assert (s.value, reading.request["sequence_parallel"]) == (65536, 4)
    assert "--max_length 65535" in s.source and "sequence_parallel.py:385-396" in s.source


def test_a_grpo_generation_batch_is_micro_steps_of_the_global_micro_batch(tmp_path):
    """ms-swift v4.5.2's openenv/run_grpo_sudoku.sh: --generation_batch_size 4 at 1 a device on 4 processes is one
    micro-step's completions (swift/rlhf_trainers/args_mixin.py:208-212); 6 is not a whole number of them."""
    path = tmp_path / "train.sh"
    line = (
        "NPROC_PER_NODE=4 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --num_generations 4 "
        "--per_device_train_batch_size 1 --gradient_accumulation_steps 4 --generation_batch_size {}\n"
    )
    path.write_text(line.format(4))
    assert intake.read([str(path)]).request["workload"]["steps_per_generation"] == 1
    path.write_text(line.format(6))
    reading = intake.read([str(path)])
    assert "steps_per_generation" not in reading.request["workload"]
    assert any("--generation_batch_size 6" in u and "steps_per_generation not read" in u for u in reading.unplanned)


@pytest.mark.parametrize(
    ("flags", "lora_rank", "named"),
    [  # ms-swift v4.5.2's tuners/lisa/train.sh and tuners/unsloth/train.sh, their tuner flags
        ("--tuner_type full --lisa_activated_layers 2 --lisa_step_interval 20", 0, "LISA's rotating active layers"),
        ("--tuner_type lora --tuner_backend unsloth", 8, "unsloth's kernels and checkpointing"),
    ],
)
def test_lisa_and_unsloth_are_named_and_planned_as_their_upper_bound(tmp_path, flags, lora_rank, named):
    path = tmp_path / "train.sh"
    path.write_text(f"CUDA_VISIBLE_DEVICES=0 swift sft --model Qwen/Qwen2.5-7B-Instruct {flags}\n")
    reading = intake.read([str(path)])
    assert reading.request["lora_rank"] == lora_rank
    assert any(named in u and "not planned" in u for u in reading.unplanned)


def test_image_max_token_num_caps_a_qwen3_vl_image_in_tokens(tmp_path):
    """ms-swift v4.5.2's models/qwen3_vl/zero3.sh and qwen3_5/transformers.sh: IMAGE_MAX_TOKEN_NUM=1024 is qwen_vl_utils'
    cap in merged patches (swift/model/models/qwen.py:697-731; qwen_vl_utils 0.0.14 vision_process.py:132): one image
    a row of at most 1024 tokens, where the reading said text only."""
    path = tmp_path / "train.sh"
    path.write_text(
        "IMAGE_MAX_TOKEN_NUM=1024 NPROC_PER_NODE=2 swift sft --model Qwen/Qwen3-VL-30B-A3B-Instruct --max_length 8192\n"
    )
    reading = intake.read([str(path)])
    (s,) = [s for s in reading.settings if s.field == "image_tokens"]
    assert s.value == 1024 and s.key == "IMAGE_MAX_TOKEN_NUM" and "vision_process.py:132" in s.source
