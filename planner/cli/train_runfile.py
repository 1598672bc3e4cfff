"""The bundled SFT trainer's run file (trainer.runconfig.RunConfig as JSON): its fields from the plan and the flags,
the folder it goes in, writing it, and the checks made once before anything is written or launched (every line of
--data, the checkpoint --resume would load)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from planner import resolved
from planner.advise import CheckRequest
from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.search.batching import check_budget


def run_config(args: argparse.Namespace, model: str, req: CheckRequest, knobs: Knobs) -> dict:
    """The trainer's RunConfig fields (trainer.runconfig.RunConfig), as JSON."""
    from planner.export.configs import deepspeed_config_for
    from planner.model.catalog import load_model

    spec = load_model(model)
    resolved.check_positions(spec, req.seq_len)
    if req.max_tokens_per_micro_batch is not None:
        check_budget(req.max_tokens_per_micro_batch, req.seq_len)
    world = (req.gpus_per_node or 1) * req.nodes
    ds = deepspeed_config_for(knobs, req.micro_batch, req.grad_accum, world, spec) if knobs.zero_stage else None
    return {
        "model": model,
        "micro_batch": req.micro_batch,
        "grad_accum": req.grad_accum,
        "seq_len": req.seq_len,
        "knobs": knobs.model_dump(),
        "data": args.data,
        "tokenizer": args.tokenizer,
        "processor": args.processor,
        "max_steps": args.max_steps,
        "lr": args.lr,
        "seed": args.seed,
        "log": args.log,
        "device": args.device,
        "save_dir": args.save_dir,
        "save_every": args.save_every,
        "resume": args.resume,
        "store": args.store,
        "deepspeed_config": ds,
        "eval_every": args.eval_every,
        "eval_batch": knobs.eval_batch or 8,
        "max_tokens_per_micro_batch": req.max_tokens_per_micro_batch,
        # the plan as `planner runs` checks it again (trainer/runlog.py)
        "extra": {"plan": {"gpu": req.gpu, "gpus_per_node": req.gpus_per_node or 1, "nodes": req.nodes}},
    }


def run_file_dir(args: argparse.Namespace, req: CheckRequest) -> tuple[Path, bool]:
    """(folder of the run file, whether it is a temporary one to remove). --save-dir keeps it beside the
    checkpoints; a one-node run without it uses a temporary folder (not the working directory); a multi-node
    run needs a folder every node reads: --save-dir, else the working directory."""
    if args.save_dir:
        return Path(args.save_dir), False
    if (args.nnodes or req.nodes) > 1:
        return Path("."), False
    import tempfile

    return Path(tempfile.mkdtemp(prefix="memplan-run-")), True


def write_run_file(path: Path, cfg: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cfg, indent=1))
    except (OSError, ValueError) as e:
        raise BadInput(f"--save-dir {str(path.parent)!r}: cannot write the run file ({e})", "save_dir") from None


def check_data_and_resume(args: argparse.Namespace, cfg: dict, world: int) -> None:
    """Before anything is written or launched (once, here, for every rank): every line of --data, and the
    checkpoint --resume would load (intact, of this model and plan, behind --max-steps)."""
    from planner.model.catalog import load_model
    from trainer.data import validate

    vocab = load_model(cfg["model"]).text.vocab
    if args.processor:
        from trainer import vlm

        vlm.check_batching(cfg["knobs"]["batching"])
        vlm.load(args.data, cfg["seq_len"], vocab, vlm.load_processor(args.processor))
    elif args.data != "synthetic":
        validate(args.data, cfg["seq_len"], vocab, args.tokenizer)
    if args.resume and args.save_dir:
        from trainer.checkpoint import check_resume
        from trainer.runconfig import RunConfig

        check_resume(Path(args.save_dir), RunConfig(**cfg), world, args.max_steps)
