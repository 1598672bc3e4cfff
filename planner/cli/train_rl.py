"""`planner train --workload grpo|dpo`: the run file for trainer/rl.py (TRL's trainers) and its launch."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path

from planner import resolved
from planner.advise import CheckRequest
from planner.cli import printout
from planner.config.layout import Layout, raise_if
from planner.config.spec import Knobs
from planner.errors import BadInput


def run_config(args: argparse.Namespace, model: str, req: CheckRequest, knobs: Knobs) -> dict:
    from planner.export.configs import deepspeed_config_for
    from planner.model.catalog import load_model

    spec = load_model(model)
    w = knobs.workload
    resolved.check_positions(spec, w.seq_len())
    if args.data != "synthetic" and not Path(args.data).is_file():
        raise BadInput(
            f"--data {args.data!r}: not a file (synthetic, or a JSONL of "
            f"{'prompt' if w.kind == 'grpo' else 'prompt/chosen/rejected'} rows)",
            "data",
        )
    if args.processor:
        _check_image_prompts(args, w.kind, spec)
    if args.resume or args.max_tokens_per_micro_batch or args.save_every or args.eval_every:
        raise BadInput(
            f"--workload {w.kind} runs TRL's trainer: --resume, --save-every, --eval-every and "
            "--max-tokens-per-micro-batch are the bundled SFT trainer's",
            "workload",
        )
    world = (req.gpus_per_node or 1) * req.nodes
    raise_if(Layout(req.gpus_per_node or 1, req.nodes).split_error(knobs, req.micro_batch, req.grad_accum))
    ds = deepspeed_config_for(knobs, req.micro_batch, req.grad_accum, world, spec) if knobs.zero_stage else None
    return {
        "model": model,
        "micro_batch": req.micro_batch,
        "grad_accum": req.grad_accum,
        "world": world,
        "knobs": knobs.model_dump(),
        "data": args.data,
        "max_steps": args.max_steps,
        "lr": args.lr,
        "seed": args.seed,
        "log": args.log,
        "device": args.device,
        "deepspeed_config": ds,
        "reward": args.reward,
        "processor": args.processor,
    }


def _check_image_prompts(args: argparse.Namespace, kind: str, spec) -> None:
    """--processor: GRPO of a VLM from a file of {"prompt", "images"} rows whose images are there (before anything
    is written or launched)."""
    if kind != "grpo" or spec.vision is None:
        raise BadInput(
            f"--processor: images in the prompts are for --workload grpo of a VLM (not {kind} of {spec.name})",
            "processor",
        )
    from trainer.console import quiet_third_party
    from trainer.data import check_source
    from trainer.rl import image_prompts
    from trainer.vlm import load_processor

    quiet_third_party()
    check_source(args.data, None, args.processor)
    load_processor(args.processor)
    image_prompts(args.data)


def run(args: argparse.Namespace, model: str, req: CheckRequest, knobs: Knobs, launch) -> int:
    """Write the run file, then train here (one process) or launch one process per rank (`launch`: the SFT
    trainer's launch_command, pointed at trainer.rl)."""

    cfg = run_config(args, model, req, knobs)  # a dry run never gets here (train.dry_run writes the run file)
    where = Path(args.save_dir) if args.save_dir else Path(tempfile.mkdtemp(prefix="memplan-rl-"))
    try:
        return _launch(args, req, knobs, cfg, where, launch)
    finally:
        if not args.save_dir:
            import shutil

            shutil.rmtree(where, ignore_errors=True)


def _launch(args, req, knobs, cfg, where: Path, launch) -> int:
    import subprocess

    path = where / "memplan-rl-run.json"
    cmd = launch(args, req, str(path), "trainer.rl")
    try:
        where.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cfg, indent=1))
    except OSError as e:
        raise BadInput(f"--save-dir {str(where)!r}: cannot write the run file ({e})", "save_dir") from None
    printout.say_line(
        f"running TRL's {knobs.workload.kind.upper()} trainer: "
        + (shlex.join(cmd) if cmd else f"{sys.executable} -m trainer.rl {path}"),
        printout.err_console(),
    )
    if cmd is None:
        from trainer.console import quiet_third_party
        from trainer.rl import run as train

        quiet_third_party()
        rows = train(cfg)
        if args.json:
            printout.print_json({"steps": len(rows), "metrics": rows})
        return 0
    return subprocess.run(cmd, check=False).returncode
