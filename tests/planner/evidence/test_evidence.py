"""Plans calibrated from stored probe records (the CLI faces: tests/planner/cli/)."""

from planner.config.spec import Goal, Knobs
from planner.estimate.setup import Setup
from planner.evidence.calibrate import Calibrator, real_shapes
from planner.evidence.store import ProbeRecord, Store, arch_hash, tensor_key
from planner.model import catalog, hardware
from planner.search.estimates import make_plan

MODEL = catalog.load_model("llama-3.1-8b")
HW = hardware.resolve("h100", 1, 1)
GOAL = Goal(global_batch=2, seq_len=1024)
KNOBS = Knobs(precision="bf16", checkpointing="full")


def _cuda_record(status="ok", device="NVIDIA H100 80GB HBM3", peak=130 * 2**30, used=134 * 2**30):
    s = Setup(MODEL, KNOBS, 2, 1, 1024)
    sh = real_shapes(s)
    return ProbeRecord(
        model=MODEL.name,
        arch=arch_hash(MODEL.config),
        tensor_key=tensor_key(MODEL.config, KNOBS, sh),
        backend="cuda",
        status=status,
        device=device,
        versions={},
        knobs=KNOBS,
        shapes=sh,
        peak_allocated_bytes=peak,
        device_used_bytes=used,
    )


def _plan(store):
    return make_plan(MODEL, HW, GOAL, KNOBS, 2, Calibrator("auto", store, MODEL.name, MODEL.config))


def test_auto_without_a_store_is_analytic_and_creates_nothing(tmp_path):
    path = tmp_path / "none.sqlite"
    assert Calibrator.open("auto", str(path), MODEL.name, MODEL.config) is None
    assert not path.exists()


def test_measured_record_sets_peak_and_same_card_overhead(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    store.add(_cuda_record())
    p = _plan(store)
    assert p.evidence == "measured"
    assert p.memory.peak_allocated_bytes == 130 * 2**30
    assert p.memory.overhead_bytes == 4 * 2**30


def test_record_from_another_card_carries_tensor_bytes_only(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    store.add(_cuda_record(device="NVIDIA A100-SXM4-80GB"))
    p = _plan(store)
    analytic = make_plan(MODEL, HW, GOAL, KNOBS, 2)
    assert p.memory.peak_allocated_bytes == 130 * 2**30
    assert p.memory.overhead_bytes != 4 * 2**30
    assert p.memory.overhead_bytes < analytic.memory.overhead_bytes  # fragmentation prior on a smaller peak


def test_measured_oom_on_the_same_card_does_not_fit(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    store.add(_cuda_record(status="oom", peak=None, used=None))
    p = _plan(store)
    assert not p.fits and "ran out of memory" in p.reason and p.evidence == "measured"


def test_a_plan_the_sim_cannot_trace_is_analytic_beside_records_of_its_model(tmp_path):
    """A store with a record of the architecture and a tensor-parallel plan (which no sim record can key: the sim traces
    one process): the plan is analytic, not a --tensor-parallel error from the probe's rules (seen when a user who had
    probed Llama-3.1-8B checked a TP 2 plan of it)."""
    store = Store(tmp_path / "s.sqlite")
    store.add(_cuda_record())
    hw = hardware.resolve("h100", 2, 1)
    tp = Knobs(precision="bf16", checkpointing="full", tensor_parallel=2, fsdp="full")
    p = make_plan(MODEL, hw, GOAL, tp, 2, Calibrator("auto", store, MODEL.name, MODEL.config))
    assert p.evidence == "analytic" and p.tensor_parallel == 2


def _sim_record(replay: dict | None):
    from planner.evidence.calibrate import sim_knobs, sim_shapes

    s = Setup(MODEL, KNOBS, 2, 1, 1024)
    cats = {"params": 16 * 2**30, "grads": 16 * 2**30, "optimizer": 32 * 2**30, "activations": 4 * 2**30}
    return ProbeRecord(
        model=MODEL.name,
        arch=arch_hash(MODEL.config),
        tensor_key=tensor_key(MODEL.config, sim_knobs(KNOBS), sim_shapes(s)),
        backend="sim",
        status="ok",
        device="fake-cpu",
        versions={},
        knobs=sim_knobs(KNOBS),
        shapes=sim_shapes(s),
        peak_allocated_bytes=sum(cats.values()) + 2**30,
        by_category=cats | {"temporaries": 2**30},
        detail={"replay": replay} if replay else {},
    )


def _limit():
    from planner.estimate.overheads import allocator_limit_bytes

    return allocator_limit_bytes(Setup(MODEL, KNOBS, 2, 1, 1024, gpu=HW.gpu.name), HW.gpu.capacity_bytes)


def test_a_replayed_sim_step_sets_the_fragmentation_in_place_of_the_prior(tmp_path):
    """planner.verification.verify stores the caching allocator's replay of the sim step (probes.reserved) in the
    record: at this card's limit, its reserved over allocated is the plan's fragmentation; at another card's, the
    prior."""
    store = Store(tmp_path / "s.sqlite")
    store.add(_sim_record({"limit_bytes": _limit(), "allocated": 10 * 2**30, "reserved": 13 * 2**30, "oom_at": None}))
    p = _plan(store)
    frag = next(t for t in p.memory.overheads if t.name == "fragmentation")
    assert p.evidence == "simulated" and frag.basis.startswith("replayed")
    assert frag.bytes == int(0.3 * p.memory.peak_allocated_bytes)
    other = Store(tmp_path / "o.sqlite")
    other.add(
        _sim_record({"limit_bytes": _limit() - 1, "allocated": 10 * 2**30, "reserved": 13 * 2**30, "oom_at": None})
    )
    frag = next(t for t in _plan(other).memory.overheads if t.name == "fragmentation")
    assert not frag.basis.startswith("replayed")


def test_a_replay_that_runs_out_of_memory_does_not_fit(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    store.add(_sim_record({"limit_bytes": _limit(), "allocated": 70 * 2**30, "reserved": 78 * 2**30, "oom_at": 2**33}))
    p = _plan(store)
    assert not p.fits and "caching allocator run out of memory: a request of 8.00 GiB" in p.reason


def test_a_probe_of_a_dataparallel_plan_leaves_gpu0s_gathers_standing(tmp_path):
    """A probe traces one process on one GPU: under nn.DataParallel GPU 0 also gathers every replica's logits
    (planner.estimate.dataparallel), so a record smaller than the analytic gather phase does not replace it (seen on
    LLaMA-Factory 0.7's one-process launch of Llama-3-8B LoRA at 8k tokens over 8 GPUs: --verify answered the
    replica's 29 GiB step where GPU 0's gather holds 56 GiB). Without DataParallel the same record is the peak."""
    store = Store(tmp_path / "s.sqlite")
    calibrated, analytic = {}, {}
    for gpus, more in ((8, {"dataparallel": True}), (1, {})):
        hw = hardware.resolve("h100", gpus, 1)
        knobs = Knobs(precision="bf16", checkpointing="full", lora_rank=8, framework="hf", release="4", **more)
        goal = Goal(global_batch=gpus, seq_len=8192)  # one row on each replica
        analytic[gpus] = make_plan(MODEL, hw, goal, knobs, 1)
        step = analytic[8].memory.phases["backward"]  # a replica's step: what the probe holds
        shapes = real_shapes(Setup.of(MODEL, analytic[gpus].knobs, 1, 1, hw, goal))
        update = {"knobs": knobs, "shapes": shapes, "tensor_key": tensor_key(MODEL.config, knobs, shapes)}
        store.add(_cuda_record(peak=step, used=step + 2**30).model_copy(update=update))
        calibrated[gpus] = make_plan(MODEL, hw, goal, knobs, 1, Calibrator("auto", store, MODEL.name, MODEL.config))
    dp, one = calibrated[8].memory, calibrated[1]
    assert analytic[8].memory.peak_phase == dp.peak_phase == "forward"
    assert dp.peak_allocated_bytes == analytic[8].memory.peak_allocated_bytes > 1.5 * step
    assert calibrated[8].evidence == "analytic"  # the figure shown is the analytic one, and says so
    assert one.evidence == "measured" and one.memory.peak_allocated_bytes == step
