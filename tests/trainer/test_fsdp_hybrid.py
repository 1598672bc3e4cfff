"""HSDP across nodes, emulated: two torchrun agents (`--nnodes 2 --node_rank 0|1`, c10d rendezvous on loopback),
2 ranks each, run an FSDP2 `hybrid` plan (sharded within a node, replicated across the two), and give the losses
of 4-rank DDP with the same global batch (fp32, tolerance 1e-5 relative)."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers")
from recipe.dist import free_port
from tests.trainer.helpers import ROOT, TINY, launch, losses

STEPS = 5


def test_hybrid_over_two_emulated_nodes_gives_the_ddp_losses(tmp_path):
    _, ref = launch(tmp_path, "ddp", 4, max_steps=STEPS, micro_batch=1, grad_accum=1)
    log = tmp_path / "hybrid.jsonl"
    conf = tmp_path / "hybrid.json"
    conf.write_text(
        json.dumps(
            {
                **TINY,
                "log": str(log),
                "micro_batch": 1,
                "grad_accum": 1,
                "max_steps": STEPS,
                "knobs": {"precision": "fp32", "fsdp": "hybrid"},
            }
        )
    )
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes",
                "2",
                "--nproc_per_node",
                "2",
                "--node_rank",
                str(r),
                "--rdzv_backend",
                "c10d",
                "--rdzv_id",
                "hsdp",
                "--rdzv_endpoint",
                f"127.0.0.1:{port}",
                "-m",
                "trainer.main",
                str(conf),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for r in (0, 1)
    ]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    got = losses(log)
    assert len(got) == STEPS and got == pytest.approx(losses(ref), rel=1e-5)
