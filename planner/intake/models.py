"""A configuration's model name resolved offline, to what a request's `model` takes: a catalog name (directly, or a
Hugging Face / ModelScope id through planner/model/catalog/hf_ids.json), a local folder or file holding config.json,
or a snapshot in the local Hugging Face or ModelScope cache; else a one-line BadInput asking for the config.json.
Also what the readers need from the config: its context length, its vision tower and the image-token size.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from planner.errors import BadInput
from planner.intake.collect import Collector, assumption, is_dir, is_file
from planner.intake.limits import OverLimit, load_json, read_config_text
from planner.model import catalog


@dataclass(frozen=True)
class Model:
    ref: str  # the request's `model`: a catalog name or a config.json path
    config: dict  # its config.json (with the variant's own context length where hf_ids.json gives one)
    how: str  # how the name was resolved, for the Setting's source


@lru_cache(maxsize=1)
def _ids() -> tuple[dict[str, str], dict[str, int]]:
    data = json.loads(resources.files("planner.model.catalog").joinpath("hf_ids.json").read_text())
    return (
        {k.lower(): v for k, v in data["models"].items()},
        {k.lower(): v for k, v in data["max_position_embeddings"].items()},
    )


@lru_cache(maxsize=1)
def _spelled() -> dict[str, str]:
    """The ids as hf_ids.json spells them."""
    return json.loads(resources.files("planner.model.catalog").joinpath("hf_ids.json").read_text())["models"]


def hf_id_of(name: str) -> tuple[str, str] | None:
    """(catalog name, the id as the table spells it) of a Hugging Face id, any case."""
    ids, _ = _ids()
    hit = ids.get(name.strip().strip("/").lower())
    return (hit, name.strip().strip("/")) if hit else None


def _from_catalog(name: str, hf_id: str | None, how: str) -> Model:
    cfg = catalog.model_config(name)
    context = _ids()[1].get((hf_id or "").lower())
    if context:
        cfg["max_position_embeddings"] = context
    return Model(name, cfg, how)


def _config_file(path: Path) -> Path | None:
    p = path / "config.json" if is_dir(path) else path
    return p if is_file(p) and p.name.endswith(".json") else None


def _load(path: Path) -> dict | None:
    try:
        cfg = load_json(read_config_text(path), path)
    except OverLimit:
        raise
    except (OSError, ValueError):
        return None
    return cfg if isinstance(cfg, dict) else None


def _local(name: str, near: Path | None) -> Path | None:
    try:
        p = Path(name).expanduser()
    except RuntimeError:  # "~user" of no such user: no folder of that name (catalog.checked_path names the error)
        return None
    places = [p] if p.is_absolute() else [d / p for d in ([near] if near else []) + [Path.cwd()]]
    return next((f for f in map(_config_file, places) if f is not None), None)


def cache_dirs() -> list[Path]:
    """Where Hugging Face and ModelScope keep downloaded models (HF_HUB_CACHE, HF_HOME, MODELSCOPE_CACHE)."""
    env = os.environ
    hf = env.get("HF_HUB_CACHE") or (str(Path(env["HF_HOME"]) / "hub") if env.get("HF_HOME") else None)
    xdg = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    ms = env.get("MODELSCOPE_CACHE") or str(xdg / "modelscope" / "hub")
    return [Path(hf) if hf else xdg / "huggingface" / "hub", Path(ms)]


def _cached(name: str) -> Path | None:
    """config.json of `Org/Name` in the Hugging Face cache (refs/main's snapshot, else the newest) or ModelScope's."""
    if name.count("/") != 1 or name.startswith((".", "/", "~")):
        return None
    hf, ms = cache_dirs()
    repo = hf / ("models--" + name.replace("/", "--"))
    ref = repo / "refs" / "main"
    try:
        snaps = [repo / "snapshots" / read_config_text(ref).strip()] if is_file(ref) else []
        if is_dir(repo / "snapshots"):
            snaps += sorted((repo / "snapshots").iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:  # an unreadable cache is no cache
        snaps = []
    snaps += [ms / "models" / name, ms / name]
    return next((f for f in map(_config_file, snaps) if f is not None), None)


def _by_cache_layout(name: str) -> Model | None:
    """A path into a Hugging Face cache that is not here (`.../models--Qwen--Qwen2.5-VL-7B-Instruct/snapshots/<sha>`,
    the layout huggingface_hub writes: file_download.py repo_folder_name): the id its folder names."""
    part = next((p for p in Path(name).parts if p.startswith("models--") and p.count("--") >= 2), None)
    if part is None:
        return None
    repo_id = part[len("models--") :].replace("--", "/", 1)
    if hit := hf_id_of(repo_id):
        return _from_catalog(
            hit[0], hit[1], assumption(f"{name} is not on this machine; it is {hit[1]}'s cache folder")
        )
    cached = _cached(repo_id)
    if cached is not None and (cfg := _load(cached)) is not None:
        return Model(str(cached), cfg, f"cached config.json {cached} ({name} is {repo_id}'s cache folder)")
    return None


# How a folder joins an id's organisation and name when it keeps both (`Qwen-Qwen2.5-VL-7B-Instruct`,
# `Qwen.Qwen2.5-VL-7B-Instruct`, `Qwen_Qwen2.5-VL-7B-Instruct`): what users' download scripts write
ORG_JOINS = ("-", ".", "_")


def _folder_names(hf: str) -> set[str]:
    """The folder names a download of `hf` goes by: its name, or its organisation joined to it."""
    org, _, leaf = hf.lower().rpartition("/")
    return {leaf} | ({f"{org}{j}{leaf}" for j in ORG_JOINS} if org else set())


def _by_folder_name(name: str) -> Model | None:
    """A local path that is not here, whose last part names a known id (`/data/models/Qwen2.5-VL-3B-Instruct`, or
    with its organisation: `/data/Qwen-Qwen2.5-VL-3B-Instruct`)."""
    if found := _by_cache_layout(name):
        return found
    leaf = Path(name.rstrip("/")).name.lower()
    hits = sorted((cat, hf) for hf, cat in _spelled().items() if leaf in _folder_names(hf))
    if not leaf or not hits:
        return None
    cat, hf = hits[0]
    return _from_catalog(
        cat, hf, assumption(f"{name} is not on this machine; its folder name is {hf}'s, catalog model {cat}")
    )


def lookup(name: str, near: Path | None = None) -> Model | None:
    """The model a configuration names, or None where memplan cannot find its config offline."""
    name = str(name).strip()
    if not name:
        return None
    if name.lower() in catalog.model_names():
        return _from_catalog(name.lower(), None, "catalog model")
    local = _local(name, near)  # a folder of that name wins, as in from_pretrained
    if local is not None and (cfg := _load(local)) is not None:
        return Model(str(local), cfg, f"local config.json {local}")
    if hit := hf_id_of(name):
        return _from_catalog(hit[0], hit[1], f"{hit[1]} is catalog model {hit[0]}")
    cached = _cached(name)
    if cached is not None and (cfg := _load(cached)) is not None:
        return Model(str(cached), cfg, f"cached config.json {cached}")
    return _by_folder_name(name)


def resolve(name: str, near: Path | None = None) -> str:
    """A request's `model` for the name a configuration gives; BadInput saying how to pass it where not found."""
    found = lookup(name, near)
    if found is None:
        raise BadInput(
            f"model {name!r} is not a catalog model, a known Hugging Face id, a local folder with a "
            f"config.json or in the local Hugging Face cache: pass its config.json (--model PATH)",
            "model",
        )
    return found.ref


def read_model(c: Collector, name: str, source: str, key: str, near: Path | None) -> None:
    """The configuration's model into the reading: its catalog name or config path where found, else the name as
    given (a check of it then says to pass the config.json)."""
    found = lookup(name, near)
    c.model = found
    c.fact("model_id", name, source, key)  # the id as written: a remote-code checkpoint names its own modules
    if found is None:
        c.set("model", name, f"{source} (not found offline: pass its config.json with --model PATH)", key)
    else:
        c.set("model", found.ref, f"{source} ({found.how})", key)


# -- what the readers need from the config --------------------------------------------------------------------------
def text_config(cfg: dict) -> dict:
    return cfg.get("text_config") or cfg.get("llm_config") or cfg


def context(cfg: dict) -> int | None:
    """The model's context as ms-swift reads it: the least of its length keys (swift/utils/hf_config.py:127-149)."""
    keys = (
        "seq_length",
        "max_position_embeddings",
        "n_positions",
        "model_max_length",
        "seq_len",
        "max_seq_len",
        "max_sequence_length",
        "max_seq_length",
    )
    found = [v for c in (cfg, text_config(cfg)) for k in keys if isinstance(v := c.get(k), int) and v > 0]
    return min(found) if found else None


def has_vision(cfg: dict) -> bool:
    return isinstance(cfg.get("vision_config"), dict)


def pixels_per_token(cfg: dict) -> int | None:
    """Pixels per image token of a tower that merges patches spatially within a pixel budget (the Qwen-VL processors'
    max_pixels): (patch x spatial merge)^2, 28^2 with 14-pixel patches, 32^2 with 16; None for other towers, whose
    tokens do not follow the pixel budget."""
    v = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), dict) else {}
    patch, merge = v.get("patch_size") or v.get("spatial_patch_size"), v.get("spatial_merge_size")
    return (patch * merge) ** 2 if isinstance(patch, int) and isinstance(merge, int) else None


def frozen_value(tower: bool, projector: bool, language: bool) -> tuple[str, str | None]:
    """Knobs.frozen for a framework's three freeze switches, and a note where the plan cannot say them exactly."""
    if language:
        if projector:
            return (
                "language+vision",
                "a frozen projector beside a frozen language model is not planned; planned trained",
            )
        return ("language+vision" if tower else "language"), None
    if projector and not tower:
        return "none", "a frozen projector beside a trained tower is not planned; planned with both trained"
    return ("vision+projector" if projector else "vision") if tower else "none", None
