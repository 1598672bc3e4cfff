"""Arguments shared by `suggest` and `check`, list parsing, and JSON output."""
from __future__ import annotations

import argparse
import json
import sys

from planner import catalog, hardware
from planner.errors import BadInput
from planner.modelspec import ModelSpec
from planner.search import DEFAULT_MARGIN
from planner.spec import CHECKPOINTING, OFFLOADS, OPTIMIZERS, PRECISIONS, ZERO_STAGES, Goal, Hardware


def int_at_least(flag: str, low: int):
    """An integer flag >= low, with a one-line message naming the flag and the value."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} {text!r}: expected an integer >= {low}") from None
        if v < low:
            raise argparse.ArgumentTypeError(f"{flag} {v}: must be an integer >= {low}")
        return v
    return parse


def positive_int(flag: str):
    return int_at_least(flag, 1)


def nonneg_int(flag: str):
    return int_at_least(flag, 0)


def margin(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--margin {text!r}: expected a fraction in [0, 1)") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"--margin {v}: must be in [0, 1)")
    return v


def choice_list(flag: str, accepted: tuple, cast=str):
    """A comma-separated list whose every item must be one of `accepted`."""
    def parse(text: str) -> list:
        out = []
        for item in (x.strip().lower() for x in text.split(",")):
            try:
                v = cast(item)
            except ValueError:
                v = None
            if v not in accepted:
                raise argparse.ArgumentTypeError(
                    f"{flag} {item!r}: accepted values are {', '.join(map(str, accepted))}")
            if v not in out:
                out.append(v)
        return out
    return parse


def one_of(flag: str, accepted: tuple, cast=str):
    many = choice_list(flag, accepted, cast)

    def parse(text: str):
        vals = many(text)
        if len(vals) != 1:
            raise argparse.ArgumentTypeError(f"{flag} {text!r}: give exactly one of {', '.join(map(str, accepted))}")
        return vals[0]
    return parse


def add_target_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="catalog name (`planner models`), config.json path, or folder")
    p.add_argument("--gpu", required=True, help="catalog GPU (`planner gpus`) or 'local' (NVML)")
    p.add_argument("--gpus-per-node", type=positive_int("--gpus-per-node"), default=None,
                   help="GPUs per node (default 1; with --gpu local, all local GPUs)")
    p.add_argument("--nodes", type=positive_int("--nodes"), default=1)
    p.add_argument("--seq-len", type=positive_int("--seq-len"), required=True,
                   help="maximum sequence length in tokens (text + image tokens)")
    p.add_argument("--image-tokens", type=nonneg_int("--image-tokens"), default=None,
                   help="VLMs: LLM-side image tokens per sample (part of --seq-len)")
    p.add_argument("--images", type=nonneg_int("--images"), default=None, help="VLMs: images per sample")
    p.add_argument("--tokens-per-image", type=nonneg_int("--tokens-per-image"), default=None,
                   help="VLMs: LLM tokens per image (with --images)")
    p.add_argument("--optimizer", type=one_of("--optimizer", OPTIMIZERS), default="adamw")
    p.add_argument("--lora-rank", type=nonneg_int("--lora-rank"), default=0, help="0 = full fine-tuning")
    p.add_argument("--margin", type=margin, default=DEFAULT_MARGIN,
                   help=f"fraction of GPU memory kept free (default {DEFAULT_MARGIN})")
    p.add_argument("--inter-node-gbps", type=float, default=hardware.DEFAULT_INTER_NODE_GBPS,
                   help="network bandwidth per node in Gb/s (default 200, HDR InfiniBand)")
    p.add_argument("--host-ram-gb", type=float, default=hardware.DEFAULT_HOST_RAM_GIB,
                   help="host RAM per node for offload, GiB (default 512)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


PRECISION_LIST = choice_list("--precision", PRECISIONS)
CHECKPOINTING_LIST = choice_list("--checkpointing", CHECKPOINTING)
ZERO_LIST = choice_list("--zero", ZERO_STAGES, int)
OFFLOAD_LIST = choice_list("--offload", OFFLOADS)


def image_tokens(args: argparse.Namespace, model: ModelSpec) -> int:
    n = args.image_tokens
    if args.images is not None or args.tokens_per_image is not None:
        if args.images is None or args.tokens_per_image is None:
            raise BadInput("--images and --tokens-per-image go together")
        if n is not None:
            raise BadInput("give --image-tokens or --images with --tokens-per-image, not both")
        n = args.images * args.tokens_per_image
    n = n or 0
    if n and model.vision is None:
        raise BadInput(f"--image-tokens {n}: model {model.name!r} has no vision tower")
    if n > args.seq_len:
        raise BadInput(f"--image-tokens {n} exceeds --seq-len {args.seq_len}: image tokens are part of the sequence")
    return n


def check_positions(model: ModelSpec, seq_len: int) -> None:
    """GPT-2's positions are a learned table (n_positions rows): a longer sequence cannot run at all. RoPE
    models have no such table and may train past max_position_embeddings (context extension)."""
    t = model.text
    if t.arch == "gpt2" and t.max_positions and seq_len > t.max_positions:
        raise BadInput(f"--seq-len {seq_len}: {model.name} has learned positions for at most {t.max_positions} "
                       f"tokens (n_positions)")


def resolve(args: argparse.Namespace, global_batch: int) -> tuple[ModelSpec, Hardware, Goal]:
    model = args.model if isinstance(args.model, ModelSpec) else catalog.load_model(args.model)
    check_positions(model, args.seq_len)
    hw = hardware.resolve(args.gpu, args.gpus_per_node, args.nodes, args.inter_node_gbps, args.host_ram_gb)
    goal = Goal(global_batch=global_batch, seq_len=args.seq_len, image_tokens=image_tokens(args, model),
                margin=args.margin)
    return model, hw, goal


def hardware_json(hw: Hardware) -> dict:
    return {"gpu": hw.gpu.name, "gpus_per_node": hw.gpus_per_node, "nodes": hw.nodes,
            "world_size": hw.world_size, "capacity_bytes": hw.gpu.capacity_bytes,
            "inter_node_gbps": hw.inter_node_gbps, "host_ram_bytes": int(hw.host_ram_gib * 2**30)}


def print_json(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, indent=1) + "\n")


def print_listing(args: argparse.Namespace, data: dict, table_name: str) -> int:
    """A listing subcommand's output: JSON with --json, else the named table from render.py."""
    if args.json:
        print_json(data)
    else:
        from planner.cli import render

        render.console.print(getattr(render, table_name)(data))
    return 0


EVIDENCE = ("analytic", "sim", "auto")


def add_evidence_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--evidence", type=one_of("--evidence", EVIDENCE), default="auto",
                   help="analytic: formulas only; sim: simulate what no record covers; "
                        "auto (default): stored measured, then simulated records, else analytic")
    p.add_argument("--verify", action="store_true",
                   help="probe the chosen plan before answering (cuda on a local GPU, else sim)")
    add_store_arg(p)


def add_store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=None, help="probe store (SQLite); default $MEMPLAN_STORE or the user data dir")


def calibrator(args: argparse.Namespace, model: ModelSpec):
    from planner.evidence import Calibrator

    mode = "sim" if args.verify and args.evidence == "auto" else args.evidence
    return Calibrator.open(mode, args.store, model.name, model.config)


def status(message: str):
    """A spinner on stderr while long work runs (nothing when stderr is not a terminal)."""
    from contextlib import nullcontext

    err = err_console()
    return err.status(message) if err.is_terminal else nullcontext()


def say_line(text: str, console=None) -> None:
    """Print one line verbatim: no wrapping at the terminal's width (a command or path must paste whole), no rich
    markup or highlighting (a `[...]` in a command is not a style)."""
    from planner.cli import render

    (console or render.console).print(text, soft_wrap=True, markup=False, highlight=False)


def err_console():
    """A rich console on stderr, for progress that must not mix with --json on stdout."""
    from rich.console import Console

    return Console(stderr=True)
