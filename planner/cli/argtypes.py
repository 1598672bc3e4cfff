"""The flag value parsers every face's flags share: a one-line message naming the flag and the value where it is
refused (argparse prints it as the CLI's error)."""

from __future__ import annotations

import argparse
import math


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


def int_in(flag: str, low: int, high: int):
    """An integer flag in [low, high] (ports, worker counts)."""
    at_least = int_at_least(flag, low)

    def parse(text: str) -> int:
        v = at_least(text)
        if v > high:
            raise argparse.ArgumentTypeError(f"{flag} {v}: must be an integer from {low} to {high}")
        return v

    return parse


def positive_int(flag: str):
    return int_at_least(flag, 1)


def nonneg_int(flag: str):
    return int_at_least(flag, 0)


def number(flag: str):
    """A finite number (NaN and infinities are refused here; ranges by the request models)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} {text!r}: expected a number") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{flag} {text!r}: expected a finite number")
        return v

    return parse


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
                    f"{flag} {item!r}: accepted values are {', '.join(map(str, accepted))}"
                )
            if v not in out:
                out.append(v)
        return out

    parse.metavar = choices(accepted)
    return parse


def choices(accepted: tuple) -> str:
    """The metavar that lists a flag's accepted values in --help."""
    return "{" + ",".join(map(str, accepted)) + "}"


def one_of(flag: str, accepted: tuple, cast=str):
    many = choice_list(flag, accepted, cast)

    def parse(text: str):
        vals = many(text)
        if len(vals) != 1:
            raise argparse.ArgumentTypeError(f"{flag} {text!r}: give exactly one of {', '.join(map(str, accepted))}")
        return vals[0]

    parse.metavar = choices(accepted)
    return parse


def framework_release(flag: str, accepted: tuple):
    """NAME or NAME@RELEASE (planner.frameworks: a release line, an alias or a version inside a line)."""
    name_of = one_of(flag, accepted)

    def parse(text: str) -> str:
        from planner.errors import BadInput
        from planner.frameworks import FRAMEWORKS, split_name

        name, release = split_name(text)
        name = name_of(name)
        if "@" in text:
            try:
                FRAMEWORKS[name].release(release)
            except BadInput as e:
                raise argparse.ArgumentTypeError(str(e).removeprefix(f"{flag} ")) from None
            return f"{name}@{release}"
        return name

    parse.metavar = "NAME[@RELEASE]"
    return parse
