"""ms-swift 3.x's own GRPO placement words and --use_liger (planner/frameworks/swift/reader_3x.py), read from ms-swift's
own example scripts at v3.2.2, copied verbatim (tests/data/frameworks/swift/examples_v3/SOURCES.md)."""

from pathlib import Path

import pytest

from planner import intake
from planner.errors import BadInput

V3 = Path(__file__).parents[3] / "data/frameworks/swift/examples_v3/v3.2.2"


def _read(path: Path, tmp_path: Path | None = None, edit=None, pins: str = ""):
    if edit is not None or pins:
        text = path.read_text()
        path = tmp_path / path.name
        path.write_text(edit(text) if edit else text)
        if pins:
            (tmp_path / "requirements.txt").write_text(pins)
    r = intake.read([str(path)])
    return r, {s.field: s for s in r.settings}


def _unread(r, *keys: str) -> list[str]:
    return [u for u in r.unplanned if any(f"--{k} " in u for k in keys) and ("not planned)" in u or "refuses" in u)]


def test_vllm_device_auto_puts_the_engine_on_the_eighth_gpu():
    """full_vllm.sh: NPROC_PER_NODE=7 of 8 GPUs, --vllm_device auto, num_infer_workers 1 by default: async, the
    engine on GPU 7 (v3.4.1 rlhf_args.py:246-248), the training world 7 and vLLM's 0.7 share off the training GPUs."""
    r, s = _read(V3 / "grpo/full_vllm.sh")
    assert s["workload.generation"].value == "vllm-server" and s["gpus_per_node"].value == 7
    assert "workload.vllm_gpu_memory_utilization" not in s and "rlhf_args.py:221-254" in s["workload.generation"].source
    assert not _unread(r, "vllm_device", "use_vllm")
    # only the 3 and 3.4 lines take --vllm_device (3.6 drops it): 3.7's, 3.9's and 4's readings are not planned
    assert r.releases == ("3", "3.4") and "--vllm_device: only 3, 3.4 take it" in s["framework"].source


def test_an_engine_on_its_own_gpu_spreads_no_model_over_two(tmp_path):
    """One process with two GPUs visible: without an engine ms-swift spreads the model over both (device_map, MP);
    with one it sets USE_FAST_INFERENCE, MP off (v3.4.1 swift/utils/env.py:67-68), vLLM on the second GPU."""
    one = lambda t: t.replace("0,1,2,3,4,5,6,7", "0,1").replace("NPROC_PER_NODE=7", "NPROC_PER_NODE=1")
    _, s = _read(V3 / "grpo/full_vllm.sh", tmp_path, one)
    assert s["workload.generation"].value == "vllm-server" and s["gpus_per_node"].value == 1 and "device_map" not in s


def test_lmdeploy_on_gpus_of_its_own_is_planned_off_the_training_gpus(tmp_path):
    """full_lmdeploy.sh: NPROC_PER_NODE=6 of 8, --num_infer_workers 2, --use_lmdeploy true: TurboMind on GPUs 6 and 7;
    the same at the 3.4 line (a pin ms-swift==3.4.1 beside it: v3.4.1 ships the script byte for byte)."""
    for pins in ("", "ms-swift==3.4.1\n"):
        r, s = _read(V3 / "grpo/full_lmdeploy.sh", tmp_path, pins=pins)
        assert s["workload.generation"].value == "vllm-server" and s["gpus_per_node"].value == 6
        assert "LMDeploy's TurboMind" in s["workload.generation"].source
        assert not _unread(r, "use_lmdeploy", "num_infer_workers")
    assert s["framework"].value == "swift@3.4"


def test_num_infer_workers_equal_to_the_gpus_colocates():
    """multi_gpu_mp_colocate.sh: 8 processes, --num_infer_workers 8: an engine on each GPU at 0.5, TP 4 (3.x's
    --tensor_parallel_size, a name the line takes: no 'refuses' line), asleep outside generation."""
    r, s = _read(V3 / "grpo/multi_gpu_mp_colocate.sh")
    assert s["workload.generation"].value == "vllm-colocate" and s["gpus_per_node"].value == 8
    assert s["workload.vllm_gpu_memory_utilization"].value == 0.5 and s["workload.roles.rollout_tp"].value == 4
    assert s["workload.roles.sleep_level"].value == 1 and not _unread(r, "num_infer_workers", "tensor_parallel_size")


def test_what_ms_swift_3_refuses_or_memplan_cannot_plan_is_one_line(tmp_path):
    lm = V3 / "grpo/full_lmdeploy.sh"
    colocated = lambda t: t.replace("NPROC_PER_NODE=6", "NPROC_PER_NODE=8").replace("workers 2", "workers 8")
    with pytest.raises(
        BadInput,
        match=r"--use_lmdeploy true: LMDeploy's engine on the training GPUs .* accepted: "
        r"--use_vllm true",
    ):
        _read(lm, tmp_path, colocated)
    with pytest.raises(BadInput, match="num_infer_workers 2: .* accepted: 9 visible GPUs"):
        _read(V3 / "grpo/full_vllm.sh", tmp_path, lambda t: t.replace("auto", "auto \\\n    --num_infer_workers 2"))
    with pytest.raises(BadInput, match="accepted: auto, or GPUs from cuda:7"):
        _read(V3 / "grpo/full_vllm.sh", tmp_path, lambda t: t.replace("vllm_device auto", "vllm_device cuda:0"))


def test_use_liger_is_liger_fused_loss_for_the_architectures_apply_liger_takes(tmp_path):
    """v3.2.2's liger/train.sh (Qwen2.5-7B-Instruct, qwen2): --use_liger true is 4.x's --use_liger_kernel, the fused
    loss; a qwen3 model, which ms-swift 3.0-3.2's apply_liger does not take, is refused in one line."""
    r, s = _read(V3 / "liger/train.sh")
    assert s["loss"].value == "fused" and "use_liger_kernel" in s["loss"].source and not _unread(r, "use_liger")
    assert s["framework"].value == "swift@3" and r.releases == ()  # the 3 line alone takes --use_liger
    with pytest.raises(BadInput, match="apply_liger takes llama, .* not qwen3"):
        _read(V3 / "liger/train.sh", tmp_path, lambda t: t.replace("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-8B"))
