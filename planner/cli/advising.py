"""The flags into the core's calls: an advise request from the parsed flags, the dataset scanner, the probes a
run may use, and the --evidence, --verify and --store flags that choose them."""

from __future__ import annotations

import argparse

from planner.cli.argtypes import one_of
from planner.cli.workloadargs import workload_fields


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
