"""Kill a run (SIGKILL between checkpoints, and SIGTERM) and resume it: the loss trajectory equals the
uninterrupted one. An injected out-of-memory error on one rank: the run finishes with the same final
weights as a run that used the smaller micro-batch from that step on."""

import json
import signal
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from tests.trainer.helpers import launch, losses, rows, signal_tree

PLAN = {"micro_batch": 1, "grad_accum": 2}  # 2 ranks: global batch 4
STEPS = 12


def _wait_lines(log, n, proc, timeout_s=300):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= n:
            return
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        time.sleep(0.05)
    raise AssertionError("run too slow")


_UNINTERRUPTED: dict[str, list[float]] = {}


def _uninterrupted(tmp_path, plan: dict) -> list[float]:
    """The losses of the run never killed, once per plan (SIGKILL and SIGTERM of one plan compare with the same run)."""
    key = json.dumps(plan, sort_keys=True)
    if key not in _UNINTERRUPTED:
        _, log = launch(tmp_path, "full", 2, max_steps=STEPS, **plan)
        _UNINTERRUPTED[key] = losses(log)
    return _UNINTERRUPTED[key]


@pytest.mark.parametrize(
    "sig,plan",
    [
        (signal.SIGKILL, PLAN),
        (signal.SIGTERM, PLAN),
        # sharded, through DCP: the sweep tier's since stop 66 (47 s in make test), for CI's room
        pytest.param(signal.SIGKILL, {**PLAN, "fsdp": "full"}, marks=pytest.mark.sweep),
    ],
    ids=["sigkill", "sigterm", "fsdp-sigkill"],
)
def test_killed_run_resumes_on_the_same_trajectory(tmp_path, sig, plan):
    full = _uninterrupted(tmp_path, plan)
    save = tmp_path / "ckpt"
    proc, log = launch(
        tmp_path,
        "killed",
        2,
        wait=False,
        max_steps=STEPS,
        save_dir=str(save),
        save_every=4,
        env={"MEMPLAN_TRAIN_STEP_DELAY_S": "0.3"},
        **plan,
    )
    _wait_lines(log, 5, proc)  # step 5 done: after the checkpoint of step 4
    signal_tree(proc.pid, sig)
    proc.communicate(timeout=120)
    done = len(log.read_text().splitlines())
    saved = int((save / "latest").read_text().strip().split("-")[1])
    assert 4 <= saved <= done < STEPS  # killed mid-run, resumed from a complete checkpoint
    if sig == signal.SIGKILL:
        assert saved % 4 == 0  # a periodic one (a half-written .tmp-* is never named by latest)
    else:
        assert saved == done  # SIGTERM: saved where it stopped
    _, resumed = launch(tmp_path, "resumed", 2, max_steps=STEPS, save_dir=str(save), resume=True, **plan)
    after = rows(resumed)
    assert [r["step"] for r in after] == list(range(saved + 1, STEPS + 1))
    assert [r["loss"] for r in after] == pytest.approx(full[saved:], rel=1e-12)


def test_injected_oom_on_one_rank_keeps_the_global_batch(tmp_path):
    store = tmp_path / "store.sqlite"
    plan = {"micro_batch": 2, "grad_accum": 1, "max_steps": 5, "store": str(store)}
    _, oom_log = launch(
        tmp_path,
        "oom",
        2,
        env={"MEMPLAN_TRAIN_INJECT_OOM": "2:0:1"},  # step 3, micro 0, rank 1
        save_dir=str(tmp_path / "oom"),
        save_every=5,
        **plan,
    )
    # reference: micro 2 for steps 1-2, then micro 1 x accum 2 from step 3 on
    _, _ = launch(tmp_path, "ref-a", 2, save_dir=str(tmp_path / "ref"), save_every=2, **{**plan, "max_steps": 2})
    meta_path = tmp_path / "ref" / "step-2" / "trainer.json"
    meta = json.loads(meta_path.read_text())
    meta.update(micro_batch=1, grad_accum=2)
    meta_path.write_text(json.dumps(meta))
    from trainer.checkpoint import manifest  # edited on purpose: its manifest is written anew

    (meta_path.parent / "manifest.json").write_text(json.dumps(manifest(meta_path.parent)))
    _, ref_log = launch(tmp_path, "ref-b", 2, save_dir=str(tmp_path / "ref"), save_every=5, resume=True, **plan)

    got = rows(oom_log)
    assert [(r["micro_batch"], r["grad_accum"]) for r in got] == [(2, 1), (2, 1), (1, 2), (1, 2), (1, 2)]
    assert [r["tokens"] for r in got[2:]] == [r["tokens"] for r in rows(ref_log)]  # no sample lost or repeated
    a = torch.load(tmp_path / "oom" / "step-5" / "state.pt", weights_only=False)["model"]
    b = torch.load(tmp_path / "ref" / "step-5" / "state.pt", weights_only=False)["model"]
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-6, atol=1e-7)
    from planner.evidence.store import Store

    (rec,) = Store(store).list()
    assert rec.status == "oom" and rec.shapes.world_size == 2 and rec.detail["source"] == "trainer"


def test_evaluation_oom_halves_only_the_evaluation_batch(tmp_path):
    _, log = launch(
        tmp_path,
        "eval",
        1,
        env={"MEMPLAN_TRAIN_INJECT_EVAL_OOM": "1"},
        micro_batch=4,
        grad_accum=1,
        max_steps=2,
        eval_every=1,
        eval_batch=8,
    )
    got = rows(log)
    train = [r for r in got if "loss" in r]
    evals = [r for r in got if "eval_loss" in r]
    assert [r["micro_batch"] for r in train] == [4, 4]  # training untouched
    assert [r["eval_batch"] for r in evals] == [4, 4]  # halved once, then kept
    assert evals[0]["eval_tokens"] == evals[1]["eval_tokens"] > 0  # the whole held-out set both times


def test_an_oom_under_a_token_budget_halves_the_budget_and_keeps_the_losses(tmp_path):
    plan = {"micro_batch": 4, "grad_accum": 1, "max_steps": 4, "max_tokens_per_micro_batch": 130}
    _, ref = launch(tmp_path, "ref", 1, **plan)
    _, oom = launch(tmp_path, "oom", 1, env={"MEMPLAN_TRAIN_INJECT_OOM": "1:0:0"}, **plan)  # step 2, micro 0
    got = rows(oom)
    assert [r["max_tokens_per_micro_batch"] for r in got] == [130, 65, 65, 65]
    assert got[1]["micro_steps"] > rows(ref)[1]["micro_steps"]  # the same samples, cut smaller
    assert losses(oom) == pytest.approx(losses(ref), rel=1e-5)  # no sample lost, none twice
