"""Bundled data: model configs (HF config.json values) and the GPU table, read without torch."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from planner.config.spec import GPU
from planner.errors import BadInput, UnknownName
from planner.model.families import from_config
from planner.model.modelspec import ModelSpec

_DATA = Path(
    __file__
).parent  # the catalog's JSON beside this file (not importlib.resources: 5-10 ms of import on every cold start)


@lru_cache(maxsize=1)
def model_names() -> tuple[str, ...]:
    return tuple(sorted(p.name[:-5] for p in _DATA.joinpath("models").iterdir() if p.name.endswith(".json")))


def model_config(name: str) -> dict:
    """The bundled config.json of a catalog model (a copy: callers may change it)."""
    key = name.strip().lower()
    if key not in model_names():
        guess = closest(name, {n: n for n in model_names()})
        raise UnknownName(
            f"--model {name!r} is not a bundled model or a config path"
            + (f"; did you mean {guess}?" if guess else "")
            + f" (`planner models` lists all {len(model_names())})",
            "model",
        )
    return json.loads(_DATA.joinpath("models", key + ".json").read_text())


MAX_CONFIG_BYTES = 4 << 20  # a model's config.json is kilobytes (planner.intake.limits.MAX_FILE_BYTES alike)


def _read_config_file(path: Path) -> dict:
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():  # a regular file: no device, no pipe
        raise BadInput(f"model {str(path)!r}: no such config.json file or catalog name", "model")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise BadInput(
            f"model {str(path)!r}: config.json over {MAX_CONFIG_BYTES >> 20} MiB (a model's is kilobytes)", "model"
        )
    try:
        cfg = json.loads(path.read_text())
    except RecursionError:
        raise BadInput(f"model {str(path)!r}: config.json nests too deep to be a model's", "model") from None
    except (OSError, ValueError) as e:  # unreadable, not UTF-8, not JSON
        raise BadInput(f"model {str(path)!r}: malformed config.json ({e.__class__.__name__}: {e})", "model") from None
    if not isinstance(cfg, dict):
        raise BadInput(f"model {str(path)!r}: config.json must hold a JSON object", "model")
    return cfg


MAX_PATH_CHARS, MAX_NAME_CHARS = 4096, 255  # Linux PATH_MAX and NAME_MAX


def checked_path(text: str, field: str) -> Path:
    """A path given by a user: no NUL byte, no over-long name (BadInput naming the field, not an OS error)."""
    flag = "--" + field.replace("_", "-")
    if "\0" in text:
        raise BadInput(f"{flag} {text[:80]!r}: a path cannot hold a NUL byte", field)
    try:
        p = Path(text).expanduser()
    except RuntimeError:  # "~name" of no such user: pathlib cannot find a home directory
        raise BadInput(
            f"{flag} {text[:80]!r}: no such user's home directory (~user), catalog name or file", field
        ) from None
    if len(str(p)) > MAX_PATH_CHARS or any(len(part.encode()) > MAX_NAME_CHARS for part in p.parts):
        raise BadInput(
            f"{flag} {text[:80]!r}...: path or name too long ({MAX_PATH_CHARS} characters a path, "
            f"{MAX_NAME_CHARS} bytes a name)",
            field,
        )
    return p


def _name_of(p: Path) -> str:
    """A config file's model name: its folder's (its own without a config.json), or in the Hugging Face cache
    (`models--Org--Name/snapshots/<commit>/config.json`, huggingface_hub file_download.py:747-756) the repo id."""
    if p.name != "config.json":
        return p.name
    repo = p.parent.parent.parent.name
    if p.parent.parent.name == "snapshots" and repo.startswith("models--") and repo.count("--") >= 2:
        return repo[len("models--") :].replace("--", "/", 1)
    return p.parent.name


def load_model(ref: str) -> ModelSpec:
    """A catalog name, a path to a config.json, or a folder holding one."""
    if ref.strip().lower() in model_names():
        key = ref.strip().lower()
        return from_config(model_config(key), key)
    p = checked_path(ref, "model")
    if "/" in ref or ref.endswith(".json") or p.exists():
        spec = from_config(_read_config_file(p), _name_of(p))
        folder = str(Path(ref).parent) if ref.endswith(".json") else ref.rstrip("/") or "/"
        return replace(spec, source=folder)
    return from_config(model_config(ref), ref)  # model_config raises, with a did-you-mean


@lru_cache(maxsize=1)
def gpus() -> tuple[GPU, ...]:
    rows = json.loads(_DATA.joinpath("gpus.json").read_text())["gpus"]
    return tuple(GPU(**{**r, "aliases": tuple(r["aliases"])}) for r in rows)


def closest(name: str, choices: dict[str, str]) -> str | None:
    """The value of the key in `choices` spelled most like `name`, ignoring case and punctuation (so
    llama-3-8b finds llama-3.1-8b, h100-sxm-80gb finds h100-sxm5-80gb); None where none is close."""

    def bare(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", text.lower())

    keys = {bare(k): v for k, v in choices.items()}
    import difflib  # only for a name that is not in the catalog

    hit = difflib.get_close_matches(bare(name), keys, n=1)
    return keys[hit[0]] if hit else None


def gpu(name: str) -> GPU:
    """The catalog GPU named `name` (its name or an alias, any case, `_` or space for `-`); BadInput where an
    alias is shared by several kinds (`a100`: 40 or 80 GiB), never a silent pick; UnknownName where nothing has that
    name, with a did-you-mean only for a misspelling of a catalog name (gpu_typo), never a different card."""
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    hits = [g for g in gpus() if key == g.name or key in g.aliases]
    if len(hits) > 1:
        raise BadInput(
            f"--gpu {name!r} is ambiguous: " + " or ".join(f"{g.name} ({g.memory_mib / 1024:.0f} GiB)" for g in hits),
            "gpu",
        )
    if hits:
        return hits[0]
    guess = gpu_typo(key)
    named = f"; did you mean {guess} ({gpu(guess).memory_mib / 1024:.0f} GiB)?" if guess else ""
    raise UnknownName(
        f"--gpu {name!r} is not in the GPU catalog{named} (`planner gpus` lists all {len(gpus())}, or 'local')", "gpu"
    )


def gpu_typo(key: str) -> str | None:
    """The catalog GPU `key` misspells: a name or alias with the same model numbers (4090; 80 of 80gb) and letters
    close to its (h100-sxm-80gb: h100-80gb); None for another card (rtx4080, mi300x), whose numbers differ however
    alike the spelling."""
    numbers = re.findall(r"\d+", key)
    same = {n: g.name for g in gpus() for n in (g.name, *g.aliases) if re.findall(r"\d+", n) == numbers}
    letters = {re.sub(r"[^a-z]", "", n): g for n, g in same.items()}
    import difflib  # only for a name that is not in the catalog

    hit = difflib.get_close_matches(re.sub(r"[^a-z]", "", key), letters, n=1, cutoff=0.6)
    return letters[hit[0]] if hit and numbers else None


def gpus_json() -> dict:
    """The GPU catalog as `planner gpus --json` and GET /v1/gpus print it."""
    return {
        "gpus": [
            {**g.model_dump(), "capacity_bytes": g.capacity_bytes, "flash_attention_2": g.flash_attention_2}
            for g in gpus()
        ]
    }


def models_json() -> dict:
    """The bundled models' summaries, as `planner models --json` and GET /v1/models print them."""
    return {"models": [load_model(n).summary() for n in model_names()]}


def hf_id(name: str) -> str | None:
    """The Hugging Face id of a catalog model (hf_ids.json; the base model's where both are listed, never another
    model's that shares its shapes: same_architecture), for the exports' model field; None for a model outside the
    catalog."""
    other = _other_models()
    ids = [k for k, v in _hf_ids().items() if v == name and not k.startswith("NousResearch/") and k not in other]
    tuned = ("instruct", "chat", "-it")
    base = [k for k in ids if not any(t in k.lower() for t in tuned)]
    return (base or ids or [None])[0]


def model_path(model: ModelSpec) -> str:
    """What an export names the model by (--model_name_or_path, model.path, base_model): the folder the user named it
    by, else the Hugging Face id of a catalog model, else its name."""
    return model.source or hf_id(model.name) or model.name


@lru_cache(maxsize=1)
def _hf_ids() -> dict[str, str]:
    return json.loads(_DATA.joinpath("hf_ids.json").read_text())["models"]


@lru_cache(maxsize=1)
def _other_models() -> frozenset[str]:
    return frozenset(json.loads(_DATA.joinpath("hf_ids.json").read_text())["same_architecture"])
