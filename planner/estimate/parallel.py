"""Tensor, sequence and context parallelism: one rank's view of the step, and the terms only they add.

A plan with tensor parallel T, Ulysses sequence parallel S and context parallel C is estimated as one rank sees it
(`view`): every term of planner.estimate.memory and .speed then runs unchanged on
- the model as transformers' tensor-parallel plan leaves it on a rank (`tp_model`; DeepSpeed's AutoTP splits the
  same linears): each decoder linear split over T, column-wise (q/k/v, gate/up: their outputs) or row-wise (o, down:
  their inputs), the embedding and the head split over the vocabulary, norms replicated (transformers 5.24
  models/llama/configuration_llama.py:48-56 base_model_tp_plan, distributed/mixin.py:92-94 embedding_rowwise,
  modeling_llama.py:414 lm_head colwise_gather_output). The plan has no sequence-parallel norms, so the residual
  stream, the linears' inputs and the gathered logits stay whole on every rank: the view keeps the hidden size;
- the rank's slice of the sequence, seq / (S x C): outside attention Ulysses and ring attention keep only it, and
  inside Ulysses' attention a rank holds the whole sequence for 1/S of the heads, the same bytes (Jacobs et al.
  2023, "DeepSpeed Ulysses", section 3.1); the loss runs on the local slice (ALST's sharded labels);
- the ranks that shard or all-reduce states: ZeRO and FSDP shard over data x sequence x context parallel (the world
  over T; DeepSpeed's Ulysses and accelerate's dp_shard_cp mesh), so the view has gpus_per_node / T per node (host
  RAM per node still counts every process: Setup.node_ranks).

On top of the view: the Ulysses all-to-all's second copy of q, k and v while it runs and the attention output it saves
twice, and ring attention's key/value blocks in flight.
"""

from __future__ import annotations

from dataclasses import replace

from planner.estimate.setup import Setup
from planner.model.modelspec import ModelSpec
from planner.model.shapes import Tensors

# torch's RowwiseParallel linears (the input dimension split); every other decoder linear is ColwiseParallel
ROWWISE = ("o_proj", "down_proj", "c_proj", "dense_4h_to_h", "out_proj", "w2", "wo")


def split_tensor(t: Tensors, tp: int, conv1d: bool = False) -> Tensors:
    """A tensor's share on one rank: a decoder linear colwise splits its output dimension, rowwise its input (GPT-2's
    Conv1D stores (in, out)); the embedding and head their vocabulary rows; norms and biases stay whole."""
    if t.role in ("embed", "head"):  # vocabulary-parallel
        return replace(t, shape=(-(-t.shape[0] // tp), *t.shape[1:]))
    if t.role != "layer" or len(t.shape) != 2 or not t.lora:
        return t
    rowwise = any(t.name == n or t.name.endswith("." + n) for n in ROWWISE)
    dim = 0 if rowwise == conv1d else 1
    shape = list(t.shape)
    shape[dim] = -(-shape[dim] // tp)
    return replace(t, shape=tuple(shape))


def tp_model(m: ModelSpec, tp: int) -> ModelSpec:
    """The model as one tensor-parallel rank holds it: its decoder linears split, the heads and MLP width of a rank."""
    if tp == 1:
        return m
    memo = m.memo  # once per model and size: every candidate of a tensor-parallel search asks
    if ("tp", tp) not in memo:
        memo["tp", tp] = _split_model(m, tp)
    return memo["tp", tp]


def _split_model(m: ModelSpec, tp: int) -> ModelSpec:
    t = m.text
    text = replace(t, heads=t.heads // tp, kv_heads=t.kv_heads // tp, intermediate=t.intermediate // tp)
    return replace(m, text=text, tensors=tuple(split_tensor(x, tp, t.traits.conv1d) for x in m.tensors))


def local_seq(s: Setup) -> int:
    """Tokens of a row on one rank outside attention: the sequence over sequence x context parallel, rounded up
    (a GRPO row padded to a multiple of the ranks, planner.config.layout.Layout.sequence_error; other rows divide)."""
    return -(-s.seq_len // (s.knobs.sequence_parallel * s.knobs.context_parallel))


def view(s: Setup) -> Setup:
    """One rank's setup: the tensor-parallel share of the model, the local slice of the sequence, the state-sharding
    ranks per node (gpus_per_node / T). A plan without these knobs, or a view already, is returned as it is."""
    k = s.knobs
    if k.parallel == 1 or s.context_len:
        return s
    knobs = k
    if k.sequence_parallel * k.context_parallel > 1 and k.attention == "sdpa":
        # the split attention runs causal without a padding mask (ALST and torch's context_parallel need it):
        # SDPA's flash kernel, GQA unrepeated, no float bias (what --attention flash counts)
        knobs = k.model_copy(update={"attention": "flash"})
    return replace(
        s,
        model=tp_model(s.model, k.tensor_parallel),
        knobs=knobs,
        seq_len=local_seq(s),
        gpus_per_node=s.gpus_per_node // (k.tensor_parallel * k.device_map),  # the processes of a device_map
        context_len=s.seq_len,
        tensor_parallel=k.tensor_parallel,
    )


def all_to_all_group(k) -> int:
    """Ranks that exchange heads for the whole sequence: Ulysses', times context parallel's under --cp-attention
    all-to-all."""
    return k.sequence_parallel * (k.context_parallel if k.cp_attention == "all-to-all" else 1)


def ulysses_all_to_all_bytes(v: Setup, profile_bytes: int) -> int:
    """Ulysses' all-to-all holds its input and output of q, k and v at once (the input is freed after it): one
    extra copy of the local q, k and v, in the compute dtype (DeepSpeed 0.19.8 deepspeed/sequence/layer.py:327-368).
    KV heads fewer than the group are repeated to it first, each rank then receiving one
    (runtime/sequence_parallel/ulysses_sp.py:133-138). `v` is the rank's view."""
    k, t, n = v.knobs, v.model.text, all_to_all_group(v.knobs)
    if n == 1:
        return 0
    tokens = v.micro_batch * v.seq_len * (2 if k.workload.kind == "dpo" else 1)
    return profile_bytes * tokens * t.head_dim * (t.heads + 2 * max(t.kv_heads, n))


def ulysses_layer_saved_bytes(k, t, tokens: int, compute_bytes: int) -> int:
    """Saved in a decoder layer not under a checkpoint, beyond its view's count:
    - the attention output twice: the local kernel saves its output (the whole row for 1/S of the heads) and the
      all-to-all back makes a new tensor in the slice's layout, which the output projection saves as its input
      (without the split the projection's input is a view of the kernel's output: CPU's flash kernel and flash-attn
      write [batch, seq, heads, dim]);
    - KV heads fewer than the group, repeated to it before the exchange (as ulysses_all_to_all_bytes): the kernel
      saves the repeated keys and values.
    `t` and `tokens`: the view's text spec and its rows x local tokens. Measured on gloo (benchmarks/
    parallel_sharding.py, debug-llama fp32, micro-batch 2 x 128 tokens, 4 layers): Ulysses 2 saves 11,328,000 bytes
    per rank where the view alone counts 10,764,288; Ulysses 4 over 2 KV heads 5,665,024 where the view and the
    output copy count 5,513,216."""
    n = all_to_all_group(k)
    if n == 1:
        return 0
    return compute_bytes * tokens * (t.q_dim + 2 * (max(t.kv_heads, n) - t.kv_heads) * t.head_dim)


def ring_kv_blocks_bytes(v: Setup, profile_bytes: int, backward: bool) -> int:
    """Context parallelism's keys and values from other ranks while attention runs: ring attention one block in
    flight beside the local one (forward), its gradient's too (backward); all-gather every other rank's C - 1 blocks
    (and their gradients in backward). A block is the local slice's k and v."""
    k, t = v.knobs, v.model.text
    if k.context_parallel == 1 or k.cp_attention == "all-to-all":
        return 0
    tokens = v.micro_batch * v.seq_len * (2 if k.workload.kind == "dpo" else 1)
    block = profile_bytes * tokens * 2 * t.kv_heads * t.head_dim
    blocks = 1 if k.cp_attention == "ring" else k.context_parallel - 1
    return block * blocks * (2 if backward else 1)
