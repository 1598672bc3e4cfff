"""LLaMA-Factory's DPO and video rows as its code runs them (planner/frameworks/llamafactory/reader.py): DPO's
log-probs from the whole logits (train/dpo/trainer.py:230, not TRL's fused head), a video a row where the files set
its frame sampling (data/mm_plugin.py:237-247), a pixel cap alone or a worst case over the cutoff a line, and the
field run that ran out of memory with both (lf-7309) refused."""

from pathlib import Path

from planner import checkconfig, intake

FIELD = Path(__file__).resolve().parents[3] / "field"
YAML = (
    "model_name_or_path: Qwen/Qwen2.5-VL-7B-Instruct\nstage: {stage}\nfinetuning_type: full\ncutoff_len: {cutoff}\n"
    "per_device_train_batch_size: 1\ntemplate: qwen2_vl\n{extra}\n"
)


def _read(tmp_path: Path, stage="sft", cutoff=8192, extra=""):
    path = tmp_path / "train.yaml"
    path.write_text(YAML.format(stage=stage, cutoff=cutoff, extra=extra))
    r = intake.read([str(path)])
    return r, {s.field: s for s in r.settings}


def test_dpo_takes_log_probs_from_the_whole_logits(tmp_path):
    r, s = _read(tmp_path, "dpo")
    assert s["workload.logprobs"].value == "full" and "trainer.py:230" in s["workload.logprobs"].source
    assert not any("fp32" in u for u in r.unplanned)  # its fp32 logits are planned (Framework.fp32_logps)
    _, sft = _read(tmp_path, "sft")
    assert "workload.logprobs" not in sft


def test_frame_sampling_plans_a_video_a_row_at_its_worst_case(tmp_path):
    _, s = _read(tmp_path, extra="video_maxlen: 64\nvideo_fps: 1.0")
    assert s["videos"].value == 1 and "give --videos N" in s["videos"].source
    assert (s["max_frames"].value, s["fps"].value, s["video_max_pixels"].value) == (64, 1.0, 65536)
    assert "image_tokens" not in s  # the default image stood for the rows' media
    out = checkconfig.check_config([str(tmp_path / "train.yaml")], {"gpu": "h100"})
    assert out.plan.memory.peak_allocated_bytes > 0 and out.videos is not None


def test_a_pixel_cap_alone_or_a_video_over_the_cutoff_plans_no_video(tmp_path):
    r, s = _read(tmp_path, extra="video_max_pixels: 65536")
    assert "videos" not in s and any("video frames are not planned" in u for u in r.unplanned)
    r, s = _read(tmp_path, cutoff=1024, extra="video_maxlen: 300")
    assert "videos" not in s and any("over the cutoff 1024: a bound" in u for u in r.unplanned)


def test_the_video_dpo_run_that_ran_out_of_memory_does_not_fit():
    run = next(FIELD.glob("lf-7309-*"))
    out = checkconfig.check_config([str(run / "train.sh")], {"gpu": "h20", "gpus_per_node": 8})
    assert not out.plan.fits and out.plan.workload.logprobs == "full" and out.plan.workload.kind == "dpo"


def test_a_dpo_request_for_llamafactory_plans_its_whole_logits():
    """The request naming no head takes LLaMA-Factory's (Framework.logprobs), so what suggest ranks is what the file
    it writes reads back as (tests/planner/intake/test_round_trip.py)."""
    from planner import advise

    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 8, "global_batch": 16, "top": 1}
    body["workload"] = {"kind": "dpo", "max_length": 1024}
    plans = {
        fw: advise.suggest(advise.parse(advise.SuggestRequest, {**body, "framework": fw})).plans[0]
        for fw in ("llamafactory", "trl")
    }
    assert plans["llamafactory"].workload.logprobs == "full" and plans["trl"].workload.logprobs == "fused"
    assert plans["llamafactory"].memory.peak_allocated_bytes > plans["trl"].memory.peak_allocated_bytes
