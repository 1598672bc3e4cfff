"""Tensor and Ulysses sequence parallelism in the bundled trainer (recipe/parallel.py): the same global batch split
over sequence or tensor parallel ranks gives plain data parallelism's losses, over 10 fp32 steps, on gloo with 4
ranks. Context parallelism cannot run here: torch's context_parallel shards only CUDA's SDPA kernels (torch 2.13
distributed/tensor/experimental/_context_parallel/_attention.py:918-945), and the planner's memplan adapter
refuses it."""

import json

import pytest

pytest.importorskip("transformers")
from planner.model.catalog import load_model
from tests.trainer.helpers import launch, losses

STEPS = 10
REL_TOL = 1e-5  # the bar


REFERENCE = "data parallel, 2 ranks, micro 2"
# every commit: Ulysses beside data parallelism, and tensor x Ulysses x FSDP2 together; the sweep tier (since stop
# 68, for CI's room: 5 launches of up to 4 ranks took 113 s of a worker) adds Ulysses over 4 ranks and tensor x FSDP2
ON_COMMIT = {
    REFERENCE: (2, {"micro_batch": 2, "grad_accum": 1}),
    "Ulysses 2 x data 2, micro 1, accum 2": (4, {"micro_batch": 1, "grad_accum": 2, "sequence_parallel": 2}),
    "tensor 2 x Ulysses 2, FSDP2, micro 4": (
        4,
        {"micro_batch": 4, "grad_accum": 1, "tensor_parallel": 2, "sequence_parallel": 2, "fsdp": "full"},
    ),
}
SWEEP = {
    REFERENCE: ON_COMMIT[REFERENCE],
    "Ulysses 4, micro 2, accum 2": (4, {"micro_batch": 2, "grad_accum": 2, "sequence_parallel": 4}),
    "tensor 2 x FSDP2 2, micro 2": (4, {"micro_batch": 2, "grad_accum": 1, "tensor_parallel": 2, "fsdp": "full"}),
}


@pytest.mark.parametrize(
    "runs", [pytest.param(ON_COMMIT, id="commit"), pytest.param(SWEEP, id="more", marks=pytest.mark.sweep)]
)
def test_sequence_and_tensor_parallel_give_the_data_parallel_losses(tmp_path, runs):
    got = {}
    for i, (name, (ranks, cfg)) in enumerate(runs.items()):
        _, log = launch(tmp_path, f"run{i}", ranks, max_steps=STEPS, **cfg)
        got[name] = losses(log)
    ref = got[REFERENCE]
    assert len(ref) == STEPS and ref[-1] < ref[0]
    for name, ls in got.items():
        worst = max(abs(a / b - 1) for a, b in zip(ls, ref))
        print(f"{name}: max relative difference {worst:.2e}")
        assert ls == pytest.approx(ref, rel=REL_TOL), name


def test_ulysses_repeats_kv_heads_fewer_than_its_ranks(tmp_path):
    """debug-llama with 2 KV heads over 4 sequence ranks: each rank gets one repeated KV head (DeepSpeed's ALST
    and verl repeat them the same way)."""
    cfg = {**load_model("debug-llama").config, "num_key_value_heads": 2}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    common = {"model": str(path), "max_steps": 4}
    _, ref = launch(tmp_path, "dp", 1, micro_batch=4, grad_accum=1, **common)
    _, sp = launch(tmp_path, "sp", 4, micro_batch=4, grad_accum=1, sequence_parallel=4, **common)
    assert losses(sp) == pytest.approx(losses(ref), rel=REL_TOL)


def test_what_the_trainer_cannot_split_is_refused_in_one_line(tmp_path):
    proc, _ = launch(
        tmp_path, "packed", 2, wait=False, micro_batch=1, grad_accum=1, sequence_parallel=2, batching="packed"
    )
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode != 0 and "--batching packed with --sequence-parallel" in err
