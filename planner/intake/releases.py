"""Which release of its framework a run targets, from what the user's files show (planner.frameworks lists each
framework's releases: Framework.releases): a GRPO fork's own trainer (its script's trainer class, else its files'
names), then a version pin beside the launch script or the script it runs (requirements*.txt, setup.py,
pyproject.toml, environment.yml, a `pip freeze`), then flag names only some releases take (the framework's reader
passes them), else the newest, said in one line. The reading's framework becomes NAME@RELEASE, so the plan takes that
release's defaults and meanings (planner.config.release).

Pins are looked for in the folders the run names (the script's, the folder it `cd`s to, the training script's) and
up to PARENTS folders above each, never in memplan's own working folder, and only where the reading may read.
"""

from __future__ import annotations

import re
from pathlib import Path

from planner.frameworks import FRAMEWORKS
from planner.frameworks.hf import HF_KEYS
from planner.intake import limits
from planner.intake.collect import Collector, assumption, default, is_dir, is_file

PARENTS = 3
QUOTES = " ,[\"'"  # what a pin's match may start with in a list
PIN_FILES = ("requirements.txt", "setup.py", "pyproject.toml", "environment.yml", "environment.yaml")
PIN_GLOBS = ("requirements*.txt", "*freeze*.txt", "constraints*.txt")
# the package whose version decides each framework's release (transformers for HF's Trainer)
PACKAGES = {"trl": "trl", "swift": "ms-swift", "openrlhf": "openrlhf", "hf": "transformers"}
_PIN = re.compile(
    r"""(?mi)(?:^|["'\s,\[])(?:-\s*)?(?P<name>trl|ms[-_]swift|openrlhf|transformers)\s*(?:\[[^\]]*\])?\s*"""
    r"""(?:===|==|~=|>=|=|\s@\s[^\n"']*?@v?)\s*v?(?P<version>\d+(?:\.\d+)*)"""
)
# GRPO forks by their trainer classes (trl's releases "r1-v" and "vlm-r1"), and by their files where the script is
# not among the user's: VLM-R1's grpo_jsonl.py came with VLMGRPOTrainer (4081ec3); R1-V's src/r1-v
TRAINER_CLASSES = (("VLMGRPOTrainer", "vlm-r1"), ("Qwen2VLGRPOTrainer", "r1-v"))
# GRPO forks by a flag only their script takes: Video-R1 (59d65c3) src/r1-v/src/open_r1/grpo.py:55-60 --temporal,
# --len_control; its trainer (:286 Qwen2VLGRPOVLLMTrainerModified with vLLM, else Qwen2VLGRPOTrainer) is R1-V's,
# repeating each prompt num_generations times (trainer/vllm_grpo_trainer_modified.py:615): its batch counts prompts
VIDEO_R1 = "Video-R1's flag, src/r1-v/src/open_r1/grpo.py:55-60; its trainer is R1-V's Qwen2VLGRPOTrainer's copy"
FORK_FLAGS = (("temporal", "r1-v", VIDEO_R1), ("len_control", "r1-v", VIDEO_R1))
FORK_PATHS = (("grpo_jsonl.py", "vlm-r1"), ("open-r1-multimodal", "vlm-r1"), ("VLM-R1", "vlm-r1"), ("r1-v", "r1-v"))


def _pin_files(folder: Path) -> list[Path]:
    found = [folder / n for n in PIN_FILES if is_file(folder / n)]
    for pattern in PIN_GLOBS:
        try:
            found += sorted(p for p in folder.glob(pattern) if is_file(p) and p not in found)
        except OSError:
            continue
    return found


_GIT = re.compile(r"""(?mi)(?:^|["'\s,\[])(?P<name>trl|ms[-_]swift|openrlhf|transformers)\s*@\s*git\+[^\s"',]+""")


def pins(folders: list[Path]) -> dict[str, tuple[str, str]]:
    """package -> (version, `setup.py:66 trl==0.17.0`): the first pin of each, nearest folder first; a git checkout
    with no release in its ref (`trl @ git+...@main`, as open-r1 and R1-V's first setup.py pinned) is version ""."""
    out: dict[str, tuple[str, str]] = {}
    seen: set[Path] = set()
    here = Path.cwd().resolve()
    for start in folders:
        for folder in [start, *list(start.parents)[:PARENTS]]:
            if folder in seen or folder == here or not is_dir(folder):
                continue
            seen.add(folder)
            for path in _pin_files(folder):
                try:
                    text = limits.read_config_text(path, errors="replace")
                except (OSError, ValueError, limits.OverLimit):
                    continue
                for m in [*_PIN.finditer(text), *_GIT.finditer(text)]:
                    name = m.group("name").lower().replace("_", "-")
                    line = text.count("\n", 0, m.start("name")) + 1
                    version = m.groupdict().get("version") or ""
                    shown = m.group(0).strip(QUOTES)
                    out.setdefault(name, (version, f"{path.name}:{line} {shown}"))
    return out


def fork(paths: list[str], script: Path | None) -> tuple[str, str] | None:
    """(trl release, why) for a GRPO fork's run: its script's trainer class, else a fork's file names in the paths."""
    if script is not None:
        try:
            text = limits.read_config_text(script, errors="replace")
        except (OSError, ValueError, limits.OverLimit):
            text = ""
        for cls, release in TRAINER_CLASSES:
            m = re.search(rf"\b{cls}\b", text)
            if m:
                return release, f"{script.name}:{text.count(chr(10), 0, m.start()) + 1} uses {cls}"
    for mark, release in FORK_PATHS:
        hit = next((p for p in paths if mark in p), None)
        if hit is not None:
            return release, f"{hit} (a {release} file)"
    return None


def for_run(c: Collector, run, trainer: str, flags: dict | None = None) -> None:
    """The TRL or transformers release a launched run targets: a GRPO fork's trainer (its script's class, its files,
    or a flag only the fork's script takes), else a pin beside the launch script, the folder it runs from or the
    script it runs (`run`: planner.intake.launch.Run)."""
    script = script_of(run)
    v = run.command.vars
    where = [f"{v.cwd or v.cd_words}/{run.target}", str(run.command.path)]
    told = (fork(where, script) or fork_by_flags(flags or {})) if trainer == "grpo" else None
    decide(c, c.framework, folders(run), told)


def fork_by_flags(flags: dict) -> tuple[str, str] | None:
    """(trl release, why) for a GRPO fork's script known by a flag of its own argument dataclass."""
    for key, release, why in FORK_FLAGS:
        if key in flags:
            return release, f"{flags[key].source} ({why})"
    return None


def by_flags(c: Collector, framework: str, run, hint: tuple[str, str] | None) -> None:
    """ms-swift's or OpenRLHF's release: a pin, else the release the flags' names say (`hint`: (release, why), from
    the framework's reader: planner.frameworks.swift.reader.release_hint, planner.frameworks.openrlhf.reader.release_hint), else the
    newest."""
    decide(c, framework, folders(run), hint=hint)


def script_of(run) -> Path | None:
    """The Python script a launcher runs, where it is among the user's files (beside the launch script or above)."""
    from planner.intake.shellvars import find_file

    return find_file(run.target, run.command.vars, run.command.path) if run.target.endswith(".py") else None


def folders(run) -> list[Path]:
    """Where a run's version pins may be: the folder it runs from, its script's, the launch script's."""
    script, cwd = script_of(run), run.command.vars.cwd
    found = [Path(cwd) if cwd else None, script.parent if script else None, run.command.path.parent]
    return [p.resolve() for p in found if p is not None]


def decide(
    c: Collector,
    framework: str,
    folders: list[Path],
    told: tuple[str, str] | None = None,
    hint: tuple[str, str] | None = None,
) -> None:
    """Record the release the files show as the fact "release" (name, why), or the newest, its source saying it was
    assumed (the framework field's line in the reading). `told`: (release, why) the run itself shows (a fork's own
    trainer), which a pin does not override; `hint`: a flag name only older releases take (ms-swift 3's --train_type, OpenRLHF's flat flags), which a pin does
    (newer releases keep some old names as aliases)."""
    fw = FRAMEWORKS.get(framework)
    if fw is None or not fw.releases:
        return
    if told is None:
        package = PACKAGES.get(framework)
        pin = pins(folders).get(package) if package else None
        told = (pin[0], pin[1]) if pin is not None else hint
    if told is not None and _known(fw, told[0]):
        r = fw.release(told[0])
        c.fact("release", fw.line(told[0]), f"{told[1]} ({fw.label} release {r.name})", "release")
        return
    newest = fw.newest
    why = "the files pin none"
    if told is not None:
        what = "a git checkout, not a release" if not told[0] else "older than the releases memplan lists"
        why = f"{told[1]}: {what} ({fw.accepted()})"
    c.fact(
        "release",
        "",
        assumption(
            f"release assumed: {fw.label} {newest.name}, the newest memplan lists ({why}; another: --framework "
            f"{framework}@RELEASE)"
        ),
        "release",
    )


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
    name = "hf" if trainer == "hf" else "trl"
    if not release or c.framework != name:
        return
    r = FRAMEWORKS[name].release(release)
    who = f"{name}@{r.name}"
    for field, d in r.defaults.items():
        if field in ("checkpointing", "optimizer", "micro_batch", "grad_accum"):
            c.fill(field, d.value, default(who, d.source), HF_KEYS.get(field, field))
    if trainer != "grpo":
        return
    for field, d in r.workload.items():
        c.fill(f"workload.{field}", d.value, default(who, d.source), field)
    if r.means("grpo_batch_counts") == "prompts":
        mb = c.setting("micro_batch")
        n = c.get("workload.num_generations", 8)
        c.note(
            f"{mb.source if mb else 'per_device_train_batch_size'} ({who} counts it in prompts, {n} completions each: "
            f"planned as {int(c.get('micro_batch', 1)) * int(n)} completions a micro-batch; {why})"
        )
