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
from planner.intake import limits
from planner.intake.collect import Collector, assumption, is_dir, is_file

PARENTS = 3
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
FORK_PATHS = (("grpo_jsonl.py", "vlm-r1"), ("open-r1-multimodal", "vlm-r1"), ("VLM-R1", "vlm-r1"), ("r1-v", "r1-v"))


def _pin_files(folder: Path) -> list[Path]:
    found = [folder / n for n in PIN_FILES if is_file(folder / n)]
    for pattern in PIN_GLOBS:
        try:
            found += sorted(p for p in folder.glob(pattern) if is_file(p) and p not in found)
        except OSError:
            continue
    return found


def pins(folders: list[Path]) -> dict[str, tuple[str, str]]:
    """package -> (version, `setup.py:66 trl==0.17.0`): the first pin of each, nearest folder first."""
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
                for m in _PIN.finditer(text):
                    name = m.group("name").lower().replace("_", "-")
                    line = text.count("\n", 0, m.start("name")) + 1
                    out.setdefault(name, (m.group("version"), f"{path.name}:{line} {m.group(0).strip()}"))
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


def decide(
    c: Collector,
    framework: str,
    folders: list[Path],
    told: tuple[str, str] | None = None,
    hint: tuple[str, str] | None = None,
) -> None:
    """Record the release the files show as the fact "release" (name, why), or the newest with a line saying it was
    assumed. `told`: (release, why) the run itself shows (a fork's own trainer), which a pin does not override;
    `hint`: a flag name only older releases take (ms-swift 3's --train_type, OpenRLHF's flat flags), which a pin does
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
    why = f"{told[1]}: older than the releases memplan lists ({fw.accepted()})" if told else "the files pin none"
    c.fact(
        "release",
        "",
        assumption(f"{fw.label} {newest.name}, the newest release memplan lists: {why}"),
        "release",
    )
    c.note(f"release assumed: {fw.label} {newest.name} ({why}; another: --framework {framework}@RELEASE)")


def _known(fw, text: str) -> bool:
    try:
        fw.release(text)
    except ValueError:
        return False
    return True
