"""`planner train`: run a plan with the bundled trainer (trainer/), in this process or under a launcher.

The plan is `--plan FILE` (what `suggest --json` or `check --json` printed: its best plan) or the same
flags as `check`. With one process (world 1, or already started by a launcher) it trains here;
otherwise it prints and runs the launch command: torchrun (also multi-node with --nnodes/--node-rank/
--rdzv-endpoint), the deepspeed launcher, or srun + torchrun inside a Slurm allocation.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from pydantic import ValidationError

from planner import advise, resolved
from planner.advise import CheckRequest
from planner.cli import advising, argtypes, extras, knobargs, printout, workloadargs
from planner.cli.probe import add_config_args
from planner.config.knobfields import KNOBS
from planner.config.spec import Knobs, Plan, bad_input
from planner.errors import BadInput
from planner.search.batching import check_budget

LAUNCHERS = ("auto", "none", "torchrun", "deepspeed", "slurm")


def register(p) -> None:
    """The subcommand's flags on its parser (planner.cli.build_parser makes it)."""
    p.add_argument("--plan", help="plan JSON as printed by `suggest --json` (best plan) or `check --json`")
    add_config_args(p, required=False)  # --model may also be a local HF folder with weights
    p.add_argument("--gpu", default="h100", help="GPU kind of the plan (with --gpus-per-node: the world size)")
    p.add_argument("--gpus-per-node", type=argtypes.positive_int("--gpus-per-node"), default=1)
    p.add_argument("--nodes", type=argtypes.positive_int("--nodes"), default=1)
    p.add_argument(
        "--data", default="synthetic", help="synthetic | a JSONL file ({'text': ...} or {'input_ids': [...]})"
    )
    p.add_argument("--tokenizer", help="local tokenizer folder, for a JSONL of text")
    p.add_argument(
        "--processor",
        help="a VLM's local processor folder, for a JSONL of {'text', 'images'} rows (image paths relative to the file)",
    )
    p.add_argument("--max-steps", type=argtypes.positive_int("--max-steps"), default=100)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--max-tokens-per-micro-batch",
        type=argtypes.positive_int("--max-tokens-per-micro-batch"),
        default=None,
        help="cut each rank's samples into micro-batches of samples x padded width <= this "
        "(the global batch stays micro-batch x accumulation x world samples)",
    )
    p.add_argument("--log", help="metrics JSONL, one object per optimizer step")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda when available")
    p.add_argument("--save-dir", help="checkpoints (atomic; also saved on SIGTERM)")
    p.add_argument("--save-every", type=argtypes.nonneg_int("--save-every"), default=0)
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --save-dir")
    p.add_argument(
        "--eval-every",
        type=argtypes.nonneg_int("--eval-every"),
        default=0,
        help="evaluate on a held-out 5%% every N steps (0: never), --eval-batch rows a rank (8 when not given; an "
        "OOM there halves the evaluation batch only)",
    )
    p.add_argument("--launcher", type=argtypes.one_of("--launcher", LAUNCHERS), default="auto")
    p.add_argument("--nnodes", type=argtypes.positive_int("--nnodes"), default=None)
    p.add_argument("--node-rank", type=argtypes.nonneg_int("--node-rank"), default=0)
    p.add_argument("--rdzv-endpoint", help="host:port of the rendezvous (multi-node torchrun)")
    p.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    p.add_argument("--reward", help="--workload grpo: reward as module:function (default: the built-in format reward)")
    advising.add_store_arg(p)
    p.set_defaults(run=run)


def _plan_file(path: str) -> dict:
    """The plan file's fields as check's request, after checking its shape and its batch invariant."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise BadInput(f"--plan {path!r}: not a readable JSON file ({e})", "plan") from None
    if not isinstance(data, dict):
        raise BadInput(f"--plan {path!r}: expected the JSON object `suggest --json` or `check --json` prints", "plan")
    plans = data.get("plans")
    plan = data.get("plan") or (plans[0] if isinstance(plans, list) and plans else None)
    if plan is None:
        raise BadInput(f"--plan {path!r}: no plan in it (suggest found nothing that fits?)", "plan")
    try:
        plan, hw, goal = Plan.model_validate(plan), data["hardware"], data["goal"]
        model = data["model"]["name"]
        world = hw["gpus_per_node"] * hw["nodes"]
    except (ValidationError, KeyError, TypeError) as e:
        what = bad_input(e) if isinstance(e, ValidationError) else f"missing or malformed {e}"
        raise BadInput(f"--plan {path!r}: not a plan file ({what})", "plan") from None
    if not (isinstance(world, int) and world == plan.world_size):
        raise BadInput(
            f"--plan {path!r}: the plan's world size {plan.world_size} is not the hardware's "
            f"gpus_per_node x nodes ({world!r})",
            "plan",
        )
    return {
        "model": model,
        "gpu": str(hw.get("gpu", "h100")),
        "gpus_per_node": hw["gpus_per_node"],
        "nodes": hw["nodes"],
        "seq_len": goal.get("seq_len") if isinstance(goal, dict) else None,
        "micro_batch": plan.micro_batch,
        "grad_accum": plan.grad_accum,
        **{f: getattr(plan, f) for f in KNOBS},
        "max_tokens_per_micro_batch": plan.token_batches.max_tokens_per_micro_batch if plan.token_batches else None,
    }


def plan_from(args: argparse.Namespace) -> tuple[str, CheckRequest, Knobs]:
    """(model reference, the run as check's request, its knobs) from --plan or the check-like flags; every
    value bounded and every knob rule checked, as for check itself."""
    if args.plan:
        fields = _plan_file(args.plan)
        fields["model"] = args.model or fields["model"]
        fields["seq_len"] = args.seq_len or fields["seq_len"]
        fields["max_tokens_per_micro_batch"] = args.max_tokens_per_micro_batch or fields["max_tokens_per_micro_batch"]
    else:
        rl = getattr(args, "workload", "sft") != "sft"
        missing = [
            f for f in ("model", "micro_batch", "seq_len") if getattr(args, f) is None and not (rl and f == "seq_len")
        ]
        if missing:
            raise BadInput(
                "give --plan FILE, or --model, --micro-batch and --seq-len (missing: "
                + ", ".join("--" + m.replace("_", "-") for m in missing)
                + ")"
            )
        fields = {
            "model": args.model,
            "gpu": args.gpu,
            "gpus_per_node": args.gpus_per_node,
            "nodes": args.nodes,
            "seq_len": args.seq_len,
            "micro_batch": args.micro_batch,
            "grad_accum": args.grad_accum,
            "max_tokens_per_micro_batch": args.max_tokens_per_micro_batch,
            **knobargs.knob_values(args),
            **workloadargs.workload_fields(args),
        }
    req = advise.parse(advise.CheckRequest, fields)
    return str(req.model), req, advise.knobs_of(req, req.precision or "bf16")


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


def launch_command(
    args: argparse.Namespace, req: CheckRequest, config_path: str, module: str = "trainer.main"
) -> list[str] | None:
    """The command that starts every process (running `module` on the run file), or None to train in this one."""
    gpn, nodes = req.gpus_per_node or 1, args.nnodes or req.nodes
    launcher = args.launcher
    if launcher == "auto":
        if "LOCAL_RANK" in os.environ or gpn * nodes == 1:
            launcher = "none"
        else:
            launcher = "slurm" if "SLURM_JOB_ID" in os.environ and nodes > 1 else "torchrun"
    if launcher == "none":
        return None
    entry = ["-m", module, config_path]
    if launcher == "deepspeed":
        cmd = ["deepspeed", "--num_gpus", str(gpn)]
        if nodes > 1:
            cmd += ["--num_nodes", str(nodes), "--hostfile", "hostfile"]
        return [*cmd, "--module", module, config_path]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(gpn)]
    if launcher == "slurm":  # one srun task per node; MASTER_ADDR/PORT from the allocation (see run)
        inner = (
            f'{shlex.join(torchrun)} --nnodes "$SLURM_NNODES" --rdzv_id "$SLURM_JOB_ID" --rdzv_backend c10d '
            f'--rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" {shlex.join(entry)}'
        )
        return ["srun", "--kill-on-bad-exit=1", "--ntasks-per-node=1", "bash", "-c", inner]
    if nodes > 1:
        if not args.rdzv_endpoint:
            raise BadInput(f"--nnodes {nodes}: give --rdzv-endpoint HOST:PORT (and --node-rank on each node)")
        torchrun += [
            "--nnodes",
            str(nodes),
            "--node_rank",
            str(args.node_rank),
            "--rdzv_backend",
            "c10d",
            "--rdzv_endpoint",
            args.rdzv_endpoint,
        ]
    else:
        from recipe.dist import free_port

        torchrun += ["--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    return [*torchrun, *entry]


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


def run(args: argparse.Namespace) -> int:
    from trainer.data import check_source

    model, req, knobs = plan_from(args)
    if knobs.expert_parallel > 1:
        raise BadInput(
            f"--expert-parallel {knobs.expert_parallel}: the bundled trainer runs data parallelism only "
            "(DDP, ZeRO, FSDP); expert-parallel plans are launched with transformers' DistributedConfig "
            "(ep_size) in your own script",
            "expert_parallel",
        )
    if not args.dry_run:  # a dry run writes the run file and prints its command: no step is run here
        what = f"planner train --workload {knobs.workload.kind}" if knobs.workload.rl else "planner train"
        extras.require(what, extras.for_knobs(knobs, trainer=True))
    if knobs.workload.rl:
        from planner.cli import train_rl

        if args.dry_run:
            cfg = train_rl.run_config(args, model, req, knobs)
            return dry_run(args, req, cfg, Path(args.save_dir or ".") / "memplan-rl-run.json", "trainer.rl")
        return train_rl.run(args, model, req, knobs, launch_command)
    check_source(args.data, args.tokenizer, args.processor)
    cfg = run_config(args, model, req, knobs)
    check_data_and_resume(args, cfg, (req.gpus_per_node or 1) * req.nodes)
    if args.dry_run:
        return dry_run(args, req, cfg, Path(args.save_dir or ".") / "memplan-run.json", "trainer.main")
    where, temporary = run_file_dir(args, req)
    config_path = where / "memplan-run.json"
    cmd = launch_command(args, req, str(config_path))
    write_run_file(config_path, cfg)
    shown = " ".join(shlex.quote(x) for x in cmd) if cmd else f"{sys.executable} -m trainer.main {config_path}"
    printout.say_line(f"running: {shown}", printout.err_console())
    try:
        return _train(args, cfg, cmd)
    finally:
        if temporary:
            import shutil

            shutil.rmtree(where, ignore_errors=True)


def write_run_file(path: Path, cfg: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cfg, indent=1))
    except (OSError, ValueError) as e:
        raise BadInput(f"--save-dir {str(path.parent)!r}: cannot write the run file ({e})", "save_dir") from None


def dry_run(args: argparse.Namespace, req: CheckRequest, cfg: dict, path: Path, module: str) -> int:
    """Write the run file (to --save-dir, else the working directory) and print the command that runs it;
    launch nothing. The command on stdout, what was written on stderr."""
    write_run_file(path, cfg)
    cmd = launch_command(args, req, str(path), module) or [sys.executable, "-m", module, str(path)]
    print(shlex.join(cmd))
    printout.say_line(
        f"dry run: wrote {path}; nothing launched (run the command above to train)", printout.err_console()
    )
    return 0


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


def _train(args: argparse.Namespace, cfg: dict, cmd: list[str] | None) -> int:
    """Train in this process (cmd None) or run the launch command; third-party deprecation noise is
    filtered in every rank unless MEMPLAN_VERBOSE=1 (trainer.console.quiet_third_party)."""
    from planner.config.spec import Knobs
    from planner.export.commands import alloc_env

    os.environ.update(alloc_env(Knobs(**cfg["knobs"])))  # before CUDA starts here or in a rank (they inherit it)
    if cmd is None:
        from trainer.console import quiet_third_party
        from trainer.loop import run as train
        from trainer.runconfig import RunConfig

        quiet_third_party()
        rows = train(RunConfig(**cfg))
        if args.json:
            printout.print_json({"steps": len(rows), "metrics": rows})
        return 0
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    if cmd[0] == "srun" and "MASTER_ADDR" not in env:
        hosts = subprocess.run(
            ["scontrol", "show", "hostnames", env.get("SLURM_JOB_NODELIST", "")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        env.update(MASTER_ADDR=hosts[0], MASTER_PORT=env.get("MASTER_PORT", "29500"))
    if cfg["device"] == "cpu":
        env["DS_ACCELERATOR"] = "cpu"
    return subprocess.run(cmd, env=env, check=False).returncode
