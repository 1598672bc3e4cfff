"""What a run trains and the dtype each part is held in: the trainable and frozen parameters (LoRA adapters, a VLM's
frozen tower, the idle tower of text-only rows), their bytes per parameter under each precision, and an optimizer's
state bytes per trained parameter. Every memory term that counts parameters reads them here (planner.estimate.memory,
lifecycle, fsdp)."""

from __future__ import annotations

from math import prod

from planner.config.spec import Knobs
from planner.estimate import boft, bottleneck, freeze, heads, lora, lora_ends, oft, peft_tuners, quant
from planner.estimate.quant_modules import dense_names
from planner.estimate.setup import Setup
from planner.estimate.torchao_optim import TORCHAO_BLOCK
from planner.frameworks import FRAMEWORKS, adapter
from planner.model.modelspec import IDLE_AUDIO, IDLE_HEAD, frozen_roles

ADAMW_8BIT_BLOCK = 256  # bitsandbytes blockwise quantisation: one fp32 absmax per block
ADAMW_8BIT_MIN_SIZE = 4096  # bitsandbytes keeps 32-bit states for tensors smaller than this


def trainable_params(s: Setup) -> int:
    """Full fine-tuning: every parameter but the modules --frozen keeps frozen (a VLM's tower, its projector); LoRA:
    the adapters on --lora-targets (and with --lora-vision on the tower's and projector's linears) and any trained
    embedding copies."""
    if "trainable_params" not in s.memo:  # asked for many times a candidate: computed once (Setup.memo)
        s.memo["trainable_params"] = _trainable_params(s)
    return s.memo["trainable_params"]


def _trainable_params(s: Setup) -> int:
    if freeze.freeze_tuned(s.knobs):  # freeze tuning: the last decoder layers alone (planner.estimate.freeze)
        return freeze.trained_layer_params(s.model, s.knobs.trained_layers)
    if not s.lora:
        return s.model.params - s.model.frozen_params(frozen_modules(s))
    k = s.knobs
    if oft.oft(k):  # OFT's rotations in place of LoRA's factors
        return oft.oft_params(s.model, k) + lora.embedding_copy_params(s.model, k)
    if boft.boft(k):  # BOFT's rotations and scales
        return boft.boft_params(s.model, k) + lora.embedding_copy_params(s.model, k)
    if bottleneck.bottleneck(k):  # ms-swift's adapters after the MLPs, no LoRA factors
        return bottleneck.trained_params(s.model, k)
    tower = s.model.tower_lora_params(k.lora_rank) if k.lora_vision else tower_full_params(s)
    magnitudes = lora.dora_magnitude_params(s.model, k)
    adapters = (
        peft_tuners.vera_trained_params(s.model, k)
        if peft_tuners.vera(k)
        else s.model.lora_params(k.lora_rank, k.lora_targets)
        + peft_tuners.adalora_extra_params(s.model, k, frozen_weight_bytes_per_param(k) == 2)
    )
    ends = lora_ends.end_adapter_params(s.model, k)  # LoRA on embed_tokens / lm_head
    return adapters + tower + lora.embedding_copy_params(s.model, k) + magnitudes + ends


# the towers and projectors --lora-tower-full trains: the one builder's VisionSpec.tower_modules (an Omni's audio tower
# beside its ViT) and projector_modules (recipe/model.py _train_tower), never an Omni's resident talker or vocoder
TOWER_FULL_ROLES = ("vision", "audio", "projector")


def tower_full_tensors(s: Setup) -> list:
    """--lora-tower-full (ms-swift's lora_llm): the towers' and projectors' own tensors, trained in full beside the
    adapters (ms-swift 4.6 swift/tuner_plugin/lora_llm.py:78-80: get_peft_model on the language model's linears, then
    requires_grad_(True) on model_arch.vision_tower and aligner); none otherwise."""
    if not (s.lora and s.knobs.lora_tower_full):
        return []
    return [t for t in s.model.tensors if t.role in TOWER_FULL_ROLES]


def tower_full_params(s: Setup) -> int:
    return sum(t.numel for t in tower_full_tensors(s))


def base_dtype_trained_params(s: Setup) -> int:
    """Trained parameters held in the base's dtype beside the fp32 adapters (torch AMP upcasts PEFT's adapters
    alone): PEFT's trained embedding copies (modules_to_save) and a tower trained in full (ms-swift converts only fp16
    trainable parameters to fp32: 4.6 swift/pipelines/train/tuner.py:398-402)."""
    return lora.embedding_copy_params(s.model, s.knobs) + tower_full_params(s)


def trainable_tensor_sizes(s: Setup) -> list[tuple[int, int]]:
    """(elements of one tensor, how many) of every trainable tensor: LoRA's A (r x d_in) and B (d_out x r) factors, or
    the model's tensors outside the frozen modules."""
    k = s.knobs
    if oft.oft(k):
        return oft.tensor_sizes(s.model, k)
    if boft.boft(k):
        return boft.tensor_sizes(s.model, k)
    if bottleneck.bottleneck(k):
        return bottleneck.tensor_sizes(s.model, k)
    if peft_tuners.vera(k):
        return peft_tuners.tensor_sizes(s.model, k)
    if s.lora:
        r, out = k.lora_rank, peft_tuners.tensor_sizes(s.model, k)  # AdaLoRA's lora_E beside A and B
        for t in s.model.tensors:
            if t.adapted(k.lora_targets):
                n = t.count * prod(t.shape[:-2]) * t.lora_rank_multiple(k.lora_targets)
                out += [(r * t.shape[-1], n), (r * t.shape[-2], n)]
                out += [(t.shape[-2], n)] if lora.dora(k) else []  # DoRA's magnitude vector
        out += lora_ends.end_tensor_sizes(s.model, k)
        return out + [(t.numel // t.count, t.count) for t in tower_full_tensors(s)]
    if freeze.freeze_tuned(k):
        return freeze.trained_tensor_sizes(s.model, k.trained_layers)
    frozen = frozen_roles(frozen_modules(s))
    return [(t.numel // t.count, t.count) for t in s.model.tensors if t.role not in frozen]


def largest_trainable_matrix_params(s: Setup) -> int:
    """Elements of the largest weight that receives a gradient (a LoRA factor under LoRA)."""
    if "largest_trainable_matrix_params" not in s.memo:  # asked for several times a candidate: computed once
        s.memo["largest_trainable_matrix_params"] = _largest_trainable_matrix_params(s)
    return s.memo["largest_trainable_matrix_params"]


def _largest_trainable_matrix_params(s: Setup) -> int:
    if oft.oft(s.knobs):
        return max((n for n, _ in oft.tensor_sizes(s.model, s.knobs)), default=0)
    if boft.boft(s.knobs):
        return max((n for n, _ in boft.tensor_sizes(s.model, s.knobs)), default=0)
    if bottleneck.bottleneck(s.knobs):
        return max((n for n, _ in bottleneck.tensor_sizes(s.model, s.knobs)), default=0)
    if s.lora:
        adapters = max(
            (s.knobs.lora_rank * max(t.shape) for t in s.model.tensors if t.adapted(s.knobs.lora_targets)), default=0
        )
        if peft_tuners.vera(s.knobs):  # lambda_b, d_out elements
            adapters = max((n for n, _ in peft_tuners.tensor_sizes(s.model, s.knobs)), default=0)
        adapters = max([adapters, *(prod(t.shape) for t in tower_full_tensors(s) if len(t.shape) == 2)])
        adapters = max([adapters, *(n for n, _ in lora_ends.end_tensor_sizes(s.model, s.knobs))])
        return max(adapters, s.model.text.vocab * s.model.text.hidden if s.knobs.lora_train_embeddings else 0)
    if freeze.freeze_tuned(s.knobs):
        return freeze.largest_trained_matrix_params(s.model)
    return max(prod(t.shape) for t in s.model.tensors if len(t.shape) == 2)


def base_dtype_overcount_bytes(s: Setup, per_param_bytes: int) -> int:
    """Trained parameters in the base's dtype (base_dtype_trained_params: embedding copies, a tower trained in full)
    where torch AMP keeps the adapters in fp32: the bytes to take back from a term that counted them at the adapters'
    width (0 elsewhere)."""
    k = s.knobs
    over = trainable_weight_bytes_per_param(k) - frozen_weight_bytes_per_param(k)
    return (
        base_dtype_trained_params(s) * per_param_bytes * over // trainable_weight_bytes_per_param(k)
        if over > 0 and k.zero_stage == 0
        else 0
    )


def frozen_params(s: Setup) -> int:
    """LoRA: the whole base; full fine-tuning: the modules --frozen keeps frozen."""
    if "frozen_params" not in s.memo:  # asked for many times a candidate: computed once (Setup.memo)
        s.memo["frozen_params"] = _frozen_params(s)
    return s.memo["frozen_params"]


def _frozen_params(s: Setup) -> int:
    if freeze.freeze_tuned(s.knobs):
        return s.model.params - trainable_params(s)
    return s.model.params - tower_full_params(s) if s.lora else s.model.frozen_params(frozen_modules(s))


def frozen_modules(s: Setup) -> str:
    """The modules that take no gradient: --frozen's, or on one GPU a VLM's tower and projector when its rows hold no
    images, and an audio tower (rows never hold audio). Text-only rows never run them, so their gradients stay None and torch's optimizers skip them: no
    gradient, no optimizer state, no step temporaries (torch/optim/adamw.py _init_group takes only parameters with
    a gradient). DeepSpeed and FSDP allocate every parameter's states up front; DDP's handling of unused parameters
    depends on find_unused_parameters: those keep --frozen's. The H100's Qwen2.5-VL-3B text rows (transformers 5.17)
    ran at this."""
    if "frozen_modules" not in s.memo:  # asked for many times a candidate: computed once (Setup.memo)
        s.memo["frozen_modules"] = _frozen_modules(s)
    return s.memo["frozen_modules"]


def _frozen_modules(s: Setup) -> str:
    k = s.knobs
    idle = s.model.vision is not None and not s.image_tokens and s.world_size == 1
    plain = not s.lora and k.zero_stage == 0 and k.fsdp == "off"
    frozen = "vision+projector" if idle and plain else k.frozen
    # an embedding run's lm_head: its forward is the identity (ms-swift 4.6 swift/model/patcher.py:109-119); trl's
    # value-head model's (heads.value_head_rm): its logits are made and discarded (LLaMA-Factory 0.9.5
    # train/rm/trainer.py:98-109 takes the values alone). Either way an untied head's weight takes no gradient and
    # AdamW no state (on one GPU, as the idle tower above)
    idle_head = k.task == "embedding" or heads.value_head_rm(k)
    head = idle_head and plain and s.world_size == 1 and any(t.role == "head" for t in s.model.tensors)
    # an audio tower (Qwen2.5-Omni's thinker) never runs: a plan's rows hold no audio, and the thinker skips the tower
    # without input_features (modeling_qwen2_5_omni.py:1893, transformers 5.25); idle on one GPU as above
    audio = plain and s.world_size == 1 and any(t.role == "audio" for t in s.model.tensors)
    frozen += IDLE_AUDIO if audio else ""
    return frozen + IDLE_HEAD if head else frozen


def trainable_weight_bytes_per_param(k: Knobs) -> int:
    """fp32 weights for fp32 and for torch AMP (fp32 master = the model); DeepSpeed fp16/bf16 casts
    the module to half; bf16-pure is half. LoRA adapters stay fp32 on a half base under AMP and bf16-pure (PEFT's
    autocast_adapter_dtype; the sim probe's debug-moe with adapted experts: params and AdamW states at 4 bytes), but
    for a framework that builds them in the model's dtype (Framework.lora_adapter_dtype: torchtune)."""
    if k.precision == "fp32" or (k.zero_stage == 0 and k.precision in ("fp16", "bf16")):
        return 4
    fp32_adapters = k.framework not in FRAMEWORKS or adapter(k.framework, k.release).lora_adapter_dtype == "fp32"
    return 4 if k.zero_stage == 0 and k.lora_rank and fp32_adapters else 2


def frozen_weight_bytes_per_param(k: Knobs) -> int:
    """A LoRA base model is loaded in half precision unless the run is fp32; modules frozen in a full fine-tune
    (--frozen) are in the model's own dtype (recipe/model.py weight_dtype): fp32 under torch AMP. Freeze tuning's
    frozen layers stay in the half precision the model was loaded in (planner.estimate.freeze)."""
    if freeze.freeze_tuned(k) and k.precision != "fp32":
        return 2
    if not k.lora_rank:
        return trainable_weight_bytes_per_param(k)
    return 4 if k.precision == "fp32" or k.lora_base_fp32 or fsdp_upcasts_frozen(k) else 2


def fsdp_upcasts_frozen(k: Knobs) -> bool:
    """A LoRA base's frozen shards in fp32 under FSDP with mixed precision: the framework's accelerate casts the whole
    sharded model (Memory.fsdp_frozen_fp32; accelerate 1.6.0 utils/fsdp_utils.py:562-565 model.to(torch.float32)).
    FSDP2's bf16 policy still gathers them in bf16 (planner.estimate.fsdp.unsharded_params_bytes). Measured on two
    gloo ranks with accelerate 1.6.0's own fsdp2_prepare_model: the frozen shards 917,504 B fp32 a rank where 1.13.0
    keeps 458,752 B bf16 (probes.fsdp_upcast)."""
    if not k.lora_rank or k.fsdp == "off" or k.precision not in ("bf16", "fp16") or k.framework not in FRAMEWORKS:
        return False
    return adapter(k.framework, k.release).fsdp_frozen_fp32


def frozen_bytes(s: Setup) -> int:
    """The frozen base under LoRA: half precision (fp32 in fp32 runs); with --quant its decoder linears as the format
    stores them, and the dense copies compressed-tensors keeps beside them (planner.estimate.quant)."""
    k = s.knobs
    if k.quant == "none":
        return frozen_params(s) * frozen_weight_bytes_per_param(k) + fp32_resident_extra_bytes(s)
    left = dense_names(s)  # the experts and routers no nn.Linear holds: dense in half (quant_modules)
    q = quant.quantized_weights(s.model, left)
    half = frozen_weight_bytes_per_param(k)
    dense = quant.dense_copy_bytes(s.model, k.quant, half, left)  # compressed-tensors' kept dense weights
    base = quant.base_bytes(s.model, k.quant, k.quant_absmax, left) + dense + (frozen_params(s) - q) * half
    if fsdp_upcasts_frozen(k):  # the 4-bit weights' bf16 storage cast to fp32 with the module
        base += quant.fp32_storage_extra_bytes(s.model, k.quant, left)
    return base + fp32_resident_extra_bytes(s)


def fp32_resident_extra_bytes(s: Setup) -> int:
    """The bytes an fp32 resident module holds past the frozen weights' width: Qwen2.5-Omni's token2wav, cast to fp32
    after the load dtype (transformers 5.25 modeling_qwen2_5_omni.py:3740; measured: from_pretrained at bf16 and fp16
    leaves its 198 tensors fp32, tests/planner/model/test_omnitalker.py). None under DeepSpeed (ZeRO 1-3: bf16, fp16
    or fp32, spec_rules refusing bf16-pure): under bf16/fp16 the engine casts every floating parameter to the half
    dtype at initialize, buffers kept (deepspeed 0.19.8 runtime/engine.py:2080-2088, :1858-1862), as the sim's cast
    (probes.sim.as_deepspeed_casts, measured on real ZeRO-2 ranks in tests/probes/test_zero_cast.py). FSDP2 keeps the
    shards as built (fp32; its bf16 policy casts only the unsharded copies of a unit that runs, torch 2.13
    _fsdp_param.py:586-599), and the vocoder never runs in a training step."""
    if s.knobs.zero_stage:
        return 0
    return s.model.resident_params(fp32=True) * max(0, 4 - frozen_weight_bytes_per_param(s.knobs))


# full-size temporaries of torch's foreach steps, in the parameters' dtype, a trained parameter each: AdamW's
# exp_avg_sq.sqrt(), RMSprop's square_avg.sqrt() (torch 2.13 optim/rmsprop.py _multi_tensor_rmsprop), Adagrad's
# sqrt of its sum and the grads times -lr (optim/adagrad.py _multi_tensor_adagrad). Measured with the live-bytes
# tracker around a second step of a 2-layer Llama on the CPU, fp32 and bf16 (tests/probes/test_one_state_optim.py):
# exactly these, rounded to 512-byte blocks; axolotl's ADOPT (foreach on CUDA) the sqrt of exp_avg_sq and the
# normalized gradient (axolotl 0.19.0 utils/optimizers/adopt.py:431-434), measured in axolotl's venv alike
# (tests/probes/test_one_state_optim.py::test_axolotls_adopt); ZeRO's client optimizer the same on
# its fp32 partition (zero.client_step_temp_bytes_per_element)
FOREACH_TEMPS = {"adamw": 1, "rmsprop": 1, "adagrad": 2, "adopt": 2}


def optimizer_state_bytes_per_param(optimizer: str, state_bytes: int) -> float:
    """Per-parameter state of an unfactored optimizer: AdamW two moments, SGD one momentum buffer,
    Adafactor (on flat ZeRO partitions it cannot factor) one second moment, 8-bit AdamW two 1-byte
    moments plus one fp32 absmax per block (Dettmers et al. 2022)."""
    return {
        "adamw": 2 * state_bytes,
        "adamw-fused": 2 * state_bytes,
        "sgd": state_bytes,
        "adafactor": state_bytes,
        "adamw-8bit": 2 + 2 * 4 / ADAMW_8BIT_BLOCK,
        "paged-adamw": 2 * state_bytes,
        "paged-adamw-8bit": 2 + 2 * 4 / ADAMW_8BIT_BLOCK,
        # AdamW's where no matrix is whole (a flat partition, a checkpoint's bound): planner.estimate.matrix_optim
        # counts their states on the GPU, and spec_rules keeps them off ZeRO and FSDP
        "galore-adamw": 2 * state_bytes,
        "galore-adamw-8bit": 2 + 2 * 4 / ADAMW_8BIT_BLOCK,
        "apollo-adamw": 2 * state_bytes,
        "muon": 2 * state_bytes,
        "muonclip": state_bytes,  # one momentum buffer, whatever the group (planner.estimate.muonclip)
        # torchao's, quantized tensors only (planner.estimate.torchao_optim counts the rest and the qmaps)
        "adamw-torchao-4bit": 1 + 2 * 4 / TORCHAO_BLOCK,
        "adamw-torchao-8bit": 2 + 2 * 4 / TORCHAO_BLOCK,
        # one state: bitsandbytes' 32-bit ones fp32 (state_terms.optimizer_bytes), 8-bit ones a byte and an absmax a
        # block; torch's RMSprop square_avg and Adagrad sum in the parameters' dtype (torch 2.13 optim/rmsprop.py:
        # 123, optim/adagrad.py:96)
        "lion": 4,
        "paged-lion": 4,
        "rmsprop-bnb": 4,
        "lion-8bit": 1 + 4 / ADAMW_8BIT_BLOCK,
        "paged-lion-8bit": 1 + 4 / ADAMW_8BIT_BLOCK,
        "rmsprop-bnb-8bit": 1 + 4 / ADAMW_8BIT_BLOCK,
        "rmsprop": state_bytes,
        "adagrad": state_bytes,
        # axolotl's adopt_adamw: its ADOPT keeps AdamW's exp_avg and exp_avg_sq (axolotl 0.19.0 utils/optimizers/
        # adopt.py:162-169)
        "adopt": 2 * state_bytes,
    }[optimizer]
