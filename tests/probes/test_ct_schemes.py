"""compressed-tensors' pack-quantized schemes on a tiny Llama (tests/probes/ct_schemes.py, in the venv
MEMPLAN_PREQUANT_PYTHON names: compressed-tensors 0.12.2, transformers 4.57.1, PEFT 0.17.1) against
planner.estimate.quant: the bytes each scheme saves and loads, to the byte (quant.ct_stored_bytes_per_weight and the
16-byte weight_shape a linear), the dense copy after a step (quant.dense_copy_bytes), and what the schemes memplan
refuses (planner.model.prequant) do when trained."""

import pytest

from planner.config.knobfields import CT_QUANTS
from planner.estimate import quant
from planner.model import prequant
from tests.probes.test_ct_fp8 import PLANNED as MORE  # the fp8 and block schemes, measured in the sweep tier
from tests.probes.test_ct_fp8 import run

PLANNED = {"w4a16-g128": "ct-w4a16", "w4a16-g64": "ct-w4a16-g64", "w4a16-g32": "ct-w4a16-g32", "w8a16": "ct-w8a16"}


CHEAP = ("w4a16-g32", "w8a16")  # every commit's: a group size and a scale a row; the rest in the sweep tier


@pytest.fixture(scope="module")
def real() -> dict:
    """The two cheap schemes on every commit; every scheme and the MoE where a sweep-tier test asks for them
    (`make test-all`)."""
    return run(*CHEAP)


@pytest.fixture(scope="module")
def every() -> dict:
    return run()


def term_bytes(r: dict, q: str) -> int:
    """quant.tensor_stored_bytes over the probe's linears: packed weights, scales, weight_shape."""
    return int(sum(n * k * quant.stored_bytes_per_weight(q, k) + quant.CT_SHAPE_BYTES for n, k in r["linears"]))


@pytest.mark.parametrize("scheme", [pytest.param(s, marks=() if s in CHEAP else pytest.mark.sweep) for s in PLANNED])
def test_each_planned_scheme_saves_loads_and_keeps_its_dense_copy_to_the_byte(request, scheme):
    """W4A16 at 32/64/128 (0.5 + 2/g bytes a weight), W8A16 (1 + 2/K): saved and loaded exactly as the term, the
    config.json read back as the knob value, and after one LoRA step the bf16 dense copy beside them, 2 bytes a
    weight (tolerance: none)."""
    r, q = request.getfixturevalue("real" if scheme in CHEAP else "every")[scheme], PLANNED[scheme]
    assert prequant.quant_of({"quantization_config": r["qc"]}, "m") == q
    assert sum(r["saved"].values()) == sum(r["loaded"].values()) == term_bytes(r, q)
    dense = sum(r["after_step"].values()) - sum(r["loaded"].values())
    assert dense == 2 * sum(n * k for n, k in r["linears"]) and r["lora_grads"] and not r["optimizer_error"]


@pytest.mark.parametrize("scheme", ["w4a16-g32", "w8a16"])
def test_a_later_forward_fake_quantizes_and_saves_as_w4a16_does(real, scheme):
    """One down_proj forward after the step: its peak beyond the output and the kept dense weight within 3% below
    quant.dequantized_weight_bytes plus the saved copy (groups: 3 bf16 copies transient, measured 3.92 with the
    saved one; a scale a row: 2, measured 2.92), and what it saves for backward the fake-quantized weight alone
    (quant.saved_weights_layer_bytes), whatever the bits and groups."""
    r = real[scheme]
    t = r["transient"]
    n = t["shape"][0] * t["shape"][1]
    measured = t["peak"] - t["output"] - 2 * n
    term = quant.ct_fake_quant_bytes_per_weight(PLANNED[scheme], 2) * n + 2 * n  # 3 or 2 bf16 copies, the saved one
    assert 0.97 * term <= measured <= term
    assert [(s["is_input"], s["is_stored"], s["bytes"]) for s in r["saved_for_backward"]] == [(False, False, 2 * n)]


@pytest.mark.sweep
def test_the_schemes_memplan_refuses_fail_or_differ_as_measured(every):
    """Asymmetric W4A16: its packed zero points (0.5/128 bytes a weight saved) cannot be decompressed by 0.12.2;
    int-quantized W8A16: the dense weight replaces the int8 one (2 bytes a weight after a step, not 3); FP8_DYNAMIC:
    PEFT 0.17.1 makes the adapter float8, and AdamW cannot step it (under PEFT 0.19, which upcasts it, the input's
    fake quantization cuts the gradient: test_ct_fp8.py). Each is refused in one line."""
    asym, naive, fp8 = every["w4a16-asym-g128"], every["w8a16-int"], every["fp8-dynamic"]
    weights = sum(n * k for n, k in asym["linears"])
    assert asym["saved"]["weight_zero_point:int32"] == weights // 256 and "packed zero points" in asym["error"]
    assert naive["after_step"]["weight:bfloat16"] == 2 * weights and "weight:int8" not in naive["after_step"]
    assert fp8["lora_dtypes"] == ["float8_e4m3fn"] and fp8["optimizer_error"]
    for r in (asym, naive, fp8):
        with pytest.raises(Exception, match="compressed-tensors"):
            prequant.quant_of({"quantization_config": r["qc"]}, "m")
    assert set(PLANNED.values()) | set(MORE.values()) == set(CT_QUANTS) == set(quant.CT_SCHEMES)


@pytest.mark.sweep
def test_an_moe_decompresses_each_expert_at_its_first_routed_token(every):
    """Tiny Qwen3-MoE, 8 experts a layer, 2 a token, 2 layers: a one-token step leaves the dense copies of the 2
    experts it reached in each layer (12 of 48 expert linears); after a 512-token step every expert holds one, the
    plateau quant.dense_copy_bytes counts from the first step (a real step's thousands of tokens reach them all)."""
    moe = every["moe"]
    per_layer = moe["expert_linears"] // moe["layers"] // moe["experts"]  # gate, up, down
    assert moe["dense_after"] == [moe["top_k"] * per_layer * moe["layers"], moe["expert_linears"]]
