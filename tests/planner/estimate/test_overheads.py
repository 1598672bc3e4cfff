"""The overhead term by term (planner.estimate.overheads): NCCL by card class and process count, the H100's
measurements as the priors, each term saying whether it was measured, and the terms adding up to the total."""

import pytest

from planner.config.spec import MIB, Knobs
from planner.estimate import memory as mem
from planner.estimate import overheads
from planner.estimate.setup import Setup
from planner.model.catalog import load_model

MODEL = load_model("llama-3.2-1b")


def _terms(gpu: str, gpus: int = 1, nodes: int = 1, peak: int = 10 * 2**30) -> dict:
    s = Setup(MODEL, Knobs(), 1, 1, 1024, gpus_per_node=gpus, nodes=nodes, gpu=gpu)
    return {t.name: t for t in overheads.terms(s, peak)}


def test_the_context_prior_is_the_h100_measurement_and_its_parts():
    """benchmarks/results/gpu/priors.json: the context row plus the cuBLAS, cuDNN and SDPA rows, to the byte, and the
    calibration file's cuda_context_bytes (the same measurement)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    rows = json.loads((root / "benchmarks/results/gpu/priors.json").read_text())["rows"]
    parts = {r["kind"]: r["bytes"] for r in rows if r["kind"] in ("context", "cublas", "cudnn", "sdpa")}
    cal = json.loads((root / "planner/model/catalog/calibration/h100-80gb.json").read_text())
    assert sum(parts.values()) == overheads.CUDA_CONTEXT_BYTES == cal["cuda_context_bytes"]


@pytest.mark.parametrize(
    "gpu,gpus,nodes,nccl_mib",
    [
        ("rtx4090", 1, 1, 0),  # one process: no communicator
        ("rtx4090", 2, 1, 484),  # PCIe: NVIDIA/nccl#2366
        ("rtx4090", 8, 1, 484),
        ("l40s", 4, 1, 484),
        ("a800-80gb", 2, 1, 544),  # NVLink pair: NVIDIA/nccl#964
        ("a800-80gb", 8, 1, 688),  # NVLink group of more than two
        ("a800-80gb", 8, 2, 688 + 512),  # across nodes: the network's shared buffers, NVIDIA/nccl#2363
        ("h100-80gb", 2, 1, 564),  # the H100 measured 564 MiB for a group of one, more than the pair's prior
        ("h100-80gb", 8, 1, 688),  # ... and less than a group's: the prior
    ],
)
def test_nccl_follows_the_card_class_and_the_process_count(gpu, gpus, nodes, nccl_mib):
    """Exact: each figure is a published measurement or the H100's (within a MiB: the calibration holds bytes)."""
    assert _terms(gpu, gpus, nodes)["nccl"].bytes == pytest.approx(nccl_mib * MIB, abs=MIB)


def test_each_term_says_measured_or_prior():
    """An RTX 4090 has no calibration: every figure a prior; the H100 its own context, driver reserve and
    fragmentation, measured."""
    consumer = _terms("rtx4090", 2)
    assert not any(t.measured for t in consumer.values())
    assert consumer["context"].bytes == overheads.CUDA_CONTEXT_BYTES and consumer["driver"].bytes == 0
    assert consumer["fragmentation"].per_allocated == overheads.FRAGMENTATION_FRACTION
    h100 = _terms("h100-80gb", 8)
    assert all(h100[n].measured for n in ("context", "driver", "fragmentation")) and not h100["nccl"].measured
    assert all(len(t.source) > 15 for t in (*consumer.values(), *h100.values()))


@pytest.mark.parametrize("gpu,gpus", [("rtx4090", 2), ("h100-80gb", 8), ("t4", 1), ("b300", 8)])
def test_the_terms_add_up_to_the_breakdowns_overhead(gpu, gpus):
    s = Setup(MODEL, Knobs(), 2, 1, 1024, gpus_per_node=gpus, gpu=gpu)
    b = mem.breakdown(s, 80 * 2**30)
    assert sum(t.bytes for t in b.overheads) == b.overhead_bytes == overheads.overhead_bytes(s, b.peak_allocated_bytes)
    assert b.device_total_bytes == b.peak_allocated_bytes + b.overhead_bytes


def test_the_reserve_decides_where_the_largest_measured_reserve_would_pass_the_usable_memory():
    """overheads.rests_on_the_prior: with the card's median reserve the plan fits; the same step at the largest
    reserve the GPU windows measured (FRAGMENTATION_MEASURED_MAX) decides whether the verdict turns on it. A replayed
    reserve (probes/allocator.py) is the step's own: it never does."""
    m = mem.breakdown(Setup(load_model("llama-3.2-1b"), Knobs(), 4, 1, 1024, gpu="h100-80gb"), 80 * 2**30)
    frag = next(t for t in m.overheads if t.name == "fragmentation")
    worst = m.device_total_bytes - frag.bytes + int(overheads.FRAGMENTATION_MEASURED_MAX * m.peak_allocated_bytes)
    assert overheads.rests_on_the_prior(m, worst - 1) and not overheads.rests_on_the_prior(m, worst)
    assert not overheads.rests_on_the_prior(m, m.device_total_bytes - 1)  # it does not fit at all: no turn
    replayed = overheads.replayed_term(0.1, m.peak_allocated_bytes)
    swapped = m.model_copy(update={"overheads": tuple(replayed if t is frag else t for t in m.overheads)})
    assert not overheads.rests_on_the_prior(swapped, worst - 1)
