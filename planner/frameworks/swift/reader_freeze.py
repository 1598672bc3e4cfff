"""ms-swift's full fine-tuning with frozen parameters (--tuner_type full with --freeze_parameters_ratio,
--freeze_parameters, --trainable_parameters and their regexes), read at v4.5.2 (github.com/modelscope/ms-swift;
the same flags since v3.0.0 swift/llm/argument/tuner_args.py:102-104): swift/pipelines/train/tuner.py:403-409 makes
every parameter trainable, freezes the first ratio of them in named_parameters' order and every parameter whose name
starts with a --freeze_parameters prefix (swift/utils/transformers_utils.py:70-99), then unfreezes every parameter
whose name starts with a --trainable_parameters prefix (:101-112). Whatever the precision, every weight keeps the
model's --torch_dtype (no upcast of the trained ones: tuner.py:403-409).

Planned as freeze tuning (--trained-layers N) where the trained parameters are exactly the last N decoder layers of a
text model: every parameter frozen (--freeze_parameters_ratio 1) and --trainable_parameters naming the layers
(model.layers.I.). Any other split (a ratio under 1 trains the final norm and the head beside the top layers; a
regex) is refused in one line; the first N layers (model.layers.0. .. N-1.) as --trained-layout first.

LLaMA-Pro (--tuner_type llamapro, 3.x --train_type; read_llamapro): N new blocks inserted at load, one after every
layers/N layers, the new ones trained and every other parameter frozen (planner.estimate.freeze.expanded_model, read
at 4.6.0 swift/tuners/llamapro.py and v3.0.0's): --trained-layers N --trained-layout inserted."""

from __future__ import annotations

import re

from planner.frameworks.swift.keys import KEYS
from planner.frameworks.swift.reader_rl import get
from planner.intake import tuners
from planner.intake.collect import Collector, as_float, as_names, one
from planner.intake.flags import Flag

FLAGS = ("freeze_parameters_ratio", "freeze_parameters", "trainable_parameters")
REGEXES = ("freeze_parameters_regex", "trainable_parameters_regex")
LAYER = re.compile(r"^model\.layers\.(\d+)\.?$")


def trained_layers(prefixes: list[str], layers: int) -> set[int] | None:
    """The decoder layers --trainable_parameters' prefixes unfreeze (a prefix model.layers.2 reaches 20-29 too:
    names are matched with startswith), or None where a prefix names anything else."""
    out: set[int] = set()
    for p in prefixes:
        if not LAYER.match(p):
            return None
        out |= {i for i in range(layers) if f"model.layers.{i}.".startswith(p)}
    return out


def read_freeze(c: Collector, f: dict[str, Flag]) -> None:
    """--tuner_type full's freezing flags -> trained_layers, or a one-line refusal."""
    given = [k for k in FLAGS + REGEXES if k in f and one(f[k].value) not in (None, "", [], "0", "0.0", 0)]
    if not given:
        return
    first = f[given[0]].source
    for k in REGEXES:
        if k in given:
            tuners.refuse(f[k].source, "parameters frozen or trained by a regex")
    ratio = as_float(one(f["freeze_parameters_ratio"].value)) if "freeze_parameters_ratio" in f else 0.0
    if ratio != 1.0 or "trainable_parameters" not in f:
        tuners.refuse(first, "a share of the parameters frozen from the bottom (the final norm and head trained)")
    cfg = c.model.config if c.model is not None else {}
    layers = int((cfg.get("text_config") or cfg).get("num_hidden_layers") or 0)  # the model's config.json
    trained = trained_layers(as_names(f["trainable_parameters"].value), layers)
    src = f["trainable_parameters"].source
    bottom = bool(trained) and trained == set(range(len(trained))) and len(trained) < layers
    if not trained or (trained != set(range(layers - len(trained), layers)) and not bottom):
        tuners.refuse(src, "trainable parameters other than the last or the first decoder layers (model.layers.I.)")
    c.number("trained_layers", len(trained), f"{first}; {src}", "--" + KEYS.key("trained_layers"))
    if bottom:
        c.set("trained_layout", "first", src, "--" + KEYS.key("trained_layers"))


def read_llamapro(c: Collector, f: dict[str, Flag], src: str, key: str) -> None:
    """--llamapro_num_new_blocks N (4 by default) -> --trained-layers N --trained-layout inserted. Its groups, where
    they differ from N, decide how many blocks go in (one after every layers // groups: llamapro.py:61, :90) and are
    refused in one line."""
    row = KEYS["llamapro_blocks"]
    n, nsrc = get(f, row.key, row.default, row.cite)
    groups = f.get(KEYS.key("llamapro_groups"))
    if groups is not None and one(groups.value) not in (None, "None", "none") and str(one(groups.value)) != str(n):
        tuners.refuse(groups.source, f"LLaMA-Pro's new blocks in {one(groups.value)} groups, not one a block")
    c.number("trained_layers", n, f"{nsrc}; {src}", f"--{row.key}")
    c.set("trained_layout", "inserted", src, key)
