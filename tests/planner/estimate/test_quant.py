"""Quantized bases (planner/estimate/quant.py): each format's stored bytes, what sharding splits, the dequantization
transients and saved tensors, the knob's rules and the exports. The terms' pins to real layers and the sim are in
tests/probes/test_quant.py (4-bit under FSDP2 and ZeRO-3 on gloo ranks) and tests/probes/test_recipe_sim.py
(bitsandbytes' int8 storage, every format's change to the peak against the sim, the stand-ins against real
bitsandbytes steps)."""

import pytest

from planner import advise
from planner.config.knobfields import CT_FP8, CT_QUANTS
from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.estimate import quant
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.estimate.state_terms import params_bytes
from planner.frameworks.rules import peft_fp8_quant
from planner.model import catalog

LLAMA = catalog.load_model("llama-3.1-8b")
GiB = 2**30


def setup(world: int = 1, **kw) -> Setup:
    return Setup(LLAMA, Knobs.make(**{"lora_rank": 16, "precision": "bf16", **kw}), 1, 1, 2048, gpus_per_node=world)


def test_storage_per_format():
    """int8: CB plus one fp32 absmax a row (bitsandbytes nn/modules.py:737-748); GPTQ/AWQ at 4 bits in groups of 128:
    qweight, qzeros and fp16 scales (gptqmodel qlinear/__init__.py:827-865), GPTQ's g_idx per input besides."""
    assert quant.stored_bytes_per_weight("int8", 4096) == 1 + 4 / 4096
    assert quant.stored_bytes_per_weight("gptq") == quant.stored_bytes_per_weight("awq") == 0.5 + 2.5 / 128
    q = quant.quantized_weights(LLAMA)
    index = sum(4 * t.shape[1] * t.count for t in LLAMA.tensors if t.lora)
    assert quant.base_bytes(LLAMA, "gptq") - quant.base_bytes(LLAMA, "awq") == index
    assert quant.base_bytes(LLAMA, "int8") == pytest.approx(q, rel=1e-3)  # 1 byte a weight, 0.08% of absmax


def test_compressed_tensors_and_hqq_storage():
    """ct-w4a16: weight_packed (int32, 8 weights each), a bf16 weight_scale per 128 and a 16-byte weight_shape a linear;
    after a step, the dense bf16 copy beside them. hqq (transformers 4.57): W_q, fp32 scale and zero per 64. Both
    measured to the byte on a real checkpoint in tests/probes/test_prequant.py."""
    q = quant.quantized_weights(LLAMA)
    linears = sum(t.count for t in LLAMA.tensors if t.lora)
    assert quant.base_bytes(LLAMA, "ct-w4a16") == q * (0.5 + 2 / 128) + 16 * linears
    assert quant.base_bytes(LLAMA, "hqq") == q * 0.625
    assert quant.dense_copy_bytes(LLAMA, "ct-w4a16", 2) == 2 * q and quant.dense_copy_bytes(LLAMA, "hqq", 2) == 0
    plain, ct = (params_bytes(setup(quant=v, framework="hf", release="4.54")) for v in ("none", "ct-w4a16"))
    assert ct - plain == quant.base_bytes(LLAMA, "ct-w4a16")  # the dense model, and the packed one beside it


def test_compressed_tensors_schemes_storage():
    """Each pack-quantized scheme: num_bits/8 bytes a weight and one bf16 scale a group, or a row of K for W8A16
    (measured to the byte saved and loaded, tests/probes/test_ct_schemes.py); the dense copy after a step alike."""
    assert [quant.stored_bytes_per_weight(q, 4096) for q in quant.CT_SCHEMES] == [
        0.5 + 2 / 128, 0.5 + 2 / 64, 0.5 + 2 / 32, 1 + 2 / 4096, 0.5 + 2 / 128**2, 1 + 2 / 128**2, 1 + 2 / 4096,
        1 + 2 / 128**2,
    ]  # fmt: skip
    q, g128 = quant.quantized_weights(LLAMA), quant.base_bytes(LLAMA, "ct-w4a16")
    assert quant.base_bytes(LLAMA, "ct-w4a16-g32") - g128 == pytest.approx(q * (2 / 32 - 2 / 128), rel=1e-9)
    assert {quant.dense_copy_bytes(LLAMA, v, 2) for v in quant.CT_SCHEMES} == {2 * q}
    plans = {v: check(quant=v, framework="hf@4.54") for v in ("ct-w4a16", "ct-w8a16")}
    grown = plans["ct-w8a16"].memory.params_bytes - plans["ct-w4a16"].memory.params_bytes
    assert grown == quant.base_bytes(LLAMA, "ct-w8a16") - g128  # the packed bytes only: the dense copy is the same


def test_fp8_and_block_schemes_hold_what_the_probe_measures():
    """ct-w8a16-fp8(-block): the float8 weight (1 byte) with bf16 scales a row or a 128 x 128 block as saved, and after
    a step the scales and the dense bf16 weight that replaced it, no weight_shape; the int block schemes one scale a
    block beside weight_packed and weight_shape (measured to the byte: tests/probes/test_ct_fp8.py)."""
    q = quant.quantized_weights(LLAMA)
    linears = sum(t.count for t in LLAMA.tensors if t.lora)
    rows = sum(t.count * t.shape[0] for t in LLAMA.tensors if t.lora)  # one scale a row
    assert quant.base_bytes(LLAMA, "ct-w8a16-fp8") == 2 * rows  # the scales alone: the fp8 weight is replaced
    assert quant.base_bytes(LLAMA, "ct-w8a16-fp8-block") == q * 2 // 128**2
    assert quant.base_bytes(LLAMA, "ct-w8a16-block") == q * (1 + 2 / 128**2) + 16 * linears
    assert {quant.dense_copy_bytes(LLAMA, v, 2) for v in CT_FP8} == {2 * q}
    largest = max(t.numel // t.count for t in LLAMA.tensors if t.lora)
    fake = {v: quant.dequantized_weight_bytes(LLAMA, v, 2) // largest for v in quant.CT_SCHEMES if "-block" in v}
    assert fake == {"ct-w4a16-block": 4, "ct-w8a16-block": 4, "ct-w8a16-fp8-block": 5}  # 2 bf16 copies (+ float8)
    assert quant.dequantized_weight_bytes(LLAMA, "ct-w8a16-fp8", 2) == 5 * largest
    plans = {v: check(quant=v, framework="hf@4.54") for v in ("none", "ct-w8a16-fp8")}
    assert plans["ct-w8a16-fp8"].memory.params_bytes - plans["none"].memory.params_bytes == 2 * rows


@pytest.mark.parametrize("quant_value", ["ct-w8a16-fp8", "ct-w8a16-fp8-block"])
def test_an_fp8_base_is_refused_where_peft_is_pinned_below_0_19(quant_value):
    """ms-swift 3.x pins peft < 0.19 (v3.10.3 requirements/framework.txt: <0.18), whose LoRA on a float8 base is
    float8 and AdamW cannot step it (measured: tests/probes/test_ct_schemes.py): refused in one line; HF and TRL on
    transformers 4.57 plan it, the launch note asking for PEFT >= 0.19."""
    with pytest.raises(BadInput, match="pins peft < 0.19") as e:
        check(quant=quant_value, framework="swift@3.9")
    assert "\n" not in str(e.value)
    assert check(quant=quant_value, framework="trl@0.22").memory.params_bytes > 0
    assert "PEFT >= 0.19" in check(quant=quant_value, framework="hf@4.54").launch.note


def test_the_peft_pin_rule_refuses_the_fp8_schemes_alone():
    """The rule matches names (the frameworks stage cannot import the config's CT_FP8): exactly CT_FP8 of CT_QUANTS."""
    rule = peft_fp8_quant("x", "y")
    assert (
        [q for q in CT_QUANTS if rule.refuses({"quant": q})] == list(CT_FP8) == ["ct-w8a16-fp8", "ct-w8a16-fp8-block"]
    )


def test_absmax_without_double_quantization():
    """fp32 absmax per 64 weights: 0.5 + 4/64 bytes a weight, 9% more than QLoRA's double-quantized 0.516."""
    assert quant.stored_bytes_per_weight("nf4", absmax="fp32") == 0.5625
    fp32, nested = (params_bytes(setup(quant="nf4", quant_absmax=a)) for a in ("fp32", "8bit"))
    q = quant.quantized_weights(LLAMA)
    assert fp32 - nested == pytest.approx(q * (4 / 64 - 1 / 64 - 4 / 16384), rel=1e-6)


def test_sharding_splits_the_packed_weight_and_keeps_the_constants():
    """4-bit under FSDP or ZeRO-3 on 8 ranks: the packed half byte a weight sharded, the absmax whole on each."""
    replicated = quant.replicated_bytes(LLAMA, "nf4")
    assert replicated == pytest.approx(quant.quantized_weights(LLAMA) * (1 / 64 + 4 / 16384), rel=1e-6)
    whole = params_bytes(setup(quant="nf4"))
    for shard in ({"fsdp": "full"}, {"zero_stage": 3}):
        two, eight = (params_bytes(setup(n, quant="nf4", **shard)) - replicated for n in (2, 8))
        assert eight == pytest.approx(two / 4, rel=1e-6)  # all but the constants shrinks with the ranks
        assert two + replicated < whole / 2 + replicated  # the packed weights are among what is sharded


def test_zero3_gathers_packed_storage():
    """ZeRO-3's gathered elements count a 4-bit linear in bf16 storage elements: four weights an element."""
    saved = quant.storage_elements_saved(LLAMA, "nf4", 2)
    assert saved == quant.quantized_weights(LLAMA) * 3 // 4
    assert quant.storage_elements_saved(LLAMA, "int8", 2) == 0


def test_dequantization_transients_per_format():
    largest = max(t.numel // t.count for t in LLAMA.tensors if t.lora)  # gate/up: 14336 x 4096
    assert quant.dequantized_weight_bytes(LLAMA, "nf4", 2) == 2 * largest
    assert quant.dequantized_weight_bytes(LLAMA, "int8", 4) == 2 * largest  # CB.to(half), whatever the compute
    assert quant.dequantized_weight_bytes(LLAMA, "gptq", 2) == 6 * largest  # eager: codes, scales, product
    assert quant.dequantized_weight_bytes(LLAMA, "awq", 2) == 2 * largest  # fp16, as AWQ runs
    assert quant.dequantized_weight_bytes(LLAMA, "ct-w4a16", 2) == 6 * largest  # fake quantization: 3 bf16 copies
    assert quant.dequantized_weight_bytes(LLAMA, "ct-w8a16", 2) == 4 * largest  # a scale a row: 2 copies
    assert quant.dequantized_weight_bytes(LLAMA, "ct-w8a16-fp8", 2) == 5 * largest  # and fp8's float8 cast
    assert quant.dequantized_weight_bytes(LLAMA, "hqq", 2) == 12 * largest  # 3 fp32 copies, whatever the compute


def test_ct_saves_every_fake_quantized_weight_and_hqq_its_inputs():
    """Against a 4-bit bitsandbytes base: ct-w4a16 saves each linear's fake-quantized copy (2 bytes a weight) as GPTQ
    its dequantized one; hqq saves the quantized linears' inputs as int8 keeps them (no checkpoint here)."""
    nf4, ct, hqq, int8 = (
        breakdown(setup(quant=q, framework="hf", release="4.54"), 80 * GiB) for q in ("nf4", "ct-w4a16", "hqq", "int8")
    )
    assert ct.activations_bytes - nf4.activations_bytes == 2 * quant.quantized_weights(LLAMA)
    assert hqq.activations_bytes == int8.activations_bytes > nf4.activations_bytes


def test_int8_keeps_the_inputs_a_checkpoint_would_drop():
    """Per layer, the inputs of q/k/v (one tensor), o_proj, gate/up (one) and down_proj: 2h + q_dim + intermediate."""
    t = LLAMA.text
    assert quant.retained_input_elements_per_token(LLAMA, "int8") == 2 * t.hidden + t.q_dim + t.intermediate
    plain, int8 = (breakdown(setup(quant=q, checkpointing="full"), 80 * GiB) for q in ("nf4", "int8"))
    kept = t.layers * quant.retained_inputs_bytes(LLAMA, "int8", 2048, 2)
    assert int8.activations_bytes - plain.activations_bytes == kept


def test_gptq_saves_every_dequantized_weight_without_checkpointing():
    """Against a 4-bit bitsandbytes base (whose matmul saves nothing): every layer's weights, 2 bytes each."""
    gptq, nf4 = (breakdown(setup(quant=q, framework="hf"), 80 * GiB) for q in ("gptq", "nf4"))
    assert gptq.activations_bytes - nf4.activations_bytes == 2 * quant.quantized_weights(LLAMA)
    gptq, nf4 = (breakdown(setup(quant=q, framework="hf", checkpointing="full"), 80 * GiB) for q in ("gptq", "nf4"))
    assert gptq.activations_bytes == nf4.activations_bytes  # checkpointed: dropped until the layer's recomputation


@pytest.mark.parametrize(
    "fields,needle",
    [
        ({"quant": "int8", "fsdp": "full"}, "--quant int8 cannot be sharded"),
        ({"quant": "gptq", "zero_stage": 3, "framework": "hf"}, "buffers, which FSDP and ZeRO-3 do not shard"),
        ({"quant": "awq", "framework": "hf"}, "--quant awq with --precision bf16"),
        ({"quant": "gptq", "precision": "fp32", "framework": "hf"}, "--quant gptq computes in fp16 or bf16"),
        ({"quant": "gptq"}, "--framework memplan (the bundled trainer, planner train) cannot run --quant gptq"),
        ({"quant": "nf4", "zero_stage": 3, "offload": "optimizer+params"}, "offloaded to the host"),
        ({"quant": "int8", "quant_absmax": "fp32"}, "--quant-absmax fp32 is how a 4-bit base stores"),
        (
            {"quant": "ct-w4a16", "fsdp": "full", "framework": "hf@4.54"},
            "registers its dense weight at its first forward",
        ),
        ({"quant": "hqq", "zero_stage": 3, "framework": "hf@4.54"}, "HQQLinear keeps its scales and zeros in a dict"),
        ({"quant": "hqq", "precision": "bf16-pure", "framework": "hf@4.54"}, "only under autocast"),
        ({"quant": "ct-w4a16", "framework": "hf"}, "transformers 5 cannot train a compressed-tensors or HQQ base"),
        ({"quant": "ct-w8a16", "framework": "hf"}, "transformers 5 cannot train a compressed-tensors or HQQ base"),
        ({"quant": "ct-w4a16-g32", "zero_stage": 3, "framework": "hf@4.54"}, "registers its dense weight"),
    ],
)
def test_bad_quantized_bases_are_one_line_errors(fields, needle):
    with pytest.raises(BadInput) as e:
        advise.check(
            advise.parse(
                advise.CheckRequest,
                {"model": "llama-3.1-8b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 1, "seq_len": 2048}
                | {"lora_rank": 16, "precision": "bf16"}
                | fields,
            )
        )
    assert needle in str(e.value) and "\n" not in str(e.value)


def check(**kw):
    body = {"model": "llama-3.1-8b", "gpu": "h100", "gpus_per_node": 8, "micro_batch": 1, "seq_len": 2048}
    return advise.check(advise.parse(advise.CheckRequest, {**body, "lora_rank": 16, "precision": "bf16", **kw})).plan


def test_exports_each_base_as_transformers_and_trl_load_it():
    from transformers import AwqConfig, BitsAndBytesConfig, GPTQConfig

    sharded = check(quant="nf4", fsdp="full", framework="hf").launch
    assert sharded.quantization_class == "BitsAndBytesConfig"
    assert str(BitsAndBytesConfig(**sharded.quantization_config).bnb_4bit_quant_storage) == "torch.bfloat16"
    assert "bnb_4bit_quant_storage" not in check(quant="nf4", framework="hf").launch.quantization_config
    int8 = check(quant="int8", framework="trl").launch
    assert BitsAndBytesConfig(**int8.quantization_config).load_in_8bit and "--load_in_8bit" in int8.command
    z3 = check(quant="nf4", zero=3, framework="trl").launch.command
    assert "--bnb_4bit_quant_storage bfloat16" in z3
    gptq = check(quant="gptq", framework="hf").launch
    assert GPTQConfig(**gptq.quantization_config).backend == "auto_trainable" and "auto_trainable" in gptq.note
    awq = check(quant="awq", precision="fp16", framework="hf").launch
    assert awq.quantization_class == "AwqConfig" and AwqConfig(**awq.quantization_config).group_size == 128
    ct = check(quant="ct-w4a16", framework="hf@4.54").launch
    assert ct.quantization_class == "CompressedTensorsConfig" and "transformers 5 cannot train it" in ct.note
    hqq = check(quant="hqq", framework="hf@4.54").launch
    assert hqq.quantization_class == "HqqConfig" and hqq.quantization_config == {"nbits": 4, "group_size": 64}


def test_the_absmax_setting_in_every_frameworks_keys(tmp_path):
    """Exported as each framework names double quantization, and read back: TRL's CLI and BitsAndBytesConfig leave it
    off unless asked (trl model_config.py:164; transformers quantization_config.py:450)."""
    from planner import intake

    plan = check(quant="nf4", quant_absmax="fp32", framework="trl").launch
    assert "--use_bnb_nested_quant" not in plan.command and not plan.quantization_config["bnb_4bit_use_double_quant"]
    assert "--use_bnb_nested_quant" in check(quant="nf4", framework="trl").launch.command
    for flags, want in (("", "fp32"), (" --use_bnb_nested_quant", "8bit")):
        run = tmp_path / "run.sh"
        run.write_text(f"trl sft --model_name_or_path Qwen/Qwen2.5-7B --use_peft --load_in_4bit{flags}\n")
        assert intake.read([str(run)]).request["quant_absmax"] == want
