"""Where downloaded models live, and what a cache path names: the Hugging Face hub cache (`models--<org>--<name>/
snapshots/<rev>`) and ModelScope's (its SDK's `models/<org>/<name with . as ___>`, its hub's `models/<org>--<name>/
snapshots/<rev>`, older SDKs' folders), under the roots their environment variables or defaults give.
"""

from __future__ import annotations

import os
from pathlib import Path

from planner.intake.collect import is_dir, is_file
from planner.intake.limits import read_config_text


def config_file(path: Path) -> Path | None:
    """`path` itself where it is a .json file, else its config.json where there is one."""
    p = path / "config.json" if is_dir(path) else path
    return p if is_file(p) and p.name.endswith(".json") else None


def cache_dirs() -> list[Path]:
    """Where Hugging Face and ModelScope keep downloaded models: HF_HUB_CACHE, HF_HOME; then ModelScope's SDK cache
    (MODELSCOPE_CACHE, else ~/.cache/modelscope/hub: modelscope 1.40.2 utils/file_utils.py:41-58) and its hub's root
    (MODELSCOPE_CACHE, else ~/.cache/modelscope: hub/utils/utils.py:197-202), which differ only by default."""
    env = os.environ
    hf = env.get("HF_HUB_CACHE") or (str(Path(env["HF_HOME"]) / "hub") if env.get("HF_HOME") else None)
    xdg = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    ms = (
        [Path(env["MODELSCOPE_CACHE"])]
        if env.get("MODELSCOPE_CACHE")
        else [xdg / "modelscope" / "hub", xdg / "modelscope"]
    )
    return [Path(hf) if hf else xdg / "huggingface" / "hub", *ms]


def _snapshots(repo: Path, ref: str) -> list[Path]:
    """A repo folder's snapshots: the one `refs/<ref>` names, then the newest first."""
    refs = repo / "refs" / ref
    try:
        snaps = [repo / "snapshots" / read_config_text(refs).strip()] if is_file(refs) else []
        if is_dir(repo / "snapshots"):
            snaps += sorted((repo / "snapshots").iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:  # an unreadable cache is no cache
        return []
    return snaps


def modelscope_folders(base: Path, org: str, name: str) -> list[Path]:
    """The folders ModelScope keeps `org/name` in under a cache root (modelscope 1.40.2 hub/utils/utils.py:205-258):
    `models/<org>/<name>` with every `.` of the name written `___` (its SDK's layout, utils.py:146-155), the hub's
    `models/<org>--<name>/snapshots/<rev>`, and the older SDKs' `<org>/<name>` and `hub/<org>/<name>`."""
    safe = name.replace(".", "___")
    out = [base / "models" / org / safe, base / "models" / org / name]
    out += _snapshots(base / "models" / f"{org}--{name}", "master")
    return out + [base / org / name, base / org / safe, base / "hub" / org / name, base / "hub" / org / safe]


def cached(name: str) -> Path | None:
    """config.json of `Org/Name` in the Hugging Face cache (refs/main's snapshot, else the newest) or ModelScope's."""
    if name.count("/") != 1 or name.startswith((".", "/", "~")):
        return None
    hf, *ms = cache_dirs()
    snaps = _snapshots(hf / ("models--" + name.replace("/", "--")), "main")
    org, leaf = name.split("/")
    snaps += [p for base in ms for p in modelscope_folders(base, org, leaf)]
    return next((f for f in map(config_file, snaps) if f is not None), None)


def repo_of(path: str) -> str | None:
    """The repo id a cache path names: Hugging Face's `models--<org>--<name>` (huggingface_hub file_download.py
    repo_folder_name) or ModelScope's hub `models/<org>--<name>` and SDK `models/<org>/<name with ___>`."""
    parts = Path(path).parts
    for i, p in enumerate(parts):
        if p.startswith("models--") and p.count("--") >= 2:
            return p[len("models--") :].replace("--", "/", 1)
        if p == "models" and i + 1 < len(parts) and "--" in parts[i + 1]:
            return parts[i + 1].replace("--", "/", 1)
        if p == "models" and i + 2 < len(parts) and "___" in parts[i + 2]:
            return f"{parts[i + 1]}/{parts[i + 2].replace('___', '.')}"
    return None
