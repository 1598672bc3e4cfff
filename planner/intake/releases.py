"""Which release of its framework a run targets, from what the user's files show (planner.frameworks lists each
framework's releases: Framework.releases): a GRPO fork's own trainer (its script's trainer class, else its files'
names), then a version pin beside the launch script or the script it runs (requirements*.txt, setup.py,
pyproject.toml, environment.yml, a `pip freeze`), then flag names only some releases take (the framework's reader
passes them), else the newest, said in one line. The reading's framework becomes NAME@RELEASE, so the plan takes that
release's defaults and meanings (planner.config.release).

A release the user gives beside the files (check --config --framework NAME@RELEASE: collect.GIVEN_FIELDS) decides
before all of these, and each default it fills names it. Where the files leave a choice (no pin; the flags only some
TRL lines take, Framework.key_spans, narrowing the lines; a fork's file name that more than one of its trainers ran),
the lines they allow are the fact "releases" (Reading.releases): check --config plans each (planner.advise).

Pins are looked for (planner.intake.pins) in the folders the run names (the script's, the folder it `cd`s to, the
training script's) and up to PARENTS folders above each, never in memplan's own working folder, and only where the
reading may read.

What the release read changes in the plan's defaults: line_defaults.py.
"""

from __future__ import annotations

from pathlib import Path

from planner.frameworks import FRAMEWORKS, split_name
from planner.frameworks.reading import version_of
from planner.intake.collect import (
    GIVEN_FIELDS,
    GIVEN_RELEASE_WHY,
    Collector,
    assumption,
    is_default,
)
from planner.intake.pins import (  # noqa: F401 - re-exported: readers call releases.pins and releases.is_pin_file
    PACKAGES,
    PIN_FILES,
    PIN_GLOBS,
    fork,
    fork_by_flags,
    is_pin_file,
    pins,
    planned_for,
)


def for_run(c: Collector, run, trainer: str, flags: dict | None = None) -> None:
    """The TRL or transformers release a launched run targets: a GRPO fork's trainer (its script's class, its files,
    or a flag only the fork's script takes), else a pin beside the launch script, the folder it runs from or the
    script it runs (`run`: planner.intake.launch.Run)."""
    script = script_of(run)
    v = run.command.vars
    where = [f"{v.cwd or v.cd_words}/{run.target}", str(run.command.path)]
    told = (fork(where, script) or fork_by_flags(flags or {})) if trainer == "grpo" else None
    if told is not None and len(told) == 3:
        decide(c, c.framework, folders(run), told[:2], allowed=(tuple(told[2]), ""))
        return
    decide(c, c.framework, folders(run), told, allowed=None if told else taking(c.framework, trainer, flags or {}))


def for_script(c: Collector, path: Path, trainer: str, flags: dict) -> None:
    """The TRL or transformers release a Python training script read whole targets: a pin beside it or above, else
    the lines its own arguments allow (the newest assumed and said; check --config plans each where they differ)."""
    decide(c, c.framework, [path.parent.resolve()], allowed=taking(c.framework, trainer, flags))


def taking(framework: str, trainer: str, flags: dict) -> tuple[tuple[str, ...], str] | None:
    """(the release lines that take the run's own flags, why) where a flag, or its value (a `KEY=WORD` entry: _word),
    only some releases take narrows them (Framework.key_spans; a script's own defaults are no flags of the command);
    None where none does."""
    fw = FRAMEWORKS.get(framework)
    spans = fw.key_spans.get(trainer, {}) if fw is not None else {}
    given = {f: flag for f, flag in flags.items() if not is_default(flag.source)}
    named = [f for f in given if f in spans]
    valued = [f"{f}={_word(flag.value)}" for f, flag in given.items() if f"{f}={_word(flag.value)}" in spans]
    lines = fw.lines_taking(trainer, named + valued) if named or valued else ()
    if not lines or len(lines) == len(fw.lines_taking(trainer, ())):
        return None
    said = ", ".join(flags[f.partition("=")[0]].source for f in named + valued)
    return tuple(r.name for r in lines), f"{said}: taken by {fw.label} {lines[0].name} .. {lines[-1].name} only"


def _word(value: object) -> str:
    """A flag's value as a key_spans entry names it (`KEY=WORD`: a value only some releases take, e.g.
    LLaMA-Factory's flash_attn bool to v0.6.3): "bool" for a switch or true/false, else the value lowercased."""
    return "bool" if isinstance(value, bool) or str(value).lower() in ("true", "false") else str(value).lower()


def entry_point(fw, words: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    """(the word, the release lines shipping it) of the first of the framework's entry points (Framework.entry_points)
    that `words` (a launcher tool, the script it runs) name: the same word, or a path ending /ENTRY."""
    for entry, lines in fw.entry_points:
        for w in words:
            if w == entry or w.endswith("/" + entry):
                return w, lines
    return None


def for_entry(c: Collector, framework: str, keys, folders: list[Path], words: tuple[str, ...] = ()) -> None:
    """The release of a run of a framework's own entry point (Framework.entry_points: `words`, the launcher tool and
    the script it runs) with its keys (`keys`: names, Framework.key_spans["train"] narrowing the lines): a pin in
    `folders`, else the newest line the entry point and the keys allow, said as assumed. A release already decided
    (a reading's launcher did) stands."""
    fw = FRAMEWORKS.get(framework)
    if fw is None or not fw.releases or "release" in c.facts:
        return
    every = tuple(r.name for r in fw.lines_taking("", ()))
    names, why = every, []
    hit = entry_point(fw, words)
    if hit is not None:
        lines = hit[1]
        names, why = tuple(n for n in names if n in lines), [f"{hit[0]}: {fw.label} {lines[0]} .. {lines[-1]}'s"]
    narrowed = taking(framework, "train", {k: keys[k] for k in keys})
    if narrowed is not None:
        names, why = tuple(n for n in names if n in narrowed[0]) or names, [*why, narrowed[1]]
    allowed = (names, "; ".join(why)) if names != every else None
    decide(c, framework, folders, allowed=allowed)


def by_flags(c: Collector, framework: str, run, hint: tuple | None) -> None:
    """ms-swift's or OpenRLHF's release: a pin or the release given, else the release the flags' names say (`hint`:
    (release, why) or (release, why, the lines those names allow), from the framework's reader:
    planner.frameworks.swift.reader.release_hint, planner.frameworks.openrlhf.reader.release_hint), else the newest.
    Where the names allow two lines or more, `release` is read and each line planned (the fact "releases": check
    --config answers the hungrier verdict)."""
    by_flags_in(c, framework, folders(run), hint)


def by_flags_in(c: Collector, framework: str, where: list[Path], hint: tuple | None) -> None:
    """by_flags for a file read without a command (its folder the one a pin may be in)."""
    lines = hint[2] if hint is not None and len(hint) > 2 else ()
    if len(lines) > 1 and PACKAGES.get(framework) not in pins(where) and given(framework) is None:
        decide(c, framework, where, told=hint[:2], allowed=(lines, hint[1]))
        return
    decide(c, framework, where, hint=hint[:2] if hint else None)


def script_of(run) -> Path | None:
    """The Python script a launcher runs, where it is among the user's files (beside the launch script or above)."""
    from planner.intake.shellvars import find_file

    return find_file(run.target, run.command.vars, run.command.path) if run.target.endswith(".py") else None


def folders(run) -> list[Path]:
    """Where a run's version pins may be: the folder it runs from, its script's, the launch script's."""
    script, cwd = script_of(run), run.command.vars.cwd
    found = [Path(cwd) if cwd else None, script.parent if script else None, run.command.path.parent]
    return [p.resolve() for p in found if p is not None]


def given(framework: str) -> tuple[str, str] | None:
    """(release, why) of the release the caller gives beside the files for this framework (check --config
    --framework NAME@RELEASE, or a name that is another's release: trl-0; `why` GIVEN_RELEASE_WHY where memplan chose
    it), else None."""
    text = GIVEN_FIELDS.get().get("framework")
    if not isinstance(text, str):
        return None
    name, release = split_name(text)
    other = FRAMEWORKS.get(name)
    if other is not None and other.same_as and not release:
        name, release = split_name(other.same_as)
    if name != framework or not release:
        return None
    return release, GIVEN_RELEASE_WHY.get() or f"--framework {text}, given"


def decide(
    c: Collector,
    framework: str,
    folders: list[Path],
    told: tuple[str, str] | None = None,
    hint: tuple[str, str] | None = None,
    allowed: tuple[tuple[str, ...], str] | None = None,
) -> None:
    """Record the release the files show as the fact "release" (name, why), or the newest they allow, its source
    saying it was assumed (the framework field's line in the reading), with the fact "releases": the lines they
    allow. The release given beside the files (`given`) decides first. `told`: (release, why) the run itself shows
    (a fork's own trainer), which a pin does not override; `hint`: a flag name only older releases take (ms-swift 3's
    --train_type, OpenRLHF's flat flags), which a pin does (newer releases keep some old names as aliases);
    `allowed`: (the lines the run's flags or files allow, why), where `told` is a choice among them."""
    fw = FRAMEWORKS.get(framework)
    if fw is None or not fw.releases:
        return
    if (mine := given(framework)) is not None:
        r = fw.release(mine[0])  # BadInput naming the accepted for a release it does not list
        c.fact("release", fw.line(mine[0]), f"{mine[1]} ({fw.label} release {r.name})", "--framework")
        return
    if told is not None and allowed is not None:  # a choice among the trainers a fork's files name
        _assume(c, fw, fw.release(told[0]), allowed[0], told[1])
        return
    if told is None:
        package = PACKAGES.get(framework)
        pin = pins(folders).get(package) if package else None
        told = (pin[0], pin[1]) if pin is not None else hint
    if told is not None and _known(fw, told[0]):
        r = fw.release(told[0])
        c.fact("release", fw.line(told[0]), f"{told[1]} ({fw.label} release {r.name})", "release")
        return
    why = "the files pin none"
    if told is not None:
        what = "a git checkout, not a release" if not told[0] else "older than the releases memplan lists"
        why = f"{told[1]}: {what} ({fw.accepted()})"
    names = allowed[0] if allowed else tuple(r.name for r in fw.lines_taking("", ()))
    newest = max((fw.release(n) for n in names), key=lambda r: r.first)
    # each line planned only where the flags that tell the lines apart are listed (Framework.key_spans): a line's
    # reader may read another line's flags wrongly (ms-swift 2's names, OpenRLHF's flat flags)
    _assume(c, fw, newest, names, f"{why}; {allowed[1]}" if allowed else why, sweep=bool(fw.key_spans))


def _assume(c: Collector, fw, r, names: tuple[str, ...], why: str, sweep: bool = True) -> None:
    """The release `r` assumed among `names`, the lines the files allow (the fact "releases" where they are two or
    more and `sweep`: check --config plans each)."""
    every = len(names) == len(fw.lines_taking("", ()))
    firsts = [fw.release(n).first for n in names]
    which = (
        "the newest memplan lists"
        if r is fw.newest and every
        else f"the newest of {', '.join(names)}"
        if r.first and None not in firsts and r.first == max(firsts)
        else f"one of {', '.join(names)}"
    )
    c.fact(
        "release",
        fw.line(r.name),
        assumption(f"release assumed: {fw.label} {r.name}, {which} ({why}; another: --framework {fw.name}@RELEASE)"),
        "release",
    )
    if len(names) > 1 and sweep:
        c.fact("releases", names, why, "release")


def _known(fw, text: str) -> bool:
    if not text:
        return False
    try:
        fw.release(text)
    except ValueError:
        return False
    return True


def transformers_read(
    c: Collector, line, other: str = "it takes 5.10+ too, where the answer differs", near=None
) -> tuple[tuple[int, ...] | None, str]:
    """The transformers a reading of `line` (a Release whose package is not transformers: Release.transformers) runs,
    and what says so: the files' pin (beside them, or `near`, or above, as the release's own), else the line's own,
    said as assumed (`other`: what else the line takes); (None, "") for a line that names none."""
    if line is None or not line.transformers:
        return None, ""
    folders = [Path(f).resolve().parent for f in c.files] + ([Path(near).resolve()] if near is not None else [])
    pin = pins(folders).get("transformers")
    if pin is not None and version_of(pin[0]) is not None:
        return version_of(pin[0]), f"transformers {pin[0]}: {pin[1]}"
    return version_of(line.transformers), assumption(
        f"transformers assumed {line.transformers}, as memplan reads the {line.name} line; {other}: pin transformers "
        "beside the files"
    )
