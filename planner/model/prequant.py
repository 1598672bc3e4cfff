"""Prequantized checkpoints (issue 49 item 6): the quantized base a checkpoint is, read from its config.json's
`quantization_config` or, for an id not on this machine, from the name its publisher gave it (`-GPTQ-Int4`, `-AWQ`,
`-bnb-4bit`), as the `quant` knob (planner.estimate.quant holds what each format stores and dequantizes).

transformers picks the quantizer from `quantization_config.quant_method` (transformers 5.23
quantizers/auto.py:AUTO_QUANTIZER_MAPPING; the method names: utils/quantization_config.py QuantizationMethod) and
loads the checkpoint's packed weights as they are stored:
- "bitsandbytes": `load_in_4bit` with `bnb_4bit_quant_type` nf4 or fp4 (double quantization by
  `bnb_4bit_use_double_quant`), or `load_in_8bit` (BitsAndBytesConfig, quantization_config.py:396-470);
- "gptq" and "awq" at 4 bits (the only width memplan's terms count; GPTQConfig/AwqConfig `bits`);
- "mxfp4" (gpt-oss) and "fp8" (DeepSeek-V3's fine-grained FP8) checkpoints are fine-tuned dequantized to 16 bits at
  load (Mxfp4Config(dequantize=True), as TRL's gpt-oss recipe loads it; FineGrainedFP8Config(dequantize=True)):
  planned as the 16-bit model, saying so;
- "compressed-tensors" (llm-compressor's format) in `pack-quantized` symmetric int weights with 16-bit activations,
  compressed: 4-bit in groups of 128 (W4A16, the scheme of most "-AWQ" and "-W4A16" builds it makes) as ct-w4a16, of
  64 or 32 as ct-w4a16-g64 / -g32, 8-bit with one scale a row (W8A16) as ct-w8a16, either in 128 x 128 blocks as
  ct-w4a16-block / ct-w8a16-block; and `float-quantized` FP8 weights with 16-bit activations, one scale a row or a
  128 x 128 block, as ct-w8a16-fp8 / ct-w8a16-fp8-block;
- "hqq" at 4 bits in groups of 64 (HqqConfig's defaults) as hqq;
- any other method or width (compressed-tensors' asymmetric, int-quantized, quantized-activation (W8A8, FP8_DYNAMIC,
  FP8_BLOCK) and nvfp4 schemes, eetq, aqlm, quanto, torchao, bitnet, ...)
  is refused in one line.
A quantized base trains only through adapters: transformers' Trainer refuses "purely quantized models" without a
PEFT adapter (trainer.py `_is_quantized_and_base_model`), so full fine-tuning of one is refused too.
"""

from __future__ import annotations

import re

from planner.config.knobfields import CT_SCHEMES
from planner.errors import BadInput

DEQUANTIZED_AT_LOAD = ("mxfp4", "fp8")
PLANNED = ("bitsandbytes", "gptq", "awq", "compressed-tensors", "hqq")

# what publishers append to a quantized checkpoint's id (Qwen's -GPTQ-Int4 / -AWQ, TheBloke's -GPTQ / -AWQ,
# unsloth's -bnb-4bit and -unsloth-bnb-4bit), and the quantization_config such a checkpoint carries
NAME_SUFFIXES: tuple[tuple[str, dict], ...] = (
    (r"[-_.]gptq(?:[-_.]int4)?$", {"quant_method": "gptq", "bits": 4, "group_size": 128}),
    (r"[-_.]gptq[-_.]int8$", {"quant_method": "gptq", "bits": 8, "group_size": 128}),
    (r"[-_.]awq$", {"quant_method": "awq", "bits": 4, "group_size": 128}),
    (
        r"(?:[-_.]unsloth)?[-_.]bnb[-_.]4bit$",
        {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
         "bnb_4bit_use_double_quant": True},
    ),
    (r"[-_.]bnb[-_.]8bit$", {"quant_method": "bitsandbytes", "load_in_8bit": True}),
    # ISTA-DASLab's AQLM builds (`-AQLM-2Bit-1x16`, LLaMA-Factory's examples/train_qlora/llama3_lora_sft_aqlm.yaml):
    # refused by name (unplanned_by_name), as quant_of refuses an aqlm config.json
    (r"[-_.]aqlm(?:[-_.][0-9a-z]+)*$", {"quant_method": "aqlm", "bits": 2}),
)  # fmt: skip


def _config(cfg: dict) -> dict | None:
    """The config.json's quantization_config, where it has one."""
    qc = cfg.get("quantization_config") if isinstance(cfg, dict) else None
    return qc if isinstance(qc, dict) else None


def split_name(name: str) -> tuple[str, dict] | None:
    """(the base's name, the quantization_config its suffix implies) for a quantized checkpoint's id, else None."""
    for pattern, qc in NAME_SUFFIXES:
        m = re.search(pattern, name, flags=re.IGNORECASE)
        if m and m.start() > 0:
            return name[: m.start()], dict(qc)
    return None


FORMATS = {"int": "pack-quantized", "float": "float-quantized"}  # the format each weight type is planned in


def _ct_scheme(qc: dict, group: dict) -> str | None:
    """The CT_SCHEMES value of one config group, else None."""
    w = group.get("weights") or {}
    kind = w.get("type")
    if group.get("input_activations") or (group.get("format") or qc.get("format")) != FORMATS.get(kind):
        return None
    if w.get("symmetric") is False or w.get("dynamic") or w.get("actorder") == "group":
        return None
    block = tuple(w.get("block_structure") or ())
    scale = {"group": w.get("group_size"), "channel": None, "block": block}.get(w.get("strategy", "group"), 0)
    return next((q for q, scheme in CT_SCHEMES.items() if scheme == (kind, w.get("num_bits"), scale)), None)


def _ct_quant(qc: dict) -> str | None:
    """The ct-* value of a compressed-tensors checkpoint stored compressed in one weight-only symmetric scheme
    (planner.estimate.quant.CT_SCHEMES: pack-quantized W4A16 in groups of 128, 64 or 32, W8A16 one scale a row, both
    in 128 x 128 blocks; float-quantized FP8 one scale a row or a 128 x 128 block); None for any other (an asymmetric
    scheme, the int-quantized format, quantized activations: refused, planner.estimate.quant says why)."""
    groups = qc.get("config_groups") or {}
    if qc.get("quantization_status", "compressed") != "compressed":
        return None
    schemes = {_ct_scheme(qc, g) for g in groups.values()}
    return schemes.pop() if len(schemes) == 1 and None not in schemes else None


def _hqq_quant(qc: dict) -> str | None:
    """hqq for an HQQ checkpoint quantized at 4 bits in groups of 64 (one weight_quant_params, or one a linear)."""
    params = qc.get("quant_config") or {}
    each = [params] if "weight_quant_params" in params else list(params.values())
    widths = {(p.get("weight_quant_params") or {}).get("nbits") for p in each if isinstance(p, dict)}
    groups = {(p.get("weight_quant_params") or {}).get("group_size") for p in each if isinstance(p, dict)}
    return "hqq" if each and widths == {4} and groups == {64} else None


def unplanned_by_name(name: str) -> None:
    """BadInput for an id whose name says a quantization memplan does not plan (`-AQLM-2Bit-1x16`), else nothing."""
    split = split_name(name)
    if split is not None and split[1]["quant_method"] not in PLANNED:
        quant_of({"quantization_config": split[1]}, name, said="as its name says")


def quant_of(cfg: dict, name: str, said: str = "its config.json's quantization_config") -> str:
    """The `quant` knob value a config.json's quantization_config means ("none" without one, or where the
    checkpoint is dequantized at load); BadInput naming the method where memplan does not plan it."""
    qc = _config(cfg)
    if not isinstance(qc, dict):
        return "none"
    method = str(qc.get("quant_method", "")).lower()
    bits = qc.get("bits", qc.get("w_bit", 4))
    if method == "bitsandbytes":
        if qc.get("load_in_8bit") or qc.get("_load_in_8bit"):
            return "int8"
        if qc.get("load_in_4bit") or qc.get("_load_in_4bit"):
            return "fp4" if str(qc.get("bnb_4bit_quant_type", "nf4")).lower() == "fp4" else "nf4"
    elif method in ("gptq", "awq") and bits == 4:
        return method
    elif method in DEQUANTIZED_AT_LOAD:
        return "none"
    elif method in READERS and READERS[method](qc):
        return READERS[method](qc)
    what = f"{method or 'an unnamed'} {bits}-bit" if method in ("gptq", "awq") else (method or "an unnamed method")
    raise BadInput(
        f"model {name!r} is {'an' if what[0] in 'aeiou' else 'a'} {what} checkpoint ({said}): memplan plans bitsandbytes "
        "4- and 8-bit, GPTQ and AWQ 4-bit, compressed-tensors weight-only W4A16 and W8A16 (pack-quantized, "
        "symmetric, groups of 128, 64 or 32, one scale a row or 128 x 128 blocks), FP8 (float-quantized, one scale "
        "a row or 128 x 128 blocks) and HQQ 4-bit "
        f"(groups of 64) bases{_ct_why(qc) if method == 'compressed-tensors' else ''}; pass the unquantized model's "
        "config.json (--model PATH)",
        "model",
    )


def _ct_why(qc: dict) -> str:
    """Why a compressed-tensors scheme is not planned, as measured in tests/probes/test_ct_schemes.py."""
    groups = [g for g in (qc.get("config_groups") or {}).values() if isinstance(g, dict)]
    weights = [g.get("weights") or {} for g in groups]
    if any(g.get("input_activations") for g in groups):
        return (
            " (its quantized input activations: compressed-tensors fake-quantizes each linear's input under "
            "torch.no_grad, so no gradient reaches the layers below)"
        )
    if any(w.get("symmetric") is False for w in weights):
        return " (an asymmetric scheme: compressed-tensors 0.12.2 cannot decompress its packed zero points)"
    return ""


READERS = {"compressed-tensors": _ct_quant, "hqq": _hqq_quant}


def absmax_of(cfg: dict) -> str | None:
    """A bitsandbytes 4-bit checkpoint's block constants (the quant_absmax knob): double quantization or not."""
    qc = _config(cfg)
    if not isinstance(qc, dict) or str(qc.get("quant_method", "")).lower() != "bitsandbytes":
        return None
    if not (qc.get("load_in_4bit") or qc.get("_load_in_4bit")):
        return None
    return "8bit" if qc.get("bnb_4bit_use_double_quant") else "fp32"


def dequantized_note(cfg: dict) -> str | None:
    """The line a checkpoint fine-tuned dequantized (mxfp4, fp8) gets: planned as its 16-bit model."""
    qc = _config(cfg)
    method = str(qc.get("quant_method", "")).lower() if isinstance(qc, dict) else ""
    if method not in DEQUANTIZED_AT_LOAD:
        return None
    return f"{method} checkpoint: planned dequantized to 16 bits at load, as it is fine-tuned"


def apply(req, cfg: dict, name: str):
    """The request with the checkpoint's quantization as its base: --quant (and a 4-bit base's --quant-absmax) taken
    from the checkpoint where not given; a different --quant, or full fine-tuning, refused in one line."""
    quant = quant_of(cfg, name)
    if quant == "none":
        return req
    given = req.model_fields_set
    if "quant" in given and req.quant not in ("none", quant):
        raise BadInput(
            f"--quant {req.quant}: model {name!r} is a {quant} checkpoint (its quantization_config); give --quant "
            f"{quant} or the unquantized model",
            "quant",
        )
    if not req.lora_rank:
        raise BadInput(
            f"model {name!r} is a {quant} checkpoint: its quantized weights train only through adapters (transformers' "
            "Trainer refuses a purely quantized model): give --lora-rank N, or the unquantized model",
            "lora_rank",
        )
    update = {"quant": quant}
    if quant == "awq" and "precision" not in given:  # transformers runs AWQ in fp16 (quantizers/quantizer_awq.py:54-62)
        update["precision"] = ["fp16"] if isinstance(req.precision, list) else "fp16"
    absmax = absmax_of(cfg)
    if absmax is not None and "quant_absmax" not in given:
        update["quant_absmax"] = absmax
    return req.model_copy(update=update)
