"""The reading in progress, which every reader writes through: request fields with their provenance (one Setting per
field; an explicit value replaces a default, never the other way), the unplanned lines, the files read, and the
facts a later step settles (the precision needs the sharding, read last). Also the value parsers and the source
strings the readers share, and the versions whose defaults they cite.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from planner.errors import BadInput
from planner.intake import Reading, Setting, limits, may_read

LF = "llamafactory 0.9.5"
SWIFT = "ms-swift 4.6.0"
AXOLOTL = "axolotl 0.19.0"
HF = "transformers 5.23"
TRL = "trl 1.16"
PEFT = "peft 0.21"
DEEPSPEED = "deepspeed 0.19.8"
ACCELERATE = "accelerate 1.15"
PRESETS = Path(__file__).parent / "presets"
# the question a file's note asks where its launch, and so its processes, are not among the files; the flag
# answers it (dispatch.ASKS drops the note then): every reader of a file given alone ends its note with it
ASK_GPUS = "pass --gpus-per-node)"
UNKNOWN = "\x00"  # a part of a value the configuration does not give (a shell variable set elsewhere)
# `llamafactory 0.9.5 default ...`, `trl@r1-v default ...` (a release's, planner.frameworks), assumption()
_DEFAULT = re.compile(r"(\d|@[\w.-]+) default\b|memplan assumption")


def default(who: str, cite: str, what: str = "") -> str:
    """The source of a framework default: `llamafactory 0.9.5 default (src/.../finetuning_args.py:77)`."""
    return f"{who} default{' ' + what if what else ''} ({cite})"


def assumption(text: str) -> str:
    return f"memplan assumption ({text})"


def is_default(source: str) -> bool:
    """A source that is a framework's default or memplan's assumption, not the configuration's own value."""
    return _DEFAULT.search(source) is not None


def where(path: Path | str, key: str, value: object = None, line: int | None = None) -> str:
    """`train.sh:14 --per_device_train_batch_size 4` for a flag, `qwen_lora.yaml: cutoff_len: 4096` for a key."""
    name = Path(path).name
    shown = "" if value is None else f" {show(value)}"
    if line is not None:
        return f"{name}:{line} {key}{shown}"
    return f"{name}: {key}:{shown}"


def show(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(show(v) for v in value)
    if isinstance(value, dict):
        return "{...}"
    return str(value).replace(UNKNOWN, "?")


# the fields of the world a reading cannot guess: a count left to a variable the files do not set is a question
WORLD = ("gpus_per_node", "nodes")


class Collector:
    """The fields, notes and files of one reading."""

    def __init__(self, framework: str) -> None:
        self.framework = framework
        self._settings: dict[str, Setting] = {}
        self.unplanned: list[str] = []
        self.files: list[str] = []
        self.facts: dict[str, tuple[object, str, str]] = {}
        self.model = None  # models.Model once the model is resolved
        self.derived: dict = {}  # Reading.derived
        self.assumed_media: set[str] = set()  # Reading.media_assumed: the count fields set by assume_media

    def assume_media(self, field: str, value: int, source: str, key: str) -> None:
        """A row's media count (`field`: "images", "image_tokens" for one image's, or "videos") the reading assumes,
        the files not saying it: set, and stated as the verdict's condition (Reading.media_assumed)."""
        self.set(field, value, source, key)
        self.assumed_media.add(field)

    def set(self, field: str, value: object, source: str, key: str) -> None:
        """An explicit value: replaces what the field held (the setting moves to the end: the order read)."""
        self._settings.pop(field, None)
        self._settings[field] = Setting(field, value, source, key)
        self.assumed_media.discard(field)

    def fill(self, field: str, value: object, source: str, key: str) -> None:
        """A value for a field not read yet, or read only from a default."""
        old = self._settings.get(field)
        if old is None or (is_default(old.source) and not is_default(source)):
            self.set(field, value, source, key)

    def restate(self, said) -> None:
        """Each setting's and fact's source passed through `said` (planner.intake.line_defaults.restate), in place."""
        for name, s in self._settings.items():
            self._settings[name] = Setting(s.field, s.value, said(s.source), s.key)
        self.facts = {name: (value, said(source), key) for name, (value, source, key) in self.facts.items()}

    def has(self, field: str) -> bool:
        return field in self._settings

    def get(self, field: str, fallback: object = None) -> object:
        s = self._settings.get(field)
        return s.value if s is not None else fallback

    def setting(self, field: str) -> Setting | None:
        return self._settings.get(field)

    def explicit(self, field: str) -> bool:
        s = self._settings.get(field)
        return s is not None and not is_default(s.source)

    def drop(self, field: str) -> None:
        self._settings.pop(field, None)

    def note(self, line: str) -> None:
        if line not in self.unplanned:
            self.unplanned.append(line)

    def add_file(self, path: Path | str) -> None:
        if str(path) not in self.files:
            self.files.append(str(path))

    def fact(self, name: str, value: object, source: str, key: str, *, weak: bool = False) -> None:
        """Something a later step turns into fields (`weak`: a default, kept only where nothing was read)."""
        if weak and name in self.facts:
            return
        before = self.facts.get(name)
        if name == "amp" and before is not None and before[1] not in source:
            if before[0] == value:  # the launcher's or DeepSpeed's mixed precision, agreeing: both cited
                source = f"{source}; {before[1]}"
            elif before[2] in ("--config_file", "config_file"):  # the accelerate config's, read from the environment
                # unless the trainer's bf16 / fp16 is on (transformers 5.25 training_args.py:1612-1618)
                if value == "fp32":
                    return
                self.note(f"{before[1]} (the trainer's {source} decides: {value})")
        self.facts[name] = (value, source, key)

    def number(self, field: str, value: object, source: str, key: str, *, minimum: int = 1) -> int | None:
        """A whole-number field; a value that is not one (or not known) is a note, not a field."""
        if not known(value):
            self.note(f"{source} (its value is not known from the configuration: {field} not read)")
            if field in WORLD:  # asked at check time (Reading.unknown_world), never planned on a guessed count
                self.facts["unknown_world"] = (
                    (*self.facts.get("unknown_world", ((),))[0], (field, source)),
                    source,
                    key,
                )
            return None
        n = as_int(value)
        if n is None or n < minimum:
            self.note(f"{source} (not a whole number >= {minimum}: {field} not read)")
            return None
        self.set(field, n, source, key)
        return n

    def flag(self, value: object, source: str) -> bool | None:
        """A true/false setting; a value that is neither is a note."""
        b = as_bool(value) if known(value) else None
        if b is None:
            self.note(f"{source} (not true or false: not read)")
        return b

    def settings(self) -> list[Setting]:
        return list(self._settings.values())

    def reading(self) -> Reading:
        request: dict = {}
        for s in self._settings.values():
            if s.field.startswith("workload.roles."):
                request.setdefault("workload", {}).setdefault("roles", {})[s.field.split(".", 2)[2]] = s.value
            elif s.field.startswith("workload."):
                request.setdefault("workload", {})[s.field.split(".", 1)[1]] = s.value
            else:
                request[s.field] = s.value
        return Reading(
            framework=self.framework,
            request=request,
            settings=self.settings(),
            unplanned=list(self.unplanned),
            files=list(self.files),
            derived=dict(self.derived),
            refused=str(self.facts.get("refused", ("",))[0]),
            releases=tuple(self.facts.get("releases", ((),))[0]),
            unknown_world=tuple(self.facts.get("unknown_world", ((),))[0]),
            open_length=str(self.facts.get("open_length", ("",))[0]),
            media_assumed=tuple(k for k in self._settings if k in self.assumed_media),
            rows_fill_cap=str(self.facts.get("rows_fill_cap", ("", "", ""))[1]),
        )


# -- values as configurations write them -------------------------------------------------------------------------
_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off", "none", "null", ""}


def known(value: object) -> bool:
    """No part of the value is left to a variable the configuration does not set."""
    if isinstance(value, (list, tuple)):
        return all(known(v) for v in value)
    return UNKNOWN not in str(value)


def one(value: object) -> object:
    """A flag's value: a list of one word is that word."""
    if isinstance(value, (list, tuple)) and len(value) == 1:
        return value[0]
    return value


def as_bool(value: object) -> bool | None:
    value = one(value)
    if isinstance(value, bool) or value is None:
        return bool(value)
    if isinstance(value, (int, float)):
        return bool(value)
    text = str(value).strip().strip("'\"").lower()
    return True if text in _TRUE else False if text in _FALSE else None


def as_int(value: object) -> int | None:
    value = one(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    try:
        f = float(str(value).strip().strip("'\"").replace("_", ""))
        return int(f) if f == int(f) else None
    except (ValueError, OverflowError):  # not a number, nan, inf
        return None


def as_float(value: object) -> float | None:
    value = one(value)
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(str(value).strip().strip("'\""))
    except ValueError:
        return None


def is_file(path: Path) -> bool:
    """A file is there (and this reading may open it: planner.intake.may_read); False for a name the OS refuses (too
    long, a NUL byte) rather than an error."""
    try:
        return may_read(path) and path.is_file()
    except (OSError, ValueError):
        return False


def is_dir(path: Path) -> bool:
    try:
        return may_read(path) and path.is_dir()
    except (OSError, ValueError):
        return False


def section(data: object, key: str) -> dict:
    """A nested mapping of a config (`zero_optimization`, `fsdp_config`), or {} where it is absent or not one."""
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, dict) else {}


def as_names(value: object) -> list[str]:
    """Module names given as a list, `a,b`, `a, b,` or `[a, b]`."""
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        out += [n for n in re.split(r"[\s,\[\]'\"]+", str(item)) if n]
    return out


@lru_cache(maxsize=8)
def accepted(framework: str) -> frozenset[str]:
    """The keys a framework takes (presets/keys_<framework>.txt, generated from its installed package)."""
    lines = (PRESETS / f"keys_{framework}.txt").read_text().splitlines()
    return frozenset(k for k in lines if k and not k.startswith("#"))


def parse_yaml(text: str, name: Path | str | None = None) -> object:
    """A YAML document (ValueError where it is not one; limits.OverLimit past its nesting or node limit; `name`: the
    file, for that line)."""
    try:
        import yaml
    except ImportError:  # pragma: no cover - a dependency of the config readers
        raise ValueError("reading YAML needs PyYAML (pip install pyyaml)") from None
    try:
        return limits.load_yaml(text, name)
    except yaml.YAMLError as e:
        raise ValueError(" ".join(str(e).split())) from None


def count_devices(text: str) -> int | None:
    """GPUs in CUDA_VISIBLE_DEVICES (`0,1,2`), or None where the list is not known."""
    if not known(text) or not str(text).strip():
        return None
    return len([d for d in str(text).split(",") if d.strip()])


# The request fields the caller gives itself beside the files (check --config's flags): a launch the files start and
# cannot run is then one line, and the flag's value is planned (planner.intake.read sets it for one reading)
GIVEN_FIELDS: ContextVar[Mapping[str, object]] = ContextVar("memplan_intake_given_fields", default=MappingProxyType({}))
# why the release GIVEN_FIELDS' framework names is planned where memplan chose it, not the user (check --config's
# sweep over the releases the files allow: planner.advise); "" for the user's own --framework NAME@RELEASE
GIVEN_RELEASE_WHY: ContextVar[str] = ContextVar("memplan_intake_given_release_why", default="")


def processes_fit_devices(procs: int | None, env: dict[str, str], source: str, c: Collector | None = None) -> None:
    """Refuse more processes a node than CUDA_VISIBLE_DEVICES lists: torchrun starts every one and each takes the GPU
    of its local rank (torch.cuda.set_device(LOCAL_RANK)), so the ranks past the list have none and the run fails.
    Where the caller gives --gpus-per-node itself (GIVEN_FIELDS), one line says so and the flag's count is planned."""
    visible = count_devices(env.get("CUDA_VISIBLE_DEVICES", ""))
    if procs and visible and procs > visible:
        one = procs == visible + 1
        ranks = f"local rank {visible} has no GPU of its own" if one else f"local ranks {visible} to {procs - 1} have"
        why = (
            f"{source} with CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}: torchrun starts {procs} processes a "
            f"node and {visible} GPUs are visible, so {ranks}{'' if one else ' no GPU of their own'}"
        )
        if c is not None and "gpus_per_node" in GIVEN_FIELDS.get():
            c.note(f"{why} (as written, the run fails there; planned with the flag --gpus-per-node)")
            return
        raise BadInput(f"{why} (run {visible} processes, or make {procs} GPUs visible)", "config")


# pipeline parallel sizes as the frameworks spell them: Megatron's (LLaMA-Factory's Megatron-Bridge and mcore_adapter,
# ms-swift's megatron), torchtitan's, and vLLM's within ms-swift's RL
PIPELINE_KEYS = ("pipeline_model_parallel_size", "pipeline_parallel_degree", "pipeline_parallel_size")
PIPELINE_OUT = "pipeline parallelism is not planned: memplan splits a model by tensor, sequence, context and expert"


def pipeline_notes(c: Collector, flags: dict) -> set[str]:
    """One line for each pipeline-parallel size above 1 the configuration asks for; the keys read (so that they are not
    also called unknown)."""
    seen = {k for k in PIPELINE_KEYS if k in flags}
    for k in sorted(seen):
        n = as_int(flags[k].value)
        if n is not None and n > 1:
            c.note(f"{flags[k].source} ({PIPELINE_OUT} parallelism)")
    return seen


def parallel_sizes(c: Collector, sizes: dict[str, tuple[object, str, str]]) -> None:
    """Tensor, sequence and context parallel sizes read from a configuration: {field: (value, source, key)}; 1 and
    unset leave the field alone."""
    for field, (value, source, key) in sizes.items():
        n = as_int(value)
        if n is not None and n > 1:
            c.number(field, n, source, key)
