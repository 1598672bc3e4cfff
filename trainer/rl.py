"""`planner train --workload grpo|dpo`: the plan run by TRL's own GRPOTrainer / DPOTrainer (recipe/trl_run.py),
one process or one per rank under torchrun / deepspeed (TRL reads the launcher's environment through accelerate).

The run file (JSON) holds the model, the knobs (with the workload), the split, the steps and the data: synthetic
rows of the planned lengths, or a JSONL file of {"prompt"} rows (GRPO) or {"prompt", "chosen", "rejected"} rows
(DPO) in the built-in word tokenizer's words or, with --tokenizer, any text.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from types import SimpleNamespace

from planner.config.spec import Knobs


def dataset(cfg: dict, knobs: Knobs):
    from recipe import trl_run

    w = knobs.workload
    if cfg["data"] == "synthetic":
        rows = cfg["micro_batch"] * cfg["grad_accum"] * cfg["world"] * cfg["max_steps"]
        if w.kind == "grpo":
            return trl_run.prompts(rows // w.num_generations + 1, w.prompt_tokens())
        return trl_run.pairs(rows, w.prompt_tokens() or w.seq_len() // 4, w.scored_tokens() - 1)
    from datasets import load_dataset

    return load_dataset("json", data_files=cfg["data"], split="train")


def run(cfg: dict) -> list[dict]:
    """Train; the metrics TRL logged, one dict per optimizer step."""
    from planner.export.export import trl_args
    from recipe import trl_run
    from trainer.model import build_model

    knobs = Knobs.model_validate(cfg["knobs"])
    model = build_model(SimpleNamespace(model=cfg["model"], device=cfg["device"], knobs=knobs, seed=cfg["seed"]))
    model.config.use_cache = True  # generation keeps its KV cache
    fields = trl_args(knobs.workload)
    extra = {"deepspeed": cfg["deepspeed_config"]} if cfg.get("deepspeed_config") else {}
    with tempfile.TemporaryDirectory() as out:
        if knobs.lora_rank == 0:  # TRL builds GRPO's reference model from a folder
            model.save_pretrained(f"{out}/init")
            model = f"{out}/init"
        args = trl_run.config(
            knobs.workload.kind,
            out,
            fields,
            cfg["micro_batch"],
            cfg["grad_accum"],
            knobs.precision,
            knobs.checkpointing == "full",
            cfg["max_steps"],
            seed=cfg["seed"],
            learning_rate=cfg["lr"],
            **extra,
        )
        trainer = trl_run.trainer(knobs.workload.kind, model, args, dataset(cfg, knobs), reward=cfg.get("reward"))
        if trainer.accelerator.is_main_process:
            plugin = trainer.accelerator.state.deepspeed_plugin
            how = f"DeepSpeed ZeRO-{plugin.zero_stage}" if trainer.is_deepspeed_enabled else "no DeepSpeed"
            print(
                f"TRL {type(trainer).__name__}, {how}, {trainer.accelerator.num_processes} process(es) on "
                f"{trainer.accelerator.device.type}",
                file=sys.stderr,
                flush=True,
            )
        trainer.train()
        rows = [r for r in trainer.state.log_history if "loss" in r]
    if cfg.get("log"):
        with open(cfg["log"], "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    return rows


def main(path: str) -> int:
    from trainer.console import quiet_third_party

    quiet_third_party()
    with open(path) as f:
        rows = run(json.load(f))
    if os.environ.get("RANK", "0") == "0":
        print(json.dumps({"steps": len(rows), "metrics": rows}))
    return 0


if __name__ == "__main__":
    from recipe.dist import exit_rank

    exit_rank(main(sys.argv[1]))
