"""`planner check --config FILE...`: a user's own training configuration read into memplan's CheckRequest fields,
field by field with provenance, without running or importing any framework.

This module owns the public interface (Setting, Reading, read, and `replaced`: the fields a flag's image count
replaces). dispatch picks a file's reader (by extension, then
content) and merges several files; settle decides the fields that need every file (precision, frozen modules, the
framework). Each framework's own reader lives in its folder (planner/frameworks/<name>/reader*.py: llamafactory, swift
(+ reader_rl), axolotl, hf (transformers / TRL names; + loraargs here, trl/reader_grpo), accelerate, deepspeed, verl,
openrlhf, trl/reader_vlmr1 (VLM-R1's GRPO scripts: its images, its uncut prompts)); here: configs (a config file's
format), training and launch (launch scripts: launchers, processes, the training command, and the dispatch to the
framework's reader), shell, shellsplit and shellvars (bash read without running it), pyscript (a Python
script's syntax tree), models (model names resolved offline), vocab (framework words in memplan's), flags, collect;
limits (the bounds every reader reads a user's file under: its size, nesting, YAML aliases, shell expansions).

Settings memplan cannot plan are never dropped: each is one line of `Reading.unplanned`, named with its value.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from planner.frameworks import BUNDLED, NAMES

FRAMEWORKS = tuple(n for n in NAMES if n != BUNDLED)  # what a reading can be: every framework but the bundled trainer


@dataclass(frozen=True)
class Setting:
    """One request field read from a configuration: its value in memplan's vocabulary, where it came from, and the
    framework's own key or flag. Workload inputs are one Setting each, named `workload.<input>`."""

    field: str
    value: object
    source: str
    key: str


@dataclass
class Reading:
    """What the configuration files say, as CheckRequest fields (`request`; never the GPU kind, which no
    configuration names), one Setting per field in the order read, the memory-relevant settings memplan cannot plan
    yet (`unplanned`, one line each) and every file read."""

    framework: str
    request: dict
    settings: list[Setting] = field(default_factory=list)
    unplanned: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    # fields the reading derived from others (VLM-R1's uncut prompt from its pixel cap): field -> (the fields it is
    # derived from, a function of the final request giving its value), derived again where a flag changes them
    derived: dict = field(default_factory=dict)
    # a workload the reading cannot plan, whose planned stand-in would understate memory (LLaMA-Factory's PPO): the
    # one-line question check --config answers with, unless --workload says what to plan
    refused: str = ""
    # the release lines the files allow where they do not decide one (planner.intake.releases; the planned one
    # among them): check --config plans each and gives the hungrier verdict; () where the files or a flag decide
    releases: tuple[str, ...] = ()
    # (field, source) of each world count (gpus_per_node, nodes) the files leave to a variable they do not set: check
    # --config asks for it (--gpus-per-node, --nodes) rather than plan a count memplan would invent
    unknown_world: tuple[tuple[str, str], ...] = ()
    # the length field the files leave open where the framework's default is the model's whole context (ms-swift's
    # max_length): check --config plans it at the longest value that fits, with that condition in the answer
    open_length: str = ""
    # the fields of a row's media whose count the reading assumed, the files not saying it (one image a row at the
    # pixel cap: "image_tokens" or "images"; one video a row: "videos"): check --config states them as its verdict's
    # condition (planner.intake.media)
    media_assumed: tuple[str, ...] = ()
    # the source of a setting under which every row costs the length the files set though the plan pads (OpenRLHF's
    # --packing_samples, planned as micro rows of max_len): no row shorter than the cap costs less, so check --config
    # gives no capped-length condition (planner.checkconfig.capped_length); "" where rows are padded per batch
    rows_fill_cap: str = ""


# The folders a reading may open files in (read(..., allowed=...): the API's data directories); None: any
ALLOWED: ContextVar[tuple[Path, ...] | None] = ContextVar("memplan_intake_allowed", default=None)
PRESETS = Path(__file__).resolve().parent / "presets"


def may_read(path: Path) -> bool:
    """Whether this reading may look at `path`: anywhere, or inside the allowed folders (and memplan's presets). A
    path it may not read is, to every reader, a file that is not there: nothing outside is opened or revealed."""
    dirs = ALLOWED.get()
    if dirs is None:
        return True
    try:
        target = Path(path).resolve()
    except (OSError, ValueError):
        return False
    return any(target.is_relative_to(d) for d in (*dirs, PRESETS))


def read(
    paths: list[str], allowed: list[Path] | None = None, given: dict | None = None, release_why: str = ""
) -> Reading:
    """Read one or more configuration files (a launch script, a framework YAML, a DeepSpeed JSON, ...); the first
    file that names a training run leads, the others fill in what it leaves out. With `allowed`, only files inside
    those folders are opened (the files a config names included). BadInput (field "config") for a file that cannot
    be read or is not a training configuration. `given`: the request fields the caller gives itself (check's flags),
    field -> value: a launch the files start and cannot run on those is then a line of the reading, not a refusal, and
    the nodes and GPUs given are the Slurm job's that a script's arithmetic reads; a `framework` NAME@RELEASE is the
    release the reading fills defaults and meanings from (`release_why`: why, where the caller chose it, not the
    user)."""
    from planner.intake import collect, dispatch  # the readers import this module's types: import them once it is built

    token = ALLOWED.set(tuple(Path(d).resolve() for d in allowed) if allowed is not None else None)
    fields = collect.GIVEN_FIELDS.set(dict(given or {}))
    why = collect.GIVEN_RELEASE_WHY.set(release_why)
    try:
        return dispatch.read_all([paths] if isinstance(paths, (str, os.PathLike)) else list(paths))
    finally:
        collect.GIVEN_RELEASE_WHY.reset(why)
        collect.GIVEN_FIELDS.reset(fields)
        ALLOWED.reset(token)


# A flag's way of counting a sample's image tokens replaces the configuration's (resolved.image_tokens takes one way:
# --image-tokens, or --images with --tokens-per-image or alone, sized by the pixels): flag -> reading fields it drops
IMAGE_COUNTS = {
    "images": ("image_tokens",),
    "tokens_per_image": ("image_tokens", "min_pixels", "max_pixels"),
    "image_tokens": ("images", "tokens_per_image", "min_pixels", "max_pixels", "image_rule"),
}


def recounted(overrides: dict) -> set[str]:
    """The fields a flag that counts the images replaces (IMAGE_COUNTS), read or derived, less those it names."""
    return {f for flag, fields in IMAGE_COUNTS.items() if flag in overrides for f in fields} - set(overrides)


def replaced(reading: Reading, overrides: dict) -> set[str]:
    """The reading's fields that flags replace without naming them: its image count where a flag counts them, and the
    image count it assumed (Reading.media_assumed: one image a row, the dataset decides) where --data's rows carry
    their own (resolved.resolve counts them, sized by the files' pixel caps the reader derives for it)."""
    drop = recounted(overrides)
    if "data" in overrides:
        drop |= {f for f in reading.media_assumed if f in ("images", "image_tokens")} - set(overrides)
    return drop & set(reading.request)


def read_command(argv: list[str], cwd: Path) -> Reading:
    """A command line (its words, as a shell hands them over) read as a one-line launch script run in `cwd`: the
    reader `read` gives a launch script (`planner autotune` reads the command it wraps so)."""
    import shlex

    from planner.intake import settle, training

    where = Path(cwd).resolve() / "command"
    c = training.read_script_file(where, shlex.join(argv))
    c.files.remove(str(where))
    settle.finish(c)
    return c.reading()
