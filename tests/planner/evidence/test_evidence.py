"""Plans calibrated from stored probe records (the CLI faces: tests/planner/cli/)."""

from planner.config.spec import Goal, Knobs
from planner.estimate.setup import Setup
from planner.evidence.calibrate import Calibrator, real_shapes
from planner.evidence.store import ProbeRecord, Store, arch_hash, tensor_key
from planner.model import catalog, hardware
from planner.search.search import make_plan

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
