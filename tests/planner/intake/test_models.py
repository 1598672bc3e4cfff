"""Model names resolved offline: catalog names, Hugging Face ids (planner/model/catalog/hf_ids.json), a local folder
or file with config.json, the Hugging Face and ModelScope caches, a missing local folder named like a known id; else
one line asking for the config.json."""

import json

import pytest

from planner import intake
from planner.errors import BadInput
from planner.intake import modelconfig, models
from planner.model import catalog


def test_every_id_names_a_catalog_model_and_every_model_has_its_ids():
    ids, contexts = models._ids()
    assert set(ids.values()) <= set(catalog.model_names())
    # the Omni checkpoints' whole configs (talker resident): the ms-swift reading plans them for the thinker's id
    # (planner/frameworks/swift/reader_env.py WITH_TALKER)
    whole = {"qwen2.5-omni-3b-with-talker", "qwen2.5-omni-7b-with-talker", "qwen3-omni-30b-a3b-with-talker"}
    assert set(catalog.model_names()) - set(ids.values()) == {"debug-gpt2", "debug-llama", "debug-moe"} | whole
    assert set(contexts) <= set(ids)
    for base, instruct in (
        ("qwen/qwen2.5-7b", "qwen/qwen2.5-7b-instruct"),
        ("meta-llama/meta-llama-3.1-8b", "meta-llama/meta-llama-3.1-8b-instruct"),
        ("meta-llama/llama-3.2-1b", "meta-llama/llama-3.2-1b-instruct"),
    ):
        assert ids[base] == ids[instruct]


@pytest.mark.parametrize(
    "name,ref",
    [
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2.5-vl-7b"),
        ("qwen/qwen2.5-7b-instruct", "qwen2.5-7b"),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("meta-llama/Llama-3.2-1B", "llama-3.2-1b"),
        ("llama-3.2-1b", "llama-3.2-1b"),
        ("OpenGVLab/InternVL3-8B", "internvl3-8b"),
    ],
)
def test_ids_and_catalog_names(name, ref):
    assert models.resolve(name) == ref


def test_an_instruct_variant_keeps_its_own_context():
    assert models.lookup("Qwen/Qwen2.5-7B-Instruct").config["max_position_embeddings"] == 32768
    assert models.lookup("Qwen/Qwen2.5-7B").config["max_position_embeddings"] == 131072


def test_a_local_folder_next_to_the_config(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(catalog.model_config("qwen2.5-0.5b")))
    found = models.lookup("ckpt", tmp_path)
    assert found.ref == str(tmp_path / "ckpt" / "config.json") and "local config.json" in found.how


def test_the_hugging_face_and_modelscope_caches(tmp_path, monkeypatch):
    repo = tmp_path / "hf" / "models--acme--tiny"
    (repo / "snapshots" / "abc").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc")
    (repo / "snapshots" / "abc" / "config.json").write_text(json.dumps(catalog.model_config("qwen2.5-0.5b")))
    (tmp_path / "ms" / "models" / "acme" / "other").mkdir(parents=True)
    (tmp_path / "ms" / "models" / "acme" / "other" / "config.json").write_text('{"model_type": "qwen2"}')
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms"))
    assert models.resolve("acme/tiny") == str(repo / "snapshots" / "abc" / "config.json")
    assert models.resolve("acme/other").endswith("ms/models/acme/other/config.json")


def test_a_missing_folder_named_like_a_known_model_is_an_assumption():
    found = models.lookup("/nowhere/models/Qwen2.5-VL-3B-Instruct")
    assert found.ref == "qwen2.5-vl-3b" and found.how.startswith("memplan assumption")


@pytest.mark.parametrize(
    "path",
    [
        "/nfs/LLMs/Qwen/Qwen-Qwen2.5-VL-7B-Instruct/",  # R1-V#71
        "/root/data3/Qwen.Qwen2.5-VL-7B-Instruct",  # ms-swift#5199
        "/models/qwen_qwen2.5-vl-7b-instruct",
    ],
)
def test_a_missing_folder_named_with_its_organisation_is_that_id(path):
    found = models.lookup(path)
    assert found.ref == "qwen2.5-vl-7b" and "Qwen/Qwen2.5-VL-7B-Instruct" in found.how


def test_an_organisation_alone_or_another_orgs_prefix_is_no_model():
    assert models.lookup("/models/Qwen") is None
    assert models.lookup("/models/acme-Qwen2.5-VL-7B-Instruct") is None


def test_an_unknown_model_is_one_line_asking_for_its_config():
    with pytest.raises(BadInput) as e:
        models.resolve("acme/never-heard-of-it")
    assert e.value.field == "model" and "--model PATH" in str(e.value) and "\n" not in str(e.value)
    assert models.lookup("acme/never-heard-of-it") is None


def test_a_reading_keeps_a_model_it_cannot_find_as_written(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("swift sft --model acme/never-heard-of-it --max_length 128\n")
    reading = intake.read([str(path)])
    assert reading.request["model"] == "acme/never-heard-of-it"
    assert "pass its config.json with --model PATH" in reading.settings[0].source


def test_a_cache_snapshot_path_from_another_machine_is_its_repos_id(tmp_path, monkeypatch):
    """Issue 47 item 4: `.../models--Qwen--Qwen2.5-VL-7B-Instruct/snapshots/<sha>` (huggingface_hub's layout) names
    the repo: a known id is its catalog model, a cached one its cached config; before: not found (the leaf is a sha)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    found = models.lookup("/home/u/.cache/huggingface/hub/models--Qwen--Qwen2.5-VL-7B-Instruct/snapshots/0a1b2c")
    assert found.ref == "qwen2.5-vl-7b" and "Qwen/Qwen2.5-VL-7B-Instruct's cache folder" in found.how
    snap = tmp_path / "hf" / "models--acme--tiny" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(catalog.model_config("qwen2.5-0.5b")))
    other = models.lookup("/elsewhere/hub/models--acme--tiny/snapshots/zzz")
    assert other.ref == str(snap / "config.json")
    assert models.lookup("/elsewhere/hub/models--acme--unknown/snapshots/zzz") is None


def test_the_command_lines_model_resolves_what_config_resolves():
    """--model Qwen/Qwen2.5-VL-3B-Instruct was refused on the command line although --config resolved the same id."""
    from planner import resolved

    assert resolved.default_resolver("Qwen/Qwen2.5-VL-3B-Instruct").name == "qwen2.5-vl-3b"
    assert resolved.default_resolver("/nowhere/models/Qwen2.5-VL-3B-Instruct").name == "qwen2.5-vl-3b"
    with pytest.raises(BadInput, match="acme/never-heard-of-it"):
        resolved.default_resolver("acme/never-heard-of-it")


@pytest.mark.parametrize(
    "layout",
    [  # modelscope 1.40.2 hub/utils/utils.py:205-258: the SDK's ___ names, the hub's snapshots, the older SDKs'
        "models/acme/tiny-1___5B",
        "models/acme--tiny-1.5B/snapshots/master",
        "acme/tiny-1.5B",
        "hub/acme/tiny-1___5B",
    ],
)
def test_modelscopes_cache_layouts(tmp_path, monkeypatch, layout):
    folder = tmp_path / "ms" / layout
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(catalog.model_config("qwen2.5-0.5b")))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms"))
    assert models.resolve("acme/tiny-1.5B") == str(folder / "config.json")
    assert models.lookup("acme/tiny-2B") is None


@pytest.mark.parametrize(
    "path",
    [
        "/root/.cache/modelscope/hub/models/Qwen/Qwen2___5-VL-7B-Instruct",  # ms-swift's own download
        "/mnt/ms/models/Qwen--Qwen2.5-VL-7B-Instruct/snapshots/master",
        "/data/Qwen2___5-VL-7B-Instruct",
    ],
)
def test_a_modelscope_cache_path_from_another_machine_is_its_repos_id(path):
    found = models.lookup(path)
    assert found.ref == "qwen2.5-vl-7b" and "Qwen/Qwen2.5-VL-7B-Instruct" in found.how


@pytest.mark.parametrize(
    "path,run",
    [
        (
            "/ckpt/output/Qwen2.5-VL-7B-Instruct/v0-20241213-173805/checkpoint-1281",
            "v0-20241213-173805/checkpoint-1281",
        ),
        ("/saves/Qwen2.5-VL-7B-Instruct/checkpoint-500/", "checkpoint-500"),
    ],
)
def test_a_checkpoint_under_a_folder_named_like_a_known_model_is_that_model(path, run):
    """Item 4: a fine-tune's checkpoint (the HF Trainer's checkpoint-<step>, ms-swift's v<n>-<date>-<time>) keeps its
    base's architecture; the folder above the run's folders names the base."""
    found = models.lookup(path)
    assert (
        found.ref == "qwen2.5-vl-7b" and f"a checkpoint ({run}) of a run over Qwen/Qwen2.5-VL-7B-Instruct" in found.how
    )
    assert models.lookup("/ckpt/output/my-run/checkpoint-500") is None
    assert models.lookup("/ckpt/Qwen2.5-VL-7B-Instruct/extra/checkpoint-500") is None


def test_a_home_of_no_such_user_is_one_line_naming_the_model():
    """`--model ~0` (hypothesis found it: test_advise_suggest): pathlib's expanduser raises RuntimeError for a user
    without a home; the lookup finds no folder and suggest refuses in one line, naming the field."""
    from planner import advise

    assert models.lookup("~0") is None
    with pytest.raises(BadInput) as e:
        advise.suggest(advise.parse(advise.SuggestRequest, {"model": "~0", "gpu": "h100", "global_batch": 8}))
    assert e.value.field == "model" and "~0" in str(e.value)


@pytest.mark.parametrize(
    "name,ref",
    [  # the field corpus's names (tests/field): an id, a folder named like one, ModelScope's organisation
        ("01-ai/Yi-34B-Chat", "yi-34b"),
        ("/home/public/llm/Qwen-14B-Chat", "qwen-14b"),
        ("/workspace/test/models/ZhipuAI/glm-4-9b-chat/", "glm-4-9b-chat"),
        ("qwen/Qwen-14B-Chat", "qwen-14b"),
        ("Yi-34B-Chat", "yi-34b"),
        ("THUDM/glm-4-9b-chat-hf", "glm-4-9b-chat"),
    ],
)
def test_the_field_corpus_models_resolve(name, ref):
    assert models.resolve(name) == ref


@pytest.mark.parametrize(
    "name,ref",
    [  # issue 47 item 4: VLM ids the frameworks' examples name (planner/model/catalog/SOURCES-vlm.md)
        ("Qwen/Qwen3-VL-4B-Instruct", "qwen3-vl-4b"),  # LLaMA-Factory v0.9.5 qwen3vl_*.yaml, ms-swift v4.5.2
        ("/models/Qwen3-VL-4B-Instruct", "qwen3-vl-4b"),
        ("Qwen/Qwen3-VL-4B-Thinking", "qwen3-vl-4b"),
        ("Qwen/Qwen3-VL-2B-Instruct", "qwen3-vl-2b"),
        ("Qwen/Qwen2-VL-2B-Instruct", "qwen2-vl-2b"),  # ms-swift v4.5.2 examples/notebook/qwen2vl-ocr
        ("OpenGVLab/InternVL3-1B", "internvl3-1b"),
        ("OpenGVLab/InternVL3-1B-hf", "internvl3-1b"),
        ("OpenGVLab/InternVL3-2B-Pretrained", "internvl3-2b"),  # ms-swift v4.5.2 examples/train/multimodal/rlhf/gkd
        ("OpenGVLab/InternVL3-2B-hf", "internvl3-2b"),
        ("OpenGVLab/InternVL3_5-8B-HF", "internvl3.5-8b"),  # axolotl v0.18.0 examples/internvl3_5
        ("OpenGVLab/InternVL3_5-8B", "internvl3.5-8b"),
    ],
)
def test_the_framework_examples_vlm_ids_resolve(name, ref):
    assert models.resolve(name) == ref


@pytest.mark.parametrize(
    "name,says",
    [
        ("mistral-community/pixtral-12b", "Pixtral-12B (a llava config over a `pixtral` vision tower"),
        ("microsoft/phi-2", "Phi-1.5 / Phi-2 (model_type phi: LayerNorm with biases"),  # axolotl v0.18 examples/phi
        ("microsoft/phi-1_5", "is not counted by memplan: a Llama-shaped count would miss its biases"),
    ],
)
def test_a_model_memplan_does_not_count_is_refused_in_one_line_naming_it(name, says):
    with pytest.raises(BadInput) as e:
        models.resolve(name)
    assert e.value.field == "model" and says in str(e.value) and "\n" not in str(e.value)
    assert "which model" not in str(e.value)


def test_an_ms_swift_2_model_type_names_the_model_a_bare_folder_does_not(tmp_path):
    """ms-swift 2.x's --model_type loads its registry's id (v2.5.2 swift/llm/utils/model.py:5818-5825 qwen-14b-chat,
    :5826-5834 qwen-7b-chat, :4835-4845 internlm-xcomposer2-7b-chat), read where --model_id_or_path is a folder not on
    this machine."""
    path = tmp_path / "run.sh"
    path.write_text("swift sft --model_type qwen-14b-chat --model_id_or_path /data/run_712 --sft_type lora\n")
    reading = intake.read([str(path)])
    assert reading.request["model"] == "qwen-14b"
    assert "run.sh:1 --model_type qwen-14b-chat loads Qwen/Qwen-14B-Chat" in reading.settings[0].source
    path.write_text("swift sft --model_type qwen-7b-chat --model_id_or_path /data/run_713 --sft_type lora\n")
    assert intake.read([str(path)]).request["model"] == "qwen-7b"
    path.write_text("swift sft --model_type internlm-xcomposer2-7b-chat --model_id_or_path /data/rotate_712\n")
    assert intake.read([str(path)]).request["model"] == "internlm-xcomposer2-7b"
    path.write_text("swift sft --model_type internlm-xcomposer2-7b-chat --model_id_or_path /b/internlm-xcomposer2d5\n")
    # the folder's weights, not the model_type's: 2.5's image, at its own size under XComposer2's template, is asked
    with pytest.raises(BadInput, match="over InternLM-XComposer-2.5's weights: its template .XComposer2's. hands"):
        intake.read([str(path)])
    assert intake.read([str(path)], given={"image_tokens": 841}).request["model"] == "internlm-xcomposer2d5-7b"
    path.write_text("swift sft --model_type no-such-type --model_id_or_path /data/rotate_712\n")
    assert intake.read([str(path)]).request["model"] == "/data/rotate_712"


def test_a_folder_named_after_a_one_size_model_without_its_size_is_that_model():
    """hf_ids.json one_size: InternLM-XComposer-2.5 is released at 7B alone, so /base/internlm-xcomposer2d5 is it, an
    assumption said so; a size-less name of a model released in several sizes resolves to none."""
    m = models.lookup("/base/internlm-xcomposer2d5")
    assert m is not None and m.ref == "internlm-xcomposer2d5-7b"
    assert "internlm/internlm-xcomposer2d5-7b's without its size, the only one it is released in" in m.how
    assert models.lookup("/base/qwen2.5", fetch=False) is None


def test_a_refused_model_in_the_files_yields_to_the_model_the_caller_gives(tmp_path):
    """Issue 47 item 7: --model beside --config has the last word, over a model the files name that memplan refuses."""
    path = tmp_path / "run.sh"
    path.write_text("swift sft --model_id_or_path microsoft/phi-2 --sft_type lora\n")
    reading = intake.read([str(path)], given={"model": "qwen2.5-vl-7b"})
    assert reading.request["model"] == "microsoft/phi-2"  # the files' own word; the caller's --model replaces it


@pytest.mark.parametrize(
    "name,ref,context",
    [  # issue 47 item 4: ids LLaMA-Factory v0.9.5's and axolotl v0.18's examples name (hf_ids.json "_sources")
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3.1-8b", 8192),  # Llama-3.1-8B's shapes, 8K context
        ("NousResearch/Meta-Llama-3-8B", "llama-3.1-8b", 8192),
        ("meta-llama/Meta-Llama-3-70B-Instruct", "llama-3.1-70b", 8192),
        ("mistralai/Mistral-7B-Instruct-v0.2", "mistral-7b", 32768),
        ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "tinyllama-1.1b", 2048),
        ("HuggingFaceTB/SmolLM2-135M", "smollm2-135m", 8192),
        ("google/gemma-3-12b-it", "gemma-3-12b", None),  # no length key, as gemma-3-4b's (transformers' default)
        ("google/gemma-3-27b-it", "gemma-3-27b", None),
        ("codellama/CodeLlama-34b-hf", "codellama-34b", 16384),
        ("openlm-research/open_llama_3b_v2", "open-llama-3b", 2048),
        ("lmsys/vicuna-7b-v1.5", "llama-2-7b", 4096),  # the issue's: Llama-2's shapes, 4,096 context
        ("microsoft/Phi-3.5-mini-instruct", "phi-3-mini", 131072),
    ],
)
def test_a_fine_tune_resolves_to_the_catalog_model_of_its_shapes_at_its_own_context(name, ref, context):
    found = models.lookup(name)
    assert found.ref == ref and modelconfig.context(found.config) == context


def test_every_source_names_an_id_the_table_maps():
    data = json.loads((models.CATALOG / "hf_ids.json").read_text())
    sources = {k for k in data["_sources"] if k != "_doc"}  # a mapped id, or a catalog entry by its name
    assert sources <= set(data["models"]) | set(data["models"].values())
    assert all(len(data["_sources"][k]) > 40 for k in sources)


# Issue 47 item 4: the Qwen-family ids LLaMA-Factory 0.9.5's and axolotl 0.18's examples name (and the families the
# issue names), each read from its config.json or card (hf_ids.json _sources): (id, catalog model, its context,
# whether it is another model with that model's architecture)
QWEN_IDS = [
    ("Qwen/Qwen3-4B-Instruct-2507", "qwen3-4b", 262144, False),  # 15 LLaMA-Factory examples
    ("Qwen/Qwen3-4B-Thinking-2507", "qwen3-4b", 262144, False),
    ("Qwen/Qwen3-4B-Base", "qwen3-4b", 32768, False),
    ("Qwen/Qwen3-4B", "qwen3-4b", 40960, False),
    ("Qwen/Qwen3-1.7B", "qwen3-1.7b", 40960, False),
    ("Qwen/Qwen3-14B", "qwen3-14b", 40960, False),
    ("Qwen/Qwen3-32B", "qwen3-32b", 40960, False),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b", 262144, False),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3-235b-a22b", 262144, False),
    ("Qwen/Qwen-7B", "qwen-7b", 32768, False),
    ("Qwen/Qwen-7B-Chat", "qwen-7b", 32768, False),
    ("Qwen/Qwen2-0.5B", "qwen2.5-0.5b", 131072, True),
    ("Qwen/Qwen2-1.5B-Instruct", "qwen2.5-1.5b", 32768, True),
    ("Qwen/Qwen2-7B", "qwen2.5-7b", 131072, True),
    ("Qwen/Qwen2-7B-Instruct", "qwen2.5-7b", 32768, True),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "qwen2.5-32b", 131072, True),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "qwen2.5-7b", 131072, True),
]


@pytest.mark.parametrize("hf,ref,context,other", QWEN_IDS)
def test_qwen_family_ids_resolve_with_their_own_context(hf, ref, context, other):
    found = models.lookup(hf)
    assert found.ref == ref and found.config["max_position_embeddings"] == context
    said = f"{hf} has catalog model {ref}'s architecture" if other else f"{hf} is catalog model {ref}"
    assert found.how == said


def test_another_models_folder_says_whose_architecture_it_has():
    """A fine-tune (or another generation) resolved by its folder's name keeps the same wording: it has the catalog
    model's architecture; the catalog model's own ids still say they are it."""
    found = models.lookup("/data/ckpt/DeepSeek-R1-Distill-Qwen-32B/checkpoint-100")
    assert found.ref == "qwen2.5-32b" and found.how.endswith("catalog model qwen2.5-32b's architecture)")
    assert models.lookup("/data/Qwen2.5-32B-Instruct").how.endswith("catalog model qwen2.5-32b)")


def test_every_other_model_and_new_entry_names_its_source():
    data = json.loads((models.CATALOG / "hf_ids.json").read_text())
    assert set(data["same_architecture"]) <= set(data["models"])
    assert set(data["same_architecture"]) <= set(data["_sources"])
    assert set(data["_sources"]) - {"_doc"} <= set(data["models"]) | set(catalog.model_names())
    assert all(len(text) > 40 for text in data["_sources"].values())


@pytest.mark.parametrize(
    "hf,says",
    [("XiaomiMiMo/MiMo-7B-RL", "multi-token-prediction"), ("Skywork/Skywork-Reward-V2-Qwen3-8B", "score head")],
)
def test_a_qwen_derived_model_memplan_does_not_count_is_refused_in_one_line(hf, says):
    """axolotl 0.18's examples name them: MiMo's MTP layers (remote code), Skywork's reward model (a sequence
    classifier): one line naming what is missing, never planned as Qwen2-7B's or Qwen3-8B's causal LM."""
    with pytest.raises(BadInput) as e:
        models.resolve(hf)
    assert e.value.field == "model" and says in str(e.value) and "\n" not in str(e.value)


def test_an_export_names_the_catalog_models_own_id_not_another_models():
    """catalog.hf_id (the exports' model field) never names a model that only shares the shapes."""
    assert catalog.hf_id("qwen2.5-32b") == "Qwen/Qwen2.5-32B" and catalog.hf_id("qwen2.5-7b") == "Qwen/Qwen2.5-7B"
    assert catalog.hf_id("qwen3-4b") == "Qwen/Qwen3-4B" and catalog.hf_id("qwen-7b") == "Qwen/Qwen-7B"
