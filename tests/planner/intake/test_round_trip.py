"""Round trip (issue 31 item 3): what a plan exports for its framework (planner.export.launch.files: the config,
the DeepSpeed JSON or accelerate config it names, and launch.sh with the framework's launch line), read back by
`check --config`, gives the same plan: the framework, the batch split over the same GPUs, and every knob."""

import pytest

from planner import advise, checkconfig
from planner.export import launch

CASES = {
    "LoRA on ZeRO-3": {"lora_rank": 16, "zero": 3, "checkpointing": "full"},
    "full, ZeRO-2 with the optimizer offloaded": {"zero": 2, "offload": "optimizer", "checkpointing": "off"},
    "QLoRA on DDP": {"lora_rank": 16, "quant": "nf4", "checkpointing": "full"},
    "full on FSDP": {"fsdp": "full", "checkpointing": "full"},
    "QLoRA on FSDP": {"lora_rank": 16, "quant": "nf4", "fsdp": "full", "checkpointing": "full"},
    "QLoRA on ZeRO-3": {"lora_rank": 16, "quant": "nf4", "zero": 3, "checkpointing": "full"},
    "LoRA DPO on ZeRO-2": {"lora_rank": 16, "workload": {"kind": "dpo"}, "zero": 2},
    "LoRA on two nodes": {"lora_rank": 16, "zero": 3, "nodes": 2},
}


def knobs_read_back(plan, files: dict[str, str]) -> dict:
    """The plan's knobs as reading its files back must give them. One known difference: where the DeepSpeed JSON
    written names DeepSpeed's own AdamW (planner.export.configs.deepspeed_config; a framework's preset named instead
    does not), DeepSpeed runs it fused, so the files say adamw-fused where the plan has torch's AdamW. Where a ZeRO
    plan names a framework's preset instead (ms-swift's --deepspeed zero3: no optimizer entry), HF's Trainer hands
    DeepSpeed its --optim, so the files say client_optimizer (planner.frameworks.deepspeed.reader)."""
    k = dict(plan.knobs)
    names_adamw = any(n.endswith(".json") and '"optimizer"' in text for n, text in files.items())
    if names_adamw and k["optimizer"] == "adamw":
        k["optimizer"] = "adamw-fused"
    if not names_adamw and k["zero_stage"] >= 1 and k["framework"] == "swift":
        k["client_optimizer"] = True
    return k


def written_and_read_back(body: dict, tmp_path):
    """(the check of `body`, the files its plan writes, the one launched, `check --config` of that one)."""
    res = advise.check(advise.parse(advise.CheckRequest, body))
    model, hw, goal = res.context
    files = launch.files(res.plan, hw, model, goal.seq_len)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    main = launch.LAUNCH_NAME if launch.LAUNCH_NAME in files else next(iter(files))
    return res, files, main, checkconfig.check_config([str(tmp_path / main)], {"gpu": "h100"})


@pytest.mark.parametrize("framework", ["llamafactory", "swift", "axolotl"])
@pytest.mark.parametrize("case", CASES)
def test_what_a_plan_writes_reads_back_as_the_same_plan(framework, case, tmp_path):
    body = {
        "model": "qwen2.5-7b",
        "gpu": "h100",
        "gpus_per_node": 8,
        "micro_batch": 2,
        "grad_accum": 4,
        "seq_len": 4096,
        "framework": framework,
        **CASES[case],
    }
    if "workload" in body:
        body.pop("seq_len")  # DPO's lengths are its workload's
    res, files, main, back = written_and_read_back(body, tmp_path)
    goal = res.context[2]
    a, b = res.plan, back.plan
    assert (b.framework, b.micro_batch, b.grad_accum, b.world_size) == (
        a.framework,
        a.micro_batch,
        a.grad_accum,
        a.world_size,
    )
    assert dict(b.knobs) == knobs_read_back(a, files)
    assert back.goal["seq_len"] == goal.seq_len and back.model["name"] == "qwen2.5-7b"
    assert back.config["files"][0].endswith(main)


@pytest.mark.parametrize(
    "knobs",
    [
        {"vit_checkpointing": "off"},
        {"frozen": "vision"},
        {"frozen": "none"},
        {"lora_rank": 16, "lora_tower_full": True},
    ],
    ids=str,
)
def test_a_vlms_tower_settings_read_back_in_swift(knobs, tmp_path):
    """--vit_gradient_checkpointing false, --freeze_vit and --tuner_type lora_llm (LoRA on the language model, the
    tower trained in full), written and read back as the same knobs."""
    body = {"model": "qwen2.5-vl-7b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 1, "grad_accum": 2}
    body |= {"seq_len": 4096, "framework": "swift", "zero": 3, "checkpointing": "full", **knobs}
    res, files, _, back = written_and_read_back(body, tmp_path)
    assert dict(back.plan.knobs) == knobs_read_back(res.plan, files)
    assert all(getattr(back.plan.knobs, k) == v for k, v in knobs.items())


@pytest.mark.parametrize("frozen", ["none", "vision", "vision+projector", "language", "language+vision"])
def test_what_is_frozen_reads_back_in_llamafactory(frozen, tmp_path):
    """freeze_vision_tower, freeze_multi_modal_projector and freeze_language_model, written and read back."""
    body = {"model": "qwen2.5-vl-7b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 1, "grad_accum": 2}
    body |= {"seq_len": 4096, "framework": "llamafactory", "zero": 3, "checkpointing": "full", "frozen": frozen}
    body |= {"image_tokens": 1024}
    _, _, _, back = written_and_read_back(body, tmp_path)
    assert back.plan.knobs.frozen == frozen


@pytest.mark.parametrize(
    "flags, frozen",
    [
        ("--freeze_llm true --freeze_vit false --freeze_aligner false", "language"),
        ("--freeze_llm true --freeze_aligner false", "language+vision"),
        ("--freeze_llm false --freeze_vit false", "none"),
    ],
)
def test_swifts_freeze_llm_is_read_and_written(flags, frozen, tmp_path):
    """--freeze_llm (tuner_args.py:122) beside --freeze_vit / --freeze_aligner; the export writes the same three."""
    from planner import intake

    script = (
        f"MAX_PIXELS=602112 NPROC_PER_NODE=8 swift sft --model Qwen/Qwen2.5-VL-7B-Instruct --tuner_type full {flags}\n"
    )
    (tmp_path / "run.sh").write_text(script)
    r = intake.read([str(tmp_path / "run.sh")])
    assert r.request.get("frozen", "none") == frozen
    res = advise.check(advise.parse(advise.CheckRequest, {**r.request, "gpu": "h100"}))
    text = "\n".join(launch.files(res.plan, *res.context[:2], 4096).values())
    assert ("--freeze_llm true" in text) == frozen.startswith("language")
    assert ("--freeze_vit true" in text) == ("vision" in frozen)


@pytest.mark.parametrize("framework", ["swift", "trl"])
def test_a_gkd_plan_reads_back_with_its_teacher(framework, tmp_path):
    """GKD (ms-swift's rlhf gkd script; TRL's GKDConfig fields in the HF route's train_args.json, which names no
    model): the teacher, lmbda, the JSD's beta and the rows' and completions' lengths written and read back as the
    same workload, with the same knobs and the same peak."""
    body = {"model": "qwen2.5-1.5b", "gpu": "h100", "gpus_per_node": 2, "micro_batch": 2, "grad_accum": 4}
    body |= {"framework": framework, "zero": 3, "checkpointing": "full"}
    body["workload"] = {"kind": "gkd", "teacher_model": "qwen2.5-7b", "lmbda": 0.25, "jsd_beta": 0.1}
    body["workload"] |= {"max_length": 2048, "max_completion_length": 384}
    res = advise.check(advise.parse(advise.CheckRequest, body))
    model, hw, goal = res.context
    files = launch.files(res.plan, hw, model, goal.seq_len)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    main = next(iter(files)) if framework == "swift" else "train_args.json"
    given = {"gpu": "h100"} | ({} if framework == "swift" else {"model": "qwen2.5-1.5b", "gpus_per_node": 2})
    back = checkconfig.check_config([str(tmp_path / main)], given)
    assert back.plan.workload == res.plan.workload and res.plan.workload.teacher_model == "qwen2.5-7b"
    assert dict(back.plan.knobs) == knobs_read_back(res.plan, files)
    assert back.plan.memory.peak_allocated_bytes == res.plan.memory.peak_allocated_bytes
