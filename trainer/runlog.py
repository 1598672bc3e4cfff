"""Each optimizer step of a bundled-trainer run recorded in the probe store (planner.evidence.runs), with the plan it
ran, where the run names a store (`planner train --store FILE`): `planner runs` then sets it against the prediction.
Every rank writes its own row (planner.evidence.store.Store sets up a new file opened by several at once). The run's id is $MEMPLAN_RUN, else one made from the run file and the launch (the same
on every rank of one launch)."""

from __future__ import annotations

import hashlib
import json
import os

import torch

from planner.evidence.runs import RunStep, add, peak_rss_bytes
from planner.evidence.store import Store


def run_id(cfg) -> str:
    given = os.environ.get("MEMPLAN_RUN")
    if given:
        return given
    launch = (os.environ.get("TORCHELASTIC_RUN_ID", ""), os.environ.get("MASTER_PORT", ""))
    digest = hashlib.sha256(json.dumps([cfg.to_json(), launch], sort_keys=True, default=str).encode()).hexdigest()
    return f"train-{digest[:10]}"


class StepRecorder:
    def __init__(self, cfg, rank: int) -> None:
        self.store = Store(cfg.store)
        self.run, self.rank = run_id(cfg), rank
        plan = {"model": cfg.model, "micro_batch": cfg.micro_batch, "grad_accum": cfg.grad_accum}
        plan |= {"seq_len": cfg.seq_len, **cfg.extra.get("plan", {}), **cfg.knobs.model_dump(exclude_defaults=True)}
        self.plan = plan

    def add(self, row: dict, device: torch.device) -> None:
        cuda = device.type == "cuda"
        add(
            self.store,
            [
                RunStep(
                    run=self.run,
                    step=row["step"],
                    rank=self.rank,
                    model=str(self.plan["model"]),
                    plan=self.plan,
                    allocated_bytes=row.get("peak_allocated_bytes"),
                    reserved_bytes=torch.cuda.max_memory_reserved(device) if cuda else None,
                    host_rss_bytes=peak_rss_bytes(),
                    device=torch.cuda.get_device_name(device) if cuda else device.type,
                    source="bundled",
                )
            ],
        )

    def close(self) -> None:
        self.store.close()
