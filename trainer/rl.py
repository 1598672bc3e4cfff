"""`planner train --workload grpo|dpo`: the plan run by TRL's own GRPOTrainer / DPOTrainer (recipe/trl_run.py),
one process or one per rank under torchrun / deepspeed (TRL reads the launcher's environment through accelerate).

The run file (JSON) holds the model, the knobs (with the workload), the split, the steps and the data: synthetic
rows of the planned lengths, or a JSONL file of {"prompt"} rows (GRPO) or {"prompt", "chosen", "rejected"} rows
(DPO) in the built-in word tokenizer's words or, with --tokenizer, any text. A VLM's GRPO (--processor, its local
processor folder) reads {"prompt", "images"} rows, image paths relative to the file: TRL puts each row's images in its
prompt as one user message and its processor makes the inputs (trainer/vlm.py has the rows' rules).
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
    if cfg.get("processor"):
        return image_prompts(cfg["data"])
    from datasets import load_dataset

    return load_dataset("json", data_files=cfg["data"], split="train")


def image_prompts(data: str):
    """{"prompt", "images"} rows as TRL's GRPOTrainer takes a VLM's: a conversational prompt (one user message) and
    its images, decoded from their files when a batch is drawn."""
    from pathlib import Path

    from datasets import Dataset, Image, List

    from planner.errors import BadInput
    from scan.read import jsonl_rows
    from trainer.vlm import image_paths

    prompts, images = [], []
    for n, row in jsonl_rows(Path(data), "--data"):
        where = f"--data {data!r} line {n}"
        if not isinstance(row.get("prompt"), str):
            raise BadInput(
                f"{where}: expected an object with 'prompt' (and 'images') for GRPO with --processor", "data"
            )
        prompts.append([{"role": "user", "content": row["prompt"]}])
        images.append(image_paths(row, Path(data).parent, where))
    if not prompts:
        raise BadInput(f"--data {data!r}: no samples (the file is empty)", "data")
    return Dataset.from_dict({"prompt": prompts, "images": images}).cast_column("images", List(Image()))


def deepspeed_for(ds_config: dict, device: str) -> dict:
    """The plan's DeepSpeed config for TRL: on a GPU as exported; on CPU as the bundled trainer runs it
    (trainer/setup.py), the Trainer's own torch AdamW instead of DeepSpeed's FusedAdam and gloo without the
    shared-memory collectives, both of which DeepSpeed would compile at run time (2-4 minutes on 2 cores)."""
    if device != "cpu":
        return ds_config
    from recipe.dist import client_optimizer_config, no_shm_collectives

    no_shm_collectives()
    return client_optimizer_config(ds_config)


def run(cfg: dict) -> list[dict]:
    """Train; the metrics TRL logged, one dict per optimizer step."""
    from planner.export.export import trl_args
    from recipe import trl_run
    from trainer.model import build_model

    knobs = Knobs.model_validate(cfg["knobs"])
    model = build_model(SimpleNamespace(model=cfg["model"], device=cfg["device"], knobs=knobs, seed=cfg["seed"]))
    model.config.use_cache = True  # generation keeps its KV cache
    fields = trl_args(knobs.workload)
    ds = cfg.get("deepspeed_config")
    extra = {"deepspeed": deepspeed_for(ds, next(model.parameters()).device.type)} if ds else {}
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
        processor = None
        if cfg.get("processor"):
            from trainer.vlm import load_processor

            processor = load_processor(cfg["processor"])
            processor.tokenizer.padding_side = "left"  # TRL generates from the prompts' end
        trainer = trl_run.trainer(
            knobs.workload.kind, model, args, dataset(cfg, knobs), reward=cfg.get("reward"), processing_class=processor
        )
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
