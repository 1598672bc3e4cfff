"""The web page's form, made from the request models' declaration (planner/config/knobfields.py, the request models,
the workload and its roles): every field's label and help from its description (never its name), its control (a
choice, a number, a flag, a text, or one checkbox per value of a searched knob, ticked as the default list), its
default; and the catalog models and GPUs. api/routes/web.py inlines it into the page, so the form is whole when
the page loads, before any request (no /openapi.json)."""

from __future__ import annotations

import functools
import re
import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from planner.config.requests import SuggestRequest

SHORTEST = 12  # a first clause shorter than this is a value's name ("adamw (torch foreach), ..."): the label is whole
CLAUSE = re.compile(r"; | \(")


def label_and_help(description: str, choices: tuple = ()) -> tuple[str, str]:
    """(label, help) from a description: its first clause (up to "; " or " (") as the label, without the values
    it goes on to list ("activation checkpointing: off, full, ..."), and the whole description as the help. A
    description that opens with the field's values ("bf16 / fp16: mixed precision ...", "standard, chunked ...")
    or whose first clause is too short to say anything is the label itself, whole."""
    text = description.removeprefix("values to search: ")
    named = {str(c).lower() for c in choices}
    m = CLAUSE.search(text)
    head = text[: m.start()] if m else text
    before, colon, after = head.partition(": ")
    if colon and len(before) >= SHORTEST and _words(after)[:1] and _words(after)[0] in named:
        head = before
    elif len(head) < SHORTEST or _words(head)[0] in named or (", " in head and set(_words(head)) & named):
        return text, ""
    return head, "" if head == text else text


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[ /,:]+", text.lower()) if w] or [""]


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return (args[0] if len(args) == 1 else annotation), len(args) < len(get_args(annotation))
    return annotation, False


def _control(annotation: Any) -> tuple[str, tuple]:
    """(control kind, choices) of a field's type."""
    t, _ = _unwrap(annotation)
    if get_origin(t) is list and get_origin(get_args(t)[0]) is Literal:
        return "checks", get_args(get_args(t)[0])
    if get_origin(t) is Literal:
        return "enum", get_args(t)
    if get_origin(t) is tuple:
        return "list", ()
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string"}
    return kinds.get(t, "string"), ()


def _default(info: FieldInfo) -> Any:
    if info.default_factory is not None:
        made = info.default_factory()
        return None if isinstance(made, BaseModel) else list(made)
    return None if info.is_required() else info.default


def field_entry(name: str, info: FieldInfo) -> dict:
    """One field of the form: its name (the request's JSON name), label, help, control, choices and default."""
    kind, choices = _control(info.annotation)
    label, help_ = label_and_help(info.description or "", choices)
    _, nullable = _unwrap(info.annotation)
    return {
        "name": name,
        "label": label,
        "help": help_,
        "kind": kind,
        "choices": list(choices),
        "default": _default(info),
        "nullable": nullable,
    }


def fields_of(model: type[BaseModel], prefix: str = "") -> list[dict]:
    """Every field of a request model, nested models (the workload, its roles) as groups of their own fields
    (names `workload.kind`, `workload.roles.placement`)."""
    out = []
    for field, info in model.model_fields.items():
        name = prefix + (info.alias or field)
        t, _ = _unwrap(info.annotation)
        if isinstance(t, type) and issubclass(t, BaseModel):
            label, help_ = label_and_help(info.description or "")
            out.append(
                {"name": name, "label": label, "help": help_, "kind": "group", "fields": fields_of(t, name + ".")}
            )
        else:
            out.append(field_entry(name, info))
    return out


def missing_descriptions(model: type[BaseModel] = SuggestRequest, prefix: str = "") -> list[str]:
    """Fields with no description (no label): each would be a field name on the page."""
    out = []
    for field, info in model.model_fields.items():
        t, _ = _unwrap(info.annotation)
        if not info.description:
            out.append(prefix + field)
        if isinstance(t, type) and issubclass(t, BaseModel):
            out += missing_descriptions(t, prefix + field + ".")
    return out


@functools.cache
def catalog() -> dict:
    """What the page's form needs: the catalog models and GPUs, and the suggest request's fields."""
    from planner.model import catalog as bundled

    return {
        "models": [{"name": m["name"], "params": m["params"]} for m in bundled.models_json()["models"]],
        "gpus": [{"name": g["name"], "capacity_bytes": g["capacity_bytes"]} for g in bundled.gpus_json()["gpus"]],
        "fields": fields_of(SuggestRequest),
    }
