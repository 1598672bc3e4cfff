"""A configuration's model name resolved offline, to what a request's `model` takes: a catalog name (directly, or a
Hugging Face / ModelScope id through planner/model/catalog/hf_ids.json), a local folder or file holding config.json,
or a snapshot in the local Hugging Face or ModelScope cache (caches.py), else with network access an `Org/Name` id's
config.json fetched from the Hub (hub.py); else a one-line BadInput asking for the config.json.
What the readers need from the config once found (its context length, its vision tower): modelconfig.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from planner.errors import BadInput
from planner.intake import caches, hub
from planner.intake.collect import Collector, assumption
from planner.intake.limits import OverLimit, load_json, read_config_text
from planner.model import catalog, prequant

CATALOG = Path(__file__).parents[1] / "model" / "catalog"  # hf_ids.json: the Hub ids of the bundled models


@dataclass(frozen=True)
class Model:
    ref: str  # the request's `model`: a catalog name or a config.json path
    config: dict  # its config.json (with the variant's own context length where hf_ids.json gives one)
    how: str  # how the name was resolved, for the Setting's source


@lru_cache(maxsize=1)
def _ids() -> tuple[dict[str, str], dict[str, int]]:
    data = json.loads((CATALOG / "hf_ids.json").read_text())
    return (
        {k.lower(): v for k, v in data["models"].items()},
        {k.lower(): v for k, v in data["max_position_embeddings"].items()},
    )


@lru_cache(maxsize=1)
def _spelled() -> dict[str, str]:
    """The ids as hf_ids.json spells them."""
    return json.loads((CATALOG / "hf_ids.json").read_text())["models"]


@lru_cache(maxsize=1)
def _other_models() -> frozenset[str]:
    """Ids (lower case) of other models with a catalog model's architecture and shapes (hf_ids.json same_architecture:
    Qwen/Qwen2-7B, DeepSeek-R1-Distill-Qwen-32B): said to have its architecture, never to be it."""
    return frozenset(k.lower() for k in json.loads((CATALOG / "hf_ids.json").read_text())["same_architecture"])


def _as_catalog(cat: str, hf_id: str) -> str:
    """What the id resolved to, for the Setting's source: `catalog model qwen2.5-7b` for its own ids (base, instruct,
    a mirror), `catalog model qwen2.5-7b's architecture` for another model sharing it (issue 47 item 4)."""
    return f"catalog model {cat}" + ("'s architecture" if _is_other(hf_id) else "")


def _is_other(hf_id: str) -> bool:
    return hf_id.lower() in _other_models()


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[str, str], dict[str, str]]:
    """(ms-swift 2.x model_type -> its Hub id, refused Hub id (lower case) -> the line naming what memplan lacks)."""
    data = json.loads((CATALOG / "hf_ids.json").read_text())
    return data["swift_model_types"], {k.lower(): v for k, v in data["refused"].items()}


def refuse_uncounted(name: str) -> None:
    """A one-line BadInput for a Hub id memplan knows and does not count (hf_ids.json "refused"), instead of asking
    which model it is."""
    reason = _tables()[1].get(name.strip().strip("/").lower())
    if reason:
        raise BadInput(f"model {name.strip()!r}: {reason}", "model")


def hf_id_of(name: str) -> tuple[str, str] | None:
    """(catalog name, the id as the table spells it) of a Hugging Face id, any case."""
    refuse_uncounted(name)
    ids, _ = _ids()
    hit = ids.get(name.strip().strip("/").lower())
    return (hit, name.strip().strip("/")) if hit else None


def _from_catalog(name: str, hf_id: str | None, how: str) -> Model:
    cfg = catalog.model_config(name)
    context = _ids()[1].get((hf_id or "").lower())
    if context:
        cfg["max_position_embeddings"] = context
    return Model(name, cfg, how)


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
    return next((f for f in map(caches.config_file, places) if f is not None), None)


def _by_cache_layout(name: str) -> Model | None:
    """A path into a Hugging Face or ModelScope cache that is not here (`.../models--Qwen--Qwen2.5-VL-7B-Instruct/
    snapshots/<sha>`, `.../modelscope/hub/models/Qwen/Qwen2___5-VL-7B-Instruct`): the id its folder names."""
    repo_id = caches.repo_of(name)
    if repo_id is None:
        return None
    if hit := hf_id_of(repo_id):
        return _from_catalog(
            hit[0],
            hit[1],
            assumption(
                f"{name} is not on this machine; it is {hit[1]}'s cache folder"
                + (f", {_as_catalog(*hit)}" if _is_other(hit[1]) else "")
            ),
        )
    cached = caches.cached(repo_id)
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


# the folders a fine-tuning run writes under its output folder: the HF Trainer's checkpoint-<step>
# (transformers trainer_utils.py PREFIX_CHECKPOINT_DIR) and ms-swift's v<n>-<date>-<time> (swift/utils/utils.py:132-143)
RUN_FOLDERS = re.compile(r"checkpoint-\d+|v\d+-\d{8}-\d{6}")


def _refuse_folder(name: str, leaf: str) -> None:
    """A folder named after a refused model (its id's name, or that name without its size: internlm-xcomposer2d5),
    refused before a framework's model_type can stand in for it with another model's shapes."""
    for hf, reason in _tables()[1].items():
        if leaf and leaf in (stem := hf.rpartition("/")[2], re.sub(r"-\d+(?:\.\d+)?b$", "", stem)):
            raise BadInput(f"model {name.strip()!r} (its folder's name): {reason}", "model")


def _sizeless(leaf: str) -> list[tuple[str, str]]:
    """(catalog model, id) of the ids released in one size alone (hf_ids.json one_size) whose name without that size
    is `leaf` (internlm-xcomposer2d5 for internlm/internlm-xcomposer2d5-7b, as _refuse_folder reads a refused one)."""
    one = json.loads((CATALOG / "hf_ids.json").read_text())["one_size"]
    return sorted(
        (_spelled()[hf], hf)
        for hf in one
        if leaf and re.sub(r"-\d+(?:\.\d+)?b$", "", (stem := hf.rpartition("/")[2].lower())) == leaf != stem
    )


def _by_folder_name(name: str) -> Model | None:
    """A local path that is not here, whose last part names a known id (`/data/models/Qwen2.5-VL-3B-Instruct`, or
    with its organisation: `/data/Qwen-Qwen2.5-VL-3B-Instruct`), or a checkpoint a run wrote under a folder that
    does (`.../Qwen2.5-7B-Instruct/v0-20250101-120000/checkpoint-500`: a fine-tune keeps its base's architecture)."""
    if found := _by_cache_layout(name):
        return found
    parts = Path(name.rstrip("/")).parts
    run = []
    while len(parts) > 1 and RUN_FOLDERS.fullmatch(parts[-1]):
        run, parts = [parts[-1], *run], parts[:-1]
    leaf = parts[-1].lower().replace("___", ".") if parts else ""  # ModelScope writes a name's dots as ___
    _refuse_folder(name, leaf)
    hits = sorted((cat, hf) for hf, cat in _spelled().items() if leaf in _folder_names(hf))
    sized = not hits
    if sized:  # a one-size model's folder named without its size: one such id, never a choice among several
        hits = found if len(found := _sizeless(leaf)) == 1 else []
    if not leaf or not hits:
        return None
    cat, hf = hits[0]
    whose = f"{hf}'s without its size, the only one it is released in" if sized else f"{hf}'s"
    what = f"a checkpoint ({'/'.join(run)}) of a run over {hf}" if run else f"its folder name is {whose}"
    return _from_catalog(cat, hf, assumption(f"{name} is not on this machine; {what}, {_as_catalog(cat, hf)}"))


def lookup(name: str, near: Path | None = None, fetch: bool = True) -> Model | None:
    """The model a configuration names, or None where memplan cannot find its config (offline, then, where `fetch`
    and hub.py allow, on the Hugging Face Hub)."""
    name = str(name).strip()
    if not name:
        return None
    if name.lower() in catalog.model_names():
        return _from_catalog(name.lower(), None, "catalog model")
    local = _local(name, near)  # a folder of that name wins, as in from_pretrained
    if local is not None and (cfg := _load(local)) is not None:
        return Model(str(local), cfg, f"local config.json {local}")
    if hit := hf_id_of(name):
        verb = "has" if _is_other(hit[1]) else "is"
        return _from_catalog(hit[0], hit[1], f"{hit[1]} {verb} {_as_catalog(*hit)}")
    cached = caches.cached(name)
    if cached is not None and (cfg := _load(cached)) is not None:
        return Model(str(cached), cfg, hub.fetched_how(cached) or f"cached config.json {cached}")
    return _by_folder_name(name) or _quantized(name, near) or (_fetched(name) if fetch else None)


def by_id(name: str) -> Model | None:
    """A Hugging Face id alone, reading nothing on this machine but the Hub's cache: the catalog's ids, a quantized
    id's base, then the Hub where hub.py allows it (the API's `model`, which must not name the server's folders)."""
    if hit := hf_id_of(name):
        verb = "has" if _is_other(hit[1]) else "is"
        return _from_catalog(hit[0], hit[1], f"{hit[1]} {verb} {_as_catalog(*hit)}")
    cataloged = _quantized(name, None, lambda base: (hit := hf_id_of(base)) and _from_catalog(*hit, ""))
    return cataloged or (_fetched(name) if hub.is_repo_id(name) else None)


def _fetched(name: str) -> Model | None:
    """An `Org/Name` id found nowhere here: its config.json from the Hub (hub.fetch), read as a local one is."""
    got = hub.fetch(name)
    if got is None or (cfg := _load(got.path)) is None:
        return None
    return Model(str(got.path), cfg, got.how)


def _quantized(name: str, near: Path | None, find=None) -> Model | None:
    """A quantized checkpoint's id not on this machine (`Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4`): its base's config with
    the quantization_config its name implies (planner.model.prequant.split_name). Its base is looked up here only
    (`find`, lookup's offline search by default): where it is not, the quantized id's own config.json (hub.py) says
    more than its name."""
    prequant.unplanned_by_name(name)  # an AQLM id: refused in one line, whatever its base
    split = prequant.split_name(name)
    base = (find or (lambda b: lookup(b, near, fetch=False)))(split[0]) if split else None
    if base is None:
        return None
    cfg = {**base.config, "quantization_config": split[1]}
    how = assumption(f"{name} is {split[0]} quantized ({split[1]['quant_method']}), as its name says")
    return Model(name, cfg, how)


def resolve(name: str, near: Path | None = None) -> str:
    """A request's `model` for the name a configuration gives; BadInput saying how to pass it where not found."""
    found = lookup(name, near)
    if found is None and (refused := hub.refusal(name)):
        raise refused
    if found is None:
        raise BadInput(
            f"which model is {name!r}? it is not a catalog model, a known Hugging Face id, a local folder with a "
            f"config.json or in the local Hugging Face cache{hub.clause(name)}: give --model PATH (its config.json) or "
            f"--model NAME (a catalog model with its shapes: planner models)",
            "model",
        )
    return found.ref


def by_model_type(model_type: str, source: str) -> Model | None:
    """The model an ms-swift 2.x --model_type names (the Hub id its registry loads, hf_ids.json swift_model_types),
    for a model path that does not resolve; a refused id is refused in one line."""
    hub = _tables()[0].get(model_type.strip())
    found = lookup(hub) if hub else None
    if found is None:
        return None
    return Model(found.ref, found.config, assumption(f"not found offline; {source} loads {hub}: {found.how}"))


def read_model(
    c: Collector, name: str, source: str, key: str, near: Path | None, model_type: tuple[str, str] | None = None
) -> None:
    """The configuration's model into the reading: its catalog name or config path where found, else the model its
    framework's `model_type` (value, source) names, else the name as given (a check of it then says to pass the
    config.json)."""
    try:
        found = lookup(name, near) or (by_model_type(*model_type) if model_type else None)
    except BadInput:  # a model memplan does not count: refused, unless the caller gives the model (the last word)
        if given_model() is None:
            raise
        found = None
    c.model = given_model() or found  # the fields that need the model take the final one, whoever gave it
    c.fact("model_id", name, source, key)  # the id as written: a remote-code checkpoint names its own modules
    if found is None:
        c.set("model", name, f"{source} (not found offline: pass its config.json with --model PATH)", key)
    else:
        c.set("model", found.ref, f"{source} ({found.how})", key)


def given_model() -> Model | None:
    """The model the caller gives beside the files (check --config --model: collect.GIVEN_FIELDS), resolved as the
    files' name is; None where none is given or it is not found (check then refuses it in one line). Issue 47 item 4:
    the fields that need the model (pixel caps, freeze switches, LoRA on the tower) are settled with the model that is
    planned, whoever gave it."""
    from planner.intake.collect import GIVEN_FIELDS

    given = GIVEN_FIELDS.get().get("model")
    return lookup(given) if isinstance(given, str) and given else None
