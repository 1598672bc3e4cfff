"""The recipe knobs' memory terms, in bytes per rank: the checkpointing policies (full, torchtitan's op-level
selective policy, every N-th layer, offload to host), the loss (standard, chunked, fused), the attention
implementation and packed rows. planner/estimate/activation_terms.py and temp_terms.py ask here for the shapes and
terms these knobs change.

Shapes: a packed micro-batch is one padding-free row of micro_batch x seq_len tokens (TRL's padding_free
collator); with SDPA or eager attention transformers masks the packed samples from each other with one
block-diagonal (1, 1, T, T) mask (masking_utils.find_packed_sequence_indices), so the s^2 terms grow with
the row, while flash-attention's varlen kernel takes the sequence boundaries and has none.
"""

from __future__ import annotations

from dataclasses import replace

from planner.config.spec import Knobs
from planner.estimate import activations as act
from planner.estimate.heads import rows_per_example
from planner.model.modelspec import TextSpec

CHUNKED_LOSS_CHUNKS = 8  # torchtune's CEWithChunkedOutputLoss(num_output_chunks=8)
OFFLOAD_MIN_BYTES = 1024  # torchtune's OffloadActivations(min_offload_size=1024): smaller tensors stay


def text_spec(t: TextSpec, k: Knobs, experts_adapted: bool = False) -> TextSpec:
    """The text model as the knobs run it: --attention sdpa is the family's default (Gemma-2 stays eager:
    SDPA cannot softcap), flash and eager are what they say; with --expert-parallel N the busiest rank's experts
    run --expert-imbalance times this rank's share of pairs (all N ranks' tokens at most); under LoRA the experts
    are frozen, or adapted (`experts_adapted`: --lora-targets reaches them)."""
    if t.moe is not None:
        n = k.expert_parallel
        grad = "full" if not k.lora_rank else "lora" if experts_adapted else "frozen"
        t = replace(
            t,
            moe=replace(
                t.moe,
                imbalance=k.expert_imbalance,
                ep=n,
                experts_grad=grad,
                load=min(k.expert_imbalance, float(n)) if n > 1 else 1.0,
            ),
        )
    return with_attention(t, k)


def with_attention(t: TextSpec, k: Knobs) -> TextSpec:
    """The text model under --attention: sdpa is the family's own kernel, flash and eager are what they say."""
    return t if k.attention == "sdpa" else replace(t, attention=k.attention)


def row_shape(k: Knobs, micro_batch: int, seq_len: int) -> tuple[int, int]:
    """(rows, tokens per row) of a micro-batch: padded rows, or one packed row of all its tokens; DPO's micro-batch
    of pairs runs 2 x micro rows (chosen and rejected), packed into one row of them all (trl v0.28.0
    dpo_trainer.py:1643-1650: input_ids[attention_mask.bool()]); a task's example its rows (heads.rows_per_example)."""
    rows = rows_per_example(k.task, k.negatives) * k.workload.rows(micro_batch)
    return (1, rows * seq_len) if k.batching == "packed" else (rows, seq_len)


def checkpointed_layers(k: Knobs, layers: int) -> int:
    """Decoder layers under a checkpoint: all for full, offload-inputs and selective-op (op-level, inside every
    layer); every-N: layers N, 2N, ... (torchtitan's `ac_freq`: layer i is wrapped when i % N == 0, counting from 1)."""
    if k.checkpointing in ("full", "offload-inputs", "selective-op"):
        return layers
    if k.checkpointing.startswith("every-"):
        return layers // int(k.checkpointing.removeprefix("every-"))
    return 0


def recomputes(k: Knobs) -> bool:
    """Whether a layer's full set of saved tensors is rebuilt in backward (recomputed, or brought back from
    the host), one layer at a time."""
    return k.checkpointing != "off"


def selective_layer_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """torchtitan's op-level selective checkpointing (torchtitan/distributed/activation_checkpoint.py,
    `_custom_policy`): a layer keeps its input and the outputs of the attention kernel (out and its fp32
    log-sum-exp) and of every mm but every second one (the 1st, 3rd, 5th... `aten.mm` in the layer); the rest
    is recomputed. Linears with a bias run `aten.addmm`, which the policy does not save (Qwen2's q/k/v, GPT-2's
    Conv1D). Llama: q, v, gate, down kept; Qwen2: o, up; Phi-3: qkv, gate_up."""
    r, c = act.saved_dtype_bytes(profile)
    tokens = batch * seq
    mms = [width for width, _, bias in layer_linears(t) if not bias]
    kernel = 0 if t.attention == "eager" else c * tokens * t.q_dim + 4 * tokens * t.heads
    return r * tokens * t.hidden + c * tokens * sum(mms[0::2]) + kernel


def layer_linears(t: TextSpec) -> list[tuple[int, int, bool]]:
    """(output width, input width, has a bias) of a decoder layer's linears in the order forward runs them."""
    f = t.traits
    qkv, o, mlp = (True, True, True) if f.conv1d else t.biases  # Conv1D: torch.addmm whatever its bias
    h, i = t.hidden, t.intermediate
    attention = (
        [(t.q_dim + 2 * t.kv_dim, h, qkv)]
        if f.fused_qkv
        else [(t.q_dim, h, qkv), (t.kv_dim, h, qkv), (t.kv_dim, h, qkv)]
    )
    mlp_in = [(2 * i, h, mlp)] if f.fused_gate_up else [(i, h, mlp)] * (2 if f.gated_mlp else 1)
    return attention + [(h, t.q_dim, o)] + mlp_in + [(h, i, mlp)]


def recomputed_linears(t: TextSpec) -> list[tuple[int, int, bool]]:
    """The linears selective-op recomputes in backward: every addmm, and every second mm."""
    out, mm = [], 0
    for lin in layer_linears(t):
        if not lin[2]:
            mm += 1
        if lin[2] or mm % 2 == 0:
            out.append(lin)
    return out


def recomputed_layer_bytes(t: TextSpec, k: Knobs, batch: int, seq: int, profile: str) -> int:
    """What a checkpointed layer's backward adds on top of what it kept: its whole set of saved tensors
    rebuilt (full, every-N; offload brings it back from the host), less, under selective-op, the outputs the
    policy kept, which the recomputation reuses."""
    if not recomputes(k):
        return 0
    whole = act.layer_bytes(t, batch, seq, profile)
    if k.checkpointing != "selective-op":
        return whole
    r, _ = act.saved_dtype_bytes(profile)
    return whole - (selective_layer_bytes(t, batch, seq, profile) - r * batch * seq * t.hidden)


def text_activations_bytes(t: TextSpec, k: Knobs, batch: int, seq: int, profile: str) -> int:
    """Saved activations of all decoder layers and the final norm at the end of forward, on the device."""
    if k.checkpointing == "offload":  # moved to the host as they are saved (host_activation_bytes)
        return 0
    if k.checkpointing == "offload-inputs":  # the layers' inputs are on the host (host_layer_inputs_bytes)
        return act.final_norm_bytes(t, batch, seq, profile)
    n = checkpointed_layers(k, t.layers)
    kept = selective_layer_bytes if k.checkpointing == "selective-op" else act.checkpointed_layer_bytes
    return (
        n * kept(t, batch, seq, profile)
        + act.layers_bytes(t, t.layers - n, batch, seq, profile)
        + act.final_norm_bytes(t, batch, seq, profile)
    )


def host_activation_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """--checkpointing offload: every saved activation lives in pinned host memory until its backward
    (torch.autograd.graph.save_on_cpu; parameters stay, as torchtune's OffloadActivations keeps them)."""
    return act.layers_bytes(t, t.layers, batch, seq, profile) + act.final_norm_bytes(t, batch, seq, profile)


def host_layer_inputs_bytes(t: TextSpec, batch: int, seq: int, profile: str) -> int:
    """--checkpointing offload-inputs: every layer recomputed in backward, its input hidden states in host RAM till
    then (axolotl's Unsloth checkpointer, v0.8.0 utils/gradient_checkpointing/unsloth.py:39-46: `hidden_states.to(
    "cpu")` saved, the layer run under no_grad): what full checkpointing keeps per layer, moved off the device."""
    return t.layers * act.checkpointed_layer_bytes(t, batch, seq, profile)


def fused_chunk_tokens(tokens: int, t: TextSpec) -> int:
    """Liger's fused linear cross-entropy chunk (liger_kernel/ops/fused_linear_cross_entropy.py): the next power
    of two of tokens / ceil(vocab / hidden), so that a chunk's logits are about the size of the hidden states."""
    inc = -(-t.vocab // t.hidden)
    n = -(-tokens // inc)
    return 1 << (n - 1).bit_length()


def loss_bytes(t: TextSpec, k: Knobs, tokens: int, profile: str, head_grad_bytes_per_param: int) -> int:
    """Logits and loss at the start of backward.
    standard: transformers' loss (activations.logits_loss_bytes: 12 bytes per token per vocabulary entry);
    chunked: torchtune's chunked cross-entropy: each chunk's fp32 log-softmax is saved (4 bytes per token per
      entry) and one chunk's backward holds its gradient in fp32 twice more; from the second chunk on, the head's
      weight gradient of the chunk is summed into the one before it (two vocab x hidden gradients of the matmul
      dtype: under autocast every chunk uses one cached copy of the weight, cast back once), while the
      first chunk's saved log-softmax is freed (the sim probe: the larger of the two moments);
    fused: no logits kept: the gradient of the hidden states (matmul dtype) and of the head's weight (its
      parameter dtype; none for a frozen head) are computed chunk by chunk in forward and held until backward,
      plus one chunk's logits, fp32 copy and gradient."""
    _, c = act.saved_dtype_bytes(profile)
    softcap = c if t.final_logit_softcap else 0
    if k.loss == "standard":
        return act.logits_loss_bytes(t, 1, tokens, profile)
    if k.loss == "chunked":  # + the head's weight gradient of each chunk summed into the previous ones
        chunk = -(-tokens // CHUNKED_LOSS_CHUNKS)
        grads = 2 * (c if head_grad_bytes_per_param else 0) * t.vocab * t.hidden  # summed in the matmul dtype
        return (4 + softcap) * tokens * t.vocab + 8 * chunk * t.vocab + max(0, grads - 4 * chunk * t.vocab)
    chunk = fused_chunk_tokens(tokens, t)
    return c * tokens * t.hidden + head_grad_bytes_per_param * t.vocab * t.hidden + (c + 8 + softcap) * chunk * t.vocab


# TRL's fused log-prob head (trl/kernels/chunked_logprob.py, TRL 1.16): `add_fused_lm_head` projects only the scored
# positions (on Triton devices) through the head in tiles of TOKEN_CHUNK_SIZE tokens x _CHUNKED_LOGPROB_CHUNK_SIZE
# vocabulary entries, and accumulates the gradients in fp32
TRL_TOKEN_CHUNK = 4096
TRL_VOCAB_CHUNK = 32768


def logprob_head_bytes(t: TextSpec, scored_tokens: int, profile: str, head_grad_bytes_per_param: int) -> int:
    """TRL's log-prob head at its backward (GRPO and DPO): the saved copy of the scored hidden states (residual
    dtype), the fp32 gradient of those hidden states and of the head's weight (a trainable head), one tile in the
    compute dtype, the tile's weight and hidden slices cast to it, and at the end the gradients cast back to the
    hidden states' and the weight's dtypes beside their fp32 accumulators; plus the per-token outputs (fp32)."""
    r, c = act.saved_dtype_bytes(profile)
    # the tile buffer is allocated at the full chunk width whatever the vocabulary (chunked_logprob.py: mm_buf)
    n, tile_tokens, tile_vocab = scored_tokens, min(scored_tokens, TRL_TOKEN_CHUNK), TRL_VOCAB_CHUNK
    weight_grad = 4 * t.vocab * t.hidden + (
        head_grad_bytes_per_param * t.vocab * t.hidden if head_grad_bytes_per_param not in (0, 4) else 0
    )
    casts = (tile_tokens * t.hidden * c if r != c else 0) + (
        min(t.vocab, tile_vocab) * t.hidden * c if profile == "amp" else 0
    )
    hidden_grad = 4 * n * t.hidden + (r * n * t.hidden if r != 4 else 0)
    return (
        r * n * t.hidden
        + hidden_grad
        + (weight_grad if head_grad_bytes_per_param else 0)
        + c * tile_tokens * tile_vocab
        + casts
        + 16 * n
    )


def full_logprob_bytes(t: TextSpec, rows: int, width: int, profile: str) -> int:
    """Log-probs from the whole logits (`logprobs full`: TRL before its fused head, VLM-R1's trainer): every row's
    log_softmax saved for backward, and at backward the rows' stacked gradient of the (rows, tokens, vocabulary)
    logits beside them (sim probe: the peak holds these two, a row's own gradients come and go under them)."""
    _, c = act.saved_dtype_bytes(profile)
    return 2 * c * rows * width * t.vocab


def packed_row_grad_bytes(t: TextSpec, k: Knobs, tokens: int, profile: str) -> int:
    """`logprobs full` over one packed row (DPO padding-free): the row's log_softmax gradient at backward. Padded, one
    row's gradient comes and goes under the stacked gradient and the saved rows (full_logprob_bytes); packed, the one
    row is every token, and its gradient lands beside them. Measured (tests/probes/test_rl.py, real CPU tensors, a
    2-layer Llama of vocabulary 4,096, fp32, 2 pairs x 96 tokens): the packed step's peak 6,380,544 bytes over the
    padded one's, where this term counts 384 x 4,096 x 4 = 6,291,456."""
    _, c = act.saved_dtype_bytes(profile)
    return c * tokens * t.vocab if k.batching == "packed" else 0


def whole_logits_logps_bytes(t: TextSpec, rows: int, width: int, scored: int, profile: str) -> int:
    """ms-swift 3.2-3.6's GRPO log-probs of a multimodal model (Framework.vlm_logprobs "whole"): the model's logits
    over all `width` tokens of the rows, in the compute dtype (labels popped: no fp32 upcast, transformers 4.51.3
    modeling_qwen2_5_vl.py:1839-1844), the completion's `scored` tokens sliced and divided by the temperature (the
    copy frees the whole logits), then TRL's selective_log_softmax row by row, each row's log_softmax kept for
    backward (trl 0.17.0 trainer/utils.py:1694-1700). The largest moment, in the forward and again in the head's
    backward (the slice's gradient beside the scaled one's): the whole logits and one scored copy. Measured with
    probes.tracker on that code (tests/probes/test_whole_logits.py): exactly 2 x rows x (width + scored) x vocab
    bytes in bf16, with or without gradients."""
    _, c = act.saved_dtype_bytes(profile)
    return c * rows * (width + scored) * t.vocab


# ms-swift's own examples chunk the loss by 2,048 tokens (examples/train/sequence_parallel/sequence_parallel.sh:5,
# CELOSS_PARALLEL_SIZE=2048): the chunk a --loss chunked ms-swift plan sets and is planned with
SWIFT_CE_CHUNK = 2048


def swift_logits_upcast(k: Knobs) -> bool:
    """Whether ms-swift's loss under sequence parallel gets the logits in fp32. ms-swift turns mixed precision on from
    --torch_dtype (bf16, or fp16 for fp16 and fp32 weights: swift/arguments/base_args/model_args.py:129-142), and
    accelerate's native AMP wraps the model's forward in convert_outputs_to_fp32, which casts every half output, the
    logits too, to fp32 (accelerate 1.15 accelerator.py:1824-1835, utils/operations.py:912-942). DeepSpeed turns
    native AMP off (accelerator.py:585-588): the logits stay in the model's dtype. Traced on gloo ranks with
    `swift sft` itself (benchmarks/swift_sp.py): under --sequence_parallel_size 2 the loss gets fp32 logits."""
    return k.zero_stage == 0


def swift_logps_bytes(rows: int, tokens: int, vocab: int, c: int, upcast: bool, grad: bool, path: str) -> int:
    """ms-swift's GRPO log-probs (swift/rlhf_trainers/grpo_trainer.py), the largest moment from the final hidden
    states to their gradient (`grad`) or of a no-grad pass; `c` the logits' dtype bytes, `upcast` where accelerate's
    native AMP casts the model's outputs to fp32 (swift_logits_upcast: the bf16 logits and their fp32 copy).
    - "kept" (4.6.0 :1564-1600): the model keeps the completion's `tokens` + 1 logits (logits_to_keep), the
      completion's are divided in place and scored with TRL's selective_log_softmax, row by row in half precision
      (each row's log_softmax saved), by logsumexp in fp32;
    - "copied" (v3.7.0 :1470-1477 .. v4.0.0 :1613-1639): the same, divided into a copy that frees the logits;
    - "slice" (4.6.0 under sequence parallel, :1470-1494): the logits of all `tokens` of the rank's slice, held by
      the model's output while a divided copy is scored.
    Measured with probes.tracker on that code over a real bf16 head (tests/probes/test_swift_logps.py, tolerance
    there), per row and vocabulary entry: kept 2(4T + 2) bytes with gradients, 2(T + 1) + 2T / rows without, fp32
    4(4T + 2) and 6(T + 1); copied 2(2T + 1) either way, fp32 16T and 4(2T + 1); the slice 6T and 4T + 2T / rows,
    fp32 16T and 8T."""
    n = rows * tokens * vocab
    if path == "slice":
        if upcast:
            return (16 if grad else 8) * n
        return 3 * c * n if grad else 2 * c * n + c * tokens * vocab
    if path == "copied":
        if upcast:
            return 16 * n if grad else 4 * rows * (2 * tokens + 1) * vocab
        return c * rows * (2 * tokens + 1) * vocab
    if grad:
        return (4 if upcast else c) * rows * vocab * (4 * tokens + 2)
    if upcast:
        return (c + 4) * rows * (tokens + 1) * vocab
    return c * rows * (tokens + 1) * vocab + c * tokens * vocab


def swift_sp_loss_bytes(t: TextSpec, k: Knobs, tokens: int, profile: str) -> int:
    """ms-swift 4.6.0's loss under sequence parallel on the rank's tokens (trainers/seq2seq_trainer.py:162-167,
    trainers/utils.py:167-184; the per-token losses are gathered, not the logits): cross_entropy on the logits in the
    dtype they arrive in (fp32 unless under DeepSpeed: swift_logits_upcast; the model's own copy is freed once cast):
    standard: the log-softmax it saves, its gradient and the logits' gradient, 3 logits-sized tensors;
    chunked (CELOSS_PARALLEL_SIZE, sequence_parallel/utils.py:65-105): the logits, which it saves for backward, their
    gradient, and 4 of one chunk's tensors at its backward (its log-softmax, their gradients).
    Measured with probes.tracker on ms-swift's own functions behind accelerate's cast (bf16 logits, 4,096 tokens x
    8,192 entries, chunks of 256 to 1,024): standard 12.000 bytes per token per entry; chunked 8.000 plus 16.00 per
    chunk token and entry; on bf16 logits (DeepSpeed) 6.000, and 4.000 plus 8.00 (test_swift_sp_loss.py)."""
    _, c = act.saved_dtype_bytes(profile)
    e = 4 if swift_logits_upcast(k) else c
    if k.loss == "chunked":
        return 2 * e * tokens * t.vocab + 4 * e * min(tokens, SWIFT_CE_CHUNK) * t.vocab
    return 3 * e * tokens * t.vocab
