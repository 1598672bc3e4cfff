"""ms-swift 3.x's own GRPO placement words and --use_liger (planner/frameworks/swift/reader_3x.py), read from ms-swift's
own example scripts at v3.2.2, copied verbatim (tests/data/frameworks/swift/examples_v3/SOURCES.md), and written at the
3.4 line (writer_rollout.py); 2.x's --use_liger (reader_2.liger) on field scripts."""

from pathlib import Path

import pytest

from planner import advise, checkconfig, intake
from planner.errors import BadInput
from planner.export import launch

V3 = Path(__file__).parents[3] / "data/frameworks/swift/examples_v3/v3.2.2"
V312 = V3.parent / "v3.12.6"


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


def test_a_bare_use_vllm_at_the_3_4_line_is_placed_as_3_4_places_it(tmp_path):
    """full_vllm.sh less --vllm_device under a pin ms-swift==3.4.1: num_infer_workers 1 by default, 8 GPUs visible,
    NPROC_PER_NODE=7: 3.4.x's async mode, the engine on GPU 7 (v3.4.1 rlhf_args.py:221-254), not 4.x's "requires
    vllm_mode"; the note says 3.5-3.6 colocate it. With 7 GPUs visible 3.4.x asserts: refused, naming --vllm_mode."""
    bare = lambda t: t.replace("    --vllm_device auto \\\n", "")
    r, s = _read(V3 / "grpo/full_vllm.sh", tmp_path, bare, pins="ms-swift==3.4.1\n")
    assert s["framework"].value == "swift@3.4" and s["workload.generation"].value == "vllm-server"
    assert s["gpus_per_node"].value == 7 and any("3.5-3.6 colocate it" in u for u in r.unplanned)
    assert not any("requires" in u for u in r.unplanned)
    r, s = _read(V3 / "grpo/full_vllm.sh", tmp_path, bare, pins="ms-swift==3.7.3\n")  # 3.7-3.8: colocate by default
    assert s["workload.generation"].value == "vllm-colocate" and any("3.7-3.8's default" in u for u in r.unplanned)
    seven = lambda t: bare(t).replace("0,1,2,3,4,5,6,7", "0,1,2,3,4,5,6")
    with pytest.raises(BadInput, match="accepted: 8 visible GPUs, .* or --vllm_mode colocate"):
        _read(V3 / "grpo/full_vllm.sh", tmp_path, seven, pins="ms-swift==3.4.1\n")


FIELD_2 = Path(__file__).parents[3] / "field"


def test_ms_swift_2_use_liger_is_the_fused_loss_where_its_patch_is_the_models(tmp_path):
    """ms-swift 2.x takes --use_liger from v2.4.0 (v2.5.2 swift/llm/utils/argument.py:781): apply_liger picks Liger's
    patch by the first of llama3, mistral, mixtral, gemma, qwen2 in its model_type (v2.5.2 swift/llm/tuner.py:66-87).
    qwen2-7b: qwen2's patch, the fused loss; qwen2-vl-7b-instruct: qwen2's classes patched, the model's qwen2_vl
    ones not, its loss unfused (a note); llama2-7b: 2.x raises, and so does memplan, in one line."""
    liger = lambda t: t.replace("--sft_type", "--use_liger true \\\n    --sft_type")
    qwen2 = FIELD_2 / "swift-2516-qwen2-7b-full-z3off-8x4090/train.sh"
    r, s = _read(qwen2, tmp_path, liger)
    assert s["framework"].value == "swift@2" and s["loss"].value == "fused" and "2.x's name" in s["loss"].source
    r, s = _read(FIELD_2 / "swift-2753-qwen2vl7b-lora-z2-4xa6000/train.sh", tmp_path, liger)
    assert "loss" not in s and any("the model is qwen2_vl: its loss unfused" in u for u in r.unplanned)
    with pytest.raises(BadInput, match="apply_liger takes a model_type naming llama3, .* not llama2-7b"):
        _read(qwen2, tmp_path, lambda t: liger(t).replace("qwen2-7b", "llama2-7b"))


@pytest.mark.parametrize(
    ("generation", "placed", "shown"),
    [("colocate", ["--num_infer_workers 2"], 2), ("server", ["--vllm_device auto", "--num_infer_workers 1"], 3)],
)
def test_the_3_4_line_writes_3_4s_placement_words_and_reads_them_back(generation, placed, shown, tmp_path):
    """swift@3.4 writes no --vllm_mode (3.4.x's parser leaves it over: remaining_argv; the 3.4.1 parser passes these,
    test_old_releases_parse's grpo-vllm kinds): colocated, num_infer_workers = the 2 GPUs; on a GPU of its own,
    vllm_device auto and a third GPU shown past the 2 training ones; read back as the same placement."""
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "top": 1}
    body |= {"workload": {"kind": "grpo", "num_generations": 4, "generation": f"vllm-{generation}"}}
    res = advise.suggest(advise.parse(advise.SuggestRequest, {**body, "framework": "swift@3.4"}), with_nearest=False)
    (model, hw, goal), plan = res.context, res.plans[0]
    files = launch.files(plan, hw, model, goal.seq_len, goal)
    text = files["swift_train.sh"]
    assert "--vllm_mode" not in text and all(p in text for p in placed)
    assert f"CUDA_VISIBLE_DEVICES={','.join(map(str, range(shown)))} " in text
    assert "ms-swift>=3.4.0,<3.5.0" in files["requirements.txt"]  # 3.5 colocates whatever these say, 3.6 refuses
    for name, body_text in files.items():
        (tmp_path / name).write_text(body_text)
    _, s = _read(tmp_path / "swift_train.sh")
    assert s["workload.generation"].value == f"vllm-{generation}" and s["gpus_per_node"].value == 2


def test_a_server_plan_names_the_rollout_host_past_the_3_4_line():
    """--vllm_mode server without --vllm_server_host: 3.5-3.11 reset it to colocate (v3.7.0 swift/llm/argument/
    rlhf_args.py:211-220), 4.x asserts (v4.5.2 swift/arguments/rlhf_args.py:451-452): swift@3.7 and swift write it."""
    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "global_batch": 16, "top": 1}
    body |= {"workload": {"kind": "grpo", "num_generations": 4, "generation": "vllm-server"}}
    for framework in ("swift@3.7", "swift"):
        res = advise.suggest(advise.parse(advise.SuggestRequest, {**body, "framework": framework}), with_nearest=False)
        (model, hw, goal), plan = res.context, res.plans[0]
        text = launch.files(plan, hw, model, goal.seq_len, goal)["swift_train.sh"]
        assert "--vllm_mode server \\\n    --vllm_server_host YOUR_ROLLOUT_HOST" in text


def test_a_3_12_script_reads_at_the_lines_that_take_its_flags():
    """ms-swift 3.12.6's own rloo.sh: --train_type (3.x's name) beside --vllm_mode colocate (from v3.5.0) and
    --advantage_estimator: read at 3.9 and 4 (4.0.x's alias), not at 3.0-3.3, whose placement rules (no --vllm_mode,
    v3.4.1 rlhf_args.py:221-254) refused its 8 colocated processes; grpo_7b.sh's --vllm_mode server: not at 3.0-3.3,
    whose one micro-step a generation refused its 2 x 6 rows for 8 generations."""
    r, s = _read(V312 / "grpo/rloo.sh")
    assert r.releases == ("3.9", "4") and "--vllm_mode" in s["framework"].source
    assert s["workload.generation"].value == "vllm-colocate" and s["gpus_per_node"].value == 8
    assert checkconfig.check_config([str(V312 / "grpo/rloo.sh")], {"gpu": "a100-80gb"}).plan.fits
    r, s = _read(V312 / "grpo/grpo_7b.sh")
    assert "3" not in r.releases and s["workload.generation"].value == "vllm-server"
    assert checkconfig.check_config([str(V312 / "grpo/grpo_7b.sh")], {"gpu": "a100-80gb"}).plan.fits


def test_an_open_length_plans_at_a_line_that_runs_the_files(tmp_path):
    """ms-swift 3.12.6's sequence_parallel_dpo.sh, cut to its memory flags: --train_type (3.x) with DPO under
    sequence parallel, which 3.0-3.6 refuse (rlhf_args.py:359-369) and 3.7 runs; no --max_length, so the length is
    searched at one line: the oldest that takes the files, the lines that refuse them named as skipped."""
    script = tmp_path / "sequence_parallel_dpo.sh"
    script.write_text(
        "NPROC_PER_NODE=4 CUDA_VISIBLE_DEVICES=0,1,2,3 swift rlhf --rlhf_type dpo --model Qwen/Qwen2.5-VL-3B-Instruct "
        "--train_type full --torch_dtype bfloat16 --per_device_train_batch_size 1 --gradient_accumulation_steps 8 "
        "--deepspeed zero3 --attn_impl flash_attn --sequence_parallel_size 4\n"
    )
    result = checkconfig.check_config([str(script)], {"gpu": "a100-80gb"})
    releases = result.config["releases"]
    assert releases["planned"] == "3.7" and set(releases["failed"]) == {"3", "3.4"}
    assert all("sequence parallel from v3.7.0" in why for why in releases["failed"].values())
    assert result.plan.knobs.sequence_parallel == 4 and result.plan.knobs.release == "3.7"


def test_config_flag_is_read_at_the_lines_that_take_it_and_its_keys_win(tmp_path):
    """ms-swift 3.12.6's Ray example `swift sft --config sft.yaml`: 3.10-4.0.x turn the file's keys into flags after
    the command line's (v3.10.0 swift/cli/main.py prepare_config_args), so the file wins; 4.5's positional file
    goes first, so the command line wins."""
    r, s = _read(V312 / "multi-node/ray/sft.sh")
    assert s["model"].value == "qwen2.5-7b" and "sft.yaml" in s["model"].source
    assert r.releases == ("3.9", "4") and "--config FILE" in s["framework"].source
    (tmp_path / "sft.yaml").write_text((V312 / "multi-node/ray/sft.yaml").read_text())
    (tmp_path / "a.sh").write_text("swift sft --per_device_train_batch_size 4 --config sft.yaml\n")
    assert _read(tmp_path / "a.sh")[1]["micro_batch"].value == 1  # the file's
    (tmp_path / "b.sh").write_text("swift sft sft.yaml --per_device_train_batch_size 4\n")
    assert _read(tmp_path / "b.sh")[1]["micro_batch"].value == 4  # the command line's
