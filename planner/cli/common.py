"""Arguments shared by `suggest` and `check`, list parsing, flags into advise requests, and JSON output."""

from __future__ import annotations

import argparse
import json
import sys

from planner.cli.argtypes import (  # noqa: F401 - the faces' flag parsers, re-exported as common.X
    choice_list,
    choices,
    framework_release,
    int_at_least,
    int_in,
    margin,
    nonneg_int,
    number,
    one_of,
    positive_int,
)
from planner.cli.roleargs import add_role_args, role_fields
from planner.config import knobfields
from planner.config.knobfields import FIXED
from planner.config.spec import DEFAULT_HOST_RAM_GIB, DEFAULT_INTER_NODE_GBPS, DEFAULT_MARGIN


def add_target_args(p: argparse.ArgumentParser, model_required: bool = True) -> None:
    p.add_argument(
        "--model",
        required=model_required,
        help="catalog name (`planner models`), config.json path, or folder"
        + ("" if model_required else " (with --config: read from the config unless given)"),
    )
    p.add_argument("--gpu", required=True, help="catalog GPU (`planner gpus`) or 'local' (NVML)")
    p.add_argument(
        "--gpus-per-node",
        type=positive_int("--gpus-per-node"),
        default=None,
        help="GPUs per node (default 1; with --gpu local, all local GPUs)",
    )
    p.add_argument("--nodes", type=positive_int("--nodes"), default=1)
    p.add_argument(
        "--seq-len",
        type=positive_int("--seq-len"),
        default=None,
        help="maximum sequence length in tokens (text + image tokens); or --data",
    )
    p.add_argument(
        "--data",
        default=None,
        help="plan for this dataset's longest row (.jsonl/.json/.csv/.parquet or a datasets folder; `planner scan`)",
    )
    p.add_argument("--tokenizer", default=None, help="with --data: a local tokenizer folder")
    p.add_argument(
        "--max-length",
        type=positive_int("--max-length"),
        default=None,
        help="with --data: cut rows to this many tokens (the plan says how many it cuts)",
    )
    p.add_argument(
        "--seed",
        type=nonneg_int("--seed"),
        default=0,
        help="with --data: the bundled trainer's sampler seed (names the step a too-long row is drawn)",
    )
    p.add_argument(
        "--max-tokens-per-micro-batch",
        type=positive_int("--max-tokens-per-micro-batch"),
        default=None,
        help="token-budget batching: micro-batches of samples x padded width <= this many tokens",
    )
    add_image_args(p)
    add_video_args(p)
    add_knob_args(p, [k for k in FIXED if k != "workload"])
    add_workload_args(p)
    p.add_argument(
        "--margin",
        type=margin,
        default=None,
        help=f"fraction of GPU memory kept free (default {DEFAULT_MARGIN}; wider for a model family "
        "counted approximately)",
    )
    p.add_argument(
        "--inter-node-gbps",
        type=number("--inter-node-gbps"),
        default=DEFAULT_INTER_NODE_GBPS,
        help="network bandwidth per node in Gb/s (default 200, HDR InfiniBand)",
    )
    p.add_argument(
        "--host-ram-gb",
        type=number("--host-ram-gb"),
        default=DEFAULT_HOST_RAM_GIB,
        help="host RAM per node for offload, GiB (default 512)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def add_image_args(p: argparse.ArgumentParser) -> None:
    """VLMs' images: a count per sample and its tokens, or the image rule and the processor's pixel settings
    (planner.search.imagefit)."""
    p.add_argument(
        "--image-rule",
        default=None,
        help="image tokens per image with --data or --images alone: qwen2-vl, qwen3-vl, internvl[:N], llava, "
        "llava-next, llava-onevision, gemma3[:pan-and-scan], idefics3, mllama or fixed:N (default: the model family's)",
    )
    p.add_argument("--min-pixels", type=positive_int("--min-pixels"), default=None, help="the Qwen rules' min_pixels")
    p.add_argument("--max-pixels", type=positive_int("--max-pixels"), default=None, help="the Qwen rules' max_pixels")
    p.add_argument(
        "--image-tokens",
        type=nonneg_int("--image-tokens"),
        default=None,
        help="VLMs: LLM-side image tokens per sample (part of --seq-len)",
    )
    p.add_argument(
        "--images",
        type=nonneg_int("--images"),
        default=None,
        help="VLMs: images per sample; alone, each at the worst case of its image rule's settings",
    )
    p.add_argument(
        "--tokens-per-image",
        type=nonneg_int("--tokens-per-image"),
        default=None,
        help="VLMs: LLM tokens per image (with --images)",
    )


def add_video_args(p: argparse.ArgumentParser) -> None:
    """Qwen2-VL / Qwen2.5-VL videos from the video processor's settings (planner.search.videofit)."""
    p.add_argument("--videos", type=nonneg_int("--videos"), default=None, help="Qwen-VL: videos per sample")
    p.add_argument("--video-seconds", type=number("--video-seconds"), default=None, help="the longest video (seconds)")
    p.add_argument("--fps", type=number("--fps"), default=None, help="video frames sampled a second (default 2)")
    p.add_argument("--max-frames", type=positive_int("--max-frames"), default=None, help="default 768")
    p.add_argument("--video-min-pixels", type=positive_int("--video-min-pixels"), default=None, help="per frame")
    p.add_argument("--video-max-pixels", type=positive_int("--video-max-pixels"), default=None, help="per frame")
    p.add_argument(
        "--video-pixel-cap",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="frames share a 115,200-token pixel budget (qwen-vl-utils; cap_pixels_per_frame)",
    )


def add_knob_args(p: argparse.ArgumentParser, fields, many: bool = False) -> None:
    """One flag per knob field, made from its declaration (planner.config.knobfields): its values or bounds, its description
    and default in --help; `many`: a comma list of values to search (suggest). Each flag's default is None, so the
    request's default (the declaration's) applies."""
    for field in fields:
        if field == "release":  # given as --framework NAME@RELEASE
            continue
        f, flag, accepted = knobfields.info(field), knobfields.flag_of(field), knobfields.choices(field)
        default = knobfields.SEARCHED[field][0] if many else f.get_default(call_default_factory=True)
        shown = (",".join(map(str, default)) or "auto") if many else default
        doc = f"{f.description} (default {shown}{'; a comma list to search' if many else ''})"
        if f.annotation is bool:
            # --X / --no-X: beside --config either overrides what the files say
            p.add_argument(flag, dest=field, action=argparse.BooleanOptionalAction, default=None, help=f.description)
            continue
        if field == "framework":
            kind = framework_release(flag, accepted)
        elif accepted:
            cast = int if isinstance(accepted[0], int) else str
            kind = choice_list(flag, accepted, cast) if many else one_of(flag, accepted, cast)
        elif f.annotation is int:
            kind = int_at_least(flag, next((m.ge for m in f.metadata if hasattr(m, "ge")), 0))
        elif f.annotation is float:
            kind = number(flag)
        else:
            kind = str
        p.add_argument(flag, dest=field, type=kind, default=None, help=doc.replace("%", "%%"))


def knob_values(args: argparse.Namespace, fields=knobfields.KNOBS) -> dict:
    """The knob flags given (None: not given, the request's default applies), by field name."""
    return {f: getattr(args, f) for f in fields if f != "workload" and getattr(args, f, None) is not None}


WORKLOAD_FLAGS = (
    "num_generations",
    "max_prompt_length",
    "max_completion_length",
    "beta",
    "generation",
    "vllm_gpu_memory_utilization",
    "steps_per_generation",
    "num_iterations",
    "precompute_ref_log_probs",
    "logprobs",
    "teacher_model",
    "lmbda",
    "jsd_beta",
)


def add_workload_args(p: argparse.ArgumentParser) -> None:
    """--workload and TRL's GRPOConfig / DPOConfig inputs (planner.config.workload.Workload); DPO's max_length is
    --max-length."""
    from planner.config.workload import GENERATIONS, WORKLOADS

    p.add_argument(
        "--workload",
        type=one_of("--workload", WORKLOADS),
        default="sft",
        help=(
            "sft, TRL's dpo (global batch in pairs) / grpo (global batch in completions), or with --framework verl or "
            "openrlhf: ppo, grpo, rloo, reinforce++ by their roles (global batch: the actor's mini-batch in samples); gkd: "
            "distillation from --teacher-model (TRL's GKDTrainer, ms-swift's rlhf gkd); kto: TRL's KTOTrainer (global "
            "batch in rows, one completion each)"
        ),
    )
    p.add_argument(
        "--num-generations",
        type=positive_int("--num-generations"),
        default=None,
        help="grpo: completions per prompt (default 8)",
    )
    p.add_argument(
        "--max-prompt-length",
        type=positive_int("--max-prompt-length"),
        default=None,
        help="grpo: longest prompt, image tokens included (default 512); dpo: the prompt part of a row",
    )
    p.add_argument(
        "--max-completion-length",
        type=positive_int("--max-completion-length"),
        default=None,
        help="grpo: longest completion (default 512)",
    )
    p.add_argument(
        "--beta", type=number("--beta"), default=None, help="grpo: KL coefficient; > 0 keeps a reference model"
    )
    p.add_argument(
        "--generation",
        type=one_of("--generation", GENERATIONS),
        default=None,
        help="grpo: hf generate on the training GPU (default), vllm-colocate or vllm-server",
    )
    p.add_argument(
        "--vllm-gpu-memory-utilization",
        type=number("--vllm-gpu-memory-utilization"),
        default=None,
        help="grpo with vllm-colocate: vLLM's share of the card (default 0.3)",
    )
    p.add_argument(
        "--steps-per-generation",
        type=positive_int("--steps-per-generation"),
        default=None,
        help="grpo: micro-steps one generation batch feeds (default: --grad-accum)",
    )
    p.add_argument(
        "--num-iterations",
        type=positive_int("--num-iterations"),
        default=None,
        help="grpo: optimisation passes per generation batch (default 1)",
    )
    p.add_argument(
        "--logprobs",
        type=one_of("--logprobs", ("fused", "full")),
        default=None,
        help="dpo/grpo: fused (TRL 1.16's log-prob head, default) or full (whole logits, as TRL before "
        "its fused head and VLM-R1's trainer)",
    )
    p.add_argument(
        "--precompute-ref-log-probs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="dpo / kto: reference log-probs computed before training (no reference model kept)",
    )
    p.add_argument(
        "--teacher-model", default=None, help="gkd: the teacher (catalog name or config.json; default: the student)"
    )
    p.add_argument("--lmbda", type=number("--lmbda"), default=None, help="gkd: share of on-policy steps (default 0.5)")
    p.add_argument("--jsd-beta", type=number("--jsd-beta"), default=None, help="gkd: the JSD's beta (default 0.5)")
    add_role_args(p)


def workload_fields(args: argparse.Namespace) -> dict:
    """The request's `workload` from the flags given (DPO's max_length is --max-length)."""
    kind = getattr(args, "workload", None) or "sft"
    w = {f: getattr(args, f) for f in WORKLOAD_FLAGS if getattr(args, f, None) is not None} | role_fields(args)
    if kind in ("dpo", "kto", "gkd") and getattr(args, "max_length", None) is not None:
        w["max_length"] = args.max_length
    return {"workload": {"kind": kind, **w}} if kind != "sft" or w else {}


def request(cls, args: argparse.Namespace, **fields):
    """An advise request of class `cls` from the parsed flags (each named as the request's field; None: not given)
    and `fields`: the API's bounds hold here too."""
    from planner import advise

    data = {f: getattr(args, f) for f in cls.model_fields if getattr(args, f, None) is not None}
    data.pop("workload", None)
    work = workload_fields(args)
    if getattr(args, "workload", None) in ("dpo", "kto", "gkd"):
        data.pop("max_length", None)  # DPO's, KTO's and GKD's --max-length is the row length, not a data cut
    return advise.parse(cls, {**data, **work, **fields})


def scanner(
    path: str, tokenizer: str | None, image_rule: str, max_length: int | None, min_pixels=None, max_pixels=None
):
    """The core's Scanner on the CLI: the scan package, imported when --data asks for it."""
    from planner.cli import extras

    if tokenizer:
        extras.require("--data with --tokenizer", {"transformers": "scan", "jinja2": "scan"})
    from scan.plan import data_fit

    return data_fit(path, tokenizer, image_rule, max_length, min_pixels, max_pixels)


def asked_probes(args: argparse.Namespace):
    """probe_functions() where the flags run a probe (--verify, --evidence sim), else None: the core runs none
    otherwise (planner.verification.calibrator), and looking for torch costs a cold start."""
    if getattr(args, "verify", False) or getattr(args, "evidence", None) == "sim":
        return probe_functions()
    return None


def probe_functions():
    """The probes the core may run here (probes.probe_functions: shared with the API), or None."""
    from probes import probe_functions as functions

    return functions()


def approximate(model, goal) -> str:
    """The headline's mark for a model family counted with the generic formula (model.exact false)."""
    if model.exact:
        return ""
    return (
        f", APPROXIMATE: model_type {model.model_type!r} is counted with the generic llama-like formula; "
        f"margin {goal.margin:g}"
    )


def text_only(model, goal) -> bool:
    """A VLM planned without a single image token (issue 47 item 5: the headline and the JSON say so)."""
    return getattr(model, "vision", None) is not None and not goal.image_tokens and not goal.tower_tokens


def text_only_mark(model, goal) -> str:
    if not text_only(model, goal):
        return ""
    return ", text only (no image planned: give --image-tokens, --max-pixels or --data with images)"


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
    p.add_argument(
        "--evidence",
        type=one_of("--evidence", EVIDENCE),
        default="auto",
        help="analytic: formulas only; sim: simulate what no record covers; "
        "auto (default): stored measured, then simulated records, else analytic",
    )
    p.add_argument(
        "--verify", action="store_true", help="probe the chosen plan before answering (cuda on a local GPU, else sim)"
    )
    add_store_arg(p)


def add_store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        default=None,
        help="probe store: a SQLite file or a postgresql:// URL; default $MEMPLAN_STORE or the user data dir",
    )


QUIET = False  # set by the root command for --json: no progress on stderr


def status(message: str):
    """A spinner with the elapsed time on stderr while long work runs (nothing when stderr is not a terminal,
    or with --json)."""
    from contextlib import contextmanager, nullcontext

    from planner.cli.plain import piped

    if QUIET or piped(sys.stderr):  # --json, or stderr to a file or pipe: not even rich imported
        return nullcontext()
    err = err_console()
    if not err.is_terminal:
        return nullcontext()
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    @contextmanager
    def shown():
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True
        ) as bar:
            bar.add_task(message, total=None)
            yield

    return shown()


def say_line(text: str, console=None) -> None:
    """Print one line verbatim: no wrapping at the terminal's width (a command or path must paste whole), no rich
    markup or highlighting (a `[...]` in a command is not a style)."""
    from planner.cli import render

    (console or render.console).print(text, soft_wrap=True, markup=False, highlight=False)


def print_nearest(nearest: list, console=None) -> None:
    """A "does not fit" ends with the nearest settings that fit (planner.search.nearest), or says none is one change away."""
    from planner.cli import render

    console = console or render.console
    if nearest:
        console.print(render.nearest_table(nearest))
    for line in render.nearest_lines(nearest):
        say_line(line, console)


def err_console():
    """A rich console on stderr, for progress that must not mix with --json on stdout."""
    from rich.console import Console

    err = Console(stderr=True)
    return err if err.is_terminal else Console(stderr=True, width=170)  # as render.console: whole tables
