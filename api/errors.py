"""The API's words for the core's errors. planner.errors.BadInput messages name CLI flags ("give --seq-len N");
every 4xx the API answers names the JSON fields it takes instead ("give seq_len"), translated here once.

A flag becomes a field only where it is one of the request bodies' fields (api.schemas), a nested object's
fields with their path (`workload.num_generations`); its metavariable (N, FILE) goes, and flags side by side
join with "and". Text in backquotes is a command line and stays as the CLI's.
"""

from __future__ import annotations

import json
import re
from functools import cache

from fastapi.encoders import jsonable_encoder
from pydantic import BaseModel

from api import schemas
from planner.errors import BadInput

FLAG = re.compile(r"--([a-z][a-z0-9-]*)(?: [A-Z]+\b)?")  # a flag and its metavariable
RUN = re.compile(rf"(?<![\w-]){FLAG.pattern}(?: {FLAG.pattern})*")
ECHO_BYTES = 2048  # a 422 echoes the refused input back up to this size
KIND = "kind"  # the CLI's `--workload grpo` is the API's `workload.kind`: a nested object's flag names its kind


@cache
def fields() -> tuple[dict[str, str], dict[str, str]]:
    """(top-level, nested): CLI flag name (dashes) -> API field, from the request models the API accepts."""
    top, nested = {}, {}
    for model in (schemas.PlansRequest, schemas.CheckRequest, schemas.ProbeRequest):
        for name, info in model.model_fields.items():
            sub = info.annotation
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                nested.update({f.replace("_", "-"): f"{name}.{f}" for f in sub.model_fields})
                if KIND in sub.model_fields:
                    nested[name.replace("_", "-")] = f"{name}.{KIND}"
            else:
                shown = info.alias or name  # the JSON name (zero for zero_stage: planner.config.knobfields.ALIASES)
                top[shown.replace("_", "-")] = shown
    return top, nested


def api_message(message: str) -> str:
    """The message with each CLI flag that is an API field written as that field.

    A flag both levels have (`--max-length`: the data cut, and DPO's row length) is the nested object's where the
    message names a flag only the nested object has (`--workload`, `--max-prompt-length`), as the CLI reads it."""
    top, nested = fields()
    prose = message.split("`")[::2]
    about_nested = any(f in nested and f not in top for part in prose for f in FLAG.findall(part))
    names = {**top, **nested} if about_nested else {**nested, **top}

    def run(m: re.Match) -> str:
        return " and ".join(names.get(f.group(1), f.group(0)) for f in FLAG.finditer(m.group(0)))

    parts = message.split("`")
    parts[::2] = [RUN.sub(run, part) for part in prose]
    return "`".join(parts)


def detail(e: BadInput, kind: str) -> dict:
    """A 4xx body for a core error: its field as `loc`, its message in the API's words."""
    return {"detail": [{"loc": ["body", e.field] if e.field else ["body"], "msg": api_message(str(e)), "type": kind}]}


def validation_detail(errors: list[dict]) -> dict:
    """FastAPI's 422 body for a request the models refused; a BadInput raised inside a model's validator
    reads as the core's message (without pydantic's "Value error, "), in the API's words."""
    out = []
    for d in errors:
        e = d.get("ctx", {}).get("error")
        loc = d.get("loc")
        if isinstance(e, BadInput) and e.field and tuple(loc or ()) == ("body",):  # a model-level validator's field
            loc = ["body", e.field]
        out.append(_writable({**d, "loc": loc, "msg": api_message(str(e) if isinstance(e, BadInput) else d["msg"])}))
    return {"detail": out}


def _writable(error: dict) -> dict:
    """The error as JSON can hold it: its `input` and `ctx` echo the request back only where they are finite, UTF-8
    and short (a 422 must never fail to be written: a NaN or a lone surrogate echoed back would)."""
    out = jsonable_encoder({k: v for k, v in error.items() if k not in ("input", "ctx")})
    for key in ("input", "ctx"):
        if key in error:
            try:
                value = jsonable_encoder(error[key])
                if len(json.dumps(value, allow_nan=False).encode("utf-8")) <= ECHO_BYTES:
                    out[key] = value
            except (ValueError, TypeError):  # NaN, a surrogate, an object JSON has no form for
                pass
    return out
