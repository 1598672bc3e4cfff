"""Prequantized checkpoints (planner/model/prequant.py, issue 49 item 6): a GPTQ, AWQ or bitsandbytes checkpoint is
planned as the quantized base it is, from its config.json's quantization_config or, offline, from its id's suffix.
The quantization_config dicts below are shaped as the publishers' config.json files carry them (Qwen's
Qwen2.5-7B-Instruct-GPTQ-Int4 and -AWQ, unsloth's -bnb-4bit; fields as transformers' GPTQConfig, AwqConfig and
BitsAndBytesConfig serialize them). The bytes each base stores and dequantizes are pinned in test_quant.py and
tests/probes/test_gptqmodel.py; here the plan of the checkpoint must be exactly the plan of --quant on its base."""

import json

import pytest

from planner import advise
from planner.errors import BadInput
from planner.model import catalog, prequant

GPTQ = {
    "batch_size": 1,
    "bits": 4,
    "damp_percent": 0.01,
    "desc_act": False,
    "group_size": 128,
    "quant_method": "gptq",
    "sym": True,
    "true_sequential": True,
    "use_exllama": True,
}
AWQ = {"bits": 4, "group_size": 128, "modules_to_not_convert": None, "quant_method": "awq", "version": "gemm"}
BNB4 = {
    "_load_in_4bit": True,
    "_load_in_8bit": False,
    "bnb_4bit_compute_dtype": "bfloat16",
    "bnb_4bit_quant_storage": "uint8",
    "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": True,
    "load_in_4bit": True,
    "load_in_8bit": False,
    "quant_method": "bitsandbytes",
}
CT = {  # llm-compressor's W4A16 as compressed-tensors 0.12.2 writes it (tests/probes/prequant_layers.py's checkpoint)
    "config_groups": {
        "group_0": {
            "format": "pack-quantized", "input_activations": None, "output_activations": None, "targets": ["Linear"],
            "weights": {"actorder": None, "block_structure": None, "dynamic": False, "group_size": 128, "num_bits": 4,
                        "observer": "minmax", "observer_kwargs": {}, "strategy": "group", "symmetric": True,
                        "type": "int"},
        }
    },
    "format": "pack-quantized", "global_compression_ratio": None, "ignore": ["lm_head"], "kv_cache_scheme": None,
    "quant_method": "compressed-tensors", "quantization_status": "compressed", "sparsity_config": {},
    "transform_config": {}, "version": "0.12.2",
}  # fmt: skip
HQQ = {  # transformers 4.57's HqqConfig(nbits=4, group_size=64).to_dict()
    "quant_config": {
        "weight_quant_params": {"nbits": 4, "channel_wise": True, "group_size": 64, "optimize": True,
                                "round_zero": True, "axis": 1, "view_as_float": False},
        "scale_quant_params": None, "zero_quant_params": None, "offload_meta": False,
    },
    "quant_method": "hqq", "skip_modules": ["lm_head"],
}  # fmt: skip
FP8_CT = {**CT, "format": "float-quantized", "config_groups": {"group_0": {**CT["config_groups"]["group_0"],
          "format": "float-quantized", "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}  # fmt: skip


def ct(fmt: str = "pack-quantized", inputs: dict | None = None, **weights) -> dict:
    """CT with its one config group's weights (and input activations, format) changed, as compressed-tensors 0.12.2
    writes llm-compressor's other presets (tests/probes/ct_schemes.py's checkpoints)."""
    group = CT["config_groups"]["group_0"]
    group = {**group, "format": fmt, "input_activations": inputs, "weights": {**group["weights"], **weights}}
    return {**CT, "format": fmt, "config_groups": {"group_0": group}}


CHANNEL = {"strategy": "channel", "group_size": None}
BLOCK = {"strategy": "block", "group_size": None, "block_structure": [128, 128]}
FP8 = {"num_bits": 8, "type": "float"}
TOKEN_FP8 = {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True, "symmetric": True}
BODY = {"gpu": "rtx4090", "micro_batch": 1, "seq_len": 2048, "checkpointing": "full", "framework": "hf"}


def folder(tmp_path, qc: dict | None, name: str = "Qwen2.5-7B-Instruct-quantized"):
    cfg = catalog.model_config("qwen2.5-7b")
    if qc is not None:
        cfg["quantization_config"] = qc
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def check(**kw):
    return advise.check(advise.parse(advise.CheckRequest, {**BODY, **kw}))


@pytest.mark.parametrize(
    ("qc", "quant", "absmax"),
    [
        (GPTQ, "gptq", None),
        (AWQ, "awq", None),
        (BNB4, "nf4", "8bit"),
        ({**BNB4, "bnb_4bit_quant_type": "fp4", "bnb_4bit_use_double_quant": False}, "fp4", "fp32"),
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "int8", None),
        ({"quant_method": "mxfp4"}, "none", None),  # gpt-oss: fine-tuned dequantized at load
        (CT, "ct-w4a16", None),
        (ct(group_size=64), "ct-w4a16-g64", None),
        (ct(group_size=32), "ct-w4a16-g32", None),
        (ct(num_bits=8, **CHANNEL), "ct-w8a16", None),  # W8A16: pack-quantized, one scale a row
        (ct(**BLOCK), "ct-w4a16-block", None),
        (ct(num_bits=8, **BLOCK), "ct-w8a16-block", None),
        (FP8_CT, "ct-w8a16-fp8", None),  # FP8 weights alone: float-quantized, one scale a row
        (ct("float-quantized", **FP8, **BLOCK), "ct-w8a16-fp8-block", None),
        (HQQ, "hqq", None),
        (None, "none", None),
    ],
)
def test_the_quant_a_config_means(qc, quant, absmax):
    cfg = {} if qc is None else {"quantization_config": qc}
    assert prequant.quant_of(cfg, "m") == quant
    assert prequant.absmax_of(cfg) == absmax


@pytest.mark.parametrize(
    "qc",
    [
        {"quant_method": "hqq", "nbits": 4},
        {**GPTQ, "bits": 8},
        {"quant_method": "eetq"},
        ct(symmetric=False),  # W4A16_ASYM: 0.12.2 cannot decompress its packed zero points
        ct(group_size=256),
        ct("int-quantized", num_bits=8, **CHANNEL),  # naive int8: the dense weight replaces it
        ct("int-quantized", {**TOKEN_FP8, "type": "int"}, num_bits=8, **CHANNEL),  # W8A8
        ct("float-quantized", TOKEN_FP8, **FP8, **CHANNEL),  # FP8_DYNAMIC: no input gradient
        ct("float-quantized", {**TOKEN_FP8, "strategy": "group", "group_size": 128}, **FP8, **BLOCK),  # FP8_BLOCK
        ct("float-quantized", **FP8, strategy="tensor", group_size=None),  # one scale a linear: not planned
        ct(**{**BLOCK, "block_structure": [64, 64]}),  # blocks of another shape
        ct("pack-quantized", **FP8, **CHANNEL),  # fp8 weights in the int format
    ],
)
def test_a_method_memplan_does_not_plan_is_refused_naming_it(qc):
    with pytest.raises(BadInput, match=rf"'m' is an? {qc['quant_method']}.*GPTQ and AWQ 4-bit"):
        prequant.quant_of({"quantization_config": qc}, "m")


@pytest.mark.parametrize(
    ("qc", "why"),
    [
        (ct(symmetric=False), "cannot decompress its packed zero points"),
        (ct("float-quantized", TOKEN_FP8, **FP8, **CHANNEL), "under torch.no_grad, so no gradient reaches"),
        (ct("int-quantized", {**TOKEN_FP8, "type": "int"}, num_bits=8, **CHANNEL), "quantized input activations"),
        (ct("float-quantized", **FP8, strategy="tensor", group_size=None), "one scale a row or 128 x 128 blocks"),
    ],
)
def test_a_compressed_tensors_refusal_says_why(qc, why):
    with pytest.raises(BadInput, match=why) as e:
        prequant.quant_of({"quantization_config": qc}, "m")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("name", "base", "method"),
    [
        ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "Qwen/Qwen2.5-7B-Instruct", "gptq"),
        ("Qwen/Qwen2.5-7B-Instruct-AWQ", "Qwen/Qwen2.5-7B-Instruct", "awq"),
        ("unsloth/Qwen2.5-7B-Instruct-bnb-4bit", "unsloth/Qwen2.5-7B-Instruct", "bitsandbytes"),
        ("unsloth/Llama-3.2-1B-Instruct-unsloth-bnb-4bit", "unsloth/Llama-3.2-1B-Instruct", "bitsandbytes"),
        ("ISTA-DASLab/Meta-Llama-3-8B-Instruct-AQLM-2Bit-1x16", "ISTA-DASLab/Meta-Llama-3-8B-Instruct", "aqlm"),
        ("Qwen/Qwen2.5-7B-Instruct", None, None),
    ],
)
def test_the_base_and_quantization_an_id_names(name, base, method):
    split = prequant.split_name(name)
    assert (split[0], split[1]["quant_method"]) == (base, method) if base else split is None


def test_an_id_whose_name_says_aqlm_is_refused_in_one_line():
    """LLaMA-Factory 0.9.5 loads AQLM checkpoints (model/model_utils/quantization.py:125-127); memplan has no AQLM
    terms: its example's id is refused naming the method, whatever its base, and a planned one passes."""
    with pytest.raises(BadInput, match=r"is an aqlm checkpoint \(as its name says\): memplan plans") as e:
        prequant.unplanned_by_name("ISTA-DASLab/Meta-Llama-3-8B-Instruct-AQLM-2Bit-1x16")
    assert "\n" not in str(e.value)
    assert prequant.unplanned_by_name("Qwen/Qwen2.5-7B-Instruct-AWQ") is None


def test_a_gptq_checkpoint_is_planned_as_the_gptq_base_it_is(tmp_path):
    as_checkpoint = check(model=folder(tmp_path, GPTQ), lora_rank=8).plan
    as_flag = check(model="qwen2.5-7b", lora_rank=8, quant="gptq").plan
    as_16_bit = check(model=folder(tmp_path, None, "plain"), lora_rank=8).plan
    assert as_checkpoint.knobs.quant == "gptq"
    assert as_checkpoint.memory == as_flag.memory  # every term and phase, to the byte
    # the decoder linears at 0.52 bytes a weight; the embeddings and head stay 16-bit (15.3 GB against 5.66 GB)
    assert as_16_bit.memory.params_bytes > 2.5 * as_checkpoint.memory.params_bytes


@pytest.mark.parametrize(
    ("qc", "quant"),
    [(CT, "ct-w4a16"), (ct(num_bits=8, **CHANNEL), "ct-w8a16"), (FP8_CT, "ct-w8a16-fp8"), (HQQ, "hqq")],
)
def test_a_compressed_tensors_or_hqq_checkpoint_is_planned_as_the_base_it_is(tmp_path, qc, quant):
    as_checkpoint = check(model=folder(tmp_path, qc), lora_rank=8, framework="hf@4.54").plan
    as_flag = check(model="qwen2.5-7b", lora_rank=8, quant=quant, framework="hf@4.54").plan
    assert as_checkpoint.knobs.quant == quant and as_checkpoint.memory == as_flag.memory


def test_an_id_not_on_this_machine_is_its_base_quantized_as_its_name_says():
    by_id = check(model="unsloth/Qwen2.5-7B-Instruct-bnb-4bit", lora_rank=8).plan
    by_flag = check(model="qwen2.5-7b", lora_rank=8, quant="nf4", quant_absmax="8bit").plan
    assert (by_id.knobs.quant, by_id.knobs.quant_absmax) == ("nf4", "8bit")
    assert by_id.memory == by_flag.memory


def test_an_awq_checkpoint_computes_in_fp16_as_transformers_runs_it(tmp_path):
    result = advise.suggest(
        advise.parse(
            advise.SuggestRequest,
            {"model": folder(tmp_path, AWQ), "gpu": "rtx4090", "seq_len": 2048, "global_batch": 8, "lora_rank": 8,
             "framework": "hf"},
        )
    )  # fmt: skip
    assert result.plans and {p.knobs.precision for p in result.plans} == {"fp16"}
    assert {p.knobs.quant for p in result.plans} == {"awq"}


def test_full_fine_tuning_or_another_quant_of_a_quantized_checkpoint_is_refused(tmp_path):
    path = folder(tmp_path, GPTQ)
    with pytest.raises(BadInput, match="gptq checkpoint: its quantized weights train only through adapters"):
        check(model=path)
    with pytest.raises(BadInput, match="--quant nf4: model .* is a gptq checkpoint"):
        check(model=path, lora_rank=8, quant="nf4")


def test_the_model_summary_names_the_checkpoints_quantization(tmp_path):
    assert check(model=folder(tmp_path, GPTQ), lora_rank=8).model["quantization"] == "gptq"
    gpt_oss = check(model=folder(tmp_path, {"quant_method": "mxfp4"}, "oss"), lora_rank=8)
    assert gpt_oss.plan.knobs.quant == "none" and "dequantized to 16 bits" in gpt_oss.model["quantization_note"]
    assert "quantization" not in check(model="qwen2.5-7b", lora_rank=8).model
