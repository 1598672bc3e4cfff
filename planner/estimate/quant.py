"""Quantized frozen bases under LoRA (--quant): what each format stores per weight, which part FSDP and ZeRO-3 shard,
and what the matmuls dequantize.

- nf4/fp4 (bitsandbytes 4-bit, QLoRA): two weights a byte, one absmax per block of 64 weights, and with double
  quantization (QLoRA's recipe, exported) that absmax in 8 bits with one fp32 absmax per 256 blocks:
  0.5 + 1/64 + 4/(64 x 256) bytes per weight (Dettmers et al. 2023, "QLoRA", section 3: 0.127 bits of constants per
  parameter). Every decoder linear is quantized (transformers leaves lm_head and the embeddings in half).
  Sharded (FSDP2, ZeRO-3), the packed weight is stored in the base's dtype (`bnb_4bit_quant_storage`, which
  LLaMA-Factory 0.9.5 model/model_utils/quantization.py:178 and axolotl 0.19.0 loaders/model.py:809 always set and
  memplan exports) so that FSDP and DeepSpeed shard it as any half-precision parameter (transformers 5.23
  integrations/bitsandbytes.py:208-221); its quant state (the absmax constants) is an attribute, not a
  parameter, so every rank keeps all of it (measured on 2 gloo ranks: tests/probes/test_quant.py).
- bitsandbytes' MatMul4Bit keeps only the packed weight for backward, dequantizes it into the compute dtype for
  the forward matmul (CUDA, more than 1536 tokens: dequantize then F.linear) and again for the input gradient:
  one dequantized weight is live at a time.
- int8 (bitsandbytes LLM.int8, `load_in_8bit`), read in bitsandbytes 0.50.2: the weight is CB, int8 [N, K], with
  SCB, one fp32 absmax per output row (nn/modules.py:737-748): 1 + 4/K bytes a weight. Backward dequantizes the
  whole weight for the input gradient (autograd/_functions.py:235-238: CB.to(dtype, copy=True), 2 bytes a weight in
  bf16). Forward keeps its input in `ctx.tensors` (:186-188), an attribute, not save_for_backward, so non-reentrant
  checkpointing (transformers' default) cannot drop it: under a checkpoint every quantized linear's input stays (the
  sim's stand-in, recipe.quant.Linear8bitStandIn, against real Linear8bitLt layers on CPU:
  tests/probes/test_recipe_sim.py). The forward's own temporaries (the int8 input, the int32 and fp16 outputs: 6
  bytes per output element, backends/cuda/ops.py:80-210) are smaller than the logits at the start of backward for
  the models planned, and are left out. Not sharded: FSDP2 drops Int8Params' CB (the next
  forward fails) and LLaMA-Factory 0.9.5 refuses it (model/model_utils/quantization.py:187-188).
- gptq, awq: a prequantized 4-bit base with groups of 128 (transformers 5.23's GPTQConfig and AwqConfig defaults,
  utils/quantization_config.py:687, :820-821), loaded through gptqmodel (quantizers/quantizer_gptq.py:35-98,
  quantizer_awq.py:45-94; gptqmodel 7.7.0 read and measured) with backend="auto_trainable", which memplan exports:
  the default "auto" picks kernels that raise at model.train() (gptqmodel utils/importer.py:892). Every tensor is a
  buffer (qweight 0.5, qzeros 0.5/g, fp16 scales 2/g bytes a weight; GPTQ's g_idx 4 bytes per input: measured
  0.5205 bytes a weight on a 4096 x 4096 TorchLinear, tests/probes/test_gptqmodel.py), so FSDP and ZeRO-3 shard
  none of it: not planned sharded.
  - gptq trains through TorchLinear's eager forward (TritonV2Linear falls back to it in training; torch.py:344-376):
    the whole weight dequantized (fp16, then cast to the input's dtype) and multiplied under plain autograd, which
    saves that dequantized weight for the input gradient, and not the input: 2 bytes a weight of every quantized
    linear in every layer not under a checkpoint, until backward (measured on the real layer). Its Triton
    dequantization is off in training (torch.py:678-682): the eager one (qlinear/__init__.py:1057-1104) holds the
    int8 codes, their difference from the gathered zeros, the gathered fp16 scales and their fp16 product at once,
    6 bytes a weight, whatever the input's dtype (GPTQ_DEQUANT_BYTES). transformers 5.23 loads a GPTQ checkpoint
    through optimum (>= 1.24.0; quantizer_gptq.py:36, :52-60): measured with optimum 2.3.0 on CPU
    (tests/probes/test_gptq_tf5.py), where it picks TorchAtenLinear, whose training forward is the same eager one.
  - awq trains through AwqGEMMLinear or AwqGEMMTritonLinear (CUDA; gemm_awq.py:43-110, gemm_awq_triton.py:44-156):
    custom Functions that save only the packed tensors and dequantize the weight (fp16) in forward and again in
    backward, as bitsandbytes' 4-bit does. Without triton and the CUDA extension gptqmodel falls back to
    AwqTorchLinear, which saves the dequantized weight as GPTQ does (measured on CPU): not what is planned.
    transformers runs AWQ in fp16 on CUDA whatever dtype is asked (quantizer_awq.py:54-62): planned in fp16 only.
- ct-w4a16: an llm-compressor checkpoint in compressed-tensors' pack-quantized format (4-bit int, groups of 128),
  as transformers 4.57 runs it (run_compressed True: quantizer_compressed_tensors.py:79 wraps every quantized linear
  in compressed-tensors 0.12.2's CompressedLinear, quantization/lifecycle/apply.py:151-163). At load each holds
  weight_packed (int32, 0.5 bytes a weight), weight_scale (the load dtype, 2 bytes a group) and weight_shape
  (int64[2], 16 bytes a linear). Its first forward decompresses the weight and registers it as a dense parameter
  beside the packed one, kept for good (linear/compressed_linear.py:98-109): once a step has reached every
  quantized linear (an MoE's experts as routing reaches them; over the steps of a run, all of them), the base holds
  the dense model too, 2 bytes a weight more (measured 0.5 + 2/128 bytes a weight packed and exactly 2 dense after
  a step: tests/probes/test_prequant.py). Each later forward runs compressed-tensors' fake quantization over the
  dense weight (quantization/lifecycle/forward.py:379-393: a clone that becomes the kept weight, the zero point,
  the scaled, clamped and rounded copies) and multiplies by the fake-quantized copy, which F.linear saves for the
  input gradient (a view of it) while the module's weight is restored: 2 bytes a weight of every quantized linear
  saved until backward, as GPTQ's, and up to 3 more copies of the largest one transient (measured with the saved
  one: 3.92 against 4). transformers 5 loads the same
  checkpoint through compressed-tensors >= 0.15 without CompressedLinear: the modules keep no `weight` until a
  model-level hook decompresses all of them at the first forward (0.20.1 compressors/model_compressors/
  model_compressor.py:258-279), and PEFT >= 0.18 reads `module.weight` when it wraps a linear
  (tuners/tuners_utils.py `_get_in_out_features`): get_peft_model raises (measured with transformers 5.25, PEFT
  0.21.2); CompressedTensorsConfig(dequantize=True) loads the dense model, which is the unquantized plan.
  The other pack-quantized weight-only schemes run the same way (CT_SCHEMES: W4A16 in groups of 64 or 32, W8A16
  with one scale a row, the format llm-compressor's infer_quantization_format gives W8A16): weight_packed holds
  32/num_bits weights an int32 (compressors/quantized_compressors/pack_quantized.py:65-70), weight_scale one
  load-dtype value a group or a row (quantization/lifecycle/initialize.py:166-175), ct_stored_bytes_per_weight;
  measured to the byte, saved and loaded, with the dense copy after a step: tests/probes/test_ct_schemes.py.
  In 128 x 128 blocks (strategy block: ct-w4a16-block, ct-w8a16-block) weight_scale holds one value a block
  (initialize.py:176-198) and the fake quantization takes forward.py:209-260's block branch, which allocates no output
  first: 2 copies transient, as with a scale a row (measured 2.92 with the saved one).
  FP8 weights (ct-w8a16-fp8 one scale a row, ct-w8a16-fp8-block one a 128 x 128 block; the float-quantized format
  llm-compressor gives 8-bit float weights) are stored as they are used: `weight` in float8_e4m3fn, 1 byte a weight,
  with the bf16 weight_scale and no weight_shape (naive_quantized.py:70-71). The first forward's decompressed weight
  is registered under the same name (compressed_linear.py:104-105), so it replaces the fp8 one: after a step each
  linear holds its scales and the dense bf16 weight alone (measured to the byte). A later forward's fake
  quantization rounds by a cast to float8 and back (quantization/quant_args.py:378-390): one float8 copy more,
  1 byte a weight (measured 6.83 bytes a weight with the saved copy against 7). PEFT up to 0.18 gives the adapter
  the base weight's float8 dtype (0.17.1 tuners/tuners_utils.py:1104-1105), which AdamW cannot step (measured:
  "mul_cpu_reduced_float" not implemented for Float8_e4m3fn); PEFT 0.19.0 upcasts a float8 adapter to fp32
  (tuners_utils.py:2166-2171), and the step runs (measured with PEFT 0.19.1 on transformers 4.57.1): planned there.
  Refused (planner.model.prequant), each measured in tests/probes/test_ct_schemes.py: an asymmetric scheme (its
  packed zero points: 0.12.2 cannot decompress them, pack_quantized.py:171-177 raises at the first forward); the
  int-quantized format (its int8 weight replaced as fp8's is; no --quant value); quantized input activations (W8A8, FP8,
  FP8_DYNAMIC, FP8_BLOCK): each forward fake-quantizes the linear's input under torch.no_grad
  (quantization/lifecycle/forward.py:156-157, 375-377), so no gradient reaches what is below a quantized linear but
  through the residual stream (measured: a linear's output has no grad_fn, and LoRA's B in every attention
  projection gets no gradient); fp8 per tensor and blocks of another shape.
  CompressedTensorsConfig(run_compressed=False) decompresses every linear at load instead (transformers 4.57.1
  quantizers/quantizer_compressed_tensors.py:86-92, decompress_model) and, with 0.12.2, leaves weight_packed,
  weight_scale and weight_shape beside the dense weight (measured on the W4A16 probe: 786,432 + 24,576 + 224 B
  with 3,145,728 B dense): the bytes the run-compressed plan counts after the first step, held from load on.
  An MoE's experts: each expert's CompressedLinear decompresses at its first forward (compressed_linear.py:102-107),
  which transformers 4.57 runs for the experts routing reaches (measured on a tiny Qwen3-MoE, 8 experts, 2 a token:
  a one-token step decompresses 12 of its 48 expert linears, a 512-token step all of them); an expert is missed by
  all of a step's T tokens with probability (1 - k/E)^T under balanced routing (Qwen3-30B-A3B, 8 of 128, 512
  tokens: e^-33), so every expert's dense copy is counted from the first step.
- hqq: HQQ 4-bit (transformers' HqqConfig defaults: groups of 64, axis 1), as transformers 4.57 builds HQQLinear:
  compute_dtype fp32 whatever dtype is asked (quantizers/quantizer_hqq.py:74-79: create_quantized_param is called
  without it, modeling_utils.py:774), so W_q (uint8, 0.5 bytes a weight) with an fp32 scale and zero a group: 0.625
  bytes a weight (measured exactly). Its forward (HQQBackend.PYTORCH, hqq 0.2.8 core/quantize.py:888-889,
  HQQMatmulNoCacheMul :322-352) dequantizes the whole weight in fp32 (Quantizer.dequantize: the unpacked copy,
  (W_q - zero) and its product with the scale) and casts it under autocast, in forward and again for the input
  gradient, saving only the input: 12 bytes a weight of the largest linear transient (measured 11.83).
  transformers 5.x cannot load one (HqqHfQuantizer has no quantize ops: base.py get_quantize_ops raises, measured
  with 5.25).
"""

from __future__ import annotations

from math import prod

from planner.config.knobfields import CT_SCHEMES  # the pack-quantized schemes planned: (num_bits, group_size)
from planner.estimate.lora import INPUT_GROUPS  # the decoder linears that read one tensor

NF4_BLOCK = 64  # bitsandbytes' 4-bit blocksize (transformers' BitsAndBytesConfig default)
NESTED_BLOCK = 256  # double quantization: absmax of the absmax, per 256 blocks
FOUR_BIT = ("nf4", "fp4")
INT8 = "int8"
PREQUANTIZED = ("gptq", "awq")
GROUP = 128  # GPTQConfig / AwqConfig group_size; llm-compressor's W4A16 scheme's
CT = "ct-w4a16"
CT_SCALE_BYTES = 2  # weight_scale in the load dtype (bf16 or fp16; initialize.py:208-222)
HQQ = "hqq"
HQQ_GROUP = 64  # transformers' HqqConfig group_size default (utils/quantization_config.py HqqConfig)
CT_SHAPE_BYTES = 16  # weight_shape, int64[2], one a quantized linear
CT_FAKE_QUANT_WEIGHTS = 3  # compute-dtype copies of a weight a later forward's fake quantization holds transiently
# one fewer with one scale a row: only the group strategy's branch allocates its output first (compressed-tensors
# 0.12.2 quantization/lifecycle/forward.py:261-267, torch.zeros_like(x)); measured 2.92 copies with the saved one
CT_FAKE_QUANT_WEIGHTS_CHANNEL = 2  # and in blocks: forward.py:209-260 (measured 2.92)
CT_FP8_CAST_BYTES = 1  # fp8 fake quantization's cast to float8_e4m3fn and back (quant_args.py:378-390)
CT_FP8_WEIGHT_BYTES = 1  # an fp8 scheme's stored weight, replaced by the dense one at the first forward
# bytes a weight gptqmodel 7.7.0's eager GPTQ dequantization holds at once (int8 codes and their difference from the
# zeros, the fp16 scales gathered to every weight and the product; then the product and its cast, 4): measured 6.0 on
# a 768 x 256 TorchLinear and TorchAtenLinear, bf16 and fp16 input alike, 1,536 bytes over (tests/probes/test_gptq_tf5)
GPTQ_DEQUANT_BYTES = 6
HQQ_DEQUANT_BYTES = 12  # fp32 bytes a weight HQQ's dequantization holds at once: (W_q - zero), its product, unpacked


def packed_bytes_per_weight(quant: str) -> float:
    """The part of a quantized weight that is a parameter (FSDP and ZeRO-3 shard it): 4-bit's packed pairs."""
    return {"nf4": 0.5, "fp4": 0.5}.get(quant, 0.0)


def constants_bytes_per_weight(quant: str, absmax: str = "8bit") -> float:
    """The part every rank keeps whole: 4-bit's absmax, double-quantized (8 bits per 64 weights, fp32 per 256 blocks)
    or, without double quantization (--quant-absmax fp32), fp32 per 64 weights (bitsandbytes 0.50.2
    functional.py:938-951)."""
    if quant not in FOUR_BIT:
        return 0.0
    if absmax == "fp32":
        return 4 / NF4_BLOCK
    return 1 / NF4_BLOCK + 4 / (NF4_BLOCK * NESTED_BLOCK)


def ct_scale_weights(scale, in_features: int) -> int:
    """Weights one weight_scale value covers: a group, a row of in_features (strategy channel) or a block."""
    if isinstance(scale, tuple):
        return prod(scale)
    return scale or in_features


def ct_stored_bytes_per_weight(num_bits: int, scale, in_features: int) -> float:
    """A compressed-tensors weight-only weight as saved and loaded: num_bits/8 bytes of weight_packed (int: 32/num_bits
    weights an int32) or of the float8 weight (float), and one load-dtype weight_scale a group, a row or a block;
    symmetric, so no zero point (pack-quantized's weight_shape, 16 bytes a linear: tensor_stored_bytes)."""
    return num_bits / 8 + CT_SCALE_BYTES / ct_scale_weights(scale, in_features)


def ct_replaced_bytes_per_weight(quant: str) -> int:
    """An fp8 scheme's stored weight, which the first forward's dense one replaces: bytes a weight no longer held."""
    return CT_FP8_WEIGHT_BYTES if quant in CT_SCHEMES and CT_SCHEMES[quant][0] == "float" else 0


def ct_fake_quant_bytes_per_weight(quant: str, compute_bytes: int) -> int:
    """A later forward's fake quantization of one weight, transient: 3 compute-dtype copies in groups, 2 with a scale
    a row or a block, and fp8's float8 copy."""
    kind, _, scale = CT_SCHEMES[quant]
    copies = CT_FAKE_QUANT_WEIGHTS if isinstance(scale, int) else CT_FAKE_QUANT_WEIGHTS_CHANNEL
    return copies * compute_bytes + (CT_FP8_CAST_BYTES if kind == "float" else 0)


def stored_bytes_per_weight(quant: str, in_features: int = 0, absmax: str = "8bit") -> float:
    """Bytes of one quantized weight with its constants (int8's per-row absmax spreads over the K inputs of a row)."""
    if quant == INT8:
        return 1 + 4 / in_features
    if quant in PREQUANTIZED:  # qweight, qzeros, fp16 scales (GPTQ's g_idx: base_bytes)
        return 0.5 + 0.5 / GROUP + 2 / GROUP
    if quant in CT_SCHEMES:  # weight_packed, the half-precision weight_scale (symmetric: no zero point)
        return ct_stored_bytes_per_weight(*CT_SCHEMES[quant][1:], in_features)
    if quant == HQQ:  # W_q, fp32 scale and zero
        return 0.5 + 2 * 4 / HQQ_GROUP
    return packed_bytes_per_weight(quant) + constants_bytes_per_weight(quant, absmax)


def quantized(model, dense: tuple[str, ...] = ()):
    """The decoder weights the format stores quantized: every decoder linear's, but those it leaves dense (`dense`:
    planner.estimate.quant_modules, fused experts and router modules that are no nn.Linear)."""
    return (t for t in model.tensors if t.lora and t.name not in dense)


def quantized_weights(model, dense: tuple[str, ...] = ()) -> int:
    """Weights the format stores quantized (quantized)."""
    return sum(t.numel for t in quantized(model, dense))


def fp32_storage_extra_bytes(model, quant: str, dense: tuple[str, ...] = ()) -> int:
    """A 4-bit base stored in a 16-bit float (bnb_4bit_quant_storage bfloat16, as FSDP-QLoRA loads it) and cast to
    fp32 with its module (planner.estimate.trained.fsdp_upcasts_frozen): each storage element keeps its four 4-bit
    weights in 4 bytes, not 2, so the packed bytes again; the absmax constants are no parameter and stay."""
    return int(quantized_weights(model, dense) * packed_bytes_per_weight(quant))


def replicated_bytes(model, quant: str, absmax: str = "8bit", dense: tuple[str, ...] = ()) -> int:
    """Bytes of the quantized base that sharding leaves whole on every rank."""
    if quant == "none":
        return 0
    return int(quantized_weights(model, dense) * constants_bytes_per_weight(quant, absmax))


def tensor_stored_bytes(t, quant: str, absmax: str = "8bit") -> float:
    """One quantized linear's stored bytes: its packed weights and constants, GPTQ's g_idx (4 bytes an input) and
    compressed-tensors' weight_shape too."""
    index = 4 * t.shape[-1] * t.count if quant == "gptq" else 0
    packed = quant in CT_SCHEMES and CT_SCHEMES[quant][0] == "int"  # pack-quantized: weight_shape
    index += CT_SHAPE_BYTES * t.count * prod(t.shape[:-2]) if packed else 0
    return index + t.numel * stored_bytes_per_weight(quant, t.shape[-1], absmax)


def base_bytes(model, quant: str, absmax: str = "8bit", dense: tuple[str, ...] = ()) -> int:
    """Bytes of the quantized linears, packed weights and constants, before any sharding, as held once a step has run
    (an fp8 scheme's float8 weight replaced by the dense one: dense_copy_bytes); `dense`: the weights the quantizer
    leaves in half (planner.estimate.quant_modules)."""
    if quant == "none":
        return 0
    stored = sum(tensor_stored_bytes(t, quant, absmax) for t in quantized(model, dense))
    return int(stored - ct_replaced_bytes_per_weight(quant) * quantized_weights(model, dense))


def dense_copy_bytes(model, quant: str, weight_bytes: int, dense: tuple[str, ...] = ()) -> int:
    """compressed-tensors (run compressed): the dense weight every quantized linear keeps after its first forward,
    in the load dtype (`weight_bytes` a weight)."""
    return weight_bytes * quantized_weights(model, dense) if quant in CT_SCHEMES else 0


def storage_elements_saved(model, quant: str, storage_bytes: int, dense: tuple[str, ...] = ()) -> int:
    """Elements fewer than the weights' count that the quantized linears occupy as parameters stored in
    `storage_bytes`-byte elements (4-bit in bf16 storage: 4 weights an element), as ZeRO-3 counts them."""
    if quant not in FOUR_BIT:
        return 0
    q = quantized_weights(model, dense)
    return q - int(q * packed_bytes_per_weight(quant) / storage_bytes)


def dequantized_weight_bytes(model, quant: str, compute_bytes: int, dense: tuple[str, ...] = ()) -> int:
    """The largest decoder linear's dequantization transients: one weight in the compute dtype (4-bit), in half
    (int8's CB.to(dtype), awq's fp16); gptq's eager dequantization (GPTQ_DEQUANT_BYTES). A quantized layer dequantizes one
    linear at a time, so stacked experts count one expert's matrix (axolotl's linearized Llama-4 experts are one
    Linear4bit an expert: 9f986f5e7 src/axolotl/monkeypatch/models/llama4/modeling.py:26-46, :69-84)."""
    if quant == "none":
        return 0
    largest = max((prod(t.shape[-2:]) for t in quantized(model, dense)), default=0)
    if quant == INT8:
        return 2 * largest
    if quant == "gptq":
        return GPTQ_DEQUANT_BYTES * largest
    if quant == "awq":
        return 2 * largest
    if quant in CT_SCHEMES:
        return ct_fake_quant_bytes_per_weight(quant, compute_bytes) * largest
    if quant == HQQ:
        return HQQ_DEQUANT_BYTES * largest
    return compute_bytes * largest


def saved_weights_layer_bytes(model, quant: str, dense: tuple[str, ...] = ()) -> int:
    """gptq: the dequantized weights one layer's forward saves for its backward (2 bytes a weight); ct-w4a16: the
    fake-quantized copies (in half precision, as the base loads)."""
    if quant != "gptq" and quant not in CT_SCHEMES:
        return 0
    return 2 * quantized_weights(model, dense) // model.text.layers


def retained_input_elements_per_token(model, quant: str, skip=lambda name, group: False) -> int:
    """int8 and hqq: the inputs one decoder layer's quantized linears keep in ctx.tensors, per token: one tensor for each
    group of linears that read the same one (q/k/v, gate/up), one for every other linear (o_proj, down_proj); the
    groups `skip` names (by their first linear's name, with the tensors of the group) left out. hqq's
    HQQMatmulNoCacheMul saves its input the same way (save_for_backward, so a checkpoint drops it)."""
    if quant not in (INT8, HQQ):
        return 0
    groups: dict[str, list] = {}
    for t in model.tensors:
        if t.role == "layer" and t.lora and len(t.shape) == 2 and not t.name.startswith("router."):
            groups.setdefault(next((g[0] for g in INPUT_GROUPS if t.name in g), t.name), []).append(t)
    return sum(ts[0].shape[1] for name, ts in groups.items() if not skip(name, ts))


def retained_inputs_bytes(model, quant: str, tokens: int, compute_bytes: int, skip=lambda name, ts: False) -> int:
    """int8, per layer: the quantized linears' inputs that stay beside what the layer saves (see skip above)."""
    return tokens * compute_bytes * retained_input_elements_per_token(model, quant, skip)
