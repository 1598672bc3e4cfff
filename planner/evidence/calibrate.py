"""Evidence behind a plan's memory: measured (a cuda or cpu probe) > simulated (the sim probe) >
analytic, and the calibration of a plan's breakdown from stored probe records.

- A record with the candidate's tensor_key gives its tensor bytes, whatever card it ran on.
  A zero-0 sim/cpu record gives every term; a cuda record gives the measured peak (the analytic
  terms are kept and the temporaries absorb the difference). Under DeepSpeed (zero >= 1) the sim
  traces the model without DeepSpeed, so its record gives the activation side only and the model
  states stay the ZeRO formulas.
- Overhead (context, allocator reserve, NCCL) carries over only from a cuda record on the same
  GPU kind: NVML's used memory minus the peak allocated; otherwise the analytic priors.
- A cuda record that ran out of memory on the same GPU kind makes the candidate not fit.
- mode "sim" simulates what is missing (through the `simulate` function the caller hands in: the core
  imports no probe): for each knob family two micro-batches (1 and 2) give the
  per-segment slope in micro-batch (memory is affine in it at a fixed sequence length); other
  micro-batches are read off that line, and `refine` traces a chosen plan exactly.
"""

from __future__ import annotations

from planner.config.spec import GIB, Hardware, Knobs, MemoryBreakdown, OverheadTerm
from planner.errors import BadInput
from planner.estimate.memory import breakdown
from planner.estimate.overheads import allocator_limit_bytes
from planner.estimate.overheads import terms as overhead_terms
from planner.estimate.setup import Setup
from planner.estimate.state_terms import comm_bucket_bytes
from planner.evidence.store import (
    ProbeRecord,
    Shapes,
    Store,
    arch_hash,
    default_path,
    segment_phase,
    tensor_key,
    unflat_segment,
)

RANK = {"cuda": 0, "cpu": 1, "sim": 2}


def sim_knobs(k: Knobs) -> Knobs:
    """What the sim traces for a plan (Knobs.for_probe)."""
    return k.for_probe("sim")


def sim_shapes(s: Setup, micro_batch: int | None = None) -> Shapes:
    return Shapes(
        micro_batch=micro_batch or s.micro_batch,
        grad_accum=min(s.grad_accum, 2),
        seq_len=s.seq_len,
        image_tokens=s.image_tokens,
        world_size=1,
    )


def real_shapes(s: Setup) -> Shapes:
    return Shapes(
        micro_batch=s.micro_batch,
        grad_accum=s.grad_accum,
        seq_len=s.seq_len,
        image_tokens=s.image_tokens,
        world_size=s.world_size,
    )


def _same_kind(rec: ProbeRecord, hw: Hardware) -> bool:
    if rec.backend != "cuda":
        return False
    from planner.model.hardware import match_local

    try:
        return match_local(rec.device, hw.gpu.capacity_bytes).name == hw.gpu.name
    except BadInput:
        return False


def probe_overhead(overhead: int) -> OverheadTerm:
    """The overhead a cuda probe of this plan measured on this GPU kind, whole: NVML used less peak allocated."""
    return OverheadTerm(
        name="probe",
        bytes=overhead,
        measured=True,
        basis="measured by this plan's probe",
        source="the probe record: NVML used - max_memory_allocated, same GPU kind",
    )


def _with_terms(
    s: Setup, base: MemoryBreakdown, terms: tuple, phase: str, overhead: int | None, replayed: float | None = None
) -> MemoryBreakdown:
    params, grads, opt, acts, temp = terms
    peak = params + grads + opt + acts + temp
    overheads = overhead_terms(s, peak, replayed) if overhead is None else (probe_overhead(overhead),)
    overhead = sum(t.bytes for t in overheads)
    return base.model_copy(
        update={
            "overheads": overheads,
            "params_bytes": params,
            "grads_bytes": grads,
            "optimizer_bytes": opt,
            "activations_bytes": acts,
            "temp_bytes": temp,
            "peak_allocated_bytes": peak,
            "overhead_bytes": overhead,
            "device_total_bytes": peak + overhead,
            "headroom_bytes": base.capacity_bytes - peak - overhead,
            "peak_phase": phase,
        }
    )


def _evidence(mem: MemoryBreakdown, analytic: MemoryBreakdown, recorded: str) -> str:
    """The evidence a plan's figure rests on: the record's kind, or "analytic" where the analytic breakdown stood
    (from_record under nn.DataParallel), so the headline does not call an analytic figure simulated or measured."""
    return "analytic" if mem is analytic else recorded


def from_record(s: Setup, hw: Hardware, analytic: MemoryBreakdown, rec: ProbeRecord) -> MemoryBreakdown:
    """The plan's breakdown with a record's tensor bytes (and, same card, its overhead). Under nn.DataParallel a
    probe's one process on one GPU holds a replica's step, not GPU 0's gathers of every replica's logits
    (planner.estimate.dataparallel): where those make the analytic peak the larger, it stands."""
    if s.knobs.dataparallel and analytic.peak_allocated_bytes > (rec.peak_allocated_bytes or 0):
        return analytic
    overhead = None
    if _same_kind(rec, hw) and rec.device_used_bytes and rec.peak_allocated_bytes:
        overhead = max(0, rec.device_used_bytes - rec.peak_allocated_bytes)
    c = rec.by_category
    if rec.backend == "cuda" or not c:
        a, peak = analytic, rec.peak_allocated_bytes
        states = [a.params_bytes, a.grads_bytes, a.optimizer_bytes]
        if sum(states) > peak:  # the states alone exceed the measurement: scale them to it
            states = [x * peak // sum(states) for x in states]
            states[2] += peak - sum(states)
        acts = min(a.activations_bytes, peak - sum(states))
        return _with_terms(s, a, (*states, acts, peak - sum(states) - acts), a.peak_phase, overhead)
    if s.knobs.zero_stage >= 1 or s.knobs.fsdp != "off":  # one unsharded trace: its activation side only
        side = (c["activations"], c["temporaries"], c["grads"])  # the gradients the trace held at its peak
        return breakdown(s, analytic.capacity_bytes, activation_side=side)
    terms = (c["params"], c["grads"] + comm_bucket_bytes(s), c["optimizer"], c["activations"], c["temporaries"])
    return _with_terms(s, analytic, terms, rec.phase or analytic.peak_phase, overhead, replayed_fraction(s, hw, rec))


def replay_of(s: Setup, hw: Hardware, rec: ProbeRecord) -> dict | None:
    """The record's caching-allocator replay (planner.verification.verify), where it was capped at this card's limit."""
    replay = rec.detail.get("replay") if rec.backend == "sim" else None
    if replay and replay["limit_bytes"] == allocator_limit_bytes(s, hw.gpu.capacity_bytes):
        return replay
    return None


def replayed_fraction(s: Setup, hw: Hardware, rec: ProbeRecord) -> float | None:
    replay = replay_of(s, hw, rec)
    if replay is None or replay["oom_at"] is not None or not replay["allocated"]:
        return None
    return max(0.0, replay["reserved"] / replay["allocated"] - 1)


def replay_oom_reason(replay: dict, rec: ProbeRecord) -> str:
    return (
        f"the step's allocations replayed through the CUDA caching allocator run out of memory: a request of "
        f"{replay['oom_at'] / GIB:.2f} GiB finds no room in the {replay['limit_bytes'] / GIB:.2f} GiB the card leaves "
        f"it (probe #{rec.id})"
    )


class Calibrator:
    """Given a candidate's Setup and analytic breakdown, the best evidence for its memory."""

    def __init__(self, mode: str, store: Store | None, model_name: str, config: dict, simulate=None) -> None:
        """simulate(model, config, knobs, shapes) -> ProbeRecord runs the sim (probes.run.probe_in_process);
        without it, mode "sim" reads stored records only."""
        self.mode, self.store, self.model, self.config = mode, store, model_name, config
        self._simulate = simulate
        self._lines: dict = {}
        self.exact = False  # sim mode: trace each candidate exactly instead of reading a line
        self._arch_seen: tuple[int, bool] | None = None

    @classmethod
    def open(cls, mode: str, store_path: str | None, model_name: str, config: dict, simulate=None) -> Calibrator | None:
        """None for analytic, or for auto when no store file exists (auto must cost nothing then); a server's store
        (a PostgreSQL URL) is always read."""
        if mode == "analytic":
            return None
        path = store_path or default_path()
        from pathlib import Path

        from planner.evidence.db import is_url

        if mode == "auto" and not is_url(path) and not Path(path).exists():
            return None
        return cls(mode, Store(path), model_name, config, simulate)

    def _has_records(self) -> bool:
        """Whether the store holds any record of this architecture: the search asks per candidate, and hashing a
        candidate's key costs more than its plan. Asked again once this connection has written a record."""
        changes = self.store.db.total_changes
        if self._arch_seen is None or self._arch_seen[0] != changes:
            self._arch_seen = (changes, self.store.has_arch(arch_hash(self.config)))
        return self._arch_seen[1]

    def analytic(self) -> bool:
        """Whether every candidate keeps its analytic breakdown here: nothing simulated, no record of this architecture
        (the search may then rule a knob family out by its analytic terms: planner.search.ranked.cannot_fit)."""
        return self.mode != "sim" and not self._has_records()

    def records(self, s: Setup) -> list[ProbeRecord]:
        if not self._has_records():
            return []
        keys = [tensor_key(self.config, s.knobs, real_shapes(s))]
        recs = [r for k in keys for r in self.store.by_tensor_key(k)]
        try:
            sim_key = tensor_key(self.config, sim_knobs(s.knobs), sim_shapes(s))
        except BadInput:  # a plan the sim does not trace (one process: no tensor, sequence or context parallel)
            sim_key = None
        if sim_key is not None:
            recs += [r for r in self.store.by_tensor_key(sim_key) if r.backend == "sim"]
        return sorted(recs, key=lambda r: (RANK[r.backend], -r.created))

    def __call__(self, s: Setup, hw: Hardware, analytic: MemoryBreakdown) -> tuple[MemoryBreakdown, str, str | None]:
        """(breakdown, evidence, reason when a measurement says it does not fit)."""
        for rec in self.records(s):
            replay = replay_of(s, hw, rec)
            if replay and replay["oom_at"] is not None:
                return analytic, "simulated", replay_oom_reason(replay, rec)
            if rec.status == "ok" and rec.peak_allocated_bytes:
                mem = from_record(s, hw, analytic, rec)
                return mem, _evidence(mem, analytic, "simulated" if rec.backend == "sim" else "measured"), None
            if rec.status == "oom" and _same_kind(rec, hw):
                return analytic, "measured", f"ran out of memory on {rec.device} (probe #{rec.id})"
        if self.mode == "sim" and self.exact:
            try:
                rec = self.simulate(s)
            except ValueError:
                return analytic, "analytic", None
            mem = from_record(s, hw, analytic, rec)
            return mem, _evidence(mem, analytic, "simulated"), None
        if self.mode == "sim":
            line = self._line(s)
            if line is not None:
                return self._interpolated(s, hw, analytic, line), "simulated", None
        return analytic, "analytic", None

    # -- the micro-batch line from two simulated points --------------------------------------
    def with_mode(self, mode: str) -> Calibrator:
        """The same store and model under another mode."""
        return Calibrator(mode, self.store, self.model, self.config, self._simulate)

    def simulate(self, s: Setup, micro_batch: int | None = None) -> ProbeRecord:
        shapes = sim_shapes(s, micro_batch)
        key = tensor_key(self.config, sim_knobs(s.knobs), shapes)
        for rec in self.store.by_tensor_key(key):
            if rec.backend == "sim" and rec.status == "ok":
                return rec
        if self._simulate is None:
            raise ValueError("no simulator was handed to the calibrator")
        rec = self._simulate(self.model, self.config, sim_knobs(s.knobs), shapes)
        self.store.add(rec)
        return rec

    def _line(self, s: Setup):
        fam = (sim_knobs(s.knobs), min(s.grad_accum, 2), s.seq_len, s.image_tokens)
        if fam not in self._lines:
            try:
                one, two = self.simulate(s, 1), self.simulate(s, 2)
            except ValueError:  # not traceable (e.g. 8-bit AdamW without bitsandbytes)
                one = two = None
            self._lines[fam] = (one, two)
        return None if self._lines[fam][0] is None else self._lines[fam]

    def _interpolated(self, s: Setup, hw: Hardware, analytic: MemoryBreakdown, line) -> MemoryBreakdown:
        one, two = line
        segs1 = {tuple(k): v for k, v in one.detail["segments"]}
        segs2 = {tuple(k): v for k, v in two.detail["segments"]}
        b = s.micro_batch
        best, phase = None, None
        for seg in segs1.keys() & segs2.keys():
            cats = {c: segs1[seg][c] + (segs2[seg][c] - segs1[seg][c]) * (b - 1) for c in segs1[seg]}
            if best is None or sum(cats.values()) > sum(best.values()):
                best, phase = cats, seg
        rec = one.model_copy(
            update={
                "by_category": best,
                "phase": segment_phase(unflat_segment(phase)),
                "peak_allocated_bytes": sum(best.values()),
            }
        )
        mem = from_record(s, hw, analytic, rec)
        mem.detail["sim_line_micro_batches"] = 12  # read off the line through micro-batches 1 and 2
        return mem
