"""Plans with sequence, tensor and context parallel exported for verl 0.9.1 (Ulysses through its SFT trainer) and
torchtitan 0.3.0 (TP and CP in one mesh): made by the real planner, the files hold the plan's values under the
framework's own keys, and pass the frameworks' own config code where a venv with the framework is named
(MEMPLAN_VERL_PYTHON, MEMPLAN_TORCHTITAN_PYTHON; validators in tests/planner/export/validators/), which also refuses
a broken file."""

import ast
import os
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from planner import advise
from planner.errors import BadInput
from planner.export import launch
from planner.frameworks.torchtitan import writer as torchtitan
from planner.frameworks.verl import writer as verl

VALIDATORS = Path(__file__).parent / "validators"
BASE = {"gpu": "h100", "gpus_per_node": 8, "micro_batch": 2, "grad_accum": 4, "seq_len": 4096}
VERL = {"model": "qwen2.5-7b", "fsdp": "full", "attention": "flash", "checkpointing": "full"}
TITAN = {"model": "llama-3.1-8b", "fsdp": "full", "attention": "flash", "batching": "packed"}
CASES = {
    "verl": {
        "sp2": {**VERL, "sequence_parallel": 2, "optimizer": "adamw-fused"},
        "sp4_lora_two_nodes": {**VERL, "sequence_parallel": 4, "lora_rank": 16, "nodes": 2},
        "sp2_grad_op": {**VERL, "sequence_parallel": 2, "fsdp": "grad-op", "checkpointing": "off", "micro_batch": 1},
        "sdpa_hybrid_lora": {**VERL, "attention": "sdpa", "fsdp": "hybrid", "nodes": 2, "lora_rank": 8},
    },
    "torchtitan": {
        "tp2": {**TITAN, "tensor_parallel": 2, "checkpointing": "selective-op"},
        "cp2": {
            **TITAN,
            "context_parallel": 2,
            "cp_attention": "all-gather",
            "checkpointing": "full",
            "loss": "chunked",
        },
        "tp2_cp2_two_nodes": {
            **TITAN,
            "tensor_parallel": 2,
            "context_parallel": 2,
            "cp_attention": "all-gather",
            "nodes": 2,
            "fsdp": "hybrid",
            "micro_batch": 1,
        },
        "offload_pure_bf16": {**TITAN, "offload": "optimizer+params", "precision": "bf16-pure", "micro_batch": 1},
    },
}
MODULES = {"verl": verl, "torchtitan": torchtitan}
NAME = {"verl": verl.SCRIPT_NAME, "torchtitan": torchtitan.CONFIG_NAME}


def planned(framework: str, **fields):
    """A plan made by the real planner for `framework` (advise.check), with its model, hardware and seq_len."""
    body = {**BASE, "framework": framework, **fields}
    if "workload" in body:
        body.pop("seq_len")  # an RL row is planned from the workload's lengths
    result = advise.check(advise.parse(advise.CheckRequest, body))
    model, hw, goal = result.context
    return result.plan, model, hw, goal.seq_len


def written(framework: str, case: str, folder: Path) -> SimpleNamespace:
    plan, model, hw, seq_len = planned(framework, **CASES[framework][case])
    d = folder / case
    d.mkdir(parents=True)
    for name, text in MODULES[framework].files(plan, model, hw, seq_len).items():
        (d / name).write_text(text)
    return SimpleNamespace(plan=plan, model=model, hw=hw, dir=d, path=d / NAME[framework])


def overrides(path: Path) -> tuple[list[str], dict[str, str]]:
    """(the torchrun words before -m, {Hydra key: value}) of a verl_sft.sh, as bash reads it."""
    toks = shlex.split(path.read_text().replace("\\\n", " "), comments=True)
    m = toks.index("-m")
    assert toks[m + 1] == "verl.trainer.sft_trainer"
    return toks[:m], dict(t.split("=", 1) for t in toks[m + 2 :])


def titan_calls(path: Path) -> dict[str, dict[str, object]]:
    """{TrainingConfig | ParallelismConfig: its keyword arguments} of the exported module, read by ast."""
    out = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("TrainingConfig", "ParallelismConfig"):
            out[node.func.id] = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    return out


def test_verl_ulysses_keys(tmp_path):
    w = written("verl", "sp4_lora_two_nodes", tmp_path)
    run, o = overrides(w.path)
    assert run == [
        "torchrun",
        "--nnodes",
        "2",
        "--nproc_per_node",
        "8",
        "--node_rank",
        "$NODE_RANK",
        "--master_addr",
        "$MASTER_ADDR",
        "--master_port",
        "$MASTER_PORT",
    ]
    assert o["engine.ulysses_sequence_parallel_size"] == "4" and o["model.use_remove_padding"] == "true"
    assert o["data.micro_batch_size_per_gpu"] == str(w.plan.micro_batch) and o["data.use_dynamic_bsz"] == "false"
    assert int(o["data.train_batch_size"]) == w.plan.global_batch == w.plan.micro_batch * w.plan.grad_accum * 4
    assert o["data.max_length"] == "4096" and o["engine.strategy"] == "fsdp2" and o["engine.fsdp_size"] == "-1"
    assert (o["model.lora_rank"], o["model.lora_alpha"], o["model.target_modules"]) == ("16", "32", "all-linear")
    assert o["engine.model_dtype"] == "bf16" and o["model.enable_gradient_checkpointing"] == "true"
    assert o["model.path"] == "Qwen/Qwen2.5-7B" and verl.command(w.plan, w.hw) == "bash verl_sft.sh"
    o = overrides(written("verl", "sdpa_hybrid_lora", tmp_path).path)[1]
    assert o["+model.override_config.attn_implementation"] == "sdpa" and o["model.use_remove_padding"] == "false"
    assert o["engine.fsdp_size"] == "8" and o["engine.ulysses_sequence_parallel_size"] == "1"
    o = overrides(written("verl", "sp2_grad_op", tmp_path).path)[1]
    assert o["engine.reshard_after_forward"] == "false" and o["engine.model_dtype"] == "fp32"
    assert o["model.enable_gradient_checkpointing"] == "false"


def test_torchtitan_parallelism_keys(tmp_path):
    w = written("torchtitan", "tp2_cp2_two_nodes", tmp_path)
    c = titan_calls(w.path)
    p, t = c["ParallelismConfig"], c["TrainingConfig"]
    assert (p["tensor_parallel_degree"], p["context_parallel_degree"], p["enable_sequence_parallel"]) == (2, 2, True)
    assert p["data_parallel_replicate_degree"] * p["data_parallel_shard_degree"] * 2 * 2 == w.hw.world_size == 16
    assert p["data_parallel_replicate_degree"] == 2  # hybrid: one replica a node
    assert t["local_batch_size"] == w.plan.micro_batch and t["global_batch_size"] == w.plan.global_batch
    assert t["global_batch_size"] == t["local_batch_size"] * w.plan.grad_accum * 4 and t["seq_len"] == 4096
    assert (t["dtype"], t["mixed_precision_param"]) == ("float32", "bfloat16")
    assert "torchtitan.models.llama3 import model_registry" in w.path.read_text()
    assert torchtitan.command(w.plan, w.hw).endswith(
        "-m torchtitan.train --module memplan_torchtitan --config memplan_plan"
    )
    w = written("torchtitan", "offload_pure_bf16", tmp_path)
    t, text = titan_calls(w.path)["TrainingConfig"], w.path.read_text()
    assert t["enable_cpu_offload"] is True and t["dtype"] == "bfloat16"
    assert "activation_checkpoint=None" in text  # memplan's default checkpointing, off: torchtitan's is selective
    text = written("torchtitan", "cp2", tmp_path).path.read_text()
    assert "FullAC.Config()" in text and "ChunkedLossWrapper.Config" in text


def test_launch_carries_the_framework_files():
    plan, model, hw, seq_len = planned("torchtitan", **CASES["torchtitan"]["tp2"])
    files = launch.files(plan, hw, model, seq_len)
    assert set(files) == {torchtitan.CONFIG_NAME, launch.LAUNCH_NAME} and plan.launch.note is None
    plan, model, hw, seq_len = planned("verl", **CASES["verl"]["sp2"])
    assert set(launch.files(plan, hw, model, seq_len)) == {
        verl.SCRIPT_NAME,
        launch.PIN_NAME,
    }  # verl pinned, no torchtitan


@pytest.mark.parametrize(
    "framework,fields,field,says",
    [
        ("verl", {**VERL, "workload": {"kind": "dpo", "max_length": 2048}}, "workload", "cannot run --workload dpo"),
        ("verl", {**VERL, "tensor_parallel": 2}, "tensor_parallel", "cannot run --tensor-parallel on"),
        ("verl", {**VERL, "zero": 3, "fsdp": "off"}, "zero_stage", "cannot run --zero 3"),
        ("verl", {**VERL, "attention": "sdpa", "sequence_parallel": 2}, "sequence_parallel", "flash attention"),
        ("torchtitan", {**TITAN, "sequence_parallel": 2}, "sequence_parallel", "cannot run --sequence-parallel on"),
        ("torchtitan", {**TITAN, "lora_rank": 16}, "lora_rank", "cannot run --lora-rank on"),
        ("torchtitan", {**TITAN, "context_parallel": 2}, "cp_attention", "all-gather"),
    ],
)
def test_a_plan_the_framework_cannot_run_is_refused_in_one_line(framework, fields, field, says):
    with pytest.raises(BadInput) as e:
        planned(framework, **fields)
    assert e.value.field == field and "\n" not in str(e.value) and says in str(e.value)
    assert str(e.value).startswith(f"--framework {framework} (")


def test_torchtitan_refuses_a_model_it_has_no_definition_of():
    """A rule of the framework's (planner/frameworks/torchtitan/__init__.py): the check refuses, no HF material instead."""
    with pytest.raises(BadInput, match="torchtitan 0.3.0 has no definition of qwen2.5-7b") as refused:
        planned("torchtitan", **{**TITAN, "model": "qwen2.5-7b", "tensor_parallel": 2})
    assert refused.value.field == "model"


# --- the frameworks' own config code -------------------------------------------------------------------------------

VARS = {"verl": "MEMPLAN_VERL_PYTHON", "torchtitan": "MEMPLAN_TORCHTITAN_PYTHON"}
BROKEN = {
    "verl": ("engine.ulysses_sequence_parallel_size=", "engine.ulysses_size="),
    "torchtitan": ("local_batch_size=", "local_batch="),
}


def validate(framework: str, ws: list[SimpleNamespace], *more: str) -> subprocess.CompletedProcess:
    """The framework's validator over the written files' paths and `more` arguments (--each, PATH@H,K for verl)."""
    python = os.environ.get(VARS[framework])
    if not python:
        pytest.skip(f"{VARS[framework]} is not set: the python of a venv with {framework} installed runs this check")
    extra = []
    if framework == "verl":  # the tiny stand-in model carries the planned heads (every case plans the same model)
        extra = ["--heads", str(ws[0].model.text.heads), "--kv-heads", str(ws[0].model.text.kv_heads)]
    return subprocess.run(
        [python, str(VALIDATORS / f"{framework}_validate.py"), *extra, *(str(w.path) for w in ws), *more],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ws[0].dir,
    )


@pytest.mark.parametrize("framework", list(CASES))
def test_exports_pass_the_frameworks_own_config_code_and_broken_files_fail(framework, tmp_path):
    """Every case passes the framework's own config code; a broken file fails it, and for verl Qwen2.5-7B's 28 heads
    and 4 KV heads take Ulysses 4 where a stand-in with 30 and 5 does not (verl's assertion): one validator run
    (--each)."""
    ws = [written(framework, case, tmp_path) for case in CASES[framework]]
    broken = written(framework, next(iter(CASES[framework])), tmp_path / "broken")
    old, new = BROKEN[framework]
    assert old in broken.path.read_text()
    broken.path.write_text(broken.path.read_text().replace(old, new))
    heads = [f"{ws[1].path}@30,5"] if framework == "verl" else []  # sp4_lora_two_nodes
    run = validate(framework, [*ws, broken], *heads, "--each")
    said = dict(line.split(": ", 1) for line in run.stdout.splitlines() if ": OK " in line or ": INVALID " in line)
    assert all(said[str(w.path)].startswith("OK ") for w in ws), run.stdout[-4000:] + run.stderr[-8000:]
    assert said[str(broken.path)].startswith("INVALID ") and run.returncode != 0, run.stdout[-4000:]
    if framework == "verl":
        assert "ulysses=4" in said[str(ws[1].path)] and f"accum={ws[1].plan.grad_accum}" in run.stdout
        assert "must be divisible by ulysses_sp_size" in said[heads[0]], run.stdout[-4000:]
