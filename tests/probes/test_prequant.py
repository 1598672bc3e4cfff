"""compressed-tensors' and hqq's real layers on a tiny Llama (tests/probes/prequant_layers.py) against
planner.estimate.quant: the bytes each quantized linear stores at load, the dense copy compressed-tensors keeps after
a training step, and the peak one quantized linear's forward allocates. They run as transformers 4.57 loads them
(compressed-tensors 0.12.2, PEFT 0.17.1, hqq 0.2.8: the stack ms-swift 3.10 pins), in the venv MEMPLAN_PREQUANT_PYTHON
names (`make fwenv` builds .fwenv/prequant with those pins, tools/fwenv.sh; `make test` sets it); skipped where it names
no such venv."""

import json
import os
import subprocess
from math import prod
from pathlib import Path

import pytest

from planner.estimate import quant

SCRIPT = Path(__file__).with_name("prequant_layers.py")
ROOT = Path(__file__).resolve().parents[2]
TOKENS = 64  # prequant_layers.py's rows


@pytest.fixture(scope="module", params=["ct", "hqq"])
def real(request) -> tuple[str, dict]:
    python = os.environ.get("MEMPLAN_PREQUANT_PYTHON")
    if not python or not Path(python).is_file():
        pytest.skip(
            "MEMPLAN_PREQUANT_PYTHON names no venv with compressed-tensors 0.12.2 and hqq (make fwenv builds .fwenv/prequant)"
        )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([python, str(SCRIPT), request.param], capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    return request.param, json.loads(out.stdout.strip().splitlines()[-1])


def weights(r: dict) -> int:
    return sum(n * k for n, k in r["linears"])


def test_stored_bytes_to_the_byte(real):
    """ct: weight_packed int32, weight_scale bf16 a group of 128, weight_shape int64[2]; hqq: W_q, fp32 scale, zero."""
    mode, r = real
    q = {"ct": quant.CT, "hqq": quant.HQQ}[mode]
    shapes = quant.CT_SHAPE_BYTES * len(r["linears"]) if mode == "ct" else 0
    assert sum(r["loaded"].values()) == weights(r) * quant.stored_bytes_per_weight(q) + shapes


def test_compressed_tensors_keeps_a_dense_copy_after_a_step(real):
    """After the first step every quantized linear holds its dense bf16 weight beside the packed one, and the second
    step adds nothing (quant.dense_copy_bytes); HQQ keeps nothing."""
    mode, r = real
    dense = {k: v for k, v in r["after_step1"].items() if k not in r["loaded"]}
    assert dense == ({"weight:bfloat16": 2 * weights(r)} if mode == "ct" else {})
    assert r["after_step2"] == r["after_step1"]


def test_one_linears_forward_transient_within_3_percent_below_the_term(real):
    """The peak of one down_proj forward beyond its output (and, for ct, beyond the kept dense weight, which the
    tracker counts as new) against quant.dequantized_weight_bytes: ct's later forwards (fake quantization) 3.92
    bf16 copies against the 3 transient and the 1 saved counted, its first (decompression) lower; hqq's fp32 dequantization 11.83 bytes a
    weight against 12. The term counts whole weight-sized buffers; the tracker's 512-byte rounding and the
    per-group scale temporaries make up the difference."""
    mode, r = real
    for when in ("first", "later"):
        t = r["transient"][when]
        n = prod(t["shape"])
        kept = 2 * n if mode == "ct" else 0
        measured = t["peak"] - t["output"] - kept
        saved = 2 * n if mode == "ct" else 0  # the fake-quantized copy F.linear saves, live after the call
        term = quant.CT_FAKE_QUANT_WEIGHTS * 2 * n + saved if mode == "ct" else quant.HQQ_DEQUANT_BYTES * n
        assert measured <= term
        if when == "later":
            assert measured >= 0.97 * term


def test_what_a_quantized_linears_forward_saves(real):
    """hqq saves its input and nothing else (the term quant.retained_input_elements_per_token counts, as int8's);
    compressed-tensors' F.linear saves a view of the fake-quantized weight, which the module's restored weight no
    longer holds: 2 bytes a weight until backward (quant.saved_weights_layer_bytes)."""
    mode, r = real
    out_features, in_features = r["transient"]["later"]["shape"]
    saved = [(s["is_input"], s["is_stored"], s["bytes"]) for s in r["saved"]]
    hqq = [(True, False, 2 * TOKENS * in_features)]  # the bf16 input, TOKENS rows
    assert saved == (hqq if mode == "hqq" else [(False, False, 2 * out_features * in_features)])
