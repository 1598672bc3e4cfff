"""`check --config`: the user's files read into a request (planner.intake), with the flags given beside them over it
field by field, checked by `planner.advise.check`. It owns what the reading adds to a check: the fields table (each
field's value and where it came from), the release choice where the files leave it open (planner.checkconfig_lines), the
run whose length the files leave open (planned at the longest rows that fit) and the longest rows that fit under a
length the files set as a cap (rows padded per micro-batch), the LoRA targets as PEFT takes a file's,
and the launcher counts a flag overrides. Above planner.advise (the faces call `checkconfig.check_config`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from planner import advise, resolved
from planner.checkconfig_lines import hungrier_release, release_given, runnable_release
from planner.config import requests
from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS, split_name
from planner.model.shapes import module_name_matches

if TYPE_CHECKING:
    from planner.config.requests import CheckResult


def check_config(paths: list[str], overrides: dict, allowed: list | None = None, **kwargs) -> CheckResult:
    """`check --config FILE...`: the files read into a request (planner.intake; the GPU and any field in
    `overrides` as given, each flag one field), checked; the result's `config` says what was read, field by field, and
    where from. Where the files leave the framework's release open, each release they allow is planned and the
    hungrier verdict is answered (`config["releases"]`: which fit and which do not). With `allowed` (folders), no
    file outside them is opened, the files a config names included."""
    from planner import intake
    from planner.intake import media, models

    reading = intake.read(paths, allowed, given=overrides)
    if reading.refused and "workload" not in overrides:
        raise BadInput(reading.refused, "workload")
    ask_world(reading, overrides)
    if "model" not in overrides and "model" in reading.request and allowed is None:  # a service resolves its own way
        models.resolve(reading.request["model"])  # an id not found offline: the one-line "pass its config.json"
    choice = None
    if reading.releases and not release_given(overrides):
        if not open_field(reading, config_body(reading, overrides)):
            reading, choice = hungrier_release(paths, allowed, overrides, reading, kwargs, config_body)
        else:
            reading, choice = runnable_release(paths, allowed, overrides, reading, config_body)
    b = config_body(reading, overrides)
    field = open_field(reading, b)
    result = (
        open_length_check(b.body, kwargs)
        if field == "seq_len"
        else open_workload_check(b.body, field.split(".", 1)[1], kwargs)
        if field
        else advise.check(advise.parse(requests.CheckRequest, b.body), **kwargs)
    )
    if not field:
        result.capped_length = capped_length(reading, b, result)
    result.media = with_most_images(media.condition(reading, b.body, b.flags, result.context[2]), result)
    result.config = {
        "framework": reading.framework,
        "files": reading.files,
        "settings": b.rows(reading),
        # a file's question the flag answers (intake.dispatch.ASKS "gpus") is dropped
        "unplanned": [n for n in reading.unplanned if not ("gpus_per_node" in overrides and asks_gpus(n))]
        + launch_disagreements(reading, overrides),
        **({"releases": choice} if choice else {}),
    }
    return result


def with_most_images(condition: dict | None, result) -> dict | None:
    """An assumed one-image row's condition (planner.intake.media) with the most such images a row can hold where
    the plan fits (planner.search.imagefit.most_images): the verdict's condition says how far the data may go, as an
    open length's does (issue 47 items 5 and 6)."""
    if not condition or condition["images_per_row"] != 1 or not condition["tokens_per_image"] or condition["videos"]:
        return condition
    model, hw, goal = result.context
    if not result.plan.fits or goal.tower_tokens > goal.image_tokens or result.plan.workload.generates:
        return condition
    from planner.search.imagefit import most_images

    plan = result.plan
    release = FRAMEWORKS[plan.framework].release(plan.release) if plan.framework in FRAMEWORKS else None
    text_cut = release is not None and release.means("swift_max_length_counts") == "text"  # images after the cut
    k, whole = most_images(plan, model, hw, goal, condition["tokens_per_image"], text_cut)
    room = "model's context" if text_cut else "row's length"
    held = f"the {room} holds no more" if whole else f"{k + 1} do not fit"
    said = f"; this configuration fits rows of up to {k:,} such image{'s' if k > 1 else ''} ({held})"
    return {**condition, "fits_up_to_images": k, "condition": condition["condition"] + said}


def asks_gpus(note: str) -> bool:
    """A file's note asking for the GPUs a node (intake.dispatch.ASKS, as a second file answers it)."""
    from planner.intake.dispatch import ASKS

    return any(a in note for a in ASKS["gpus"])


def ask_world(reading, overrides: dict) -> None:
    """The model where the files name none, and a world count they leave to a variable they do not set
    (Reading.unknown_world), not given as flags: the question, never a plan on a count memplan would invent (issue 47
    item 8)."""
    if "model" not in reading.request and "model" not in overrides:  # a config over another that names the model
        said = ", ".join(Path(f).name for f in reading.files) or "the files"
        raise BadInput(f"which model does it train? {said} names none: give --model NAME or PATH", "model")
    missing = [(f, s) for f, s in reading.unknown_world if f not in overrides]
    if missing:
        flags = " and ".join("--" + f.replace("_", "-") + " N" for f, _ in missing)
        said = "; ".join(s for _, s in missing)
        raise BadInput(f"how many GPUs does it run on? {said}: not known from the files: pass {flags}", missing[0][0])


@dataclass
class ConfigBody:
    """The request check --config plans: the reading's fields with the flags over them (`body`), and what the fields
    table says of each (`given`: a flag replaced it; `again`: derived again from a flag; `capped`: --data's rows cut
    at the files' length; `peft`: PEFT's line on the files' LoRA targets)."""

    body: dict
    flags: dict
    given: dict
    again: dict
    capped: bool
    peft: str

    def rows(self, reading) -> list[dict]:
        """The fields table: each field read, with its source (a flag's where one replaced it), then each flag given
        for a field the files do not set."""
        out = [self._row(s) for s in reading.settings]
        read = {s.field for s in reading.settings}
        for f, v in self.flags.items():
            if f not in read and f != "gpu" and v is not None:  # the GPU, which no file names, is the headline's
                out.append(
                    {"field": f, "value": v, "source": "a flag", "key": "--" + f.split(".")[-1].replace("_", "-")}
                )
        return out

    def _row(self, s) -> dict:
        if self.peft and s.field == "lora_targets":
            return {
                "field": s.field,
                "value": self.body["lora_targets"],
                "source": f"{s.source} ({self.peft})",
                "key": s.key,
            }
        value, source = self.again.get(s.field, self.given.get(s.field, s.value)), s.source
        if self.capped and s.field == "seq_len":
            source = f"a cap on --data's rows (the config: {s.value}, {s.source})"
        elif s.field in self.given:
            source = f"a flag (the config: {s.value}, {s.source})"
        elif s.field in self.again:
            source = f"derived again from the flags (the config: {s.value}, {s.source})"
        return {"field": s.field, "value": value, "source": source, "key": s.key}


def config_body(reading, overrides: dict) -> ConfigBody:
    """The reading's request with the flags over it, each flag one field: `--framework NAME` alone keeps the release
    the files show; DPO's --max-length beside a DPO run's files is its row length, as `--workload dpo` makes it."""
    from planner import intake

    overrides = dict(overrides)
    fw, read_fw = overrides.get("framework"), reading.request.get("framework")
    if isinstance(fw, str) and "@" not in fw and isinstance(read_fw, str) and split_name(read_fw)[0] == fw:
        overrides.pop("framework")  # the name alone: the release the files show
    kind = (overrides.get("workload") or {}).get("kind") or (reading.request.get("workload") or {}).get("kind")
    if kind in ("dpo", "kto") and "max_length" in overrides and "max_length" not in overrides.get("workload", {}):
        overrides["workload"] = {**overrides.get("workload", {}), "max_length": overrides.pop("max_length")}
    dropped = intake.replaced(reading, overrides)
    body = merged({k: v for k, v in reading.request.items() if k not in dropped}, overrides)
    capped = "data" in overrides and "seq_len" in body and not {"seq_len", "max_length"} & set(overrides)
    if capped:  # the files' length cuts the data's rows (max_length, cutoff_len): --data decides the length under it
        body["max_length"] = body.pop("seq_len")
    read, flags = flat(reading.request), flat(overrides)
    again = {}  # a derived field whose inputs a flag changed, the field itself not given: derived again
    recounted = intake.recounted(overrides)  # a count the files derive (0 where their model had none) a flag replaced
    for f, (inputs, fn) in reading.derived.items():
        if (
            f not in flags and f not in dropped | recounted and any(i in flags for i in inputs)
        ):  # not one a flag replaced
            again[f] = fn(body)
            # the files' length derived again stays --data's cap (capped: the row's length is the data's)
            body = merged(body, nested("max_length" if capped and f == "seq_len" else f, again[f]))
    body, peft = file_lora_targets(body, overrides)
    given = {k: v for k, v in flags.items() if k in read and v != read[k]} | {k: None for k in dropped}
    return ConfigBody(body, flags, given, again, capped, peft)


def file_lora_targets(body: dict, overrides: dict) -> tuple[dict, str]:
    """A file's LoRA targets as PEFT takes them: a name that matches no module is dropped while another matches (peft
    0.20 tuners/tuners_utils.py:990-1006 raises only when none does); (the body, the line saying so, or ""). Names
    given as a flag stay strict (lora_knobs)."""
    t = body.get("lora_targets")
    if (
        "lora_targets" in overrides
        or not isinstance(t, str)
        or t in ("all-linear", "attention")
        or not body.get("model")
    ):
        return body, ""
    try:
        known = resolved.default_resolver(body["model"]).linear_names()
    except BadInput:
        return body, ""
    names = t.split(",")
    kept = [n for n in names if any(module_name_matches(k, n) for k in known)]
    if not kept or len(kept) == len(names):
        return body, ""
    dropped = ",".join(n for n in names if n not in kept)
    why = (
        f"PEFT skips {dropped}, which matches no module, while {','.join(kept)} do: peft 0.20 tuners_utils.py:990-1006"
    )
    return {**body, "lora_targets": ",".join(kept)}, why


def launch_disagreements(reading, overrides: dict) -> list[str]:
    """One line for each of --gpus-per-node and --nodes given beside files that start another count: the flag is
    planned (the user has the last word), and the line says what the files start."""
    out = []
    for s in reading.settings:
        flag = "--" + s.field.replace("_", "-")
        said = any(line.startswith(s.source) and flag in line for line in reading.unplanned)
        if (
            s.field in ("gpus_per_node", "nodes")
            and s.field in overrides
            and overrides[s.field] != s.value
            and not said
        ):
            out.append(
                f"{flag} {overrides[s.field]} (given) and {s.source} ({s.value}) disagree: planned with the flag"
            )
    return out


SHOWN_WHEN_NOTHING_FITS = 4096  # tokens: a common row length, only to show a plan and its nearest settings


def open_length(body: dict) -> bool:
    """Files that set no length for an SFT run, with no --seq-len or --data beside them."""
    kind = (body.get("workload") or {}).get("kind", "sft")
    return kind == "sft" and body.get("seq_len") is None and body.get("data") is None


def open_field(reading, b) -> str:
    """The length field the check plans at the longest value that fits: "seq_len" where the files set none, or the
    field the reading left at the model's whole context as the framework's default (Reading.open_length), unless a
    flag sets it or --data decides it; "" where the length is set."""
    if open_length(b.body):
        return "seq_len"
    field = reading.open_length
    given = field in b.flags or (field == "seq_len" and "max_length" in b.flags)
    kind = (b.body.get("workload") or {}).get("kind", "sft")
    if not field or given or b.body.get("data") is not None or (field == "seq_len") != (kind == "sft"):
        return ""
    return field


def longest_rows(first) -> int:
    """The longest SFT rows the checked configuration `first` fits (planner.search.datafit), 0 for none."""
    from planner.search.datafit import largest_fitting_seq_len

    model, hw, goal = first.context
    return largest_fitting_seq_len(model, hw, goal, first.plan.knobs, first.plan.micro_batch)


def longest_of(got: str):
    """The search of a DPO / KTO row or a GRPO prompt that fits (planner.search.lengths' `got`), as longest_rows."""
    from planner.search import lengths

    return lambda first: lengths.limits(first.plan, *first.context).get(got, 0)


def open_length_check(body: dict, kwargs: dict) -> CheckResult:
    """The run whose length the files leave open: not planned at the model's context (rows are rarely that long) but
    at the longest rows it fits, found under the context, with that condition in the answer."""
    context = resolved.default_resolver(body["model"]).text.max_positions or 131072 if body.get("model") else 131072
    # every row holds its image: no row that fits only shorter ones (floor)
    floor = int(body.get("image_tokens") or 0)
    at = lambda n: {**body, "seq_len": n}
    return _at_the_longest_that_fits(body, at, context, longest_rows, "rows", kwargs, floor)


def open_workload_check(body: dict, name: str, kwargs: dict) -> CheckResult:
    """A DPO row or a GRPO prompt left at the model's context (ms-swift's default max_length): planned there where it
    fits, else at the longest that does (planner.search.lengths: a prompt holds its images), with that condition."""
    got = "prompt_fits_up_to" if name == "max_prompt_length" else "length_fits_up_to"
    what = "prompts" if name == "max_prompt_length" else "rows"
    at = lambda n: merged(body, {"workload": {name: n}})
    return _at_the_longest_that_fits(body, at, int(body["workload"][name]), longest_of(got), what, kwargs)


def _at_the_longest_that_fits(
    body: dict, at, top: int, longest, what: str, kwargs: dict, floor: int = 0
) -> CheckResult:
    """The check of `at(top)` where it fits, else of the longest length that does (`longest(first check)`), none at
    `floor` or under (then shown at a common row past the image), with that condition in the answer
    (CheckResult.open_length)."""
    first = advise.check(advise.parse(requests.CheckRequest, at(top)), **kwargs)
    n = top if first.plan.fits else longest(first)
    n = n if n > floor else 0
    shown = n or min(top, int(body.get("image_tokens") or 0) + SHOWN_WHEN_NOTHING_FITS)  # nothing fits: a row's plan
    result = first if shown == top else advise.check(advise.parse(requests.CheckRequest, at(shown)), **kwargs)
    result.open_length = {"fits_up_to_tokens": n, "context": top, "planned_at": shown, "what": what}
    return result


# the length field a workload's rows are cut at (SFT's sequence, a DPO or KTO row): the ones a collator pads per batch
CAPPED_FIELDS = {"sft": "seq_len", "dpo": "workload.max_length", "kto": "workload.max_length"}


def capped_length(reading, b: ConfigBody, first: CheckResult) -> dict | None:
    """A length the files set (or leave at the framework's default) that is a cap, rows shorter costing less (the
    framework's collator pads a micro-batch to its longest row: Runs.pads_per_batch; not packed, no token budget, no
    flag or --data deciding it), where the plan at it does not fit: the longest rows that do (the open length's
    search, rounded down to the multiple the collator pads to: Runs.pad_multiple), the verdict staying the cap's
    (issue 47 item 6); else None."""
    plan = first.plan
    field = CAPPED_FIELDS.get(plan.workload.kind, "")
    fw = FRAMEWORKS.get(split_name(reading.framework)[0])
    padded, multiple = getattr(fw, "pads_per_batch", ""), getattr(fw, "pad_multiple", 1)
    read = {s.field: s for s in reading.settings}
    if plan.fits or not padded or field not in read or field in flat(b.flags) or b.body.get("data") is not None:
        return None
    if plan.knobs.batching == "packed" or plan.token_batches is not None or reading.rows_fill_cap:
        return None  # every row costs the cap (packed, or packed where planned padded), or a token budget's batches
    rows = field == "seq_len"
    n = longest_rows(first) if rows else longest_of("length_fits_up_to")(first)
    n -= n % multiple  # a row is padded up to the collator's multiple: the longest that fit are one
    floor = int(b.body.get("image_tokens") or 0) if rows else 0  # every row holds its image
    cap = first.context[2].seq_len if rows else plan.workload.max_length
    n = n if n > floor else 0
    out = {"fits_up_to_tokens": n, "cap": cap, "field": field, "key": spelled_key(read[field]), "padding": padded}
    return out | ({"image_tokens": floor} if floor else {})


def spelled_key(s) -> str:
    """A setting's key as the files spell it: the flag its source quotes (OpenRLHF 0.10.1's flat `--max_len`, which
    the reader records by its dotted name), else the reader's key."""
    quoted = re.search(r"\s(--[A-Za-z][\w.-]*)", s.source)
    return quoted.group(1) if quoted else s.key


def merged(read: dict, flags: dict) -> dict:
    """The request read from the files with the flags over it, a nested object (the workload, its roles) field by
    field: `--beta 0` alone replaces the beta read and keeps the rest of the workload."""
    out = dict(read)
    for k, v in flags.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def nested(dotted: str, value) -> dict:
    """{"workload": {"beta": v}} for "workload.beta"."""
    head, _, rest = dotted.partition(".")
    return {head: nested(rest, value) if rest else value}


def flat(d: dict, prefix: str = "") -> dict:
    """A nested request as the reading's settings name its fields: {"workload.beta": 0.04, ...}."""
    out = {}
    for k, v in d.items():
        out |= flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v}
    return out
