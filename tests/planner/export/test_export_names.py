"""Exports that start: ms-swift, LLaMA-Factory and axolotl files name the checkpoint the framework loads and that
checkpoint's FSDP layer classes and LoRA target modules (planner.model.catalog.checkpoints). Every catalog model with
a Hub id is written as an FSDP + LoRA plan for each framework, and each framework's validator builds the model it
names on the meta device (a remote-code checkpoint as its own code builds it) and applies the written wrap classes
and LoRA targets (validators/meta_model.py): a class or module name the model does not have fails."""

from pathlib import Path

import pytest

from planner import checkconfig
from planner.frameworks import FRAMEWORKS
from planner.frameworks.axolotl import writer as axolotl
from planner.frameworks.llamafactory import writer as llamafactory
from planner.frameworks.rules import Where
from planner.frameworks.swift import writer as swift
from planner.model.catalog import checkpoints, hf_id, load_model, model_names
from planner.model.shapes import REMOTE_CODE_ONLY
from tests.planner.export.test_frameworks_export import PARSERS, planned, swift_flags, validate, written

yaml = pytest.importorskip("yaml")

# a model transformers has no class for (Qwen v1) has no module tree the validators can build on the meta device
HUB_MODELS = [m for m in model_names() if hf_id(m) and load_model(m).model_type not in REMOTE_CODE_ONLY]
FSDP_LORA = {"fsdp": "full", "checkpointing": "full", "lora_rank": 8, "micro_batch": 1, "grad_accum": 1}
INTERNVL = {**FSDP_LORA, "model": "internvl2.5-8b", "lora_targets": "q_proj,v_proj,down_proj"}


def every_linear(model: str) -> str:
    """--lora-targets naming each of the model's linears (stacked experts aside: PEFT's target_parameters)."""
    return ",".join(sorted(n for n in load_model(model).linear_names() if not n.startswith("experts")))


def _one_a_family() -> list[str]:
    """The first catalog model of each model type (and of each remote-code checkpoint's type, which ms-swift builds
    from the repository's own code)."""
    remote = {e["model"] for e in checkpoints.remote_ids().values()}
    seen, out = set(), []
    for m in HUB_MODELS:
        if (key := (load_model(m).model_type, m in remote)) not in seen:
            seen.add(key)
            out.append(m)
    return out


# one model a family on every commit (37 of 82), every model in the sweep tier: since stop 71, for CI's room (the three
# frameworks' validators built 82 models each on the meta device: 89 s of a worker in make test at stop 70). A family's
# sizes share its layer classes and LoRA targets; each size's own Hub id is built here in the sweep tier.
MODELS = {"families": _one_a_family(), "every-model": HUB_MODELS}


def unwritten(framework: str, models: list[str] = HUB_MODELS) -> list[str]:
    """The catalog models `framework` writes no plan for (its rules of scope "written")."""
    return [m for m in models if FRAMEWORKS[framework].unwritten(FSDP_LORA, Where(model=load_model(m)))]


def sweep(framework: str, folder: Path, models: list[str] = HUB_MODELS) -> list[Path]:
    """Each of `models`' FSDP plan with LoRA on every linear by name, written for `framework`."""
    name = PARSERS[framework][2]
    fields = {**FSDP_LORA, "seq_len": 1024}
    skipped = unwritten(framework, models)
    return [
        written(framework, m, folder, {**fields, "model": m, "lora_targets": every_linear(m)}).dir / name
        for m in models
        if m not in skipped
    ]


@pytest.mark.parametrize("framework", list(PARSERS))
@pytest.mark.parametrize("which", ["families", pytest.param("every-model", marks=pytest.mark.sweep)])
def test_every_catalog_model_starts_under_each_framework(framework, which, tmp_path):
    models = MODELS[which]
    paths = sweep(framework, tmp_path, models)
    run = validate(framework, paths)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-8000:]
    refused = unwritten(framework, models)
    omnis = ["qwen2.5-omni-3b", "qwen2.5-omni-7b", "qwen3-omni-30b-a3b"]  # ms-swift loads the Omnis whole
    assert sorted(refused) == ([] if framework != "swift" else [m for m in omnis if m in models])
    assert refused or framework != "swift"  # an Omni among them on every commit too
    assert run.stdout.count(": OK ") == len(paths) == len(models) - len(refused)
    remote_built = "InternVLChatModel wraps" in run.stdout  # the remote code's model, built for ms-swift only
    assert remote_built == (framework == "swift")


def test_swift_writes_internvl_remote_codes_classes(tmp_path):
    """The issue's export: ms-swift loads OpenGVLab/InternVL2_5-8B through its own code (InternVLLoader), so the
    FSDP file wraps InternVisionEncoderLayer and InternLM2DecoderLayer and LoRA names InternLM2's fused linears."""
    w = written("swift", "internvl", tmp_path, INTERNVL)
    _env, _cmd, f = swift_flags((w.dir / swift.SCRIPT_NAME).read_text())
    assert f["model"] == "OpenGVLab/InternVL2_5-8B" and f["target_modules"] == ["wqkv", "w2"]
    cfg = yaml.safe_load((w.dir / swift.FSDP_NAME).read_text())["fsdp_config"]
    assert cfg["transformer_layer_cls_to_wrap"] == ["InternVisionEncoderLayer", "InternLM2DecoderLayer"]


def test_swift_writes_its_own_fsdp_file_for_remote_code():
    """The fsdp2 preset wraps the model's _no_split_modules, which InternVLChatModel and Gemma-3 list with classes
    they do not build; a native text model keeps the preset."""
    plan = planned("swift", **{**FSDP_LORA, "model": "internvl3-8b"})[0]
    assert swift.fsdp_arg(plan, load_model("internvl3-8b")) == swift.FSDP_NAME
    assert swift.fsdp_arg(plan, load_model("gemma-3-4b")) == swift.FSDP_NAME
    assert swift.fsdp_arg(plan, load_model("qwen2.5-7b")) == "fsdp2"


def test_llamafactory_and_axolotl_name_the_native_conversion(tmp_path):
    """Neither loads a repository's own code for InternVL (Framework.remote_code False): the -hf id, whose classes
    are transformers' (the catalog config's)."""
    lf = yaml.safe_load(
        (written("llamafactory", "internvl", tmp_path, INTERNVL).dir / llamafactory.CONFIG_NAME).read_text()
    )
    assert lf["model_name_or_path"] == "OpenGVLab/InternVL2_5-8B-HF" and lf["lora_target"] == "q_proj,v_proj,down_proj"
    ax = yaml.safe_load(
        (written("axolotl", "internvl", tmp_path / "ax", INTERNVL).dir / axolotl.CONFIG_NAME).read_text()
    )
    assert ax["base_model"] == "OpenGVLab/InternVL2_5-8B-HF"
    assert ax["fsdp_config"]["transformer_layer_cls_to_wrap"] == "InternVLVisionLayer,LlamaDecoderLayer"


def test_checkpoint_names_follow_the_loading_code():
    model = load_model("internvl2.5-8b")
    remote, native = checkpoints.for_framework(model, True), checkpoints.for_framework(model, False)
    assert remote.remote and not native.remote and remote.path != native.path
    assert remote.lora_names(["q_proj", "k_proj", "gate_proj"]) == ["wqkv", "w1"]
    assert native.lora_names(["q_proj", "k_proj"]) == ["q_proj", "k_proj"]
    assert checkpoints.for_framework(model, None) == checkpoints.Checkpoint(
        "OpenGVLab/InternVL2_5-8B", False, model.fsdp_units, frozenset(model.linear_names())
    )


@pytest.mark.parametrize("framework", list(PARSERS))
def test_a_wrong_class_or_target_fails_the_validator(framework, tmp_path):
    """The transformers-native classes written for ms-swift's remote-code InternVL (the issue's bug), and a LoRA
    target no module has, each fail the framework's validator (both files in one run of it, --each)."""
    wrong_class, wrong_target = (written(framework, "internvl", tmp_path / d, INTERNVL) for d in ("class", "target"))
    broken = {
        "swift": (swift.FSDP_NAME, "InternVisionEncoderLayer", "InternVLVisionLayer"),
        "llamafactory": (llamafactory.ACCELERATE_NAME, "LlamaDecoderLayer", "InternLM2DecoderLayer"),
        "axolotl": (PARSERS[framework][2], "LlamaDecoderLayer", "InternLM2DecoderLayer"),
    }[framework]
    f = wrong_class.dir / broken[0]
    f.write_text(f.read_text().replace(broken[1], broken[2]))
    target = {"swift": "wqkv", "llamafactory": "down_proj", "axolotl": "down_proj"}[framework]
    f = wrong_target.dir / PARSERS[framework][2]
    f.write_text(f.read_text().replace(target, "no_such_proj"))
    paths = [w.dir / PARSERS[framework][2] for w in (wrong_class, wrong_target)]
    run = validate(framework, [*paths, "--each"])
    assert run.returncode != 0
    said = {line.split(": ", 1)[0]: line for line in run.stdout.splitlines() if ": INVALID " in line}
    assert "Could not find the transformer layer class" in said[str(paths[0])], run.stdout[-3000:]
    assert "matches no module" in said[str(paths[1])], run.stdout[-3000:]


def test_swifts_internvl_lora_reads_back_as_the_catalogs_names(tmp_path):
    """Reading the export back (check --config) gives transformers' names: wqkv stands for q, k and v alike."""
    from planner.export import launch

    plan, model, hw, seq_len = planned("swift", **INTERNVL)
    for name, text in launch.files(plan, hw, model, seq_len).items():
        (tmp_path / name).write_text(text)
    back = checkconfig.check_config([str(tmp_path / swift.SCRIPT_NAME)], {"gpu": "h100"}).plan
    assert back.lora_targets == "q_proj,k_proj,v_proj,down_proj" and back.fsdp == "full"
    assert checkpoints.transformers_names("Qwen/Qwen2.5-7B", ["wqkv"]) == ["wqkv"]  # no remote code: as written


@pytest.mark.parametrize("model_id", sorted(checkpoints.remote_ids()))
def test_the_remote_checkpoints_names_are_in_their_module_tree(model_id):
    """checkpoints.json against the module tree of the repository's code (tests/data/checkpoints): its layer classes
    are classes of the model, its language model, tower and projector are its modules, and each renamed linear is a
    linear of its language model."""
    torch = pytest.importorskip("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location("meta_model", Path(__file__).parent / "validators" / "meta_model.py")
    meta_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(meta_model)

    entry = checkpoints.remote_ids()[model_id]
    model = meta_model.build(model_id, True)
    classes = {type(m).__name__ for m in model.modules()}
    names = dict(model.named_modules())
    assert set(entry["layer_classes"]) <= classes
    assert {entry["language_module"], *entry["vision_modules"], *entry["projector_modules"]} <= set(names)
    linears = {n.rsplit(".", 1)[-1] for n, m in names.items() if isinstance(m, torch.nn.Linear)}
    catalog_names = load_model(entry["model"]).linear_names()
    assert {entry["linears"].get(n, n) for n in catalog_names} <= linears
