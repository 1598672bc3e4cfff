"""compressed-tensors' FP8 and block schemes on a tiny Llama (tests/probes/ct_schemes.py's MORE, in the venv
MEMPLAN_PREQUANT_PYTHON names: compressed-tensors 0.12.2, transformers 4.57.1, PEFT 0.17.1, the fp8 adapter upcast as
PEFT >= 0.19 does) against planner.estimate.quant: the bytes each planned scheme saves, loads and holds after a LoRA
step, to the byte; a later forward's fake quantization within 3%; and why FP8_DYNAMIC and FP8_BLOCK are refused.
Sweep tier: compressing, loading and stepping six checkpoints takes 20-55 s (2 busy cores); the terms and the reader
are pinned on every commit by tests/planner/estimate/test_quant.py and tests/planner/model/test_prequant.py."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from planner.estimate import quant
from planner.model import prequant

pytestmark = pytest.mark.sweep
SCRIPT = Path(__file__).with_name("ct_schemes.py")
ROOT = Path(__file__).resolve().parents[2]
PLANNED = {
    "w4a16-block": "ct-w4a16-block",
    "w8a16-block": "ct-w8a16-block",
    "fp8": "ct-w8a16-fp8",
    "fp8-block": "ct-w8a16-fp8-block",
}
# FP8_BLOCK, FP8_DYNAMIC and W8A8 (int-quantized int8 weights, int8 activations a token): quantized input activations
REFUSED = ("fp8-block-dynamic", "fp8-dynamic-peft19", "w8a8-int")


def run(*names: str) -> dict:
    """ct_schemes.py's JSON line for `names` (none: test_ct_schemes.py's schemes and the MoE), in the prequant venv."""
    python = os.environ.get("MEMPLAN_PREQUANT_PYTHON")
    if not python or not Path(python).is_file():
        pytest.skip(
            "MEMPLAN_PREQUANT_PYTHON names no venv with compressed-tensors 0.12.2 (make fwenv builds .fwenv/prequant)"
        )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([python, str(SCRIPT), *names], capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def real() -> dict:
    return run(*PLANNED, *REFUSED)


def weights(r: dict) -> int:
    return sum(n * k for n, k in r["linears"])


def stored_term(r: dict, q: str) -> int:
    """quant.tensor_stored_bytes over the probe's linears: the weight as stored, its scales, weight_shape where packed."""
    shape = quant.CT_SHAPE_BYTES if quant.CT_SCHEMES[q][0] == "int" else 0
    return int(sum(n * k * quant.stored_bytes_per_weight(q, k) + shape for n, k in r["linears"]))


@pytest.mark.parametrize("scheme", list(PLANNED))
def test_each_fp8_or_block_scheme_saves_loads_and_steps_as_the_terms_to_the_byte(real, scheme):
    """Saved and loaded: the term (tolerance: none). After one LoRA step: an int block scheme holds the dense bf16
    copy beside weight_packed, an fp8 one the dense weight in place of the float8 one (quant.base_bytes, which
    subtracts quant.ct_replaced_bytes_per_weight, plus quant.dense_copy_bytes, to the byte); every LoRA B gets a
    gradient and AdamW steps. Under PEFT 0.17.1 an fp8 base's adapter is float8 (what PEFT 0.19 upcasts)."""
    r, q = real[scheme], PLANNED[scheme]
    assert prequant.quant_of({"quantization_config": r["qc"]}, "m") == q
    assert sum(r["saved"].values()) == sum(r["loaded"].values()) == stored_term(r, q)
    held = stored_term(r, q) - quant.ct_replaced_bytes_per_weight(q) * weights(r) + 2 * weights(r)
    assert sum(r["after_step"].values()) == held
    assert r["lora_grads"] and not r["optimizer_error"]
    assert r["lora_dtypes"] == (["float8_e4m3fn"] if quant.CT_SCHEMES[q][0] == "float" else ["float32"])


@pytest.mark.parametrize("scheme", list(PLANNED))
def test_a_later_forward_fake_quantizes_within_3_percent_below_the_term(real, scheme):
    """One down_proj forward after the step: its peak beyond the output and the kept dense weight within 3% below
    quant.ct_fake_quant_bytes_per_weight plus the saved copy (a block as a row: 2 bf16 copies; fp8 one float8 copy
    more: measured 5.83 and 6.83 bytes a weight against 6 and 7), and the fake-quantized weight alone saved."""
    t = real[scheme]["transient"]
    n = t["shape"][0] * t["shape"][1]
    measured = t["peak"] - t["output"] - 2 * n
    term = quant.ct_fake_quant_bytes_per_weight(PLANNED[scheme], 2) * n + 2 * n
    assert 0.97 * term <= measured <= term
    assert [(s["is_input"], s["is_stored"], s["bytes"]) for s in real[scheme]["saved_for_backward"]] == [
        (False, False, 2 * n)
    ]


@pytest.mark.parametrize("scheme", REFUSED)
def test_quantized_input_activations_cut_the_input_gradient_and_are_refused(real, scheme):
    """FP8_DYNAMIC and FP8_BLOCK (their adapter upcast as PEFT 0.19 does) and int8 W8A8: the step runs, but a
    quantized linear's output does not depend on its input for autograd (the input's fake quantization runs under
    torch.no_grad), so
    the LoRA B of every linear whose output reaches the loss only through another quantized linear (q, k, v, gate,
    up) gets no gradient. Refused in one line saying so."""
    r = real[scheme]
    assert r["output_requires_grad"] is False
    assert r["without_grad"] == ["gate_proj", "k_proj", "q_proj", "up_proj", "v_proj"]
    with pytest.raises(Exception, match="no gradient reaches the layers below"):
        prequant.quant_of({"quantization_config": r["qc"]}, "m")


def test_w8a8_int8_loads_its_int8_weights_and_steps_on_a_dense_copy_in_their_place(real):
    """W8A8 (int-quantized, measured 2026-12-05 on compressed-tensors 0.12.2): int8 weights and a bf16 scale a row
    saved and loaded (1,572,864 + 10,240 bytes over the probe's linears: 1 byte a weight + 2 a row), and after a step
    the dense bf16 weight in the int8 one's place (3,145,728: 2 bytes a weight), as the naive int-quantized W8A16
    (test_ct_schemes.py); its refusal is the input's fake quantization above."""
    r = real["w8a8-int"]
    rows = sum(n for n, _ in r["linears"])
    assert r["saved"] == r["loaded"] == {"weight:int8": weights(r), "weight_scale:bfloat16": 2 * rows}
    assert r["after_step"] == {"weight:bfloat16": 2 * weights(r), "weight_scale:bfloat16": 2 * rows}
