"""What accumulation costs, pinned on 2 gloo ranks (probes/accum.py): one global batch (8 rows of 16 tokens a rank)
split into 1, 2, 4 and 8 micro-steps under torch DDP and FSDP2 with and without no_sync and DeepSpeed ZeRO-2/3, every
torch.distributed call counted, against planner.estimate.microstep's collectives: the same calls, the same bytes of
the same tensors, once a step or on every micro-step as planned. The collectives carry gradients, whatever the rows'
length: at 64 tokens a row (until stop 70) ZeRO-2's case took 90 s of a worker in make test, bf16 backward on CPU."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate import zero
from planner.estimate.setup import Setup
from planner.model.catalog import model_config
from planner.model.families import from_config
from probes.accum import measure_accum, planned
from probes.step import Case

ACCUMS = [1, 2, 4, 8]
NOT_PLANNED = {"small", "broadcast"}  # flags, norms and DeepSpeed's first-step broadcasts: latency, under 4 KiB
# the sweep tier since stop 68, for CI's room: the -sync modes (no no_sync: every micro-step's collectives), and FSDP2
# and ZeRO-3 (87 s and 141 s of a worker in make test at stop 68, 2026-12-06): DDP's buckets once a step and ZeRO-2's
# flush on every micro-step stay on every commit
MODES = [
    ("ddp", 0),
    pytest.param("ddp-sync", 0, marks=pytest.mark.sweep),
    pytest.param("fsdp", 0, marks=pytest.mark.sweep),
    pytest.param("fsdp-sync", 0, marks=pytest.mark.sweep),
    ("zero2", 2),
    pytest.param("zero3", 3, marks=pytest.mark.sweep),
]


def _case(stage: int, mode: str = "") -> Case:
    knobs = Knobs(precision="bf16", zero_stage=stage, optimizer="sgd", fsdp="full" if "fsdp" in mode else "off")
    return Case(model_config("debug-llama"), knobs, 1, 8, 16)


def _persistent_bytes(case: Case) -> int:
    """ZeRO-3's persistent parameters (the norms): all-gathered again once a step after the update, not on every
    micro-step (DeepSpeed keeps them whole between micro-steps)."""
    s = Setup(from_config(case.config, "probe"), case.knobs, 1, 1, case.seq_len, 2, 1)
    return 2 * zero.persistent_param_elements(s)


@pytest.mark.parametrize("mode,stage", MODES)
def test_each_collective_runs_once_a_step_or_every_micro_step_as_planned(mode, stage):
    case = _case(stage, mode)
    rows = measure_accum(case, mode, ACCUMS, steps=2)

    def counts(r):  # the ranks' timings differ, never their calls and bytes
        return [
            {op: (v["calls"], v["bytes"]) for op, v in s["collectives"].items()} for x in r["runs"] for s in x["steps"]
        ]

    assert counts(rows[0]) == counts(rows[1])
    calls = {}
    for run in rows[0]["runs"]:
        a, got = run["accum"], run["steps"][-1]["collectives"]
        plan = planned(case, mode, a)
        assert {op for op in got if op not in NOT_PLANNED} == set(plan), (a, got, plan)
        assert sum(got[op]["bytes"] for op in got if op in NOT_PLANNED) < 4096
        for op, p in plan.items():
            extra = (a - 1) * _persistent_bytes(case) if stage == 3 and op == "all_gather_into_tensor" else 0
            assert got[op]["bytes"] == p["bytes"] - extra, (op, a)
            calls.setdefault(op, []).append(got[op]["calls"])
            if stage == 0:  # DDP's buckets and FSDP2's units, exactly; DeepSpeed flushes per gradient (microstep)
                assert got[op]["calls"] == p["calls"], (op, a)
    for op, c in calls.items():  # calls = once + accumulation x each micro-step's, each > 0 where planned so
        each = c[1] - c[0]
        assert [c[0] + (a - 1) * each for a in ACCUMS] == c, op
        assert (each > 0) == planned(case, mode, 1)[op]["per_micro_step"], op
