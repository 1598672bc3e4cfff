"""Which checkpoint an export names for a model, and that checkpoint's names: the layer classes FSDP wraps and the
linear module names LoRA targets. A catalog config is the transformers-native one (the ModelSpec's fsdp_units and
linear names); a Hub id whose repository ships its own modeling code (checkpoints.json "remote", loaded with
trust_remote_code) builds other classes and modules, so a framework that loads that code must be written these.

Which code a framework loads is its Framework.remote_code (planner.frameworks): True, it loads the id the export
names with the repository's code (ms-swift); False, it loads transformers' classes only, so a model whose default id
is a remote-code checkpoint is named by its native conversion (checkpoints.json "native"); None, the export names the
catalog id with the native classes, as before this table (frameworks not read for this yet)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from planner.model.modelspec import ModelSpec
from planner.model.shapes import module_name_matches


@dataclass(frozen=True)
class Checkpoint:
    path: str  # what the export names the model by
    remote: bool  # built by the repository's own modeling code (trust_remote_code)
    layer_classes: tuple[str, ...]  # FSDP's units: transformer_layer_cls_to_wrap
    linears: frozenset[str]  # the language model's linear module names (LoRA targets)
    renames: dict[str, str] = field(default_factory=dict)  # memplan's (transformers') linear name -> the checkpoint's

    def lora_names(self, names: list[str]) -> list[str]:
        """The checkpoint's module names for LoRA targets named as transformers names them: each renamed where the
        checkpoint fuses or renames it (InternLM2's wqkv for q/k/v), kept where it is a linear of the checkpoint,
        duplicates dropped; `names` themselves where none is (the caller's own choice stays visible)."""
        out: list[str] = []
        for n in names:
            n = self.renames.get(n, n)
            if n not in out and any(module_name_matches(k, n) for k in self.linears):
                out.append(n)
        return out or names


@lru_cache(maxsize=1)
def _table() -> dict:
    return json.loads((Path(__file__).parent / "checkpoints.json").read_text())


def remote_ids() -> dict[str, dict]:
    """{Hub id: its checkpoints.json entry} of the remote-code checkpoints."""
    return _table()["remote"]


def transformers_names(model_id: str, names: list[str]) -> list[str]:
    """LoRA target names as a remote-code checkpoint `model_id` names its linears, as transformers (the catalog)
    names them: each of its fused or renamed linears is every linear it stands for (InternLM2's wqkv: q_proj, k_proj,
    v_proj); other names, and any id without its own code, unchanged. What a reader of an export gives back."""
    entry = remote_ids().get(model_id.strip().strip("/"))
    if entry is None:
        return names
    out: list[str] = []
    for n in names:
        for m in [k for k, v in entry["linears"].items() if v == n] or [n]:
            if m not in out:
                out.append(m)
    return out


def for_framework(model: ModelSpec, remote_code: bool | None) -> Checkpoint:
    """The checkpoint a framework that does (True) or does not (False) load a repository's own modeling code loads
    for `model`, named as the export writes it (module docstring)."""
    from planner.model.catalog import model_path

    path = model_path(model)
    native_id = _table()["native"].get(model.name)
    if remote_code is False and not model.source and native_id:
        path = native_id
    entry = remote_ids().get(path) if remote_code else None
    if entry is None:
        return Checkpoint(path, False, tuple(model.fsdp_units), frozenset(model.linear_names()))
    renames = dict(entry["linears"])
    linears = frozenset(renames.get(n, n) for n in model.linear_names())
    return Checkpoint(path, True, tuple(entry["layer_classes"]), linears, renames)
