"""The flags of an RL run's roles (planner.config.roles.Roles), one per field, generated from the model: a field added
there is a flag here. `--role-offload` is the `offload` field (`--offload` is the trained model's)."""

from __future__ import annotations

import argparse
import typing

from planner.cli.argtypes import choice_list, number, one_of, positive_int
from planner.config.roles import OFFLOADS, Roles

FLAG_NAMES = {"offload": "--role-offload"}
BOOLEAN = ("true", "false")


def flag(field: str) -> str:
    return FLAG_NAMES.get(field, "--" + field.replace("_", "-"))


def _parser(field: str, annotation):
    name = flag(field)
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    kind = args[0]
    if field == "offload":
        return choice_list(name, OFFLOADS)
    if typing.get_origin(kind) is typing.Literal:
        values = typing.get_args(kind)
        return one_of(name, tuple(str(v) for v in values), cast=str)
    if kind is bool:
        return one_of(name, BOOLEAN)
    if kind is int:
        return positive_int(name)
    if kind is float:
        return number(name)
    return str


def add_role_args(p: argparse.ArgumentParser) -> None:
    """One flag per Roles field (verl / OpenRLHF runs: --workload ppo, grpo, rloo, reinforce++)."""
    g = p.add_argument_group("RL roles (verl / OpenRLHF)")
    for field, info in Roles.model_fields.items():
        parse = _parser(field, info.annotation)
        g.add_argument(
            flag(field),
            dest=f"role_{field}",
            type=parse,
            default=None,
            metavar=getattr(parse, "metavar", field.upper()),
            help=info.description or field.replace("_", " "),
        )


def role_fields(args: argparse.Namespace) -> dict:
    """The request's workload.roles from the role flags given (typed as the model declares them)."""
    out = {}
    for field in Roles.model_fields:
        v = getattr(args, f"role_{field}", None)
        if v is None:
            continue
        if v in BOOLEAN:
            v = v == "true"
        elif field == "sleep_level":
            v = int(v)
        elif field == "offload":
            v = tuple(v)
        out[field] = v
    return {"roles": out} if out else {}
