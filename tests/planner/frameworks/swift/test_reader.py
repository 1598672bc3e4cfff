"""ms-swift's processes under --deepspeed (planner/frameworks/swift/reader_env.py world): ms-swift refuses DeepSpeed where
one process spreads the model over several GPUs (is_mp), so a DeepSpeed run with more visible GPUs than NPROC_PER_NODE
says ran one process a GPU, NPROC_PER_NODE from the launching shell, and is planned so, said in a line."""

from pathlib import Path

import pytest

from planner import intake
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
    [("Qwen/Qwen2.5-Omni-7B", "qwen2.5-omni-7b"), ("Qwen/Qwen3-Omni-30B-A3B-Instruct", "qwen3-omni-30b-a3b")],
)
def test_an_omni_run_says_its_talker_is_resident_unless_audio_output_is_off(tmp_path, hub, name):
    """ms-swift loads Qwen2.5-Omni and Qwen3-Omni whole, talker and vocoder resident unless ENABLE_AUDIO_OUTPUT=0
    (planner/frameworks/swift/reader_env.py omni_talker); memplan plans the thinker, and says so where it is not off."""
    path = tmp_path / "train.sh"
    lines = {}
    for env in ("", "ENABLE_AUDIO_OUTPUT=0 "):
        path.write_text(f"{env}swift sft --model {hub} --tuner_type lora\n")
        reading = intake.read([str(path)])
        lines[env] = [n for n in reading.unplanned if "talker" in n]
        assert reading.request["model"] == name
    assert len(lines[""]) == 1 and "ENABLE_AUDIO_OUTPUT=0" in lines[""][0] and not lines["ENABLE_AUDIO_OUTPUT=0 "]
