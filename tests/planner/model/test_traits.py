"""Family traits as data (planner/model/shapes.py Traits, set by the family readers): each trait's value on a catalog model
of each family that has it, the structural ones against the modules transformers builds, and a guard that no term
outside the readers tests a family name."""

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from planner.model import catalog
from planner.model.families import ALL_FAMILIES
from planner.model.shapes import FAMILY_TRAITS, REMOTE_CODE_ONLY, Traits

ROOT = Path(__file__).resolve().parents[3]
READERS = {
    "planner/model/modelspec.py",
    "planner/model/families.py",
    "planner/model/decoders.py",
    "planner/model/moespec.py",
    "planner/model/moe_defaults.py",
    "planner/model/vlm.py",
    "planner/model/mllama.py",
    "planner/model/vila.py",
    "planner/model/qwenvl.py",
    "planner/model/qwenomni.py",
    "planner/model/qwen3omni.py",
    "planner/model/hybrid.py",
    "planner/model/glm4v.py",
    "planner/model/qwen1.py",
    "planner/model/minicpmv.py",
    "planner/model/xcomposer.py",
    "planner/model/llama4.py",
    "planner/model/pending.py",
    "planner/model/images.py",
    "planner/model/image_rules.py",
    "planner/model/video_rules.py",
    "planner/model/shapes.py",
    "probes/images.py",  # each family's processor: the image inputs it hands the model
    "planner/frameworks/torchtitan/__init__.py",  # catalog names to torchtitan's own model packages (a name map, not a term)
    "planner/frameworks/openrlhf/reader_forks.py",  # the model types each fork's actor loads (a refusal, not a term)
    "planner/frameworks/swift/reader_2.py",  # the model types ms-swift 2.x's Liger patch names (a refusal, not a term)
    "planner/frameworks/swift/reader_3x.py",  # the same for 3.0-3.2's apply_liger
}  # where model_type is read
SCANNED = ("planner", "probes")

# (catalog model, TextSpec/ModelSpec field, value): one model of each family that has the trait
EXPECTED = [
    ("gpt2", "traits.learned_positions", True),
    ("gpt2", "traits.conv1d", True),
    ("gpt2", "traits.layernorm", True),
    ("gpt2", "traits.fused_qkv", True),
    ("gpt2", "traits.gated_mlp", False),
    ("gpt2", "max_positions", 1024),
    ("phi-3-mini", "traits.fused_qkv", True),
    ("phi-3-mini", "traits.fused_gate_up", True),
    ("phi-4", "traits.fused_gate_up", True),
    ("gemma-2-2b", "traits.fp32_norms", True),
    ("gemma-2-2b", "traits.norms_per_layer", 4),
    ("gemma-2-2b", "traits.sliding_window_masks", True),
    ("gemma-2-2b", "attention", "eager"),
    ("gemma-2-2b", "final_logit_softcap", 30.0),
    ("gemma-3-1b", "traits.fp32_norms", True),
    ("gemma-3-1b", "traits.norms_per_layer", 4),
    ("gemma-3-1b", "qk_norm", True),
    ("gemma-3-1b", "attention", "sdpa"),
    ("gemma-3-1b", "final_logit_softcap", None),
    ("qwen3-8b", "qk_norm", True),
    ("qwen3-30b-a3b", "qk_norm", True),
    ("olmoe-1b-7b", "qk_norm", True),
    ("qwen2.5-7b", "biases", (True, False, False)),
    ("gpt2", "biases", (True, True, True)),
    ("gpt-oss-20b", "sinks", True),
    ("gpt-oss-20b", "attention", "eager"),
    ("gpt-oss-20b", "biases", (True, True, False)),
    ("llama-3.1-8b", "traits", Traits()),
    ("llama-3.1-8b", "qk_norm", False),
    ("mixtral-8x7b", "traits", Traits()),
    ("internvl3-8b", "traits", Traits()),  # its language model's (Qwen2), read from text_config
    ("gpt2", "fsdp_units", ("GPT2Block",)),
    ("phi-3-mini", "fsdp_units", ("Phi3DecoderLayer",)),
    ("qwen2.5-vl-3b", "fsdp_units", ("Qwen2_5_VLDecoderLayer", "Qwen2_5_VLVisionBlock")),
    ("internvl3-8b", "fsdp_units", ("InternVLVisionLayer", "Qwen2DecoderLayer")),
    ("qwen-14b", "traits.fused_qkv", True),  # Qwen v1's c_attn (remote code: test_remote_families.py)
    ("qwen-14b", "biases", (True, False, False)),
    ("glm-4-9b-chat", "traits.fused_gate_up", True),
    ("glm-4-9b-chat", "traits.norms_per_layer", 2),
    ("glm-4-9b-chat", "fsdp_units", ("GlmDecoderLayer",)),
]
# catalog models transformers has no class for (their repository's own code builds them: test_remote_families.py)
REMOTE_ONLY = {n for n in catalog.model_names() if catalog.load_model(n).model_type in REMOTE_CODE_ONLY}


def _field(model, path: str):
    obj = model if path == "fsdp_units" else model.text
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("name,path,value", EXPECTED, ids=lambda x: str(x))
def test_the_reader_sets_each_trait(name, path, value):
    assert _field(catalog.load_model(name), path) == value


def test_every_family_in_the_table_is_a_family_memplan_reads():
    assert set(FAMILY_TRAITS) <= set(ALL_FAMILIES)


def _text_only_kinds() -> list[str]:
    """The smallest text-only catalog model of each family (a new size of a known family adds no row)."""
    seen = {}
    for n in sorted(set(catalog.model_names()) - REMOTE_ONLY, key=lambda n: (catalog.load_model(n).params, n)):
        m = catalog.load_model(n)
        if m.vision is None:
            seen.setdefault(m.model_type, n)
    return sorted(seen.values())


@pytest.mark.parametrize("name", _text_only_kinds())
def test_structural_traits_match_the_modules_transformers_builds(name):
    """One decoder layer on the meta device: fused projections, Conv1D, LayerNorm, the layer's own norms, a gate in
    the MLP and a learned position table are what the traits say."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from transformers.pytorch_utils import Conv1D

    from recipe import hf_config

    spec = catalog.load_model(name)
    with torch.device("meta"):
        built = transformers.AutoModelForCausalLM.from_config(hf_config(catalog.model_config(name), layers=1))
    names = dict(built.named_modules())
    linears = {n.rsplit(".", 1)[-1] for n, m in names.items() if isinstance(m, (torch.nn.Linear, Conv1D))}
    layer = next(m for n, m in names.items() if re.search(r"(layers|\.h)\.0$", n))
    norms = [c for c in layer.children() if isinstance(c, torch.nn.LayerNorm) or type(c).__name__.endswith("RMSNorm")]
    params = {n.rsplit(".", 1)[-1] for n, _ in built.named_parameters()}
    f = spec.text.traits
    assert f.fused_qkv == bool(linears & {"qkv_proj", "c_attn"})
    assert f.fused_gate_up == ("gate_up_proj" in linears)
    assert f.gated_mlp == bool(linears & {"gate_proj", "gate_up_proj"} or "gate_up_proj" in params)
    assert f.conv1d == any(isinstance(m, Conv1D) for m in names.values())
    assert f.layernorm == any(isinstance(m, torch.nn.LayerNorm) for m in names.values())
    assert f.norms_per_layer == len(norms)
    assert f.learned_positions == (sum(isinstance(m, torch.nn.Embedding) for m in names.values()) > 1)


FAMILY_TEST = re.compile(
    r"""\b(arch|model_type|mt)\b\s*(==|!=|\bin\b|\bnot\s+in\b)|model_type["']\)\s*(==|!=|\bin\b)"""
    r"""|\b(arch|model_type|mt)\.startswith\("""
)


def _family_literals(source: str) -> list[int]:
    """Lines with a string literal that is a family name (a docstring or comment mentioning one is not)."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.STRING:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                continue
            if value in ALL_FAMILIES:
                out.append(tok.start[0])
    return out


def test_no_term_outside_the_readers_tests_a_family_name():
    """`arch == "phi3"`, `model_type in (...)`, `"gemma2"` as a literal: a family's difference is a trait set by the
    reader (planner/model/shapes.py FAMILY_TRAITS), read by the terms."""
    found = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in READERS:
                continue
            source = path.read_text()
            lines = source.splitlines()
            hits = {i + 1 for i, line in enumerate(lines) if FAMILY_TEST.search(line.split("#")[0])}
            hits |= set(_family_literals(source))
            found += [f"{rel}:{i}: {lines[i - 1].strip()}" for i in sorted(hits)]
    assert not found, "family names tested outside the readers (make them traits):\n" + "\n".join(found)


def test_gemma2_attends_with_sdpa_before_transformers_5_21():
    """transformers 5.20.0 modeling_gemma2.py:352 `_supports_sdpa = True`, 5.21.0 `False`: the catalog counts eager
    (the pinned transformers); a measurement made with an older one is compared with SDPA."""
    from planner.model.modelspec import as_run_by

    gemma = catalog.load_model("gemma-2-2b")
    assert gemma.text.attention == "eager"
    assert as_run_by(gemma, "5.17.0").text.attention == "sdpa" == as_run_by(gemma, "5.20.1").text.attention
    assert as_run_by(gemma, "5.21.0") is gemma and as_run_by(gemma, "") is gemma
    llama = catalog.load_model("llama-3.2-1b")
    assert as_run_by(llama, "5.17.0") is llama
