"""What a rank's device holds beside the caching allocator's live tensors, term by term: the CUDA context with its
libraries' handles and workspaces, the memory the driver holds on an idle card, NCCL's communicator buffers, and
the allocator's reserve beyond its peak (fragmentation). Each term is this GPU kind's measurement where its
calibration file holds one (planner.estimate.calibration, written by benchmarks/gpu_suite.py --apply), else a prior,
and says which and where its figure comes from (an OverheadTerm).

What the priors rest on, and what they do not claim:
- the context and fragmentation priors are the one card measured, an H100 80GB HBM3 (benchmarks/results/gpu/
  priors.json), used for every card: the allocator, not the card, makes fragmentation, and the published context
  sizes of other cards (256 MiB for a bare context on an RTX 3090 under torch 2.7.1+cu128, invoke-ai/InvokeAI#9413)
  come from other torch and CUDA versions and leave the libraries' workspaces out, so nothing is scaled by card;
- NCCL's depend on the card class and the process count: one process has no communicator; NCCL's memory grows with
  its channels, more over NVLink than over PCIe (S. Jeaugey, NVIDIA/nccl#864, quoted in #986), so NVLink boards and
  PCIe cards (consumer, workstation, PCIe datacenter) have a figure each from published measurements, and a job
  across nodes adds the network transport's shared buffers;
- the driver's reserve is counted only where it was measured (483 MiB on the H100): no prior.
"""

from __future__ import annotations

from functools import lru_cache

from planner.config.spec import MIB, OverheadTerm
from planner.errors import BadInput
from planner.estimate import calibration
from planner.estimate.setup import Setup
from planner.model import catalog

# CUDA context + cuBLAS/cuDNN handles and SDPA workspaces as the H100 80GB HBM3 measured them (benchmarks/results/gpu/
# priors.json, 2026-11-22, torch 2.11.0+cu130: context 645,464,064 + cuBLAS 69,206,016 + cuDNN 10,485,760 + SDPA
# 18,874,368 bytes; planner/model/catalog/calibration/h100-80gb.json cuda_context_bytes): the prior for every card.
CUDA_CONTEXT_BYTES = 744_030_208
# NCCL on an NVLink board: NVIDIA/nccl#964 (4 x A100 with NVLink, PyTorch, a group and one 4 MB all-reduce): 544 MB a
# group of two ranks, 688 MB a larger one; the reporter's MB taken as MiB (errs high if they were 10^6 bytes).
NCCL_NVLINK_PAIR_BYTES = 544 * MIB
NCCL_NVLINK_GROUP_BYTES = 688 * MIB
# NCCL on PCIe: NVIDIA/nccl#2366 (an RTX 3090 PCIe host, CUDA 13.0, NCCL 2.28): a GPU's initialization memory, 484 MiB
# with runtime connect (NCCL's default). The PR does not say whether that counts the CUDA context; if it does, the
# context is counted twice (errs high).
NCCL_PCIE_BYTES = 484 * MIB
# across nodes, the network transport's shared buffers: 512 MiB (NVIDIA/nccl#2363, NCCL 2.28.9 on 8 x B300: "Failed
# to CUDA calloc 536870912 bytes"; #2366 frees the same 512 MiB from groups of one rank).
NCCL_INTER_NODE_BYTES = 512 * MIB
# reserved - allocated, as a fraction of peak allocated: the median over 28 steps measured on an H100 with torch 2.11's
# default caching allocator (benchmarks/results/gpu/, 2026-11-22; 3% to 45%, median 13.1%). The allocator, not the
# card, makes it, so it is the prior for every GPU. The 6% this replaced let a plan that ran out of memory on the H100
# (Llama-3.2-1B, micro 16 x 2048, full checkpointing) be called fitting.
FRAGMENTATION_FRACTION = 0.13
# the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the median of the four steps the H100 measured with
# it (benchmarks/results/gpu/priors.json, 2026-11-22: 0.7%, 2.3%, 6.2%, 15.5%; the default allocator 6.0% to 14.7% on
# the same steps). Four steps: a prior, not a law; the GPU kit's edge part measures more.
FRAGMENTATION_FRACTION_EXPANDABLE = 0.0425
H100_PRIORS = "benchmarks/results/gpu/priors.json (an H100 80GB HBM3, 2026-11-22)"
# the largest reserved-over-allocated the GPU windows measured on a step that ran (benchmarks/results/fragmentation.json:
# Qwen2.5-0.5B, bf16-pure, full checkpointing, 1 x 1024 on the H100, 45.3%; the replay of probes/allocator.py gives
# 45.9% for it): where a plan fits at the prior but not at this, the verdict rests on the prior
FRAGMENTATION_MEASURED_MAX = 0.453


def terms(s: Setup, peak_allocated: int, replayed: float | None = None) -> tuple[OverheadTerm, ...]:
    """The overhead of a rank whose allocator peaks at peak_allocated, term by term (their bytes add up to
    overhead_bytes); `replayed`: the reserve beyond the peak that the caching allocator replayed over the step's own
    trace took, as a fraction of the peak (probes.reserved), in place of the prior."""
    cal = calibration.for_gpu(s.gpu) if s.gpu else None
    frag = fragmentation_term(s, cal, peak_allocated) if replayed is None else replayed_term(replayed, peak_allocated)
    return (context_term(cal), driver_term(cal), nccl_term(s, cal), frag)


def rests_on_the_prior(m, usable_bytes: int) -> bool:
    """Whether a fitting breakdown's verdict turns on the allocator's reserve: its fragmentation is a prior (not
    measured on this card's calibration for this step, nor replayed) and the same step at the largest reserve the GPU
    windows measured would pass `usable_bytes`."""
    frag = next((t for t in m.overheads if t.name == "fragmentation"), None)
    if frag is None or frag.basis.startswith("replayed") or m.device_total_bytes > usable_bytes:
        return False
    worst = m.device_total_bytes - frag.bytes + int(FRAGMENTATION_MEASURED_MAX * m.peak_allocated_bytes)
    return worst > usable_bytes


def allocator_limit_bytes(s: Setup, capacity_bytes: int) -> int:
    """What the caching allocator may reserve on this rank's card: its capacity less the context, the driver's reserve
    and NCCL's buffers, which lie outside it."""
    return capacity_bytes - sum(t.bytes for t in terms(s, 0)[:3])


def replayable(knobs) -> bool:
    """Whether the sim's trace is the whole step of one device: one process on one GPU's share of nothing (no ZeRO,
    FSDP, model split or RL roles), so its allocations can be replayed through the allocator as they happen."""
    return knobs.zero_stage == 0 and knobs.fsdp == "off" and knobs.parallel == 1 and not knobs.workload.rl


def replayed_term(fraction: float, peak_allocated: int) -> OverheadTerm:
    return OverheadTerm(
        name="fragmentation",
        bytes=int(fraction * peak_allocated),
        measured=True,
        basis="replayed: the step's allocations through the CUDA caching allocator",
        source="probes.allocator over the sim's trace (benchmarks/gpu_fragmentation.py: against the GPU windows)",
        per_allocated=fraction,
    )


def overhead_bytes(s: Setup, peak_allocated: int) -> int:
    return sum(t.bytes for t in terms(s, peak_allocated))


def context_term(cal: calibration.Calibration | None) -> OverheadTerm:
    if cal and cal.cuda_context_bytes is not None:
        return OverheadTerm(
            name="context",
            bytes=cal.cuda_context_bytes,
            measured=True,
            basis="measured",
            source=f"calibration of {cal.gpu} ({cal.measured})",
        )
    return OverheadTerm(
        name="context",
        bytes=CUDA_CONTEXT_BYTES,
        measured=False,
        basis="prior: an H100's",
        source=f"{H100_PRIORS}: context and library workspaces; not measured on this card",
    )


def driver_term(cal: calibration.Calibration | None) -> OverheadTerm:
    if cal and cal.driver_reserved_bytes is not None:
        return OverheadTerm(
            name="driver",
            bytes=cal.driver_reserved_bytes,
            measured=True,
            basis="measured",
            source=f"calibration of {cal.gpu} ({cal.measured}): NVML used on the idle card",
        )
    return OverheadTerm(
        name="driver",
        bytes=0,
        measured=False,
        basis="not measured",
        source="no prior: counted where measured (483 MiB on an H100 80GB HBM3, driver 580)",
    )


def nccl_term(s: Setup, cal: calibration.Calibration | None) -> OverheadTerm:
    """One process: no communicator. Otherwise the prior of the card's class for the process count, or this card's
    measured group of one rank where that is more (a floor: a group of one has no peers), and the network
    transport's buffers across nodes."""
    processes = s.world_size * s.tensor_parallel
    if processes == 1:
        return OverheadTerm(name="nccl", bytes=0, measured=False, basis="one process", source="no NCCL communicator")
    if nvlink(s.gpu):
        pair = processes == 2
        prior = NCCL_NVLINK_PAIR_BYTES if pair else NCCL_NVLINK_GROUP_BYTES
        source = f"NVIDIA/nccl#964: an A100 NVLink group of {'two' if pair else 'more than two'}"
    else:
        prior, source = NCCL_PCIE_BYTES, "NVIDIA/nccl#2366: an RTX 3090 on PCIe"
    measured = cal.nccl_bytes if cal and cal.nccl_bytes is not None and cal.nccl_bytes > prior else None
    inter = NCCL_INTER_NODE_BYTES if s.nodes > 1 else 0
    across = "; across nodes NVIDIA/nccl#2363's 512 MiB of network buffers" if inter else ""
    if measured is not None:
        return OverheadTerm(
            name="nccl",
            bytes=measured + inter,
            measured=not inter,
            basis="measured, a group of one" + (" + prior" if inter else ""),
            source=f"calibration of {cal.gpu} ({cal.measured}): a one-rank group, more than {source}{across}",
        )
    return OverheadTerm(
        name="nccl",
        bytes=prior + inter,
        measured=False,
        basis=f"prior: {'NVLink' if nvlink(s.gpu) else 'PCIe'}, {processes} processes",
        source=source + across,
    )


def fragmentation_term(s: Setup, cal: calibration.Calibration | None, peak_allocated: int) -> OverheadTerm:
    fraction = fragmentation_fraction(s, cal)
    measured = measured_fragmentation(s, cal) is not None
    return OverheadTerm(
        name="fragmentation",
        bytes=int(fraction * peak_allocated),
        measured=measured,
        basis="measured" if measured else "prior: an H100's median",
        source=f"calibration of {cal.gpu} ({cal.measured})"
        if measured
        else f"{H100_PRIORS}: median reserved/allocated",
        per_allocated=fraction,
    )


def fragmentation_fraction(s: Setup, cal: calibration.Calibration | None) -> float:
    """Reserved beyond allocated, as a fraction of the peak, for the allocator the plan runs: the GPU kind's measured
    median where it has one, else the prior; with expandable segments their own. Where the GPU kit measured the edge
    (the largest steps that ran at full capacity, benchmarks/gpu_edge.py), no more than what every one of those
    steps left free: near capacity the allocator frees its cache and retries before it fails
    (c10/cuda/CUDACachingAllocator.cpp, malloc: release_cached_blocks then alloc_block again)."""
    expandable = s.knobs.expandable_segments
    measured = measured_fragmentation(s, cal)
    fraction = (
        measured
        if measured is not None
        else (FRAGMENTATION_FRACTION_EXPANDABLE if expandable else FRAGMENTATION_FRACTION)
    )
    edge = cal and (cal.edge_fraction_expandable if expandable else cal.edge_fraction)
    return min(fraction, edge) if edge is not None else fraction


def measured_fragmentation(s: Setup, cal: calibration.Calibration | None) -> float | None:
    """The calibration's median for the plan's allocator, None where it holds none."""
    if cal is None:
        return None
    return cal.fragmentation_fraction_expandable if s.knobs.expandable_segments else cal.fragmentation_fraction


def overhead_source(s: Setup) -> str:
    """'measured' when the GPU kind's calibration holds the context and fragmentation, else 'assumed'."""
    cal = calibration.for_gpu(s.gpu) if s.gpu else None
    measured = cal and cal.cuda_context_bytes is not None and measured_fragmentation(s, cal) is not None
    return "measured" if measured else "assumed"


@lru_cache(maxsize=64)
def nvlink(gpu: str) -> bool:
    """Whether the catalog GPU kind joins its GPUs by NVLink; a Setup without one (gpu ""), or one outside the
    catalog, takes the NVLink figures, the larger."""
    try:
        return catalog.gpu(gpu).nvlink if gpu else True
    except BadInput:  # not a catalog name
        return True
