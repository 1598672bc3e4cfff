"""Catalog data: required entries, exact parameter counts (against transformers on the meta device
and against published counts), GPU table with sources, loading from paths."""

import json
import math

import pytest

from planner.errors import BadInput, UnknownName
from planner.model import catalog
from planner.model.families import from_config
from planner.model.shapes import REMOTE_CODE_ONLY

REQUIRED = [
    "gpt2",
    "gpt2-medium",
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "mistral-7b",
    "qwen2.5-0.5b",
    "qwen2.5-1.5b",
    "qwen2.5-3b",
    "qwen2.5-7b",
    "qwen2.5-14b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "gemma-2-2b",
    "gemma-2-9b",
    "qwen2.5-vl-3b",
    "qwen2.5-vl-7b",
    "qwen2.5-vl-72b",
    "internvl3-8b",
    "internvl2.5-8b",
    "debug-llama",
    "debug-gpt2",
]
MOE = [
    "mixtral-8x7b",
    "qwen1.5-moe-a2.7b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "deepseek-v2-lite",
    "deepseek-v3",
    "olmoe-1b-7b",
    "gpt-oss-20b",
    "glm-4.5-air",
    "debug-moe",
]

# Published totals (model cards / safetensors metadata); they pin the stored config values.
PUBLISHED = {
    "gpt2": 124_439_808,
    "llama-2-7b": 6_738_415_616,
    "llama-3.1-8b": 8_030_261_248,
    "mistral-7b": 7_241_732_096,
    "qwen2.5-0.5b": 494_032_768,
    "qwen2.5-7b": 7_615_616_512,
    "gemma-2-9b": 9_241_705_984,
    "qwen2.5-vl-7b": 8_292_166_656,
    "qwen2-vl-7b": 8_291_375_616,
    "llama-3.2-1b": 1_235_814_400,
    # a public script's count of HuggingFaceTB/SmolLM2-135M as transformers loads it (28,311,552 embedding, tied)
    "smollm2-135m": 134_515_008,
    # the Hugging Face API's safetensors total of zai-org/GLM-4.6V-Flash at 411bb4d (a dense glm4v: GLM-4.1V-9B's
    # shapes; its config.json was not found offline, the card's 128k context is its max_position_embeddings)
    "glm-4.6v-flash": 10_292_777_472,
    # mixture-of-experts totals (safetensors metadata of each model's Hugging Face repository)
    "mixtral-8x7b": 46_702_792_704,
    "qwen1.5-moe-a2.7b": 14_315_784_192,
    "qwen3-30b-a3b": 30_532_122_624,
    "qwen3-235b-a22b": 235_093_634_560,
    "deepseek-v2-lite": 15_706_484_224,
    "olmoe-1b-7b": 6_919_161_856,
    "gpt-oss-20b": 20_914_757_184,
}
# Active parameters per token as the model cards round them (billions); gpt-oss's card counts one of its
# embedding and unembedding (3.6B + 0.58B), DeepSeek's their 2.4B / 37B without embeddings.
ACTIVE = {
    "mixtral-8x7b": 12.9,
    "qwen1.5-moe-a2.7b": 2.7,
    "qwen3-30b-a3b": 3.3,
    "qwen3-235b-a22b": 22.2,
    "olmoe-1b-7b": 1.3,
    "gpt-oss-20b": 3.6 + 0.58,
}


def test_catalog_has_required_models():
    assert set(REQUIRED + MOE) <= set(catalog.model_names())
    assert len(catalog.model_names()) >= 22
    assert sum(catalog.load_model(n).vision is not None for n in catalog.model_names()) >= 2


# Published figures given rounded (hf_ids.json "_sources"): (catalog model, billions, relative tolerance of the rounding)
ROUNDED = {
    "tinyllama-1.1b": (1.1, 0.01),  # the model card's 1.1B
    "open-llama-3b": (3.4, 0.02),  # OpenLLaMA's 3B (the 3,200-wide EasyLM '3b' config)
    "codellama-7b": (6.7, 0.01),  # the Code Llama paper's 7B, 13B, 34B (vocabulary 32,016, 32,016, 32,000)
    "codellama-13b": (13.0, 0.01),
    "codellama-34b": (33.7, 0.01),
    "gemma-3-12b": (12.187, 1e-4),  # a design note's 12_187_000_000 from unsloth/gemma-3-12b-it
    "gemma-3-27b": (27.4, 0.01),  # the card's 27B; its language model and head the note's 27_009_000_000 (test below)
    # issue 47 item 4's VLM entries (planner/model/catalog/SOURCES-vlm.md), within the rounding the page shows:
    "qwen3-vl-4b": (4.44, 0.002),  # codersera.com's Qwen3-VL-4B guide: "4.44 billion parameters"
    "qwen2-vl-2b": (2.21, 0.003),  # ai-nexus-293.pages.dev's Qwen2-VL-2B-Instruct page: "Parameters 2.21"
    "qwen3-vl-2b": (2, 0.25),  # gr.tbb.rip/models/Qwen/Qwen3-VL-2B-Instruct: "Parameters 2B"
    "internvl3-1b": (0.9, 0.12),  # emergentmind's InternVL 2.5-1B page (the same tower, Qwen2.5-0.5B): "0.9-1 billion"
    "internvl3-2b": (2, 0.25),  # hivebook.wiki's InternVL3 table: "InternVL3-2B 2B InternViT-300M Qwen2.5-1.5B"
    "internvl3.5-8b": (8.5, 0.006),  # mixpeek.com/model/OpenGVLab/InternVL3_5-8B: "8.5B params"
}


@pytest.mark.parametrize("name", sorted(ROUNDED))
def test_rounded_published_parameter_counts(name):
    billions, rel = ROUNDED[name]
    assert catalog.load_model(name).params / 1e9 == pytest.approx(billions, rel=rel)


def test_gemma_3_27b_language_model_is_the_published_text_only_count():
    m = catalog.load_model("gemma-3-27b")
    text = sum(t.count * math.prod(t.shape) for t in m.tensors if t.role not in ("vision", "projector"))
    assert text / 1e9 == pytest.approx(27.009, rel=1e-4)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts(name):
    assert catalog.load_model(name).params == PUBLISHED[name]


def test_a_llava_config_over_a_tower_memplan_does_not_read_is_refused_in_one_line():
    """Pixtral-12B (mistral-community/pixtral-12b) is a llava config over a `pixtral` tower: refused by name, not a
    KeyError ("config for 'p' is not understood (KeyError: 'pixtral')" before)."""
    cfg = {**catalog.model_config("llava-1.5-7b"), "vision_config": {"model_type": "pixtral", "hidden_size": 1024}}
    with pytest.raises(BadInput) as e:
        from_config(cfg, "p")
    assert str(e.value) == (
        "config.json: llava's vision_config model_type 'pixtral' is not counted by memplan (accepted: "
        "clip_vision_model, siglip_vision_model)"
    )


@pytest.mark.parametrize("name", sorted(ACTIVE))
def test_active_parameters_match_the_model_cards(name):
    assert catalog.load_model(name).active_params / 1e9 == pytest.approx(ACTIVE[name], rel=0.02)  # cards round to 0.1B


def test_dense_models_are_all_active():
    m = catalog.load_model("llama-3.1-8b")
    assert m.active_params == m.params and m.text.moe is None


def test_debug_presets_are_small():
    for name in ("debug-llama", "debug-gpt2", "debug-moe"):
        assert 1e6 < catalog.load_model(name).params < 2e7


# catalog models transformers has no class for (their repository's own code builds them: test_remote_families.py)
REMOTE_ONLY = {n for n in catalog.model_names() if catalog.load_model(n).model_type in REMOTE_CODE_ONLY}
# the Omni checkpoints' whole configs: their thinkers are built here, the whole classes tensor by tensor and dtype in
# tests/planner/model/test_omnitalker.py (sweep tier: 2 s each)
WHOLE_OMNI = {n for n in catalog.model_names() if catalog.load_model(n).resident_params()}


@pytest.mark.parametrize("name", sorted(set(catalog.model_names()) - REMOTE_ONLY - WHOLE_OMNI))
def test_param_count_equals_transformers_meta_model(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = catalog.model_config(name)
    model_type = cfg.pop("model_type")
    hf_cfg = transformers.AutoConfig.for_model(model_type, **cfg)
    auto = transformers.AutoModelForImageTextToText if "vision_config" in cfg else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(hf_cfg)
    real = sum(p.numel() for p in model.parameters())
    spec = catalog.load_model(name)
    assert spec.params == real
    assert spec.exact
    # LoRA adapters ("all-linear" on the decoder): r * (d_in + d_out) for each decoder Linear
    linear = (torch.nn.Linear, transformers.pytorch_utils.Conv1D)
    lora = sum(
        8 * sum(m.weight.shape)
        for n, m in model.named_modules()
        if isinstance(m, linear)
        and (".layers." in n or ".h." in n)
        and "vision" not in n
        and "visual" not in n
        and "audio_tower" not in n  # Qwen2.5-Omni's audio tower: not adapted (planner/model/qwenomni.py)
        and not n.endswith(".router")  # Llama-4's router Linear: not adapted (planner/model/llama4.py)
    )
    if spec.text.moe is None:  # MoE: PEFT's all-linear differs by family (tests/probes/test_moe.py builds it)
        assert spec.lora_params(8) == lora
    else:
        assert (
            8
            * sum(
                sum(t.shape) * t.count
                for t in spec.tensors
                if t.lora and len(t.shape) == 2 and not t.name.startswith("router.")
            )
            == lora
        )


def test_load_from_config_path_and_folder(tmp_path):
    cfg = catalog.model_config("qwen2.5-0.5b")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert catalog.load_model(str(tmp_path)).params == 494_032_768
    assert catalog.load_model(str(tmp_path / "config.json")).params == 494_032_768


@pytest.mark.parametrize("content,message", [("{oops", "malformed config.json"), ("[1, 2]", "JSON object")])
def test_bad_config_files(tmp_path, content, message):
    f = tmp_path / "config.json"
    f.write_text(content)
    with pytest.raises(BadInput, match=message):
        catalog.load_model(str(f))


def test_missing_file_and_unknown_name():
    with pytest.raises(BadInput, match="no such config.json"):
        catalog.load_model("/nonexistent/dir/config.json")
    with pytest.raises(BadInput, match="'llama-9' is not a bundled model or a config path"):
        catalog.load_model("llama-9")


@pytest.mark.parametrize(
    "ref,guess",
    [("llama-3-8b", "llama-3.1-8b"), ("Qwen-2.5-7B", "qwen2.5-7b"), ("gpt-2", "gpt2"), ("phi3-mini", "phi-3-mini")],
)
def test_an_unknown_model_gets_a_did_you_mean_not_the_whole_catalog(ref, guess):
    """Issue 30: `--model llama-3-8b` printed all 43 names on one line, and no hint."""
    with pytest.raises(UnknownName) as e:
        catalog.load_model(ref)
    assert str(e.value) == (
        f"--model {ref!r} is not a bundled model or a config path; did you mean {guess}? "
        f"(`planner models` lists all {len(catalog.model_names())})"
    )
    with pytest.raises(UnknownName, match=r"^--model 'zzz' is not a bundled model or a config path \(`planner"):
        catalog.load_model("zzz")  # nothing close: no guess


def test_unknown_family_uses_generic_count_and_says_so():
    cfg = dict(catalog.model_config("llama-2-7b"), model_type="my_new_llm")
    spec = from_config(cfg, "custom")
    assert spec.params == 6_738_415_616 and not spec.exact
    with pytest.raises(BadInput, match="lacks 'num_attention_heads'"):
        from_config({"model_type": "x", "hidden_size": 8, "num_hidden_layers": 2}, "broken")


def test_gpu_catalog_entries_and_sources():
    names = {g.name for g in catalog.gpus()}
    assert {
        "a100-40gb",
        "a100-80gb",
        "a100-40gb-pcie",
        "a100-80gb-pcie",
        "h20",
        "h100-80gb",
        "h100-80gb-pcie",
        "h200",
        "rtx4090",
        "rtx3090",
        "l40s",
        "a10",
        "v100-32gb",
        "b200",
        "gh200",
        "h100-nvl",
        "l4",
        "a10g",
        "rtx-a6000",
        "rtx5090",
    } <= names  # issue 13's additions
    assert {
        "a800-80gb",
        "a800-80gb-pcie",
        "h800",
        "h800-pcie",
        "h20-141gb",
        "l20",
        "l40",
        "a40",
        "t4",
        "rtx-6000-ada",
        "rtx-pro-6000",
        "b300",
        "gb200",
    } <= names  # issue 48's
    for g in catalog.gpus():  # every figure names where it comes from
        assert {"compute", "memory", "link"} <= set(g.sources), g.name
        assert all(len(text) > 20 for text in g.sources.values()), g.name
    assert catalog.gpu("H100").name == "h100-80gb"
    assert catalog.gpu("RTX_4090").name == "rtx4090"
    assert catalog.gpu("h20").capacity_bytes == 97871 * 2**20
    assert {"compute", "memory", "link", "compute_capability"} <= set(catalog.gpu("t4").sources)


@pytest.mark.parametrize(
    "name,mib",
    [
        ("rtx5090", 32607),
        ("rtx-a6000", 49140),
        ("l4", 23034),
        ("a800", 81920),
        ("h800", 81559),
        ("t4", 15360),
        ("l40", 46068),
        ("b300", 275040),
        ("gb200", 189471),
        ("rtx-pro-6000", 97887),
    ],
)
def test_capacities_are_what_nvidia_smi_reports(name, mib):
    """Issue 48 item 7: the RTX 5090, RTX A6000 and L4 were catalogued from decimal gigabytes, 7% low. Each capacity
    is the MiB nvidia-smi prints (its source names where it was published); exact, no tolerance."""
    g = catalog.gpu(name)
    assert g.memory_mib == mib and "nvidia-smi" in g.sources["memory"]


@pytest.mark.parametrize(
    "name,bf16,flash,nvlink",
    [
        ("t4", False, False, False),
        ("v100", False, False, True),
        ("a800", True, True, True),
        ("h800", True, True, True),
        ("l20", True, True, False),
        ("rtx4090", True, True, False),
        ("rtx-pro-6000", True, True, False),
        ("gb200", True, True, True),
    ],
)
def test_each_card_says_what_it_runs_and_how_it_is_joined(name, bf16, flash, nvlink):
    g = catalog.gpu(name)
    assert (g.bf16_tflops > 0, g.flash_attention_2, g.nvlink) == (bf16, flash, nvlink)


def test_the_china_cards_keep_their_capped_nvlink():
    """A800 and H800: NVLink capped at 400 GB/s both directions (200 each way), the A100's and H100's compute."""
    a800, h800 = catalog.gpu("a800"), catalog.gpu("h800")
    assert (a800.link_gbs, h800.link_gbs) == (200, 200)
    assert (a800.bf16_tflops, h800.bf16_tflops) == (
        catalog.gpu("a100-80gb").bf16_tflops,
        catalog.gpu("h100").bf16_tflops,
    )


@pytest.mark.parametrize(
    "name,guess",
    [("h100-sxm-80gb", "h100-80gb (80 GiB)"), ("rtz4090", "rtx4090 (24 GiB)"), ("a100-sxm4-80g", "a100-80gb (80 GiB)")],
)
def test_an_unknown_gpu_gets_a_did_you_mean(name, guess):
    """Issue 30: `--gpu h100-sxm-80gb` listed the catalog, with no hint that it is the h100-80gb."""
    with pytest.raises(UnknownName) as e:
        catalog.gpu(name)
    assert str(e.value) == (
        f"--gpu {name!r} is not in the GPU catalog; did you mean {guess}? "
        f"(`planner gpus` lists all {len(catalog.gpus())}, or 'local')"
    )


@pytest.mark.parametrize("name", ["mi300x", "RTX 4080", "rtx3080", "gaudi2", "h10"])
def test_another_card_is_not_in_the_catalog_and_gets_no_guess(name):
    """Issue 48 item 7: `--gpu mi300x` suggested an RTX 3090. Another card, whose model numbers differ from every
    catalog name's, is refused plainly in one line that points at the list; a guess is only for a misspelling."""
    with pytest.raises(UnknownName) as e:
        catalog.gpu(name)
    assert str(e.value) == (
        f"--gpu {name!r} is not in the GPU catalog (`planner gpus` lists all {len(catalog.gpus())}, or 'local')"
    )


@pytest.mark.parametrize(
    "name,choices",
    [
        ("a100", "a100-40gb (40 GiB) or a100-80gb (80 GiB)"),
        ("A100_SXM", "a100-40gb (40 GiB) or a100-80gb (80 GiB)"),
        ("a100-pcie", "a100-40gb-pcie (40 GiB) or a100-80gb-pcie (80 GiB)"),
    ],
)
def test_a_name_several_kinds_share_is_refused_with_the_choices(name, choices):
    """Issue 30: `--gpu a100` silently meant the 40 GB card."""
    with pytest.raises(BadInput) as e:
        catalog.gpu(name)
    assert str(e.value) == f"--gpu {name!r} is ambiguous: {choices}" and e.value.field == "gpu"
    assert not isinstance(e.value, UnknownName)  # a 422 in the API, not a 404
    assert catalog.gpu("a100-40g").name == "a100-40gb" and catalog.gpu("a100-sxm4-80gb").name == "a100-80gb"


def test_a_tilde_path_of_no_such_user_is_bad_input():
    """schemathesis found it: the model '~ØÁ' reached pathlib's expanduser, which raised RuntimeError (a 500)."""
    with pytest.raises(BadInput, match="no such user"):
        catalog.load_model("~nosuchuserxyz")
