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
"""

from __future__ import annotations

from pathlib import Path

from planner.frameworks import ARGS, FRAMEWORKS, by_trainer, split_name
from planner.intake.collect import (
    GIVEN_FIELDS,
    GIVEN_RELEASE_WHY,
    Collector,
    assumption,
    default,
    is_default,
)
from planner.intake.flags import Flag
from planner.intake.pins import (  # noqa: F401 - re-exported: readers call releases.pins and releases.is_pin_file
    PACKAGES,
    PIN_FILES,
    PIN_GLOBS,
    fork,
    fork_by_flags,
    is_pin_file,
    pins,
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
    """(the release lines that take the run's own flags, why) where a flag only some releases take narrows them
    (Framework.key_spans; a script's own defaults are no flags of the command); None where none does."""
    fw = FRAMEWORKS.get(framework)
    spans = fw.key_spans.get(trainer, {}) if fw is not None else {}
    named = [f for f in flags if f in spans and not is_default(flags[f].source)]
    lines = fw.lines_taking(trainer, named) if named else ()
    if not lines or len(lines) == len(fw.lines_taking(trainer, ())):
        return None
    said = ", ".join(flags[f].source for f in named)
    return tuple(r.name for r in lines), f"{said}: taken by {fw.label} {lines[0].name} .. {lines[-1].name} only"


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
    where = folders(run)
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


def release_defaults(c: Collector, trainer: str) -> None:
    """The defaults of the release the files show (planner.intake.releases), where it differs from the newest:
    checkpointing, optimizer, micro-batch, accumulation; a GRPO release's beta and max_completion_length; and the
    line that says a GRPO batch counts prompts (trl 0.14 and the Qwen2VLGRPOTrainer forks)."""
    release, why, _ = c.facts.get("release", ("", "", ""))
    name = by_trainer(trainer)
    if not release or c.framework != name:
        return
    r = FRAMEWORKS[name].release(release)
    who = f"{name}@{r.name}"
    mine = given(name)
    tail = f" ({mine[1]})" if mine is not None else ""  # the release given beside the files, named

    def source(d) -> str:
        return default(who, d.source) + tail

    grpo = r.grpo if trainer == "grpo" else {}
    for field, d in {**r.defaults, **grpo}.items():
        if field in ("checkpointing", "optimizer", "micro_batch", "grad_accum"):
            c.fill(field, d.value, source(d), FRAMEWORKS[ARGS].keys.get(field, field))
    if "precision" in r.defaults:  # the trainer's mixed precision where the files set none
        c.fact("amp", r.defaults["precision"].value, source(r.defaults["precision"]), "bf16", weak=True)
    if trainer == "dpo" and "logprobs" in r.workload:  # DPO's log-prob head at that release
        c.fill("workload.logprobs", r.workload["logprobs"].value, source(r.workload["logprobs"]), "trainer")
    if trainer != "grpo":
        return
    for field, d in r.workload.items():
        if field != "generation":
            c.fill(f"workload.{field}", d.value, source(d), field)
    gen, mode = c.setting("workload.generation"), r.workload.get("generation")
    vllm = mode is not None and gen is not None and "use_vllm" in c.facts and str(gen.value).startswith("vllm")
    if vllm and is_default(gen.source):
        said = c.facts["use_vllm"][1]  # the flag that turned vLLM on (planner.frameworks.trl.reader_grpo)
        c.set("workload.generation", mode.value, f"{said}; {source(mode)}", gen.key)  # its mode the release's
        util = c.setting("workload.vllm_gpu_memory_utilization")
        if util is not None:  # it sizes vLLM on its own GPUs there, none of the training GPUs' memory
            c.drop("workload.vllm_gpu_memory_utilization")
            c.note(f"{util.source} (vLLM's share of its own GPUs under {who}: not planned, training GPUs hold no vLLM)")
    if r.means("grpo_batch_counts") == "prompts":
        mb = c.setting("micro_batch")
        n = c.get("workload.num_generations", 8)
        c.note(
            f"{mb.source if mb else 'per_device_train_batch_size'} ({who} counts it in prompts, {n} completions each: "
            f"planned as {int(c.get('micro_batch', 1)) * int(n)} completions a micro-batch; {why})"
        )


def _line_read(c: Collector, framework: str):
    """The release line the reading targets (the fact "release") where it is not the framework's newest, else None."""
    fw, release = FRAMEWORKS[framework], str(c.facts.get("release", ("",))[0] or "")
    r = fw.release(release) if release else None
    return None if r is None or r is fw.newest else r


def moved_default(c: Collector, framework: str, name: str) -> tuple[object, str] | None:
    """(value, source) of memplan field `name`'s default at the release line the reading targets, where that line
    moved it against the newest (Release.defaults), else None. The source reads `NAME@RELEASE default (file:line)`.
    The one way a framework's reader takes a release's defaults: a reader that looks a key up field by field
    (LLaMA-Factory's) asks here where the files leave the key unset; one that reads its flags whole takes them as
    flags (with_defaults)."""
    r = _line_read(c, framework)
    d = r.defaults.get(name) if r is not None else None
    return None if d is None else (d.value, default(f"{framework}@{r.name}", d.source))


def with_defaults(c: Collector, framework: str, table, flags: dict[str, Flag]) -> dict[str, Flag]:
    """`flags` with each default the release read changed against the newest (moved_default, by the key table's
    field) as a flag at its source where the flags leave the key unset: the framework's reader, which takes the
    newest's default from its table where a key is unset, then reads the release's."""
    r = _line_read(c, framework)
    if r is None:
        return flags
    out = dict(flags)
    for name in r.defaults:
        if name in table.rows and table.key(name) not in out:
            key = table.key(name)
            out[key] = Flag(key, *moved_default(c, framework, name), key)
    return out
