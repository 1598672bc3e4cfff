"""The knob fields, declared once: name, type, bounds, default and description of every knob a plan sets, and which
ones `suggest` searches (with the values it searches by default).

Everything else derives from this declaration: `planner.config.spec.Knobs` (adding the combination rules) and `Plan`
subclass it; the request models (planner/config/requests.py) build their knob fields with `request_fields` (one value, or
a list for a searched knob in `suggest`); `planner.config.requests.Space` is the suggest request's knob part; the CLI's flags
(planner/cli/knobargs.py `add_knob_args`), the web form's choices (read from the API schema) and the property tests'
strategies are generated from it. A new knob is one field here, its rule in Knobs or planner.config.layout, and its
domain work.

One name per knob in Python, JSON and the CLI, with one exception kept for the contract: the requests' JSON and the
CLI call `zero_stage` `zero` (an alias; `zero_stage` is accepted too).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo

from planner.config.workload import Workload
from planner.frameworks import FRAMEWORKS
from planner.frameworks import NAMES as FRAMEWORK_NAMES
from planner.frameworks.base import KNOB_DEFAULTS
from planner.frameworks.runs import TRANSFORMERS_ONE_STATE

Precision = Literal["fp32", "fp16", "bf16", "bf16-pure"]
# every-N: every N-th decoder layer checkpointed (torchtitan's layer-level selective mode, N = 2..8); offload: every
# saved tensor in host RAM, nothing recomputed; offload-inputs: full checkpointing with each layer's input in host RAM
Checkpointing = Literal[
    "off",
    "full",
    "selective-op",
    "offload",
    "offload-inputs",
    "every-2",
    "every-3",
    "every-4",
    "every-5",
    "every-6",
    "every-7",
    "every-8",
]
ZeroStage = Literal[0, 1, 2, 3]
Offload = Literal["none", "optimizer", "optimizer+params"]
# one state a parameter (planner.estimate.state_terms.optimizer_bytes): bitsandbytes' Lion and RMSprop (32-bit states
# fp32 whatever the parameters, 8-bit ones blockwise), torch's RMSprop and Adagrad (in the parameters' dtype): the
# frameworks' table of the names transformers' Trainer runs
ONE_STATE_OPTIMIZERS = TRANSFORMERS_ONE_STATE
# the last four keep states that are not AdamW's (planner.estimate.matrix_optim): GaLore and APOLLO project the gradients
# of the optimizer_targets linears to optimizer_rank, Muon keeps one momentum buffer for the hidden matrices
Optimizer = Literal[  # a tuple, as Python 3.10 takes a star expression only inside one
    (
        "adamw",
        "adamw-fused",
        "sgd",
        "adafactor",
        "adamw-8bit",
        "paged-adamw",
        "paged-adamw-8bit",
        "galore-adamw",
        "galore-adamw-8bit",
        "apollo-adamw",
        "muon",
        "muonclip",  # ms-swift 4's MuonClip: one momentum buffer for every trained tensor (planner.estimate.muonclip)
        "adamw-torchao-4bit",
        "adamw-torchao-8bit",
        *ONE_STATE_OPTIMIZERS,
        "adopt",  # axolotl's ADOPT: AdamW's states, two foreach temporaries (planner.estimate.trained.FOREACH_TEMPS)
    )
]
LOW_RANK_OPTIMIZERS = ("galore-adamw", "galore-adamw-8bit", "apollo-adamw")
# GaLore's proj_type (galore-torch 1.0 galore_projector.py:12-42): the side each target's gradient is projected on (std:
# the shorter one, reverse-std the longer, right, left, or full: both); planner.estimate.matrix_optim.projection_sides
OptimizerProjection = Literal["std", "reverse-std", "right", "left", "full"]
MATRIX_OPTIMIZERS = (*LOW_RANK_OPTIMIZERS, "muon", "muonclip")
Fsdp = Literal["off", "full", "grad-op", "hybrid"]
FsdpLoad = Literal["sharded", "whole"]  # planner.estimate.lifecycle.load_gpu_transient_bytes
Loss = Literal["standard", "chunked", "fused"]
Attention = Literal["sdpa", "flash", "eager"]
Batching = Literal["padded", "packed"]
# PEFT's LoRA variants planned (peft/tuners/lora/variants.py): plain LoRA, or DoRA (use_dora: a trained magnitude
# vector per adapted linear, and the weight norm its forward computes); OFT and BOFT (peft/tuners/oft, tuners/boft:
# orthogonal block rotations of each adapted linear's input, --lora-rank their block size; planner.estimate.oft);
# PEFT's AdaLoRA and VeRA at --lora-rank (planner.estimate.peft_tuners); ms-swift's bottleneck adapter after each
# decoder layer's MLP, --lora-rank its adapter_length (planner.estimate.bottleneck)
LoraVariant = Literal["lora", "dora", "oft", "boft", "adalora", "vera", "adapter"]
# LoRA on the ends of the language model beside --lora-targets' decoder linears (PEFT's target_modules naming
# embed_tokens: its lora.Embedding; lm_head: a lora.Linear whose lora_B writes a vocabulary-wide output a token):
# planner.estimate.lora_ends
LoraEnds = Literal["none", "embed", "head", "both"]
# the PEFT releases memplan measured where PEFT's release changes memory (planner.frameworks.peft.VERSIONS)
PeftRelease = Literal["line", "0.18", "0.20", "0.21", "0.22"]
# compressed-tensors' weight-only schemes planned (planner.estimate.quant): llm-compressor's W4A16 at groups of 128
# (its preset), 64 or 32, W8A16 (8-bit, one scale a row), both in 128 x 128 blocks, all pack-quantized; and FP8
# (e4m3) weights, float-quantized, one scale a row or a 128 x 128 block: (type, num_bits, scale: a group's size, None a
# row, (rows, cols) a block)
CT_BLOCK = (128, 128)
CT_SCHEMES = {
    "ct-w4a16": ("int", 4, 128), "ct-w4a16-g64": ("int", 4, 64), "ct-w4a16-g32": ("int", 4, 32),
    "ct-w8a16": ("int", 8, None), "ct-w4a16-block": ("int", 4, CT_BLOCK), "ct-w8a16-block": ("int", 8, CT_BLOCK),
    "ct-w8a16-fp8": ("float", 8, None), "ct-w8a16-fp8-block": ("float", 8, CT_BLOCK),
}  # fmt: skip
CT_QUANTS = tuple(CT_SCHEMES)
CT_FP8 = tuple(q for q, (kind, _, _) in CT_SCHEMES.items() if kind == "float")  # train under PEFT >= 0.19 only
Quant = Literal[
    "none", "nf4", "fp4", "int8", "gptq", "awq", "ct-w4a16", "ct-w4a16-g64", "ct-w4a16-g32", "ct-w8a16",
    "ct-w4a16-block", "ct-w8a16-block", "ct-w8a16-fp8", "ct-w8a16-fp8-block", "hqq",
]  # fmt: skip
VitCheckpointing = Literal["on", "off"]
QuantAbsmax = Literal["8bit", "fp32"]
# freeze tuning's trained layers (planner.estimate.freeze): the last N, LLaMA-Pro's interleaved expanded blocks, the
# first N (LLaMA-Factory's negative freeze_trainable_layers), or N LLaMA-Pro blocks inserted at load (ms-swift)
TrainedLayout = Literal["last", "interleaved", "first", "inserted"]
Frozen = Literal["none", "vision", "vision+projector", "language", "language+vision"]
SaveWeights = Literal["auto", "full", "sharded"]
# sequence, context and tensor parallel sizes (planner.config.layout owns their rules with the world and the model)
ParallelSize = Literal[1, 2, 4, 8, 16, 32, 64]
CpAttention = Literal["ring", "all-gather", "all-to-all"]
# what the model is trained to output (planner.estimate.heads): the vocabulary's next token, or a score head's
# num_labels outputs (sequence classification, reward models, rerankers), or pooled hidden states (embeddings)
Task = Literal["causal-lm", "seq-cls", "embedding", "reranker", "generative-reranker"]
Framework = Literal[FRAMEWORK_NAMES]  # planner.frameworks: one adapter module each

MAX_LORA_RANK = 4096
MAX_NUM_LABELS = 1 << 20
MAX_NEGATIVES = 1024
MAX_TRAINED_LAYERS = 1024
MAX_EXPERT_PARALLEL = 1024
MAX_EVAL_BATCH = 4096
MAX_EVAL_LOGITS_STEPS = 100_000
LORA_TARGETS_PATTERN = r"^[A-Za-z0-9_.\-]+(,[A-Za-z0-9_.\-]+)*$"
# suggest's default checkpointing choices: every mode (each needs no extra package); every-N at N = 2 and 4; both
# offloads, as each framework runs one or the other (LLaMA-Factory's use_unsloth_gc and torchtune's offloaded
# checkpoints are offload-inputs, and those frameworks run no other: without it their suggest had no offload at all)
SUGGEST_CHECKPOINTING = ("off", "selective-op", "every-4", "every-2", "full", "offload", "offload-inputs")
# the frameworks whose RL runs are planned by roles (planner.estimate.roles): those whose adapter declares a RoleEngine
ROLE_FRAMEWORKS = tuple(n for n, f in FRAMEWORKS.items() if f.role_engine is not None)
# those whose GRPO is planned by roles too (the others' GRPO is TRL's: planner.estimate.rl)
GRPO_ROLE_FRAMEWORKS = tuple(n for n in ROLE_FRAMEWORKS if FRAMEWORKS[n].role_engine.grpo)


class KnobFields(BaseModel):
    """What a plan sets apart from its batch split. Field order is the order faces list them."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    precision: Precision = Field(
        default="bf16",
        description=("bf16 / fp16: mixed precision (fp32 weights); bf16-pure: bf16 weights without DeepSpeed; fp32"),
    )
    checkpointing: Checkpointing = Field(
        default="off",
        description=(
            "activation checkpointing: off, full, selective-op, offload (every saved tensor to host RAM), "
            "offload-inputs (full, each layer's input in host RAM) or every-N decoder layers"
        ),
    )
    zero_stage: ZeroStage = Field(default=0, description="DeepSpeed ZeRO stage (0: none; DDP)")
    offload: Offload = Field(
        default="none", description=("DeepSpeed / FSDP offload to host RAM: none, optimizer, optimizer+params")
    )
    fsdp: Fsdp = Field(
        default="off",
        description=(
            "FSDP2 instead of ZeRO: full, grad-op (no reshard after forward) or hybrid (HSDP, two or more nodes)"
        ),
    )
    fsdp_load: FsdpLoad = Field(
        default="sharded",
        description=(
            "how FSDP's ranks load the model: sharded (each rank's shard or one unit at a time: accelerate's "
            "cpu_ram_efficient_loading, meta or rank-0 init) or whole (each rank loads the whole model onto its GPU "
            "before fully_shard: LLaMA-Factory v1's default init_on_default)"
        ),
    )
    loss: Loss = Field(
        default="standard",
        description=("standard, chunked (CE over sequence chunks) or fused (head + loss, Liger: no full logits)"),
    )
    attention: Attention = Field(
        default="sdpa", description=("sdpa (the family's default; eager where it must), flash (flash-attn) or eager")
    )
    batching: Batching = Field(default="padded", description="padded rows or packed (padding-free) rows")
    optimizer: Optimizer = Field(
        default="adamw",
        description=(
            "adamw (torch foreach), adamw-fused, sgd, adafactor, adamw-8bit, paged-adamw, paged-adamw-8bit, galore-adamw, "
            "galore-adamw-8bit, apollo-adamw (low-rank projected states of the optimizer_targets linears), muon, muonclip "
            "(ms-swift's MuonClip: one momentum buffer a parameter), or "
            "adamw-torchao-4bit / adamw-torchao-8bit (transformers' adamw_torch_4bit / adamw_torch_8bit), lion, lion-8bit, "
            "paged-lion, paged-lion-8bit, rmsprop-bnb, rmsprop-bnb-8bit (bitsandbytes' one-state optimizers), rmsprop or "
            "adagrad (torch's), adopt (axolotl's ADOPT: AdamW's two states, two foreach temporaries)"
        ),
    )
    # transformers' optim_args rank= (128 by default: trainer_optimizer.py:370), LLaMA-Factory's galore_rank (16)
    optimizer_rank: int = Field(
        default=128, ge=1, le=MAX_LORA_RANK, description="GaLore's and APOLLO's projection rank"
    )
    optimizer_targets: str = Field(
        default="all-linear",
        max_length=512,
        pattern=LORA_TARGETS_PATTERN,
        description="the linears GaLore and APOLLO project (optim_target_modules): all-linear, attention, or names",
    )
    # transformers' optim_args proj_type= (trainer_optimizer.py:373, 402: std by default), LLaMA-Factory's
    # galore_proj_type / apollo_proj_type, ms-swift's --galore_proj_type
    optimizer_projection: OptimizerProjection = Field(
        default="std",
        description=(
            "GaLore's proj_type: std (the gradient projected on its shorter side), reverse-std (the longer), right "
            "(G P^T, m x r kept), left (P^T G, r x n kept) or full (both: r x r kept); APOLLO plans std only"
        ),
    )
    client_optimizer: bool = Field(
        default=False,
        description=(
            "under ZeRO, DeepSpeed steps the trainer's torch optimizer (`optimizer`), as HF's Trainer hands it over when "
            "the DeepSpeed config names none; off: DeepSpeed's own fused Adam, which memplan's export names"
        ),
    )
    lora_rank: int = Field(
        default=0,
        ge=0,
        le=MAX_LORA_RANK,
        description=(
            "LoRA adapters' rank (OFT's and BOFT's block size under --lora-variant oft|boft: PEFT's oft_block_size, "
            "boft_block_size); 0 = full fine-tuning"
        ),
    )
    optimizer_in_backward: bool = Field(
        default=False,
        description=(
            "step each parameter as its gradient arrives and free the gradient (accumulation 1, one GPU, no ZeRO/FSDP)"
        ),
    )
    quant: Quant = Field(
        default="none",
        description=(
            "a quantized base under LoRA: its linears in 4 bits (bitsandbytes nf4 or fp4, double quantization: QLoRA) "
            "or 8 bits (int8: bitsandbytes LLM.int8, load_in_8bit), or a prequantized 4-bit GPTQ or AWQ checkpoint "
            "(gptq, awq: group size 128, through gptqmodel), an llm-compressor W4A16 or W8A16 checkpoint "
            "(compressed-tensors pack-quantized, run compressed: ct-w4a16 in groups of 128, ct-w4a16-g64, ct-w4a16-g32, "
            "ct-w8a16 one scale a row, ct-w4a16-block / ct-w8a16-block in 128 x 128 blocks), an FP8 weight-only one "
            "(float-quantized: ct-w8a16-fp8 one scale a row, ct-w8a16-fp8-block) or an HQQ 4-bit base (hqq: groups of 64)"
        ),
    )
    quant_absmax: QuantAbsmax = Field(
        default="8bit",
        description=(
            "a 4-bit base's block constants: 8bit (double quantization, QLoRA's recipe; LLaMA-Factory, ms-swift and "
            "axolotl by default) or fp32 (BitsAndBytesConfig's default, and TRL's CLI without --use_bnb_nested_quant)"
        ),
    )
    lora_targets: str = Field(
        default="all-linear",
        max_length=512,
        pattern=LORA_TARGETS_PATTERN,
        description=("linears LoRA adapts: all-linear, attention, or module names (q_proj,v_proj)"),
    )
    lora_train_embeddings: bool = Field(
        default=False, description=("train the embedding and head beside the adapters (PEFT modules_to_save)")
    )
    lora_ends: LoraEnds = Field(
        default="none",
        description=(
            "LoRA on the input embedding (embed), the output head (head) or both, beside --lora-targets' linears "
            "(PEFT's target_modules naming embed_tokens and lm_head: ms-swift's `all-linear embed_tokens lm_head`, "
            "torchtune's apply_lora_to_output); the head's adapter writes a vocabulary-wide output a token"
        ),
    )
    peft_release: PeftRelease = Field(
        default="line",
        description=(
            "the PEFT release LoRA runs under: line (the framework line's own pin, else 0.22 on transformers 5) or one "
            "memplan measured (a peft pin beside the files sets it); it decides what all-linear reaches in an MoE "
            "model, a merge's copies and AdaLoRA's ranknum (planner.frameworks.peft)"
        ),
    )
    lora_variant: LoraVariant = Field(
        default="lora",
        description=(
            "LoRA (also LoRA+, which changes only learning rates) or dora (PEFT's use_dora: a trained magnitude vector "
            "per adapted linear, the merged weight's norm computed each forward, two more saved outputs a linear); oft, boft: "
            "PEFT's OFTConfig / BOFTConfig (block-diagonal orthogonal rotations, --lora-rank the block size); "
            "adalora (PEFT's AdaLoRA at init_r = --lora-rank: singular values and the rank allocator's three "
            "importance buffers) or vera (PEFT's VeRA at r = --lora-rank: shared frozen projections, two trained "
            "vectors a linear); adapter: ms-swift's bottleneck adapter after each decoder layer's MLP (--tuner_type "
            "adapter, --lora-rank its adapter_length: fp32 down and up projections with biases)"
        ),
    )
    lora_dropout: float = Field(default=0.0, ge=0, lt=1, description="LoRA dropout probability")
    lora_dropout_kept: bool = Field(
        default=False,
        description=(
            "LoRA dropout runs in a DPO, KTO or GKD run although its trainer zeroes every dropout by default (TRL's "
            "disable_dropout false); off: the trainer's default"
        ),
    )
    lora_vision: bool = Field(
        default=False,
        description=(
            "VLM LoRA: adapters on the vision tower's and projector's linears too (PEFT's all-linear on the whole model, "
            "what TRL's --lora_target_modules all-linear runs); the tower then saves its activations for backward"
        ),
    )
    lora_tower_full: bool = Field(
        default=False,
        description=(
            "VLM LoRA: the vision tower and projector trained in full, in the weights' own dtype, beside the language "
            "model's adapters (ms-swift's --tuner_type lora_llm)"
        ),
    )
    lora_base_fp32: bool = Field(
        default=False,
        description=(
            "LoRA: the frozen base loaded in fp32 under bf16/fp16 mixed precision (a script's dtype=torch.float32, TRL's "
            "CLI default), not in half precision; torch AMP or FSDP (DeepSpeed casts the module to half)"
        ),
    )
    workload: Workload = Field(
        default_factory=Workload,
        description=(
            "sft (default), or TRL's dpo / grpo with their inputs (GRPOConfig / DPOConfig names); the global batch "
            "counts completions (grpo) or pairs (dpo)"
        ),
    )
    task: Task = Field(
        default="causal-lm",
        description=(
            "what the model outputs: causal-lm (the vocabulary head, every token), seq-cls (a score head of num_labels "
            "outputs read at the last token instead of the vocabulary head: classification and reward models), "
            "embedding (the last token's hidden state, InfoNCE over the batch and its negatives), reranker (a one-"
            "output score head over query-document rows) or generative-reranker (the vocabulary head scoring one "
            "token) (ms-swift's --task_type)"
        ),
    )
    num_labels: int = Field(
        default=1,
        ge=1,
        le=MAX_NUM_LABELS,
        description=("seq-cls: the score head's outputs (1: a reward model's or a regression's one score)"),
    )
    negatives: int = Field(
        default=0,
        ge=0,
        le=MAX_NEGATIVES,
        description=(
            "rows each example brings beside its own, run through the model in the same micro-batch: embedding, the "
            "hard negatives beside the query and its positive; reranker and generative-reranker, the negative "
            "documents beside the positive; seq-cls, the rejected reply beside the chosen (1: a reward model's pairs)"
        ),
    )
    frozen: Frozen = Field(
        default="none",
        description=(
            "VLM full fine-tuning: modules kept frozen (no gradients or optimizer states): the vision tower, the tower "
            "and its projector, the language model (the tower and projector trained), or the language model and the "
            "tower (the projector alone trained, LLaVA's first stage) (LLaMA-Factory's freeze_vision_tower / "
            "freeze_multi_modal_projector / freeze_language_model, ms-swift's freeze_vit / freeze_aligner / freeze_llm)"
        ),
    )
    trained_layers: int = Field(
        default=0,
        ge=0,
        le=MAX_TRAINED_LAYERS,
        description=(
            "freeze tuning: only the last N decoder layers trained in full, every other weight (embedding, lower "
            "layers, final norm, head) frozen in half precision, backward reaching down to the lowest trained layer "
            "(LLaMA-Factory's finetuning_type freeze, freeze_trainable_layers N); 0 = no freeze tuning"
        ),
    )
    trained_layout: TrainedLayout = Field(
        default="last",
        description=(
            "freeze tuning's trained layers: last (the top N), interleaved: LLaMA-Pro's expanded blocks, every "
            "(layers/N)-th layer of a checkpoint its expansion script wrote (LLaMA-Factory's use_llama_pro), or first "
            "(the bottom N: LLaMA-Factory's negative freeze_trainable_layers), or inserted: N new LLaMA-Pro blocks "
            "added to the model at load, one after every layers/N, the model's own layers frozen (ms-swift's "
            "--tuner_type llamapro); the frozen layers above the lowest trained one are in backward's path"
        ),
    )
    vit_checkpointing: VitCheckpointing = Field(
        default="on",
        description=(
            "VLMs: the vision tower's layers checkpoint with the decoder's (HF's gradient_checkpointing_enable reaches "
            "them), or off: the tower saves every activation (ms-swift's --vit_gradient_checkpointing false)"
        ),
    )
    expert_parallel: int = Field(
        default=1,
        ge=1,
        le=MAX_EXPERT_PARALLEL,
        description=(
            "MoE models: experts split over this many ranks with all-to-all dispatch (transformers' FSDP2 + "
            "DistributedConfig ep_size); divides the experts and the world size"
        ),
    )
    expert_imbalance: float = Field(
        default=2.0,
        ge=1.0,
        le=1024.0,
        description=("MoE models: the busiest expert receives this many times its fair share of tokens"),
    )
    tensor_parallel: ParallelSize = Field(
        default=1,
        description=(
            "tensor parallelism within a node: each decoder layer's linears, the embedding and the head split over this "
            "many GPUs (transformers' tp_plan: torch DTensor colwise/rowwise; DeepSpeed AutoTP); divides the attention "
            "and KV heads and the GPUs per node"
        ),
    )
    sequence_parallel: ParallelSize = Field(
        default=1,
        description=(
            "Ulysses sequence parallelism: each GPU keeps 1/N of the sequence outside attention and all-to-all swaps "
            "it for 1/N of the heads inside (DeepSpeed's ALST, ms-swift --sequence_parallel_size, verl, accelerate "
            "sp_size); divides the attention heads and the sequence length"
        ),
    )
    context_parallel: ParallelSize = Field(
        default=1,
        description=(
            "context parallelism: each GPU keeps 1/N of the sequence everywhere, attention exchanging keys and "
            "values (torch context_parallel, accelerate cp_size, axolotl context_parallel_size)"
        ),
    )
    device_map: int = Field(
        default=1,
        ge=1,
        le=8,
        description=(
            "one process spreads the model's layers over this many GPUs, which work in turn (from_pretrained "
            "device_map='auto', accelerate's balanced placement; ms-swift with more visible GPUs than processes): "
            "dense text models under DDP"
        ),
    )
    dataparallel: bool = Field(
        default=False,
        description=(
            "one process drives every GPU of the node with torch's nn.DataParallel (HF's Trainer when it sees more "
            "than one GPU and no launcher: python train.py, LLaMA-Factory before 0.8): each step replicates the model "
            "onto every GPU and gathers every replica's outputs (the logits) onto GPU 0, the GPU that holds most"
        ),
    )
    cp_attention: CpAttention = Field(
        default="ring",
        description=(
            "context parallelism's attention: ring (each rank's keys and values passed around the ring, one block in "
            "flight: ring-flash-attn, torch's alltoall rotation), all-gather (every rank gathers the whole sequence's "
            "keys and values: torch's allgather, accelerate's default cp_comm_strategy) or all-to-all (heads "
            "exchanged as Ulysses does: Megatron's cp_comm_type a2a)"
        ),
    )
    eval_batch: int = Field(
        default=0,
        ge=0,
        le=MAX_EVAL_BATCH,
        description=(
            "rows per device in evaluation at the full length (HF's per_device_eval_batch_size, 8 by default where a "
            "run evaluates); 0 = the run does not evaluate"
        ),
    )
    eval_logits_steps: int = Field(
        default=0,
        ge=0,
        le=MAX_EVAL_LOGITS_STEPS,
        description=(
            "evaluation steps whose logits stay on the GPU for compute_metrics, gathered from every rank (HF keeps "
            "them until eval_accumulation_steps moves them to the host; unset, the whole evaluation set's steps); 0 = "
            "loss only (no compute_metrics, or prediction_loss_only: LLaMA-Factory's, ms-swift's and TRL's default)"
        ),
    )
    save_weights: SaveWeights = Field(
        default="auto",
        description=(
            "what a checkpoint save gathers under ZeRO-3 or FSDP: full (stage3_gather_16bit_weights_on_model_save, "
            "FULL_STATE_DICT: the whole model on rank 0's host), sharded (each rank its shards), auto (what memplan "
            "exports: ZeRO-3 full, FSDP sharded)"
        ),
    )
    zero_buckets: str = Field(
        default="",
        max_length=400,
        pattern=r"^[A-Za-z0-9_.=,+ -]*$",
        description=(
            "zero_optimization values a DeepSpeed JSON sets itself, by DeepSpeed's key names (reduce_bucket_size=5e8,"
            'overlap_comm=false; planner.config.zerobuckets lists them); empty: what memplan exports (HF\'s "auto" '
            "sizes from the hidden size, DeepSpeed's defaults of the rest)"
        ),
    )
    expandable_segments: bool = Field(
        default=False,
        description=(
            "PyTorch's caching allocator with expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, "
            "set by the exported command): less memory reserved beyond what is allocated"
        ),
    )
    framework: Framework = Field(
        default="memplan",
        description=(
            "the framework that runs the plan: only what it can run is planned (`planner frameworks`); memplan is the "
            "bundled trainer (every knob)"
        ),
    )
    release: str = Field(
        default="",
        max_length=32,
        pattern=r"^[A-Za-z0-9._+-]*$",
        description=(
            "the framework's release line whose defaults, keys and meanings the plan follows (`planner frameworks` "
            "lists them; empty: the newest); --framework NAME@RELEASE sets it, with the request in that release's terms"
        ),
    )

    @property
    def role_run(self) -> bool:
        """An RL run planned by its roles (planner.estimate.roles): ppo, rloo, reinforce++, and grpo as verl and
        OpenRLHF run it."""
        return self.workload.role_run or (self.workload.kind == "grpo" and self.framework in GRPO_ROLE_FRAMEWORKS)

    @property
    def parallel(self) -> int:
        """GPUs that share one sample: tensor x sequence x context parallel, or one process's device_map GPUs (the
        data-parallel size is the world size over this)."""
        return self.tensor_parallel * self.sequence_parallel * self.context_parallel * self.device_map

    def data_parallel_of(self, world: int) -> int:
        """Data-parallel ranks of the trained model over `world` GPUs: the world over the GPUs that share a sample, or
        for an RL run whose actor has a group of its own, that group's GPUs (planner.config.roles)."""
        if self.role_run:
            world = self.workload.roles.actor_gpus(world)
        return world // (self.tensor_parallel * self.sequence_parallel * self.context_parallel * self.device_map)


KNOBS: tuple[str, ...] = tuple(KnobFields.model_fields)
# the frameworks' closed default (planner.frameworks.base.Framework.cannot): a knob an adapter does not name runs only this
KNOB_DEFAULTS.update({k: f.get_default(call_default_factory=True) for k, f in KnobFields.model_fields.items()})
# suggest searches these knobs: each a list in its request, searched as a product; (default list, what it adds)
SEARCHED: dict[str, tuple[list, str]] = {
    "precision": ([], "empty: bf16, or fp16 on GPUs without bf16"),
    "checkpointing": (list(SUGGEST_CHECKPOINTING), "every mode but every-3 and every-5..8 by default"),
    "zero_stage": ([0, 1, 2, 3], ""),
    "offload": (["none", "optimizer", "optimizer+params"], ""),
    "fsdp": (["off", "full", "grad-op", "hybrid"], "off = ZeRO or DDP only; hybrid needs nodes > 1"),
    "loss": (["standard", "chunked"], "fused (Liger's kernel on the GPU host) only when asked"),
    "attention": (["sdpa"], "flash (flash-attn on the GPU host) only when asked"),
    "batching": (["padded"], ""),
    "tensor_parallel": ([], "empty: 1, then 2, 4, 8 within a node when nothing fits without it"),
    "sequence_parallel": ([], "empty: 1, then 2, 4, 8 when nothing fits without it"),
    "context_parallel": ([], "empty: 1; other sizes only when asked"),
}
FIXED: tuple[str, ...] = tuple(k for k in KNOBS if k not in SEARCHED)
ALIASES = {"zero_stage": "zero"}  # the requests' JSON and the CLI's name, kept for the contract


def name_of(field: str) -> str:
    """The knob's name in request JSON (its alias where it has one)."""
    return ALIASES.get(field, field)


GIVEN_BY = {"release": "framework"}  # a knob the faces take inside another's flag: --framework NAME@RELEASE


def flag_of(field: str) -> str:
    return "--" + name_of(GIVEN_BY.get(field, field)).replace("_", "-")


def choices(field: str) -> tuple | None:
    """The accepted values of a Literal knob, else None."""
    ann = KnobFields.model_fields[field].annotation
    return get_args(ann) if get_origin(ann) is Literal else None


def info(field: str) -> FieldInfo:
    return KnobFields.model_fields[field]


def _bounded(f: FieldInfo) -> Any:
    """The field's type with its bounds (ge, le, pattern, ...) attached."""
    return Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation


def _one(field: str, default: Any = ...) -> tuple[Any, FieldInfo]:
    f = info(field)
    kw = {"description": f.description, "alias": ALIASES.get(field)}
    if default is not ...:
        return _bounded(f) | None, Field(default=default, **kw)
    if f.default_factory is not None:
        return _bounded(f), Field(default_factory=f.default_factory, **kw)
    return _bounded(f), Field(default=f.default, **kw)


def _many(field: str) -> tuple[Any, FieldInfo]:
    f, (default, note) = info(field), SEARCHED[field]
    n = len(choices(field) or ())
    doc = f"values to search: {f.description}" + (f" ({note})" if note else "")
    return list[f.annotation], Field(
        default_factory=lambda: list(default),
        min_length=0 if not default else 1,
        max_length=n,
        description=doc,
        alias=ALIASES.get(field),
        json_schema_extra={"default": list(default)},
    )  # the web form's ticks


def request_fields(
    fields: tuple[str, ...] | list[str], many: bool = False, auto_precision: bool = False
) -> dict[str, tuple[Any, FieldInfo]]:
    """The knobs' fields for a request model (pydantic.create_model): one value each (their bounds and defaults),
    or for `many` a list of values to search; `auto_precision`: a precision of None means bf16, or fp16 on GPUs
    without bf16 (check)."""
    out = {}
    for f in fields:
        if many:
            out[f] = _many(f)
        elif f == "precision" and auto_precision:
            out[f] = _one(f, default=None)
        else:
            out[f] = _one(f)
    return out
