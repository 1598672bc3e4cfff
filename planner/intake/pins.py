"""What a run's files pin (planner.intake.releases decides the release from it): a framework package's version pin in
the folders the run names and up to PARENTS above them (requirements*.txt, setup.py, pyproject.toml, environment.yml,
a `pip freeze`; a git checkout's ref), and a GRPO fork's signs (its script's trainer class, its files' names, a flag
of its own)."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from planner.frameworks import FRAMEWORKS
from planner.frameworks.reading import PLANNED_FOR
from planner.intake import limits
from planner.intake.collect import is_dir, is_file

PARENTS = 3
QUOTES = " ,[\"'"  # what a pin's match may start with in a list
PIN_FILES = ("requirements.txt", "setup.py", "pyproject.toml", "environment.yml", "environment.yaml")
PIN_GLOBS = ("requirements*.txt", "*freeze*.txt", "constraints*.txt")
# the package whose version decides each framework's release (transformers for HF's Trainer): Framework.package
PACKAGES = {name: fw.package for name, fw in FRAMEWORKS.items() if fw.package}
# a package's older name -> its name (Framework.package_aliases: LLaMA-Factory's llmtuner)
ALIASES = {a: fw.package for fw in FRAMEWORKS.values() if fw.package for a in fw.package_aliases}
# a package's name as a pin writes it ("ms-swift" or "ms_swift")
# the libraries under a framework whose pin a plan reads too: PEFT (Knobs.peft_release, planner.intake.peft_pin)
LIBRARIES = ("peft",)
_NAMES = "|".join(re.escape(p).replace("\\-", "[-_]") for p in (*PACKAGES.values(), *ALIASES, *LIBRARIES))
_PIN = re.compile(
    rf"""(?mi)(?:^|["'\s,\[])(?:-\s*)?(?P<name>{_NAMES})\s*(?:\[[^\]]*\])?\s*"""
    r"""(?:===|==|~=|>=|=|\s@\s[^\n"']*?@v?)\s*v?(?P<version>\d+(?:\.\d+)*)"""
)
# the GRPO forks' signs, as the framework they froze a release of declares them (planner.frameworks.trl: R1-V,
# VLM-R1, Video-R1); the releases fork() and fork_by_flags() name are that framework's
FORKS = next(fw.forks for fw in FRAMEWORKS.values() if fw.forks is not None)


def is_pin_file(path: Path) -> bool:
    """A version-pin file by its name (PIN_FILES, PIN_GLOBS): read beside a configuration in its folder, not as one."""
    return path.name in PIN_FILES or any(fnmatch.fnmatch(path.name, g) for g in PIN_GLOBS)


def _pin_files(folder: Path) -> list[Path]:
    found = [folder / n for n in PIN_FILES if is_file(folder / n)]
    for pattern in PIN_GLOBS:
        try:
            found += sorted(p for p in folder.glob(pattern) if is_file(p) and p not in found)
        except OSError:
            continue
    return found


_GIT = re.compile(rf"""(?mi)(?:^|["'\s,\[])(?P<name>{_NAMES})\s*@\s*git\+[^\s"',]+""")


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
                    name = ALIASES.get(name, name)
                    line = text.count("\n", 0, m.start("name")) + 1
                    version = m.groupdict().get("version") or ""
                    shown = m.group(0).strip().strip(QUOTES)  # a pin on a later line matches from its newline
                    out.setdefault(name, (version, f"{path.name}:{line} {shown}"))
    return out


def planned_for(folders: list[Path]) -> tuple[str, str] | None:
    """(framework, `requirements.txt:1 # memplan planned these files for TRL ...`) where memplan's own requirements.txt
    sits in one of the run's folders (not above: the files it wrote lie together), naming the framework the files were
    planned for (reading.PLANNED_FOR, by its label); None elsewhere."""
    here = Path.cwd().resolve()
    for folder in folders:
        path = folder / PIN_FILES[0]
        if folder == here or not is_file(path):
            continue
        try:
            first = limits.read_config_text(path, errors="replace").partition("\n")[0]
        except (OSError, ValueError, limits.OverLimit):
            continue
        said = first.removeprefix("#").strip()
        if not said.startswith(PLANNED_FOR):
            continue
        label = said.removeprefix(PLANNED_FOR).strip()
        for fw in sorted(FRAMEWORKS.values(), key=lambda f: -len(f.label)):  # the longest label that starts it
            if fw.label and label.startswith(f"{fw.label} "):
                return fw.name, f"{path.name}:1 {first}"
    return None


def fork(paths: list[str], script: Path | None) -> tuple[str, str] | tuple[str, str, tuple[str, ...]] | None:
    """(trl release, why) for a GRPO fork's run: its script's trainer class, else a fork's file names in the paths,
    with the releases a name allows where it names more than one trainer (ForkSigns.paths: the first is planned)."""
    if script is not None:
        try:
            text = limits.read_config_text(script, errors="replace")
        except (OSError, ValueError, limits.OverLimit):
            text = ""
        for cls, release in FORKS.classes:
            m = re.search(rf"\b{cls}\b", text)
            if m:
                return release, f"{script.name}:{text.count(chr(10), 0, m.start()) + 1} uses {cls}"
    for mark, also in FORKS.paths:
        hit = next((p for p in paths if mark in p), None)
        if hit is not None and len(also) == 1:
            return also[0], f"{hit} (a {also[0]} file)"
        if hit is not None:
            return also[0], f"{hit} (a file of {' or '.join(also)}, whose trainers differ)", also
    return None


def fork_by_flags(flags: dict) -> tuple[str, str] | None:
    """(trl release, why) for a GRPO fork's script known by a flag of its own argument dataclass."""
    for key, release, why in FORKS.flags:
        if key in flags:
            return release, f"{flags[key].source} ({why})"
    return None
