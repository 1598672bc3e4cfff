"""Which reader a configuration file goes to (its extension, then its content), and how the readings of several
files merge: the first file that names a training run leads; the others (a DeepSpeed JSON, an accelerate config, the
YAML a script runs) fill what it leaves out or took from a default. The precision, frozen modules and framework settle
last (settle.py).
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS, PLAIN, by_trainer
from planner.intake import Reading, configs, limits, pyscript, releases, settle, shellvars, training
from planner.intake.collect import ASK_GPUS, Collector, is_default

SCRIPTS = (".sh", ".bash", ".zsh", ".ksh")


def read_all(paths: list[str]) -> Reading:
    if not paths:
        raise BadInput(f"--config: give at least one file ({configs.ACCEPTED})", "config")
    paths = _without_pins(paths)
    token = shellvars.GIVEN.set(tuple(filter(None, map(_given_path, paths))))
    try:
        readings = [read_one(p) for p in paths]
    finally:
        shellvars.GIVEN.reset(token)
    lead = _lead(readings)
    for other in readings:
        if other is not lead:
            _merge(lead, other)
    if len(readings) > 1:
        lead.unplanned = [n for n in lead.unplanned if not _answered(lead, n)]
    settle.finish(lead)
    return lead.reading()


def _lead(readings: list[Collector]) -> Collector:
    """The first reading that names a training run; where it is a launcher's that could only guess HF's Trainer (the
    script it runs sets no flag and has no trainer's name) and that script is given too, the script's own reading
    leads where it names another framework (an unsloth script run by torchrun: TRL's trainer as unsloth runs it)."""
    lead = next((c for c in readings if not _supporting(c)), readings[0])
    launched = lead.facts.get("framework", ("", "", "config"))[2] not in ("script", "config")  # a launcher's key
    if lead.framework != by_trainer(PLAIN) or not launched:
        return lead
    ran = [c for c in readings if c is not lead and c.files and c.files[0] in lead.files]
    return next((c for c in ran if c.framework != lead.framework and c.facts["framework"][2] == "script"), lead)


# a file's note that asks for what another given file supplied (hf.reader, intake.scriptargs): the model, the length,
# the launch script that runs a script whose arguments come from the command line
ASKS = {
    "model": ("(the model is not known from the script: pass --model)", "no model_name_or_path in the configuration"),
    "seq_len": ("no sequence length in the configuration",),
    "launcher": ("(its arguments come from the command line: read the launch script that runs it)",),
    "gpus": (ASK_GPUS,),  # a launch that leaves the processes open (llamafactory.reader_launch.alone)
}


def _answered(lead: Collector, note: str) -> bool:
    """Whether `note`, one file's, asks for what the merged reading has from another file."""
    launched = lead.facts.get("framework", ("", "", "config"))[2] not in ("script", "config")  # a launcher's key
    has = {
        "model": lead.model is not None,
        "seq_len": lead.has("seq_len"),
        "launcher": launched,
        "gpus": lead.explicit("gpus_per_node"),
    }
    return any(has[what] and any(a in note for a in asks) for what, asks in ASKS.items())


def _without_pins(paths: list[str]) -> list[str]:
    """The given paths less the version-pin files (requirements.txt, ...) that sit in another given file's folder: the
    release reading reads them there (releases.pins); a pin file alone, or in a folder of its own, is read as a
    configuration and refused as one."""
    parents = {Path(str(p)).expanduser().parent for p in paths if not releases.is_pin_file(Path(str(p)))}
    return [
        p for p in paths if not (releases.is_pin_file(Path(str(p))) and Path(str(p)).expanduser().parent in parents)
    ]


def _supporting(c: Collector) -> str:
    """What a reading supplies to the run another file leads (Framework.supporting); "" where it leads."""
    f = FRAMEWORKS.get(c.framework)
    return f.supporting if f is not None else ""


def _given_path(text_path: str) -> Path | None:
    """A given file's path for shellvars.GIVEN; None for one read_one refuses (it says why, in its turn)."""
    try:
        return None if "\0" in str(text_path) else Path(str(text_path)).expanduser()
    except RuntimeError:  # `~name` of no such user
        return None


def read_one(text_path: str) -> Collector:
    if "\0" in str(text_path):
        raise BadInput(f"--config {str(text_path)[:80]!r}: a path cannot hold a NUL byte", "config")
    try:
        path = Path(str(text_path)).expanduser()
    except RuntimeError:  # `~name` of no such user
        raise BadInput(f"--config {str(text_path)[:80]!r}: no such user's home folder", "config") from None
    with limits.reading(path):  # the file refusals name; one budget for it and every file it names
        return _read_file(path)


def _read_file(path: Path) -> Collector:
    text = configs.text_of(path)
    suffix = path.suffix.lower()
    first = text.split("\n", 1)[0]
    if suffix == ".py" or (first.startswith("#!") and "python" in first):
        return pyscript.read(path, text)
    if suffix in SCRIPTS or first.startswith("#!"):
        return training.read_script_file(path, text)
    if suffix in (".json", ".yaml", ".yml"):
        return _config(path, configs.load(path, text))
    try:
        data = configs.load(path, text)
    except limits.OverLimit:
        raise
    except BadInput:
        data = None
    if isinstance(data, dict) and configs.kind(data) is not None:
        return _config(path, data)
    try:
        return training.read_script_file(path, text)
    except limits.OverLimit:
        raise
    except BadInput:
        raise BadInput(
            f"--config {path}: neither a training configuration nor a launch script memplan knows ({configs.ACCEPTED})",
            "config",
        ) from None


def _config(path: Path, data: object) -> Collector:
    fmt = configs.kind(data)
    configs.refuse(fmt, path)
    trainer = configs.trainer_in(data, fmt, path.name)
    c = Collector(configs.framework(fmt, trainer))
    c.fact("framework", c.framework, f"{path.name}: {c.framework}'s keys", "config")
    configs.read(c, fmt, data, path.resolve(), trainer=trainer)
    return c


def _merge(lead: Collector, other: Collector) -> None:
    """`other`'s fields where `lead` has none or only a default; its facts likewise; every note and file."""
    for s in other.settings():
        lead.fill(s.field, s.value, s.source, s.key)
        if s.field in other.assumed_media and lead.setting(s.field) == s:  # the count assumed, as the other read it
            lead.assumed_media.add(s.field)
    for name, fact in other.facts.items():
        mine = lead.facts.get(name)
        if mine is None or (is_default(mine[1]) and not is_default(fact[1])):
            lead.facts[name] = fact
    if lead.model is None:
        lead.model = other.model
    if _supporting(other) == "ds-json":
        lead.unplanned = [n for n in lead.unplanned if "pass the JSON too" not in n]
    for line in other.unplanned:
        lead.note(line)
    for f in other.files:
        lead.add_file(f)
