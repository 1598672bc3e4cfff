"""The knob flags: one flag per knob field, made from its declaration (planner.config.knobfields), and the values
given, by field name."""

from __future__ import annotations

import argparse

from planner.cli.argtypes import choice_list, framework_release, int_at_least, number, one_of
from planner.config import knobfields


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
