"""Issue 47 item 9, nothing dropped: every fixture a reader reads (the field corpus, tests/field/*, and the framework
files under tests/data/frameworks) is read, and each memory-relevant key written in its files is either a Setting of
the reading (taken from the file, not a default) or named in a `not planned:` line.

The memory-relevant keys are not restated here: they are the keys memplan's framework adapters write
(planner.frameworks: Framework.keys and each Release's) and the readers' own key tables (the keys they plan, default or
name as unplanned)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from planner import intake
from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS
from planner.frameworks.axolotl import reader as axolotl
from planner.frameworks.axolotl import reader_task as axolotl_task
from planner.frameworks.hf import reader as hfargs
from planner.frameworks.llamafactory import reader as llamafactory
from planner.frameworks.openrlhf import reader as openrlhf
from planner.frameworks.openrlhf.keys import KEYS as OPENRLHF_KEYS
from planner.frameworks.openrlhf.lmmr1 import SIGNS as LMM_R1
from planner.frameworks.swift.reader_media import LIMIT as SWIFT_LIMIT
from planner.frameworks.trl import reader_vlmr1 as vlmr1
from planner.frameworks.verl.keys import KEYS as VERL_KEYS
from planner.frameworks.verl.keys_sft import TABLES as VERL_SFT
from planner.frameworks.verl.reader_media import LIMITS as VERL_LIMITS
from planner.intake import configs, launch, scriptargs
from planner.intake.collect import is_default
from planner.intake.flags import norm
from planner.intake.flags import parse as parse_flags
from planner.intake.shell import read_script

ROOT = Path(__file__).resolve().parents[3]
FIELD = ROOT / "tests" / "field"
DATA = ROOT / "tests" / "data" / "frameworks"
_KEY = re.compile(r"-{0,2}[A-Za-z_][\w.]*")


def adapter_fields(name: str) -> dict[str, set[str]]:
    """The framework's own keys its adapter writes ("bf16 / pure_bf16", "--use_liger_kernel (fused), ..."), each with
    the memplan fields it writes them for (the table read the other way)."""
    fw, out = FRAMEWORKS[name], {}
    pairs = [*fw.keys.items(), *(kv for r in fw.releases for kv in r.keys.items())]
    for field, text in pairs:
        for part in re.split(r"\s*/\s*|,\s*", text):
            token = part.split(" (")[0].strip()
            if _KEY.fullmatch(token):
                out.setdefault(_n(token), set()).add(field)
    return out


def _n(key: str) -> str:
    return norm(key).lower().lstrip("+")  # a Hydra override's "+" adds a key absent from the config (verl)


def defaulted(table) -> set[str]:
    """The keys a framework's key table gives a default (planner.frameworks.keys): those its reader plans unset."""
    return {row.key for row in table.rows.values() if row.cite}


HF_TABLES = (hfargs.SEQ_KEYS, hfargs.TRL_KEYS, scriptargs.KEYS, vlmr1.DEFAULTS)
READER_TABLES = {  # a reader's own key tables: the keys it plans, defaults or names as unplanned
    "hf": HF_TABLES,
    "trl": HF_TABLES,
    "llamafactory": (llamafactory.UNPLANNED,),
    "axolotl": (axolotl.UNPLANNED, axolotl_task.NAMED),
    "verl": (
        defaulted(VERL_KEYS),
        VERL_LIMITS,
        {f"{VERL_LIMITS[2]}.{m}" for m in ("video", "audio")},
        *(defaulted(t) for t in VERL_SFT.values()),  # its SFT trainers' keys (verl/keys_sft.py)
    ),
    # vLLM's limit_mm_per_prompt: LMM-R1's flag (read as openrlhf@lmm-r1), ms-swift's colocated rollout's
    "openrlhf": (defaulted(OPENRLHF_KEYS), openrlhf.OLD, openrlhf.OLD.values(), {"limit_mm_per_prompt"} & set(LMM_R1)),
    "swift": ({SWIFT_LIMIT},),
}
# the model (models.read_model resolves it or says why not) and the data set by name (item 6: the rows decide)
NOT_MEMORY = {"model", "model_name_or_path", "base_model", "model.path", "actor.model_name_or_path", "pretrain"}
NOT_MEMORY |= {"dataset_name", "model_id_or_path"}  # ms-swift 2.x's name of --model
# OpenRLHF's data, output folder and KL estimator (its key table names them for the flat-flag writer: keys.py)
NOT_MEMORY |= {"data.dataset", "data.prompt_dataset", "ckpt.output_dir", "algo.kl.estimator"}
NOT_MEMORY |= {"dataset", "prompt_data", "save_path", "kl_estimator"}


# OpenRLHF's DPO entry point: its own defaults, and the flat names of those
DPO_TABLES = (openrlhf.DPO_DEFAULTS, {k for k, v in openrlhf.DPO_OLD.items() if v in openrlhf.DPO_DEFAULTS})


def memory_keys(kind: str, workload: str) -> frozenset[str]:
    """The memory-relevant keys of a file read as `kind` (a framework name) for a `workload` (sft, dpo, grpo, ...)."""
    tables = DPO_TABLES if kind == "openrlhf" and workload == "dpo" else READER_TABLES.get(kind, ())
    keys = set(adapter_fields(kind)) if kind in FRAMEWORKS else set()
    grpo = {_n(k) for k in hfargs.GRPO_KEYS} if kind in ("hf", "trl") and workload != "grpo" else set()  # DPO's beta
    return frozenset((keys | {_n(k) for table in tables for k in table}) - NOT_MEMORY - grpo)


# -- the keys written in a fixture's files ----------------------------------------------------------------------
# values that set nothing to plan: DeepSpeed's "auto" (the trainer's value fills it), off, unset
NOTHING = {"auto", "none", "null", "false", "no", ""}


def _leaves(data: object, prefix: str = "") -> dict[str, object]:
    """A config's keys, nested ones dotted, each with its value (a section: whether any value under it sets
    something)."""
    if not isinstance(data, dict):
        return {}
    out = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        below = _leaves(v, key + ".")
        out |= below
        out[key] = (_sets(v) and any(_sets(x) for x in below.values())) if isinstance(v, dict) else v
    return out


def _sets(value: object) -> bool:
    if isinstance(value, dict) and "device" in value:  # DeepSpeed's offload sections are off with device none
        return _sets(value["device"])
    return value is not None and value is not False and str(value).strip().lower() not in NOTHING


def _written(path: Path) -> set[str]:
    """The keys a file sets (to something other than NOTHING): a config's keys, a launch script's training
    commands' flags and their environment prefixes."""
    if path.suffix in (".yaml", ".yml", ".json"):
        try:
            data = configs.load(path)
        except BadInput:
            return set()
        return {_n(k) for k, v in _leaves(data).items() if _sets(v)}
    if path.suffix == ".py":  # a training script's own defaults: scriptargs reads them, not the user
        return set()
    keys = set()
    for run in launch.runs(read_script(path)):
        flags, lead = parse_flags(run.args, run.command.path)
        keys |= {k for k, f in flags.items() if _sets(f.value)}
        keys |= {w.text.split("=")[0] for w in lead if "=" in w.text and _sets(w.text.split("=", 1)[1])}
        keys |= {k for k, v in run.command.prefix.items() if _sets(v)}
    return {_n(k) for k in keys}


def _fixtures() -> list[tuple[str, list[Path]]]:
    out = []
    for toml in sorted(FIELD.glob("*/run.toml")):
        import tomllib

        meta = tomllib.loads(toml.read_text())
        out.append((f"field/{toml.parent.name}", [toml.parent / f for f in meta["files"]]))
    for path in sorted(DATA.rglob("*")):
        if path.suffix in (".sh", ".yaml", ".yml", ".json"):
            out.append((str(path.relative_to(DATA)), [path]))
    return out


FIXTURES = _fixtures()


def _kind(path: Path, reading) -> str:
    """The framework a file is read as: a config's format (an HF-keys file as the reading's hf or trl), else the
    reading's (a launch script)."""
    if path.suffix in (".yaml", ".yml", ".json"):
        try:
            fmt = configs.kind(configs.load(path))
        except BadInput:
            fmt = None
        if fmt is not None and fmt != "hf":
            return fmt
    return reading.framework


def _said(reading) -> list[str]:
    """What the reading says it took from the files (each Setting's key and source, less the parts that cite a
    default) and every unplanned line."""
    took = [s.key for s in reading.settings]
    took += [part for s in reading.settings for part in s.source.split("; ") if not is_default(part)]
    return took + reading.unplanned


def _covered(key: str, said: list[str], reading, kind: str, path: Path) -> bool:
    """Named in what the reading says, or a Setting taken from this file of a field the adapter writes the key for
    (accelerate's fsdp_config is the `fsdp` setting its reader summarizes)."""
    fields = adapter_fields(kind).get(key, set()) if kind in FRAMEWORKS else set()
    parts = [(s.field, part) for s in reading.settings for part in s.source.split("; ")]
    if any(field in fields and path.name in part and not is_default(part) for field, part in parts):
        return True
    name = "[-_]".join(map(re.escape, key.split("_")))  # --max-length is --max_length
    word = re.compile(rf"(?<![\w.-])-{{0,2}}{name}(?![\w-])", re.IGNORECASE)
    return any(word.search(text) for text in said)


def dropped(files: list[Path]) -> tuple[set[str], set[str]]:
    """(the memory-relevant keys the files write, those of them neither planned nor named); a refusal in one line
    drops nothing."""
    try:
        reading = intake.read([str(f) for f in files])
    except BadInput as e:  # refused in one line: nothing is planned silently
        assert "\n" not in str(e)
        return set(), set()
    said, written, out = _said(reading), set(), set()
    read = [Path(p) for p in reading.files if "presets" not in Path(p).parts]
    for f in dict.fromkeys([*files, *read]):
        if f.is_file():
            kind = _kind(f, reading)
            keys = memory_keys(kind, (reading.request.get("workload") or {}).get("kind", "sft"))
            written |= _written(f) & keys
            out |= {k for k in _written(f) & keys if not _covered(k, said, reading, kind, f)}
    return written, out


@pytest.mark.parametrize(("name", "files"), FIXTURES, ids=[n for n, _ in FIXTURES])
def test_every_memory_relevant_key_is_planned_or_named(name, files):
    left = dropped(files)[1]
    assert not left, f"{name}: {sorted(left)} neither planned nor named"


VL = "Qwen/Qwen2.5-VL-3B-Instruct"
VERL = f"python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo actor_rollout_ref.model.path={VL} "
LIMITED = {  # vLLM's limit_mm_per_prompt, a video and an audio key beside the images (planner.frameworks.mmlimit)
    "verl": (
        (
            f"{VERL}+data.mm_processor_kwargs.min_pixels=3136 +data.mm_processor_kwargs.max_pixels=401408 "
            "actor_rollout_ref.rollout.limit_images=2 +actor_rollout_ref.rollout.engine_kwargs.vllm.limit_mm_per_prompt."
            "video=1"
        ),
        {"actor_rollout_ref.rollout.limit_images", VERL_LIMITS[2] + ".video"},
    ),
    # no pixel bounds: the images at verl's own cap (reader_media.own_bounds), the limit their count
    "verl-own-cap": (f"{VERL}actor_rollout_ref.rollout.limit_images=2", {"actor_rollout_ref.rollout.limit_images"}),
    "lmm-r1": (
        (
            "python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2.5-VL-7B-Instruct --advantage_estimator "
            'group_norm --bf16 --limit_mm_per_prompt \'{"image": 2, "video": 1}\''
        ),
        {"limit_mm_per_prompt"},
    ),
    "swift": (
        (
            f"MAX_PIXELS=401408 swift rlhf --rlhf_type grpo --model {VL} --use_vllm true --vllm_mode colocate "
            '--max_length 1024 --vllm_limit_mm_per_prompt \'{"image": 2, "video": 1, "audio": 1}\''
        ),
        {SWIFT_LIMIT},
    ),
}


@pytest.mark.parametrize("name", list(LIMITED))
def test_vllms_limit_is_planned_or_named(tmp_path, name):
    """The limit keys are memory-relevant (the reader tables above), and a run's limit, its video and audio keys
    too, is planned or named in a line."""
    path = tmp_path / "run.sh"
    text, keys = LIMITED[name]
    path.write_text(text + "\n")
    written, left = dropped([path])
    assert keys <= written and not left, f"{name}: {sorted(left)} neither planned nor named"
